// Package postgres keeps the logs of memgate's namespaces in a PostgreSQL
// database, so that any number of memgate processes serve the same
// namespaces: each process's stores are replicas of these logs (see
// storage/replica.go). It uses no session state — transaction-scoped locks
// only, no LISTEN, no advisory session locks — so it works through
// PgBouncer in transaction mode.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// DSNVariable is the environment variable that holds the database's
// connection string; it is never a flag, so it shows in no process list.
const DSNVariable = "MEMGATE_POSTGRES_DSN"

//go:embed schema/*.sql
var schemaFiles embed.FS

// SchemaVersion is the newest schema this memgate knows: the number of its
// migrations.
var SchemaVersion = len(migrations())

// migrations returns the schema's steps in order: schema/N.sql is step N.
func migrations() []string {
	ents, err := fs.ReadDir(schemaFiles, "schema")
	if err != nil {
		panic(err)
	}
	steps := make([]string, len(ents))
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".sql"))
		if err != nil || n < 1 || n > len(ents) {
			panic("postgres: schema file " + e.Name() + " is not numbered in order")
		}
		b, _ := fs.ReadFile(schemaFiles, "schema/"+e.Name())
		steps[n-1] = string(b)
	}
	return steps
}

// migrationLock is the transaction-scoped advisory lock that migrations
// take, so that replicas starting at once apply each step once.
const migrationLock = 0x6d656d6761746531 // "memgate1"

// DefaultMaxConns is how many connections a process opens at most, unless
// the DSN says (pool_max_conns).
const DefaultMaxConns = 16

// writeIdleTimeout ends a write's transaction that stays idle this long (a
// process that stopped answering while it held a namespace's lock): its
// lock goes to the other replicas. An import, the longest write, applies
// its lines between two statements.
const writeIdleTimeout = "2min"

// DB is memgate's database. It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
}

// Errors of Open.
var (
	// ErrNoSchema: the database has no memgate schema, or an older one.
	ErrNoSchema = errors.New("postgres: the database's schema is older than this memgate's")
	// ErrNewerSchema: a newer memgate migrated the database.
	ErrNewerSchema = errors.New("postgres: the database's schema is newer than this memgate's")
	// ErrBadDSN: the connection string does not parse.
	ErrBadDSN = errors.New("postgres: the connection string does not parse")
)

// Open connects to the database of dsn and checks its schema: one older
// than this memgate's fails with ErrNoSchema (run Migrate), a newer one
// with ErrNewerSchema.
func Open(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, ErrBadDSN // its error may quote a password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	noPreparedStatements(cfg.ConnConfig, dsn)
	if !strings.Contains(dsn, "pool_max_conns") {
		// Each write to a namespace holds a connection for its transaction:
		// pgxpool's default (the number of CPUs, at least 4) would queue
		// writers to different namespaces behind each other.
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db := &DB{pool: pool}
	v, err := db.version(ctx)
	switch {
	case err != nil:
		pool.Close()
		return nil, err
	case v < SchemaVersion:
		pool.Close()
		return nil, fmt.Errorf("%w (version %d, this memgate's %d): run memgate migrate, or start with --migrate",
			ErrNoSchema, v, SchemaVersion)
	case v > SchemaVersion:
		pool.Close()
		return nil, fmt.Errorf("%w (version %d, this memgate's %d): upgrade memgate", ErrNewerSchema, v, SchemaVersion)
	}
	return db, nil
}

// Close closes the database's connections.
func (db *DB) Close() { db.pool.Close() }

// version returns the database's schema version: 0 when it has none.
func (db *DB) version(ctx context.Context) (int, error) {
	var v int
	err := db.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM memgate_schema`).Scan(&v)
	if isUndefinedTable(err) {
		return 0, nil
	}
	return v, err
}

// Migrate brings the schema of dsn's database to this memgate's and
// returns the version it was at. Every step runs in one transaction under
// an advisory lock, so processes migrating at once apply each step once; a
// database whose schema is newer fails with ErrNewerSchema.
func Migrate(ctx context.Context, dsn string) (from int, err error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return 0, ErrBadDSN
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	noPreparedStatements(cfg, dsn)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS memgate_schema (version integer NOT NULL)`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM memgate_schema`).Scan(&from); err != nil {
			return err
		}
		steps := migrations()
		if from > len(steps) {
			return fmt.Errorf("%w (version %d, this memgate's %d): upgrade memgate", ErrNewerSchema, from, len(steps))
		}
		for i := from; i < len(steps); i++ {
			if _, err := tx.Exec(ctx, steps[i]); err != nil {
				return fmt.Errorf("postgres: schema step %d: %w", i+1, err)
			}
		}
		if from < len(steps) {
			if _, err := tx.Exec(ctx, `DELETE FROM memgate_schema`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO memgate_schema (version) VALUES ($1)`, len(steps))
			return err
		}
		return nil
	})
	return from, err
}

