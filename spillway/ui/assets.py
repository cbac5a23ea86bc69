"""The dashboard's files: our page, script and styles, and the chart library bundled at set-up.

The charts are drawn by uPlot (npm package ``uplot``, MIT licence; pinned in
``web/package.json`` with its integrity hash in ``web/package-lock.json``). ``make setup``
installs it with ``npm ci`` and copies its two files (and its licence) into
``spillway/ui/static/vendor/``, which git ignores: nothing is fetched when the dashboard runs,
and the browser loads every file from the dashboard itself. uPlot is small (about 50 kB
minified), draws time series on a canvas, and redraws thousands of points in milliseconds, so
a browser left open on a running node costs it little (BENCHMARKS.md measures it).

Examples
--------
>>> sorted(p.name for p in VENDOR_FILES)
['uPlot.iife.min.js', 'uPlot.min.css']
>>> check_assets(Path("/nonexistent"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spillway.errors.MissingAssetError: the dashboard's file /nonexistent/index.html is missing ...
"""

from __future__ import annotations

from pathlib import Path

from spillway.errors import MissingAssetError

#: Folder of the files the dashboard serves under ``/static/``.
STATIC = Path(__file__).with_name("static")

#: Bundled library files (relative to :data:`STATIC`), copied there by ``make setup``.
VENDOR_FILES = (Path("vendor/uPlot.iife.min.js"), Path("vendor/uPlot.min.css"))

#: Our own files (in the repository).
OWN_FILES = (Path("index.html"), Path("dashboard.js"), Path("dashboard.css"))


def check_assets(static: Path = STATIC) -> None:
    """Raise :class:`MissingAssetError` (one line: the file, and ``make setup``) unless every
    file the dashboard serves is there."""
    for rel in (*OWN_FILES, *VENDOR_FILES):
        path = static / rel
        if not path.is_file():
            raise MissingAssetError(
                f"the dashboard's file {path} is missing (the chart library is bundled at "
                "set-up, never fetched at run time): run `make setup` in the spillway "
                "checkout, or drop --ui"
            )
