"""Where a small micro-batch's time goes: the stw-validation node's batch, phase by phase.

Runs the ``stw-validation`` node (10 TOP-5 queries, 4,000 tuples/s in all, nothing shed) on
``local[2]`` for ``--duration`` seconds with Spark's UI on loopback, then prints the medians of
Spark's own phases of the last ``--batches`` micro-batches (``durationMs``: ``addBatch`` is the
``foreachBatch`` sink, ``walCommit``/``commitOffsets`` the checkpoint's offset and commit logs)
and of the Spark jobs those batches ran, by their number of stages (a plan of one kind runs
one job a batch: it reads the source and runs the statement; a plan that persists its batch
runs a job that reads and persists it, then the statement's), from the UI's REST API.

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/profile_node_batch.py --trigger 0.5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from datetime import datetime
from typing import Any


def _rest(url: str, app: str, path: str) -> Any:
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/{path}", timeout=10) as r:
        return json.load(r)


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trigger", type=float, default=0.5, help="trigger = window (s)")
    ap.add_argument("--duration", type=float, default=25.0)
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    from spillway.experiments.stw_validation import StwRun, StwValidationConfig, node_config
    from spillway.policies import make_policy
    from spillway.spark.node import Node
    from spillway.spark.session import configure_spark

    builder = SparkSession.builder.master("local[2]").appName("spillway-profile")
    builder = configure_spark(builder, local=True).config("spark.ui.enabled", "true")
    spark = builder.config("spark.ui.port", "0").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    cfg = StwValidationConfig(runs=(StwRun(stw_s=10.0, duration_s=30.0),), trigger_s=args.trigger)
    node_cfg = node_config(cfg, cfg.runs[0])
    rate = sum(q.rate * q.n_sources for q in node_cfg.queries)
    node = Node(node_cfg, spark=spark, policy=make_policy("balance-sic", seed=0),
                capacity_tuples_per_s=10 * rate)  # fmt: skip
    node.start()
    try:
        time.sleep(args.duration)
        progress = [p for q in spark.streams.active for p in q.recentProgress][-args.batches :]
        url, app = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
        jobs = sorted(_rest(url, app, "jobs"), key=lambda j: j["jobId"])
    finally:
        node.stop()
    phases = sorted({k for p in progress for k in p["durationMs"]})
    print(f"trigger {args.trigger:g} s, {len(progress)} batches (medians, ms):")
    for k in phases:
        print(f"  {k:>18} {statistics.median(p['durationMs'].get(k, 0) for p in progress):8.0f}")
    since = _seconds(progress[0]["timestamp"].rstrip("Z")) if progress else 0.0
    done = [j for j in jobs if j.get("completionTime") and _seconds(j["submissionTime"]) >= since]
    by_stages: dict[int, list[float]] = {}
    for j in done:
        d = _seconds(j["completionTime"]) - _seconds(j["submissionTime"])
        by_stages.setdefault(len(j["stageIds"]), []).append(d * 1e3)
    for n, ds in sorted(by_stages.items()):
        print(f"  job of {n} stage(s): {len(ds)} jobs, median {statistics.median(ds):.0f} ms")


if __name__ == "__main__":
    main()
