#!/bin/sh
# install.sh installs what deploy/check needs and a fresh machine lacks,
# from Debian's packages: buildah (builds and runs the image without a
# container engine), busybox-static (the shell of the stand-in Go builder
# image) and systemd (systemd-analyze checks the unit). It does nothing when
# they are there. Without root (or sudo
# without a password) it says what to run and leaves the decision to the
# test, which fails under CI=true and is skipped elsewhere.
set -eu

packages=""
command -v buildah >/dev/null 2>&1 || packages="$packages buildah"
# A static busybox: the dynamic one of package busybox cannot run alone.
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || packages="$packages busybox-static"
command -v systemd-analyze >/dev/null 2>&1 || packages="$packages systemd"
packages=${packages# }
[ -n "$packages" ] || exit 0
if [ "$(id -u)" = 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	echo "deploy/check/install.sh: cannot install $packages without root: apt-get install --no-install-recommends $packages" >&2
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deploy/check/install.sh: no apt-get here; install $packages yourself" >&2
	exit 0
fi
echo "deploy/check/install.sh: apt-get install $packages" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -qq --no-install-recommends $packages >/dev/null ||
	{ $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends $packages >/dev/null; }
