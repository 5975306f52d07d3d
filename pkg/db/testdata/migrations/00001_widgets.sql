-- +goose Up
CREATE TABLE widgets.widgets (
    id   bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE
);

-- +goose Down
DROP TABLE widgets.widgets;
