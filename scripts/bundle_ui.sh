#!/bin/sh
# Bundle the dashboard's chart library at set-up time: npm installs the version pinned in
# web/package-lock.json (integrity-checked, npm's cache lives outside the repository) and its
# files are copied into spillway/ui/static/vendor/ (ignored by git). The dashboard never
# fetches anything at run time.
set -eu
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "spillway: npm (Node.js) is needed to bundle the dashboard's chart library." >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
(cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
vendor=spillway/ui/static/vendor
mkdir -p "$vendor"
cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css "$vendor/"
cp web/node_modules/uplot/LICENSE "$vendor/uPlot-LICENSE"