// noPreparedStatements makes cfg describe its statements without preparing
// them under a name (pgx's default), unless the DSN says otherwise
// (default_query_exec_mode): a named statement belongs to one server
// session, which PgBouncer in transaction mode does not keep between
// transactions. The descriptions are cached, so a statement still takes
// one round trip.
func noPreparedStatements(cfg *pgx.ConnConfig, dsn string) {
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
}

// Log returns the log of namespace ns.
func (db *DB) Log(ns memgate.Namespace) storage.Log { return &nsLog{db: db, ns: string(ns)} }

// Exists reports whether namespace ns has a log.
func (db *DB) Exists(ctx context.Context, ns memgate.Namespace) (bool, error) {
	var one int
	err := db.pool.QueryRow(ctx, `SELECT 1 FROM memgate_namespaces WHERE namespace = $1`, string(ns)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Namespaces returns, in name order, up to limit namespaces with a log
// whose names come after after.
func (db *DB) Namespaces(ctx context.Context, after string, limit int) ([]memgate.Namespace, error) {
	rows, err := db.pool.Query(ctx,
		`SELECT namespace FROM memgate_namespaces WHERE namespace > $1 ORDER BY namespace LIMIT $2`, after, limit)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make([]memgate.Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, memgate.Namespace(n))
	}
	return slices.Clip(out), nil
}

// Erase deletes namespace ns's log, once the write that holds it (if any)
// has ended. The next write makes it anew, in a new epoch.
func (db *DB) Erase(ctx context.Context, ns memgate.Namespace) error {
	_, err := db.pool.Exec(ctx, `DELETE FROM memgate_namespaces WHERE namespace = $1`, string(ns))
	return err
}

// nsLog is one namespace's log.
type nsLog struct {
	db *DB
	ns string
}

func (l *nsLog) Head(ctx context.Context) (storage.LogState, error) {
	return head(ctx, l.db.pool, l.ns, "")
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const headSQL = `SELECT epoch, head, key, snapshot, chain FROM memgate_namespaces WHERE namespace = $1`

func head(ctx context.Context, q querier, ns, lock string) (storage.LogState, error) {
	return scanHead(q.QueryRow(ctx, headSQL+lock, ns))
}

// scanHead reads a namespace's head: the zero state when it has none.
func scanHead(row pgx.Row) (storage.LogState, error) {
	var st storage.LogState
	var seq, snap int64
	err := row.Scan(&st.Epoch, &seq, &st.Key, &snap, &st.Chain)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.LogState{}, nil
	}
	st.Seq, st.Snapshot = uint64(seq), uint64(snap)
	return st, err
}

func (l *nsLog) Snapshot(ctx context.Context) (uint64, []byte, error) {
	var (
		seq  int64
		file []byte
	)
	err := l.db.pool.QueryRow(ctx, `SELECT seq, file FROM memgate_snapshots WHERE namespace = $1`, l.ns).Scan(&seq, &file)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, nil
	}
	return uint64(seq), file, err
}

