#!/bin/sh
# postgres.sh runs the throwaway PostgreSQL server that the tests of a
# PostgreSQL backend use (package internal/pgtest makes a database on it for
# each test). It is Debian's package, brought by scripts/apt-install.sh when
# the machine has no PostgreSQL (else the newest there, or the one on PATH),
# in a temporary data folder, with trust authentication, on a free port of
# 127.0.0.1, without fsync: for tests only.
#
#   start    starts the server unless it runs, and prints its admin DSN
#            (postgres://memgate_test@127.0.0.1:PORT/postgres?sslmode=disable)
#   dsn      prints that DSN if the server runs; fails otherwise
#   restart  restarts it, fast, on the same port and folder
#   stop     stops it, fast, and removes its folder
#   install  installs Debian's postgresql and pgbouncer if they are not here,
#            under APTLOCK (never call it under that lock: it takes it)
#   run CMD  runs CMD with MEMGATE_TEST_POSTGRES_DSN set: the caller's own if
#            set, or the server that runs, or one started for CMD and
#            stopped after it however CMD ends. When none can start, CMD
#            runs without, and the tests that need one decide (they fail
#            under CI=true and are skipped elsewhere).
#
# One server per checkout: its folder and port are in a state file under
# $TMPDIR named after the checkout's path (MEMGATE_PG_STATE names another).
# PostgreSQL refuses to run as root, so under root the server runs as the
# postgres user that Debian's package makes. APTLOCK is the lock the
# Makefile's apt-early target installs packages under.
set -eu

me=scripts/postgres.sh
root=$(cd "$(dirname "$0")/.." && pwd -P)
tmp=${TMPDIR:-/tmp}
key=$(printf %s "$root" | cksum | cut -d' ' -f1)
state=${MEMGATE_PG_STATE:-$tmp/memgate-pg-$key.state}
aptlock=${APTLOCK:-/tmp/memgate-apt.lock}
user=memgate_test

fail() { echo "$me: $*" >&2; exit 1; }

