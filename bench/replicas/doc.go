// Package replicas measures memgate's replicas over PostgreSQL in process:
// recall at 100k memories on a replica (storage.Open with a log of
// storage/postgres) against a plain bbolt store holding the same memories,
// a replica's cold catch-up (the log replayed by a fresh file's first
// search), and writes through the log. It runs when
// MEMGATE_REPLICA_FIGURES is set, with the data sets of bench/datasets.sh
// and a PostgreSQL server whose admin DSN is in MEMGATE_BENCH_POSTGRES_DSN
// (scripts/postgres.sh start prints one); MEMGATE_REPLICA_N and
// MEMGATE_REPLICA_WRITES make a smaller run, to try a change.
// docs/PERFORMANCE.md has its figures. The HTTP figures of replicas are
// the suite's "replicas" scenario, which uses this package's database
// helpers.
package replicas