// Compact takes the namespace's row lock, as a write does, so a snapshot
// and the entries it drops never cross a write.
func (l *nsLog) Compact(ctx context.Context, epoch int64, seq uint64, file []byte) error {
	return pgx.BeginFunc(ctx, l.db.pool, func(tx pgx.Tx) error {
		st, err := head(ctx, tx, l.ns, " FOR UPDATE")
		if err != nil || st.Epoch != epoch || seq <= st.Snapshot || seq > st.Seq {
			return err // erased, or a later snapshot is there already
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO memgate_snapshots (namespace, seq, file) VALUES ($1, $2, $3)
			ON CONFLICT (namespace) DO UPDATE SET seq = excluded.seq, file = excluded.file`, l.ns, int64(seq), file)
		b.Queue(`DELETE FROM memgate_log WHERE namespace = $1 AND seq <= $2`, l.ns, int64(st.Snapshot))
		b.Queue(`UPDATE memgate_namespaces SET snapshot = $2 WHERE namespace = $1`, l.ns, int64(seq))
		return tx.SendBatch(ctx, b).Close()
	})
}

// readBatch is how many entries one query of Read fetches.
const readBatch = 512

func (l *nsLog) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	return read(ctx, l.db.pool, l.ns, after, fn)
}

func read(ctx context.Context, q querier, ns string, after uint64, fn func(uint64, []byte) error) error {
	for {
		rows, err := q.Query(ctx, `SELECT seq, entry FROM memgate_log WHERE namespace = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			ns, int64(after), readBatch)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var (
				seq   int64
				entry []byte
			)
			if err := rows.Scan(&seq, &entry); err != nil {
				rows.Close()
				return err
			}
			n++
			if err := fn(uint64(seq), entry); err != nil {
				rows.Close()
				return err
			}
			after = uint64(seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n < readBatch {
			return nil
		}
	}
}

func (l *nsLog) Begin(ctx context.Context, key func() ([]byte, error)) (storage.LogWrite, error) {
	tx, err := l.db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	w := &logWrite{tx: tx, ns: l.ns}
	// One round trip: the timeout, then the lock.
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL idle_in_transaction_session_timeout = '` + writeIdleTimeout + `'`)
	b.Queue(headSQL+" FOR UPDATE", l.ns)
	br := tx.SendBatch(ctx, b)
	if _, err = br.Exec(); err == nil {
		w.state, err = scanHead(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && w.state.Epoch == 0 {
		var k []byte
		if k, err = key(); err == nil {
			_, err = tx.Exec(ctx, `INSERT INTO memgate_namespaces (namespace, epoch, key) VALUES ($1, $2, $3)
				ON CONFLICT (namespace) DO NOTHING`, l.ns, newEpoch(), k)
		}
		if err == nil {
			w.state, err = head(ctx, tx, l.ns, " FOR UPDATE")
		}
	}
	if err != nil {
		tx.Rollback(context.Background())
		return nil, err
	}
	return w, nil
}

// newEpoch is a random epoch, never 0.
func newEpoch() int64 {
	var b [8]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}

// logWrite is a log locked by its namespace's row, for one transaction.
type logWrite struct {
	tx    pgx.Tx
	ns    string
	state storage.LogState
	done  bool
}

func (w *logWrite) State() storage.LogState { return w.state }

func (w *logWrite) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	return read(ctx, w.tx, w.ns, after, fn)
}

func (w *logWrite) Append(ctx context.Context, seq uint64, entry, chain []byte) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO memgate_log (namespace, seq, entry) VALUES ($1, $2, $3)`, w.ns, int64(seq), entry)
	b.Queue(`UPDATE memgate_namespaces SET head = $2, chain = $3 WHERE namespace = $1`, w.ns, int64(seq), chain)
	return w.tx.SendBatch(ctx, b).Close()
}

func (w *logWrite) Commit(ctx context.Context) error {
	w.done = true
	return w.tx.Commit(ctx)
}

func (w *logWrite) Rollback() {
	if !w.done {
		w.done = true
		w.tx.Rollback(context.Background())
	}
}
