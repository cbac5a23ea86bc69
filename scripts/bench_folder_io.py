"""Measure the folder source on this machine: admitting files, the driver's cut, executor reads.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_folder_io.py [--files 40]

Writes ``--files`` files of ``--rows`` rows each (the ``route string, fare double`` shape,
one row in 100 malformed) in each format into a temporary folder, then reports, as one JSON
object per line and format: the time to admit them all (list, count records, append to the
manifest: the first ``count`` of a node), a later cut with nothing new (a listing), and the
rows/s of ``records`` reading every row of the lane in ranges of 50,000 (the shape of a
source's micro-batches), the median of three runs with a cold file cache each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spillway.feeds.folder import FolderFeed

ROUTES = np.array(["JFK-LAX", "SFO-SEA", "ORD-MIA", "BOS-DCA"])


def _write(folder: Path, fmt: str, files: int, rows: int, bad_every: int) -> None:
    rng = np.random.default_rng(0)
    for f in range(files):
        route = ROUTES[rng.integers(0, len(ROUTES), rows)]
        fare = np.round(rng.gamma(4, 10, rows), 2)
        path = folder / f"part-{f:04d}.{fmt}"
        if fmt == "parquet":
            pq.write_table(pa.table({"route": route, "fare": fare}), path)
            continue
        if fmt == "json":
            lines = [f'{{"route": "{r}", "fare": {x}}}' for r, x in zip(route, fare, strict=True)]
        else:
            lines = ["route,fare"] + [f"{r},{x}" for r, x in zip(route, fare, strict=True)]
        for i in range(bad_every - 1, len(lines), bad_every or len(lines) + 1):
            lines[i] = "{not a row"
        path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--rows", type=int, default=25_000)
    ap.add_argument("--bad-every", type=int, default=100, help="one malformed row in N; 0: none")
    args = ap.parse_args()
    for fmt in ("json", "csv", "parquet"):
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            _write(folder, fmt, args.files, args.rows, args.bad_every)
            opts = dict(
                path=str(folder),
                format=fmt,
                header=fmt == "csv",
                schema="route string, fare double",
                key_column="route",
                value_column="fare",
            )
            feed = FolderFeed(n_sources=1, **opts)
            feed.attach(time.time() + 3600)
            t0 = time.perf_counter()
            n = int(feed.count(1.0)[0])
            admit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            feed.count(2.0)
            list_s = time.perf_counter() - t0
            runs = []
            for _ in range(3):
                reader = FolderFeed(n_sources=1, **opts)
                t0 = time.perf_counter()
                for lo in range(0, n, 50_000):
                    reader.records(0, np.arange(lo, min(lo + 50_000, n)), 0.0)
                runs.append(time.perf_counter() - t0)
            print(
                json.dumps(
                    {
                        "format": fmt,
                        "files": args.files,
                        "bad_every": args.bad_every,
                        "rows": n,
                        "admit_s": round(admit_s, 3),
                        "listing_s": round(list_s, 4),
                        "read_rows_per_s": round(n / statistics.median(runs)),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
