// Package pgtest gives a test a PostgreSQL database of its own on the server
// that MEMGATE_TEST_POSTGRES_DSN names: the admin DSN that
// scripts/postgres.sh start prints, and that make test and make unit set
// (scripts/postgres.sh run). Each database is new and empty, and dropped
// when its test ends.
//
// Without the variable a test that needs PostgreSQL is skipped, saying how
// to start a server, except under CI=true, where it fails: CI cannot pass
// without running it.
//
// One server holds the databases of every test process of a go test run
// (a process per package, run side by side). Restart stops it for a moment,
// so it waits until no other process holds a database, and the others wait
// for it: a file lock, shared while a process holds databases, exclusive
// while one restarts. The tests of one process are their own: a Restart
// breaks the connections of the other tests of its package that run at the
// time.
//
// The DSN never goes into a message: a developer's may hold a password.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// envDSN names the variable that holds the admin DSN.
const envDSN = "MEMGATE_TEST_POSTGRES_DSN"

// timeout bounds each step: a connection, a CREATE or DROP DATABASE, a restart.
const timeout = 2 * time.Minute

// Admin returns the admin DSN of the tests' server. Without one it ends
// the test: a failure under CI=true, a skip elsewhere.
func Admin(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		missing(t, envDSN+" is not set; start a server with: export "+envDSN+"=$(scripts/postgres.sh start)"+
			" (make test and make unit start one themselves; scripts/postgres.sh stop ends it)")
	}
	return dsn
}

// missing ends a test whose real part is missing: a failure in CI, a skip
// elsewhere.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot run under CI=true: %s", why)
	} else {
		t.Skip(why)
	}
}

// DSN returns the DSN of a new, empty database on the tests' server, dropped
// (WITH (FORCE), connections and all) when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	admin := Admin(t)
	name := "memgate_" + strings.ToLower(rand.Text())
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	release, err := share(admin)
	if err != nil {
		t.Fatalf("the lock of the tests' server: %v", err)
	}
	t.Cleanup(release)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := execAdmin(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The test's context is over by now; the drop gets one of its own.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := execAdmin(ctx, admin, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return dsn
}

// withDatabase returns dsn with its database replaced by name, in either
// form PostgreSQL's clients read: a URL, or keyword=value pairs, where the
// last of a keyword wins.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// Not err: it quotes the URL, password and all.
			return "", errors.New(envDSN + " is not a URL that parses")
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

// execAdmin runs one statement on a connection of its own to the admin
// database.
func execAdmin(ctx context.Context, admin, sql string) error {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		// pgx hides a password from its message only as best it can.
		return errors.New(envDSN + " is not a connection string that pgx reads")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Restart restarts the tests' server (scripts/postgres.sh restart, a fast
// shutdown: every connection ends) and returns once it takes connections
// again, on the same port, with its databases. It needs the server that
// scripts/postgres.sh started; with another one it ends the test as Admin
// does without one.
func Restart(t testing.TB) {
	t.Helper()
	admin := Admin(t)
	script, err := script()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", script, "dsn").Output()
	if err != nil || strings.TrimSpace(string(out)) != admin {
		missing(t, "Restart restarts the server of scripts/postgres.sh, and "+envDSN+" names another")
		return
	}
	err = exclusive(admin, func() error {
		out, err := exec.CommandContext(ctx, "sh", script, "restart").CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(err.Error() + "\n" + string(out)))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scripts/postgres.sh restart: %v", err)
	}
}

// script returns the path of scripts/postgres.sh in the module that holds
// the working folder (a test's is its package's).
func script() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "scripts", "postgres.sh")
			if _, err := os.Stat(p); err != nil {
				return "", err
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working folder: cannot find scripts/postgres.sh")
		}
		dir = up
	}
}
