#!/bin/sh
# The dashboard's browser test drives Debian's Chromium headless (Playwright's core; nothing
# downloads a browser). Install it from Debian's packages when it is missing and we may
# (CI runs as root on Debian). When the install cannot run here (not root, or no apt-get), say
# how and go on: the browser tests are then skipped with that reason (tests/ui/conftest.py).
set -u
browser="${SPILLWAY_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$browser" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "spillway: installing Debian's chromium for the dashboard's browser test" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    && [ -x "$browser" ] && exit 0
  echo "spillway: apt-get could not install chromium (see above); the browser tests need it" >&2
  exit 1
fi
echo "spillway: no Chromium at $browser and it cannot be installed here (not root, or no" >&2
echo "  apt-get): the dashboard's browser tests will be skipped. Debian/Ubuntu:" >&2
echo "  sudo apt-get update && sudo apt-get install -y chromium (or set SPILLWAY_CHROMIUM)" >&2
exit 0
