"""Time the spillway source's ``read`` of one micro-batch partition of small lanes.

A partition of ``--lanes`` lanes (the sources of the ``stw-validation`` node's TOP-5 queries on
the cluster feed: 20 sources a query, 20 tuples/s each) holding one ``--interval`` of tuples,
nothing shed, read with :func:`spillway.spark.source.read_batches` as an executor reads it;
the median over ``--repeats`` reads. Small lanes are where the fixed cost of a lane (hashing
its key, the feed's per-call set-up) shows: a few tuples a lane and a hundred lanes.

    .venv/bin/python scripts/bench_source_read.py --lanes 100 --interval 0.5 --repeats 30
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from spillway.experiments.stw_validation import make_config, node_config, query_feeds
from spillway.spark.source import FeedSpec, SpillwayPartition, read_batches


def partition(lanes: int, interval_s: float, at_s: float = 60.0) -> SpillwayPartition:
    """The partition of the first ``lanes`` lanes of the stw node, ``[at_s, at_s + interval_s)``."""
    cfg = make_config(quick=True)
    node = node_config(cfg, cfg.runs[0])
    feeds = list(query_feeds(node).values())
    qid, sid, fidx, lo, hi = [], [], [], [], []
    for q, feed in enumerate(feeds):
        start, end = feed.count(at_s), feed.count(at_s + interval_s)
        for s in range(len(start)):
            qid.append(q), sid.append(s), fidx.append(q)
            lo.append(int(start[s])), hi.append(int(end[s]))
    n = min(lanes, len(lo))
    lo_a, hi_a = np.array(lo[:n]), np.array(hi[:n])
    return SpillwayPartition(
        plan="top5", seed=node.seed, epoch_us=0,
        feeds=tuple(FeedSpec.of(f).dump() for f in feeds),
        query_id=np.array(qid[:n], np.int32), source_id=np.array(sid[:n], np.int32),
        feed=np.array(fidx[:n]), lo=lo_a, hi=hi_a, keep=hi_a - lo_a,
        sic=np.full(n, 0.01),
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lanes", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    part = partition(args.lanes, args.interval)
    rows = sum(b.num_rows for b in read_batches(part))  # warm: the feeds are cached
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        for _b in read_batches(part):
            pass
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"lanes {len(part.lo)}, rows {rows}: read {med * 1e3:.1f} ms (median of "
          f"{args.repeats}), {med * 1e6 / len(part.lo):.0f} µs a lane")  # fmt: skip


if __name__ == "__main__":
    main()