# bindir prints the folder of the newest PostgreSQL's programs: Debian's,
# else those on PATH.
bindir() {
	newest=$(for f in /usr/lib/postgresql/*/bin/initdb; do
		if [ -x "$f" ]; then echo "$f"; fi
	done | sort -t/ -k5 -n | tail -n 1)
	if [ -n "$newest" ]; then
		dirname "$newest"
	elif newest=$(command -v initdb 2>/dev/null); then
		dirname "$newest"
	fi
}

# as_pg runs a PostgreSQL program as the user the server runs as, from /
# (where that user may read).
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		(cd / && runuser -u postgres -- "$@")
	else
		(cd / && "$@")
	fi
}

dsn_of() { echo "postgres://$user@127.0.0.1:$1/postgres?sslmode=disable"; }

# options are the server's settings; the port is the argument.
options() { echo "-c listen_addresses=127.0.0.1 -p $1 -k $base -c fsync=off -c max_connections=300"; }

# install_postgres takes APTLOCK itself: the lock of the Makefile's
# background installs, since apt-get runs one at a time. While it waits,
# another holder may install PostgreSQL (apt-early does, first) and then
# hold on for other packages: it stops waiting once PostgreSQL is here.
install_postgres() {
	installed && return 0
	# Closed before anything starts a server, which would hold it for life.
	exec 8>>"$aptlock"
	if command -v flock >/dev/null 2>&1; then
		until flock -n 8; do
			installed && { exec 8>&-; return 0; }
			sleep 1
		done
	fi
	if ! installed; then
		APT_INSTALL_FOR=$me "$(dirname "$0")/apt-install.sh" postgresql pgbouncer 8>&-
	fi
	exec 8>&-
}

# installed: PostgreSQL's binaries, and PgBouncer (the tests that run
# memgate through it in transaction mode start their own).
installed() {
	[ -n "$(bindir)" ] && { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }
}

# load reads the state file into base and port; it fails when there is none.
load() {
	[ -f "$state" ] || return 1
	base=$(sed -n 's/^base=//p' "$state")
	port=$(sed -n 's/^port=//p' "$state")
	[ -n "$base" ] && [ -n "$port" ]
}

running() {
	load && bin=$(bindir) && [ -n "$bin" ] &&
		as_pg "$bin/pg_ctl" -D "$base/data" status >/dev/null 2>&1 9>&-
}

# forget removes the folder and the state of a server that is not running.
forget() {
	if load; then rm -rf "$base"; fi
	rm -f "$state"
}

start() {
	if running; then
		dsn_of "$port"
		return 0
	fi
	forget
	install_postgres
	bin=$(bindir)
	[ -n "$bin" ] || fail "no PostgreSQL here: apt-get install --no-install-recommends postgresql"
	# The postgres user must reach the folder, which a root's TMPDIR may hide.
	parent=$tmp
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || fail "PostgreSQL does not run as root, and there is no postgres user"
		parent=/tmp
	fi
	base=$(mktemp -d "$parent/memgate-pg.XXXXXX")
	if [ "$(id -u)" = 0 ]; then chown postgres "$base"; fi
	as_pg "$bin/initdb" -D "$base/data" -U "$user" --auth=trust --no-locale --encoding=UTF8 \
		--no-sync >"$base/initdb.log" 2>&1 9>&- ||
		{ cat "$base/initdb.log" >&2; rm -rf "$base"; fail "initdb failed"; }
	# A port below Linux's ephemeral range (32768 and up), chosen at random;
	# the next ones when it is taken.
	port=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000 + 20000))
	tries=0
	until as_pg "$bin/pg_ctl" -D "$base/data" -l "$base/log" -o "$(options "$port")" -w start \
		>"$base/pg_ctl.out" 2>&1 9>&-; do
		tries=$((tries + 1))
		if ! grep -q 'already in use' "$base/log" 2>/dev/null || [ "$tries" -ge 20 ]; then
			cat "$base/pg_ctl.out" "$base/log" >&2 2>/dev/null || true
			rm -rf "$base"
			fail "the server did not start"
		fi
		: >"$base/log"
		port=$((port + 1))
	done
	printf 'base=%s\nport=%s\n' "$base" "$port" >"$state"
	dsn_of "$port"
}

stop() {
	if running; then
		as_pg "$bin/pg_ctl" -D "$base/data" -m fast -w stop >/dev/null 9>&-
	fi
	forget
}

restart() {
	load || fail "no server to restart: $me start"
	bin=$(bindir)
	as_pg "$bin/pg_ctl" -D "$base/data" -l "$base/log" -o "$(options "$port")" -m fast -w restart >/dev/null 9>&- ||
		{ tail -n 20 "$base/log" >&2 || true; fail "the server did not restart"; }
}

# locked runs one of the functions above with the state file's lock held,
# so that two starts at once make one server.
locked() {
	exec 9>>"$state.lock"
	if command -v flock >/dev/null 2>&1; then flock 9; fi
	"$@"
	exec 9>&-
}

run() {
	[ "$#" -gt 0 ] || fail "run needs a command"
	if [ -n "${MEMGATE_TEST_POSTGRES_DSN:-}" ]; then
		exec "$@"
	fi
	# Each step a process of its own, where set -e holds.
	if MEMGATE_TEST_POSTGRES_DSN=$(sh "$0" dsn 2>/dev/null); then
		export MEMGATE_TEST_POSTGRES_DSN # a server that ran before: it stays
		exec "$@"
	fi
	if ! MEMGATE_TEST_POSTGRES_DSN=$(sh "$0" start); then
		echo "$me: no PostgreSQL server; the tests that need one fail under CI=true and are skipped elsewhere" >&2
		exec "$@"
	fi
	export MEMGATE_TEST_POSTGRES_DSN
	trap 'sh "$0" stop' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	status=0
	"$@" || status=$?
	exit "$status"
}

dsn() {
	running || { echo "$me: no server runs: $me start" >&2; return 1; }
	dsn_of "$port"
}

case "${1:-}" in
start | stop | restart | dsn) locked "$1" ;;
install) install_postgres ;;
run) shift && run "$@" ;;
*) fail "usage: $me start|stop|restart|dsn|install|run CMD..." ;;
esac
