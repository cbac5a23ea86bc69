"""Measure CoD's executor keep path (a grouped lane's read), old rule beside new, per tuple.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_cod_keep.py [--arrived 1000000]

For every grouped workload feed (``spillway run --workload grouped``: taxi, tasks) and overload
level (3x, 10x): ``--arrived`` tuples of source 0 (starting at index 2,000,000), their groups
counted exactly and allocated as CoD's equal allocation does (``allocate_groups``, budget
``arrived / level``), and the parts of ``read_batches``'s grouped path timed separately, the
median of ``--repeats`` runs each:

- ``keys``: ``feed.keys`` of every arrived tuple;
- ``select_sort_all``: ``select_kept_groups(..., candidates=False)``, the rule as first built
  (every tuple of a cut group sorted by (group, hash));
- ``select_candidates``: ``select_kept_groups`` (only hashes below a group's quantile sorted);
- ``select_lane``: ``select_kept`` of the lane's whole keep (what a per-lane policy pays);
- ``rows``: ``feed.records`` of the kept tuples (generating the kept rows).

One JSON object per line: the groups, how many are cut, the share of the tuples in groups kept
whole (``whole_share``), the largest keep fraction ``k_g / n_g`` of a cut group, nanoseconds per ARRIVED tuple of each part, the keep path (keys plus
selection) per arrived and per ADMITTED tuple, old and new, and the weight of a grouped lane's
candidate in units of one generated kept row, ``(keys + select_candidates − select_lane) /
rows`` per row (what ``GROUP_SCAN_WEIGHT`` in ``spillway/spark/source.py`` is set from).
Both rules keep the same tuples; the script checks it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spillway.feeds import make_feed
from spillway.policies.cod import allocate_groups
from spillway.spark.source import lane_key, select_kept, select_kept_groups
from spillway.workloads import GROUPED_FEEDS


def _median_s(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(
    name: str, feed: Any, keys: np.ndarray, level: float, lo: int, key: int, repeats: int
) -> dict[str, Any]:
    """One feed at one level: the figures of one output line (see the module docstring)."""
    n = keys.size
    hi = lo + n
    idx = np.arange(lo, hi, dtype=np.int64)
    groups, counts = np.unique(keys, return_counts=True)
    keep = allocate_groups(counts, int(n / level), rng=np.random.default_rng(0))
    part = keep < counts
    gk, gn = groups[part], keep[part]
    old = select_kept_groups(lo, hi, key, keys, gk, gn, candidates=False)
    new = select_kept_groups(lo, hi, key, keys, gk, gn)
    if not np.array_equal(old, new):
        raise SystemExit(f"{name} {level}x: the two rules keep different tuples")
    admitted = int(new.size)
    t = {
        "keys": _median_s(lambda: feed.keys(0, idx), repeats),
        "select_sort_all": _median_s(
            lambda: select_kept_groups(lo, hi, key, keys, gk, gn, candidates=False), repeats
        ),
        "select_candidates": _median_s(
            lambda: select_kept_groups(lo, hi, key, keys, gk, gn), repeats
        ),
        "select_lane": _median_s(lambda: select_kept(lo, hi, admitted, key), repeats),
        "rows": _median_s(lambda: feed.records(0, new, 0.0), repeats),
    }
    ns_arr = {k: 1e9 * v / n for k, v in t.items()}
    old_path = t["keys"] + t["select_sort_all"]
    new_path = t["keys"] + t["select_candidates"]
    row_ns = 1e9 * t["rows"] / admitted
    extra = ns_arr["keys"] + ns_arr["select_candidates"] - ns_arr["select_lane"]
    return {
        "feed": name,
        "level": level,
        "arrived": n,
        "admitted": admitted,
        "groups": int(groups.size),
        "groups_cut": int(part.sum()),
        "whole_share": round(float(counts[~part].sum() / n), 3),
        "largest_cut_fraction": round(float((gn / counts[part]).max()), 3),
        "ns_per_arrived": {k: round(v, 1) for k, v in ns_arr.items()},
        "keep_path_ns_per_arrived": {
            "old": round(1e9 * old_path / n, 1),
            "new": round(1e9 * new_path / n, 1),
        },
        "keep_path_ns_per_admitted": {
            "old": round(1e9 * old_path / admitted, 1),
            "new": round(1e9 * new_path / admitted, 1),
        },
        "row_ns_per_admitted": round(row_ns, 1),
        "group_scan_weight": round(extra / row_ns, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arrived", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    lo = 2_000_000
    idx = np.arange(lo, lo + args.arrived, dtype=np.int64)
    key = lane_key(7, "grouped", 0, 0)
    for name, (feed_name, options, _) in GROUPED_FEEDS.items():
        feed = make_feed(feed_name, n_sources=2, rate=20_000.0, **options)
        keys = np.asarray(feed.keys(0, idx), dtype=np.int64)
        for level in (3.0, 10.0):
            row = measure(name, feed, keys, level, lo, key, args.repeats)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
