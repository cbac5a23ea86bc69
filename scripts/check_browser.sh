#!/bin/sh
# The dashboard's browser test drives Debian's Chromium headless (Playwright's core; nothing
# downloads a browser). Install it from Debian's packages when it is missing and we may
# (CI runs as root on Debian); otherwise say how.
set -u
browser="${SPILLWAY_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$browser" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "spillway: installing Debian's chromium for the dashboard's browser test" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    && [ -x "$browser" ] && exit 0
fi
echo "spillway: the dashboard's browser test needs Chromium at $browser (set SPILLWAY_CHROMIUM" >&2
echo "  to use another). Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y chromium" >&2
exit 1
