package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Bouncer starts a PgBouncer in transaction mode in front of the database
// of dsn (one DSN gave) and returns the DSN through it: each transaction
// may run on another server connection, and nothing of a session
// survives between transactions. It stops when the test ends. Without
// pgbouncer it ends the test as Admin does without a server.
func Bouncer(t testing.TB, dsn string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			missing(t, "no pgbouncer: apt-get install --no-install-recommends pgbouncer (scripts/postgres.sh install does)")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Hostname() == "" {
		t.Fatal("pgtest.Bouncer takes a postgres:// URL with a host")
	}
	// Not t.TempDir: its parent is the test's own, which another user (the
	// postgres user, below) cannot enter.
	dir, err := os.MkdirTemp("", "memgate-pgbouncer-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	name := u.User.Username()
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(strconv.Quote(name)+` ""`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root: as Debian's postgres user.
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("pgbouncer as root needs the postgres user (Debian's postgresql package makes it)")
		}
		uid, _ := strconv.Atoi(pg.Uid)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, -1); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited: %v; %s; its log: %s", err, stderr.Bytes(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("pgbouncer never listened")
		}
	}
	u.Host = addr
	return u.String()
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return a.Port, nil
	}
	return 0, errors.New("pgtest: no TCP address")
}
