"""Where a micro-batch's time goes, per policy, without Spark: driver decision and executor read.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/profile_cod_batch.py \
        [--capacity 697857] [--levels 3 10] [--policies balance-sic cod] [--batches 6]

The workload of ``spillway experiment overload`` (CoD's grouped means over the taxi and tasks
feeds, two sources each, 1 s windows = trigger) at ``level`` times ``--capacity`` tuples/s, one
:class:`~spillway.spark.controller.NodeController` on the logical clock with a fixed capacity of
``0.8 · capacity`` tuples an interval (what the node budget allows with no fixed cost), and per
interval the three parts of a micro-batch that spillway's own Python runs, timed separately:

- ``decide_ms``: ``latest_offset`` (the controller's decision, on the driver, inside the
  batch's planning);
- ``partitions_ms``: ``plan_partitions`` and pickling the partitions (driver);
- ``read_ms``: ``read_batches`` of every partition, one after the other (executors; Spark runs
  them on two cores side by side), with ``read_max_ms`` the slowest partition.

One JSON object per (policy, level): the medians over ``--batches`` intervals after the first,
the tuples arrived and kept per interval, and the pickled partition bytes.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from typing import Any

from spillway.config import feed_settings
from spillway.experiments.overload import OverloadConfig, base_rate, node_config
from spillway.feeds import make_feed
from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
from spillway.spark.source import FeedSpec, PlanOffset, plan_partitions, read_batches


def controller(policy: str, level: float, capacity: float) -> NodeController:
    """A logical-clock controller of the overload workload at ``level`` times ``capacity``."""
    cfg = node_config(
        OverloadConfig(sources=("generated",)), policy, level * capacity / base_rate()
    )
    queries = []
    for i, q in enumerate(cfg.queries):
        settings = feed_settings(q, cfg.seed, i)
        feed = make_feed(q.feed, **settings)
        queries.append(PlanQuery(query_id=i, name=q.name, feed=feed, kind=q.kind,
                                 spec=FeedSpec.registered(q.feed, **settings)))  # fmt: skip
    plan = PlanSpec(name="p", window_s=cfg.trigger_s, queries=tuple(queries))
    ccfg = ControllerConfig(trigger_s=cfg.trigger_s, stw_s=cfg.stw_s, seed=cfg.seed,
                            clock="logical", capacity_tuples=0.8 * capacity * cfg.trigger_s)  # fmt: skip
    return NodeController(ccfg, [plan], cfg.make_policy(), epoch_s=0.0)


def profile(policy: str, level: float, capacity: float, batches: int) -> dict[str, Any]:
    """One policy at one level: the figures of one output line (module docstring)."""
    c = controller(policy, level, capacity)
    desc = c.describe("p")
    start = c.initial_offset("p")
    rows: dict[str, list[float]] = {k: [] for k in
                                    ("decide_ms", "partitions_ms", "read_ms", "read_max_ms",
                                     "arrived", "kept", "pickled_bytes")}  # fmt: skip
    for i in range(batches + 1):
        t = time.perf_counter()
        end = c.latest_offset("p", start)
        t_decide = time.perf_counter() - t
        t = time.perf_counter()
        parts = plan_partitions(desc, PlanOffset.from_json(start), PlanOffset.from_json(end))
        blob = pickle.dumps(parts)
        t_parts = time.perf_counter() - t
        per_part = []
        for p in parts:
            t = time.perf_counter()
            for _ in read_batches(p):
                pass
            per_part.append(time.perf_counter() - t)
        c.commit("p", end)
        s, e = PlanOffset.from_json(start), PlanOffset.from_json(end)
        if i > 0:  # the first builds the feeds' caches
            rows["decide_ms"].append(t_decide * 1e3)
            rows["partitions_ms"].append(t_parts * 1e3)
            rows["read_ms"].append(sum(per_part) * 1e3)
            rows["read_max_ms"].append(max(per_part, default=0.0) * 1e3)
            rows["arrived"].append(sum(b - a for a, b in zip(s.end, e.end, strict=True)))
            rows["kept"].append(sum(e.keep))
            rows["pickled_bytes"].append(len(blob))
        start = end
    return {"policy": policy, "level": level,
            **{k: round(statistics.median(v), 1) for k, v in rows.items()}}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacity", type=float, default=697_857.0)
    ap.add_argument("--levels", type=float, nargs="+", default=[3.0, 10.0])
    ap.add_argument("--policies", nargs="+", default=["balance-sic", "cod"])
    ap.add_argument("--batches", type=int, default=6)
    a = ap.parse_args()
    for level in a.levels:
        for policy in a.policies:
            print(json.dumps(profile(policy, level, a.capacity, a.batches)), flush=True)


if __name__ == "__main__":
    main()
