#!/bin/sh
# install.sh installs what deploy/check needs and a fresh machine lacks,
# from Debian's packages: buildah (builds and runs the image without a
# container engine), busybox-static (the shell of the stand-in Go builder
# image) and systemd (systemd-analyze checks the unit). It does nothing when
# they are there; see scripts/apt-install.sh for a machine without root.
set -eu

packages=""
command -v buildah >/dev/null 2>&1 || packages="$packages buildah"
# A static busybox: the dynamic one of package busybox cannot run alone.
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || packages="$packages busybox-static"
command -v systemd-analyze >/dev/null 2>&1 || packages="$packages systemd"
APT_INSTALL_FOR=deploy/check/install.sh exec "$(dirname "$0")/../../scripts/apt-install.sh" $packages
