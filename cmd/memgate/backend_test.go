package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/pgtest"
	"github.com/memgate/memgate/storage/postgres"
)

// --store postgres: the DSN from its variable only, the schema migrated by
// memgate migrate or --migrate, a database at another schema refused with
// what to do, and the store commands working on it.
func TestStorePostgresFromTheCommandLine(t *testing.T) {
	dsn := pgtest.DSN(t)
	home := t.TempDir()
	e := env{postgres.DSNVariable: dsn, "HOME": home}
	pg := []string{"--store", "postgres", "--data-dir", t.TempDir()}

	mg(t, env{}, "", append([]string{"stats"}, pg...)...).fails(t, 2, "MEMGATE_POSTGRES_DSN is unset")
	mg(t, env{"HOME": home}, "", "migrate").fails(t, 2, "MEMGATE_POSTGRES_DSN is unset")
	mg(t, e, "", append([]string{"stats"}, pg...)...).fails(t, 1, "run memgate migrate, or start with --migrate")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--migrate"}, "--migrate: only --store postgres"},
		{[]string{"--store", "postgres", "--replica-staleness", "0s"}, "--replica-staleness: must be from 1ms"},
		{[]string{"--store", "sqlite"}, "--store: must be bbolt or postgres"},
	} {
		mg(t, e, "", append([]string{"serve", "--data-dir", t.TempDir()}, c.flags...)...).fails(t, 2, c.want)
	}

	if got := mg(t, e, "", "migrate").ok(t); got["from"] != 0.0 || got["schema"] != float64(postgres.SchemaVersion) {
		t.Fatalf("first migrate: %v", got)
	}
	if got := mg(t, e, "", "migrate").ok(t); got["from"] != float64(postgres.SchemaVersion) {
		t.Fatalf("second migrate: %v", got)
	}
	mg(t, e, "", append([]string{"remember", "--id", "car"}, append(pg, "Bought a new automobile last spring")...)...).ok(t)
	// Another command, with a replica of its own, finds it.
	got := mg(t, e, "", append([]string{"search"}, append(pg, "automobile")...)...).ok(t)
	if hits := got["hits"].([]any); len(hits) != 1 {
		t.Fatalf("search: %v", got)
	}

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE memgate_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	mg(t, e, "", append([]string{"stats"}, pg...)...).fails(t, 1, "newer than this memgate's (version 99")
	mg(t, e, "", "migrate").fails(t, 1, "upgrade memgate")

	// A DSN that does not parse, or a server that is not there: one line,
	// never the DSN.
	mg(t, env{postgres.DSNVariable: "postgres://user:pw@[::1", "HOME": home}, "", append([]string{"stats"}, pg...)...).
		fails(t, 2, "not a PostgreSQL connection string")
	bad := env{postgres.DSNVariable: "postgres://user:hunter2secret@127.0.0.1:1/none?sslmode=disable", "HOME": home}
	r := mg(t, bad, "", append([]string{"stats"}, pg...)...)
	r.fails(t, 1, "cannot be reached")
	if strings.Contains(r.stderr, "hunter2secret") {
		t.Fatalf("the password in stderr: %q", r.stderr)
	}
}
