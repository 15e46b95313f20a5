package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage/postgres"
)

// backendFlags say where the namespaces live. With --store postgres they
// live in the database of MEMGATE_POSTGRES_DSN (never a flag: it may hold a
// password), which any number of memgate processes serve at once; the data
// folder then holds only this process's replicas (see docs/SCALING.md).
type backendFlags struct {
	Store string `name:"store" default:"bbolt" placeholder:"bbolt|postgres" help:"Where the namespaces live: bbolt (files in --data-dir) or postgres (the database in MEMGATE_POSTGRES_DSN)."`
}

// replicaFlags are serve's settings of --store postgres.
type replicaFlags struct {
	ReplicaStaleness time.Duration `name:"replica-staleness" default:"1s" placeholder:"DURATION" help:"With --store postgres: how old this process's view of a namespace may be when a read starts; a write acknowledged by any process is seen within it."`
	Migrate          bool          `name:"migrate" help:"With --store postgres: bring the database's schema to this memgate's before starting (memgate migrate does it alone)."`
}

func (f *backendFlags) AfterApply(c *Config) error {
	c.backendFlags, c.taken = *f, c.taken|takesBackend
	return nil
}

const (
	storeBbolt    = "bbolt"
	storePostgres = "postgres"
)

// maxStaleness bounds --replica-staleness.
const maxStaleness = time.Hour

func (f *backendFlags) validate(bad badFunc) {
	if f.Store != storeBbolt && f.Store != storePostgres {
		bad("store", "must be bbolt or postgres")
	}
}

func (f *replicaFlags) validate(c *Config, bad badFunc) {
	if f.Migrate && c.Store != storePostgres {
		bad("migrate", "only --store postgres has a schema to migrate")
	}
	if f.ReplicaStaleness < time.Millisecond || f.ReplicaStaleness > maxStaleness {
		bad("replica-staleness", "must be from 1ms to %s", maxStaleness)
	}
}

// shared reports whether the namespaces live in PostgreSQL.
func (c *Config) shared() bool { return c.taken&takesBackend != 0 && c.Store == storePostgres }

// openDatabase opens the database of MEMGATE_POSTGRES_DSN, migrating its
// schema first with --migrate. Its errors never show the DSN.
func (a *app) openDatabase() (*postgres.DB, error) {
	dsn := a.getenv(postgres.DSNVariable)
	if dsn == "" {
		return nil, usageError{fmt.Errorf("--store postgres: the variable %s is unset or empty", postgres.DSNVariable)}
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	if a.cfg.serveFlags.Replica.Migrate {
		if err := a.migrate(ctx, dsn); err != nil {
			return nil, err
		}
	}
	db, err := postgres.Open(ctx, dsn)
	switch {
	case errors.Is(err, postgres.ErrBadDSN):
		return nil, errBadDSN
	case errors.Is(err, postgres.ErrNoSchema), errors.Is(err, postgres.ErrNewerSchema):
		return nil, schemaError("cmd.postgres", err)
	case err != nil:
		return nil, &memgate.Error{Code: memgate.CodeUnavailable, Op: "cmd.postgres",
			Message: "the database of " + postgres.DSNVariable + " cannot be reached (" + connectReason(err, dsn) +
				"); check it and that PostgreSQL is up"}
	}
	return db, nil
}

// errBadDSN is the usage error of a DSN that does not parse (its text is
// not quoted: it may hold a password).
var errBadDSN = usageError{errors.New(postgres.DSNVariable + ": not a PostgreSQL connection string (postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=...)")}

// schemaError is the error of a database whose schema is not this
// memgate's: err says which way, and what to do.
func schemaError(op string, err error) error {
	return &memgate.Error{Code: memgate.CodeUnavailable, Op: op, Message: strings.TrimPrefix(err.Error(), "postgres: ")}
}

// migrate brings the database's schema to this memgate's.
func (a *app) migrate(ctx context.Context, dsn string) error {
	from, err := postgres.Migrate(ctx, dsn)
	switch {
	case errors.Is(err, postgres.ErrBadDSN):
		return errBadDSN
	case errors.Is(err, postgres.ErrNewerSchema):
		return schemaError("cmd.migrate", err)
	case err != nil:
		a.log.Error("the schema could not be migrated", "op", "cmd.migrate", "error", redactDSN(err, dsn))
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: "cmd.migrate",
			Message: "the database's schema could not be migrated; see the log"}
	}
	if from < postgres.SchemaVersion {
		a.log.Info("database schema migrated", "op", "cmd.migrate", "from", from, "to", postgres.SchemaVersion)
	}
	return nil
}

// connectReason says why a connection failed, in a few words and without
// the DSN: PostgreSQL's own message, or the network's.
func connectReason(err error, dsn string) string {
	var pe *pgconn.PgError
	var ne *net.OpError
	switch {
	case errors.As(err, &pe):
		return redactDSN(errors.New(pe.Message), dsn)
	case errors.As(err, &ne):
		return redactDSN(ne, dsn)
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	return "see the PostgreSQL server's log"
}

// redactDSN is err's text with the DSN, and its password, taken out,
// should a driver quote them.
func redactDSN(err error, dsn string) string {
	text := strings.ReplaceAll(err.Error(), dsn, "[DSN]")
	if cfg, perr := pgconn.ParseConfig(dsn); perr == nil && cfg.Password != "" {
		text = strings.ReplaceAll(text, cfg.Password, "[password]")
	}
	return text
}

// migrateCmd applies the schema and exits.
type migrateCmd struct {
	Base baseFlags `embed:"" group:"config"`
}

// Run migrates the database of MEMGATE_POSTGRES_DSN and prints its schema
// version before and after.
func (c *migrateCmd) Run(a *app) error {
	dsn := a.getenv(postgres.DSNVariable)
	if dsn == "" {
		return usageError{fmt.Errorf("migrate: the variable %s is unset or empty", postgres.DSNVariable)}
	}
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Minute)
	defer cancel()
	from, err := postgres.Migrate(ctx, dsn)
	if err != nil {
		if errors.Is(err, postgres.ErrBadDSN) {
			return errBadDSN
		}
		if errors.Is(err, postgres.ErrNewerSchema) {
			return schemaError("cmd.migrate", err)
		}
		a.log.Error("the schema could not be migrated", "op", "cmd.migrate", "error", redactDSN(err, dsn))
		return &memgate.Error{Code: memgate.CodeUnavailable, Op: "cmd.migrate",
			Message: "the database's schema could not be migrated; see the log"}
	}
	return a.printJSON(map[string]any{"from": from, "schema": postgres.SchemaVersion})
}
