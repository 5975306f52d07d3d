-- +goose Up

-- pg_trgm's word similarity matches a question's word to its variants in
-- a passage (Mongolian suffixes: буцааж, буцаах, буцаалт), which the text
-- search configuration does not stem. An extension is one per database,
-- not per schema: it goes where the default search_path finds it (public),
-- and the search names its functions and operators unqualified.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

-- A document an operator added to a workspace's knowledge base.
CREATE TABLE flows.kb_documents (
    id           uuid        PRIMARY KEY,
    workspace_id uuid        NOT NULL,
    title        text        NOT NULL,
    passages     integer     NOT NULL CHECK (passages >= 1),
    created_at   timestamptz NOT NULL
);

CREATE INDEX kb_documents_workspace ON flows.kb_documents (workspace_id, created_at DESC);

-- A passage: a paragraph of a document under its headings. title is what a
-- search shows (the document's title and the heading path), heading the
-- path alone. tsv weighs the heading A and the text B, with the 'english'
-- configuration: it stems English and drops its stop words, and keeps
-- every Cyrillic word as it is. searchable is what trigrams compare.
CREATE TABLE flows.kb_passages (
    document_id  uuid    NOT NULL REFERENCES flows.kb_documents (id) ON DELETE CASCADE,
    ordinal      integer NOT NULL,
    workspace_id uuid    NOT NULL,
    title        text    NOT NULL,
    heading      text    NOT NULL,
    text         text    NOT NULL,
    tsv          tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', heading), 'A') || setweight(to_tsvector('english', text), 'B')
    ) STORED,
    searchable   text GENERATED ALWAYS AS (heading || E'\n' || text) STORED,
    PRIMARY KEY (document_id, ordinal)
);

CREATE INDEX kb_passages_workspace ON flows.kb_passages (workspace_id);
CREATE INDEX kb_passages_tsv ON flows.kb_passages USING gin (tsv);
CREATE INDEX kb_passages_trgm ON flows.kb_passages USING gin (searchable gin_trgm_ops);

-- +goose Down
DROP TABLE flows.kb_passages;
DROP TABLE flows.kb_documents;
-- pg_trgm stays: another schema of the database may use it.
