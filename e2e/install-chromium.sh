#!/bin/sh
# install-chromium.sh installs Debian's chromium, the browser the console's
# tests drive headless (console.test.mjs), unless it is there.
set -eu
command -v chromium >/dev/null 2>&1 && exit 0
APT_INSTALL_FOR=e2e/install-chromium.sh exec "$(dirname "$0")/../scripts/apt-install.sh" chromium
