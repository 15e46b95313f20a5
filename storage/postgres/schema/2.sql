-- Snapshots: a replica's file at a sequence of its namespace's log, which
-- takes the place of the entries before it (the log keeps those after the
-- snapshot it replaced). Under --encrypt the file is sealed as a store is.
-- The chain is the log's history to its head (a hash), which tells a
-- replica of another history (a database restored and grown again).
ALTER TABLE memgate_namespaces ADD COLUMN snapshot bigint NOT NULL DEFAULT 0;
ALTER TABLE memgate_namespaces ADD COLUMN chain bytea;

CREATE TABLE memgate_snapshots (
	namespace text   PRIMARY KEY REFERENCES memgate_namespaces ON DELETE CASCADE,
	seq       bigint NOT NULL,
	file      bytea  NOT NULL
);
