#!/bin/sh
# Builds the release assets: a static memgate binary per platform as
# DIST/memgate-<os>-<arch>[.exe], DIST/SHA256SUMS, and the checksum table the
# npm and Python launchers ship (checksums.json in each package).
#
# The bytes depend on the sources, the Go toolchain and the stamped version
# and commit alone: -trimpath, an empty build id, no VCS stamping by the Go
# command (the commit is stamped with -X instead), no cgo.
#
#   DIST       the folder of the assets (default dist); emptied of old assets
#   PLATFORMS  os/arch pairs (default: linux, darwin, windows on amd64 and arm64)
#   LAUNCHERS  the folder holding npm/ and python/ (default launchers)
#   COMMIT     the commit stamped (default: git rev-parse HEAD)
#   MODIFIED   "true" when the work tree has changes (default: from git status)
#
# The version is the launchers' own (launchers/npm/package.json and
# launchers/python/pyproject.toml, which must agree): a launcher downloads
# the release of its version.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
DIST=${DIST:-dist}
LAUNCHERS=${LAUNCHERS:-$root/launchers}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
GO=${GO:-go}
case $DIST in /*) ;; *) DIST=$PWD/$DIST ;; esac
case $LAUNCHERS in /*) ;; *) LAUNCHERS=$PWD/$LAUNCHERS ;; esac

fail() { echo "release: $*" >&2; exit 1; }

version=$(sed -n 's/^  "version": "\([^"]*\)",*$/\1/p' "$LAUNCHERS/npm/package.json")
pyversion=$(sed -n 's/^version = "\([^"]*\)"$/\1/p' "$LAUNCHERS/python/pyproject.toml")
[ -n "$version" ] || fail "no version in $LAUNCHERS/npm/package.json"
[ "$version" = "$pyversion" ] || fail "npm version $version and Python version $pyversion differ"
if [ -n "${VERSION:-}" ] && [ "$VERSION" != "$version" ]; then
	fail "VERSION=$VERSION but the launchers are $version: change their versions instead"
fi

cd "$root"
if [ -z "${COMMIT+set}" ]; then
	COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
fi
if [ -z "${MODIFIED+set}" ]; then
	MODIFIED=false
	if [ -n "$COMMIT" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		MODIFIED=true
	fi
fi

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
	else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# Settings of the environment that would change the bytes.
unset GOFLAGS GOAMD64 GOARM64 GOEXPERIMENT GO386 GOARM
export CGO_ENABLED=0

mkdir -p "$DIST"
rm -f "$DIST"/memgate-* "$DIST/SHA256SUMS" "$DIST/.SHA256SUMS.tmp"
ldflags="-s -w -buildid= -X main.stampVersion=v$version -X main.stampCommit=$COMMIT -X main.stampModified=$MODIFIED"
sums=$DIST/.SHA256SUMS.tmp
table=""
: >"$sums"
for p in $PLATFORMS; do
	os=${p%/*}
	arch=${p#*/}
	ext=""
	[ "$os" = windows ] && ext=.exe
	asset=memgate-$os-$arch$ext
	echo "release: $asset" >&2
	GOOS=$os GOARCH=$arch "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$DIST/.$asset.tmp" ./cmd/memgate
	mv "$DIST/.$asset.tmp" "$DIST/$asset"
	sum=$(sha256 "$DIST/$asset")
	size=$(wc -c <"$DIST/$asset" | tr -d ' ')
	printf '%s  %s\n' "$sum" "$asset" >>"$sums"
	[ -z "$table" ] || table="$table,
"
	table="$table    \"$asset\": { \"sha256\": \"$sum\", \"size\": $size }"
done
mv "$sums" "$DIST/SHA256SUMS"

json="{
  \"version\": \"$version\",
  \"assets\": {
$table
  }
}"
for f in "$LAUNCHERS/npm/checksums.json" "$LAUNCHERS/python/memgate_mcp/checksums.json"; do
	printf '%s\n' "$json" >"$f.tmp"
	mv "$f.tmp" "$f"
done
echo "release: v$version ($COMMIT) in $DIST" >&2
