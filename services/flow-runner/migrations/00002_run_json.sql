-- +goose Up

-- The run's JSON columns become json, not jsonb: they are only ever read
-- whole, and json keeps what jsonb refuses (a \u0000 in a string a developer
-- sent or an http node received), which would otherwise make a finished run
-- impossible to store.
ALTER TABLE flows.runs
    ALTER COLUMN vars TYPE json,
    ALTER COLUMN output TYPE json,
    ALTER COLUMN messages TYPE json,
    ALTER COLUMN usage TYPE json,
    ALTER COLUMN error TYPE json;
ALTER TABLE flows.node_runs
    ALTER COLUMN input TYPE json,
    ALTER COLUMN output TYPE json;

-- +goose Down
ALTER TABLE flows.runs
    ALTER COLUMN vars TYPE jsonb,
    ALTER COLUMN output TYPE jsonb,
    ALTER COLUMN messages TYPE jsonb,
    ALTER COLUMN usage TYPE jsonb,
    ALTER COLUMN error TYPE jsonb;
ALTER TABLE flows.node_runs
    ALTER COLUMN input TYPE jsonb,
    ALTER COLUMN output TYPE jsonb;
