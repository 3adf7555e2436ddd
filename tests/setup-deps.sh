#!/bin/sh
# Installs what building and testing ranksnap needs, from Debian/Ubuntu packages. Idempotent;
# uses sudo when not run as root. The CUDA toolkit is optional (it is looked for in
# /usr/local/cuda; without it the build is CPU-only with the sim backend).
set -eu
# chromium: the browser tests of report.html (label html; tests/html), headless
# nodejs, node-css-tree: the checks of the page's script (node --check) and style sheet (CSSTree)
pkgs="cmake make gcc g++ clang pkg-config libopenmpi-dev openmpi-bin libmsgpack-dev libunwind-dev python3 python3-msgpack chromium nodejs node-css-tree"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup-deps: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
echo "setup-deps: ok"
