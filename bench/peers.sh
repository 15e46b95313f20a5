#!/bin/sh
# peers.sh installs the peer MCP memory servers that the suite (go run .
# suite, in bench/) compares memgate with, from npm, into the folder given as $1 (default
# /tmp/memgate-peers), and prints that folder. Versions are pinned.
#
# The official server goes into $dir itself, so it starts with
#
#	MEMORY_FILE_PATH=$dir/memory.jsonl \
#	    node $dir/node_modules/@modelcontextprotocol/server-memory/dist/index.js
#
# (dist/index.js is the package's bin; it has no argv check, so the
# node_modules/.bin symlink works too). With PEERS_ALL=1 it also tries the
# two optional peers, each in a prefix of its own: mcp-memory-libsql in
# $dir/libsql, and @ai-devkit/memory in $dir/aidevkit, whose better-sqlite3
# compiles from source when its prebuilt binary cannot be downloaded (1-3
# minutes; needs python3, make and g++). The suite drives all three (the
# go-sdk memory example, its HTTP peer, it builds from the Go module cache). A peer that fails to install is
# skipped with a line on stderr; only a failure of the official server makes
# the exit status non-zero.
#
# Never run this in CI: it downloads ~100 packages per peer, and the
# benchmark that uses them takes minutes.
#
#	bench/peers.sh                        # the official server (~5-15 s)
#	PEERS_ALL=1 bench/peers.sh /tmp/peers # all three (~1.5 min)
set -u

dir="${1:-/tmp/memgate-peers}"

command -v npm >/dev/null 2>&1 || {
	echo "peers.sh: npm is needed to install the peers" >&2
	exit 1
}
mkdir -p "$dir" || exit 1

# install PREFIX PACKAGE@VERSION [npm flags...] installs one peer unless it
# is already there, and reports (without stopping) one that does not install.
install() {
	prefix=$1 pkg=$2
	shift 2
	if [ -f "$prefix/node_modules/${pkg%@*}/package.json" ]; then
		return 0
	fi
	if npm install --prefix "$prefix" "$pkg" --no-audit --no-fund "$@" >&2; then
		echo "peers.sh: installed $pkg in $prefix" >&2
	else
		echo "peers.sh: $pkg did not install; skipped" >&2
		return 1
	fi
}

status=0
install "$dir" @modelcontextprotocol/server-memory@2026.8.31 || status=1
if [ "${PEERS_ALL:-}" = 1 ]; then
	install "$dir/libsql" mcp-memory-libsql@0.0.17 || true
	npm_config_nodedir=/usr install "$dir/aidevkit" @ai-devkit/memory@0.20.1 --foreground-scripts || true
fi
echo "$dir"
exit $status
