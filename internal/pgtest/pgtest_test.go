package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestDSNIsANewDatabaseDroppedWhenTheTestEnds(t *testing.T) {
	admin := Admin(t)
	ctx := context.Background()
	var name string
	var left *pgx.Conn
	t.Run("the test", func(t *testing.T) {
		dsn, other := DSN(t), DSN(t)
		if dsn == other {
			t.Fatal("two calls gave one database")
		}
		// Left open past the test: the drop must end it.
		left = connect(t, dsn)
		var tables int
		if err := left.QueryRow(ctx, "SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')").
			Scan(&name, &tables); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "memgate_") || tables != 0 {
			t.Fatalf("database %q with %d tables, want a new memgate_ one with none", name, tables)
		}
		var n int
		if _, err := left.Exec(ctx, "CREATE TABLE m (x int); INSERT INTO m VALUES (1), (2)"); err != nil {
			t.Fatal(err)
		}
		if err := left.QueryRow(ctx, "SELECT count(*) FROM m").Scan(&n); err != nil || n != 2 {
			t.Fatalf("count = %d, %v; want 2 rows", n, err)
		}
	})
	if left == nil {
		t.Fatal("the test made no connection")
	}
	defer left.Close(ctx)
	if err := left.Ping(ctx); err == nil {
		t.Error("the test's connection outlived the drop of its database")
	}
	conn := connect(t, admin)
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d databases named %s after the test, %v; want none", n, name, err)
	}
}

func TestRestartKeepsTheDatabases(t *testing.T) {
	dsn := DSN(t)
	ctx := context.Background()
	conn := connect(t, dsn)
	var before time.Time
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&before); err != nil {
		t.Fatal(err)
	}

	Restart(t)

	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection from before the restart still answers")
	}
	conn.Close(ctx)
	conn = connect(t, dsn)
	defer conn.Close(ctx)
	var after time.Time
	var x int
	if err := conn.QueryRow(ctx, "SELECT pg_postmaster_start_time(), (SELECT x FROM kept)").Scan(&after, &x); err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Errorf("the server started at %v, and after the restart at %v", before, after)
	}
	if x != 42 {
		t.Errorf("kept x = %d after the restart, want 42", x)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		name, dsn string
		user      string
		password  string
	}{
		{"a URL gets the database as its path", "postgres://memgate_test@127.0.0.1:5432/postgres?sslmode=disable", "memgate_test", ""},
		{"a URL keeps an escaped password", "postgresql://u:p%40ss%2Fw@db.example:6543/main?sslmode=disable", "u", "p@ss/w"},
		{"a URL without a database gets one", "postgres://u@127.0.0.1:5432?sslmode=disable", "u", ""},
		{"keyword pairs get a dbname that wins", "host=127.0.0.1 port=5432 user=u password='a b' dbname=postgres sslmode=disable", "u", "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withDatabase(tt.dsn, "memgate_x")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := pgx.ParseConfig(got)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Database != "memgate_x" || cfg.User != tt.user || cfg.Password != tt.password {
				t.Errorf("database %q, user %q, password %q; want memgate_x, %q, %q",
					cfg.Database, cfg.User, cfg.Password, tt.user, tt.password)
			}
		})
	}
}

// recorder is a test that records how it ended instead of ending.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skip(args ...any)                  { r.skip = fmt.Sprint(args...) }

func TestWithoutAServerCIFailsAndADeveloperSkips(t *testing.T) {
	t.Setenv(envDSN, "")
	t.Setenv("CI", "true")
	ci := &recorder{TB: t}
	Admin(ci)
	if ci.skip != "" || !strings.Contains(ci.fatal, "CI=true") || !strings.Contains(ci.fatal, "scripts/postgres.sh start") {
		t.Errorf("under CI=true: fatal %q, skip %q; want a failure that says how to start a server", ci.fatal, ci.skip)
	}
	t.Setenv("CI", "")
	dev := &recorder{TB: t}
	Admin(dev)
	if dev.fatal != "" || !strings.Contains(dev.skip, "export "+envDSN+"=$(scripts/postgres.sh start)") {
		t.Errorf("outside CI: fatal %q, skip %q; want a skip that says how to start a server", dev.fatal, dev.skip)
	}
}
