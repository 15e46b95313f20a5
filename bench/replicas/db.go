package replicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// AdminVariable names the environment variable that holds the admin DSN
// of the PostgreSQL server the harnesses make their databases on
// (scripts/postgres.sh start prints one).
const AdminVariable = "MEMGATE_BENCH_POSTGRES_DSN"

// NewDatabase creates a database of its own on admin's server and returns
// its DSN and a function that drops it (connections and all). Neither
// error quotes a DSN.
func NewDatabase(ctx context.Context, admin string) (dsn string, drop func() error, err error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("the admin DSN is not a postgres:// URL")
	}
	name := "memgate_bench_" + strings.ToLower(rand.Text()[:12])
	if err := execAdmin(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	u.Path, u.RawPath = "/"+name, ""
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return execAdmin(ctx, admin, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

func execAdmin(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// Server is a PostgreSQL server running on this machine, whose CPU time
// /proc tells.
type Server struct{ postmaster int }

// FindServer finds the server of dsn among this machine's processes: the
// parent of the backend that serves a connection to it.
func FindServer(ctx context.Context, dsn string) (*Server, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, err
	}
	st, err := readStat(backend)
	if err != nil {
		return nil, fmt.Errorf("the server does not run on this machine (no /proc/%d): %w", backend, err)
	}
	return &Server{postmaster: st.ppid}, nil
}

// Setting returns the value of one of the server's settings (SHOW).
func Setting(ctx context.Context, dsn, name string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SHOW "+pgx.Identifier{name}.Sanitize()).Scan(&v)
	return v, err
}

// CPU is the CPU time (user + system) the server has spent so far: its
// postmaster's, with the children it reaped (backends of closed
// connections), and its children's that run (backends, checkpointer, WAL
// writer, autovacuum).
func (s *Server) CPU() (time.Duration, error) {
	pm, err := readStat(s.postmaster)
	if err != nil {
		return 0, err
	}
	total := pm.cpu + pm.children
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.postmaster {
			continue
		}
		st, err := readStat(pid)
		if err == nil && st.ppid == s.postmaster {
			total += st.cpu
		}
	}
	return total, nil
}

type procStat struct {
	ppid          int
	cpu, children time.Duration // utime+stime; cutime+cstime
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command name, field 2, may hold spaces: count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, errors.New("short /proc stat")
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / clockTick }
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17.
	return procStat{ppid: int(n(1)), cpu: tick(n(11) + n(12)), children: tick(n(13) + n(14))}, nil
}
