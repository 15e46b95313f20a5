-- Snapshots: a replica's file at a sequence of its namespace's log, which
-- takes the place of the entries before it (the log keeps those after the
-- snapshot it replaced). Under --encrypt the file is sealed as a store is.
ALTER TABLE memgate_namespaces ADD COLUMN snapshot bigint NOT NULL DEFAULT 0;

CREATE TABLE memgate_snapshots (
	namespace text   PRIMARY KEY REFERENCES memgate_namespaces ON DELETE CASCADE,
	seq       bigint NOT NULL,
	file      bytea  NOT NULL
);
