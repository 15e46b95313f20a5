-- The logs of memgate's namespaces: one row per namespace (its epoch, the
-- sequence of its last entry, and the key record of its sealed entries),
-- and one row per entry. Entries are sealed under --encrypt.
CREATE TABLE memgate_namespaces (
	namespace text PRIMARY KEY,
	epoch     bigint NOT NULL,
	head      bigint NOT NULL DEFAULT 0,
	key       bytea
);

CREATE TABLE memgate_log (
	namespace text   NOT NULL REFERENCES memgate_namespaces ON DELETE CASCADE,
	seq       bigint NOT NULL,
	entry     bytea  NOT NULL,
	PRIMARY KEY (namespace, seq)
);
