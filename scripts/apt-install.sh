#!/bin/sh
# apt-install.sh PACKAGE... installs the Debian packages named that this
# machine lacks; a test's real parts come from them (chromium for the
# console's browser tests; buildah and friends for deploy/check). It does
# nothing when the list is empty. Without root (or sudo without a password)
# or without apt-get it says what to run and exits 0, leaving the decision
# to the test, which fails under CI=true and is skipped elsewhere.
set -eu

[ "$#" -gt 0 ] || exit 0
packages="$*"
me="${APT_INSTALL_FOR:-scripts/apt-install.sh}"
if [ "$(id -u)" = 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	echo "$me: cannot install $packages without root: apt-get install --no-install-recommends $packages" >&2
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "$me: no apt-get here; install $packages yourself" >&2
	exit 0
fi
echo "$me: apt-get install $packages" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -qq --no-install-recommends $packages >/dev/null ||
	{ $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends $packages >/dev/null; }
