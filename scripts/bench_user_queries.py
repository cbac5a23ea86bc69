"""How many user queries one node carries within its trigger interval, measured.

    .venv/bin/python scripts/bench_user_queries.py [--counts 1,2,4,8,16] [--seconds 24]

For each count N, a node hosts N user queries (each a filter, a group-by key per window and a
mean: ``per_key_mean`` below) over a generated feed at ``--rate`` tuples/s per query, nothing
shed (a fixed capacity far above the input), trigger ``--trigger`` seconds. It prints, per N, the
median and 90th percentile of the micro-batch time over the batches after the first three, and
whether the median fits the node's budget (headroom 0.8 x trigger). Every user query costs two
small Spark jobs per batch (its windows' SIC mass and its result), so the batch time grows with
N; where it passes the budget, the node would start spanning or shedding.
Run under ``flock /tmp/spillway-heavy.lock`` on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import numpy as np
from pyspark.sql import functions as F

from spillway.config import NodeConfig, QuerySpec
from spillway.spark.node import Node
from spillway.testing import local_spark


def per_key_mean(rows):
    """A user query: the mean value per key and window of the values above 10."""
    return (
        rows.filter(F.col("value") > 10)
        .groupBy("window_start", "key")
        .agg(F.avg("value").alias("mean"), F.count(F.lit(1)).alias("n"))
    )


def measure(spark, n: int, *, rate: float, trigger_s: float, seconds: float) -> list[float]:
    queries = tuple(
        QuerySpec(name=f"u{i}", kind="user", feed="taxi", rate=rate, window_s=trigger_s,
                  function=per_key_mean)
        for i in range(n)
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as ckpt:
        cfg = NodeConfig(queries=queries, trigger_s=trigger_s, stw_s=10.0, checkpoint_dir=ckpt)
        node = Node(cfg, spark=spark, capacity_tuples_per_s=1e9)
        node.run(seconds)
        return [r.batch_s for r in node.history() if r.batch_s > 0][3:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1,2,4,8,16")
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--trigger", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=24.0)
    args = ap.parse_args()
    spark = local_spark("bench-user-queries")
    budget = 0.8 * args.trigger
    print(f"trigger {args.trigger} s, budget {budget:.1f} s, {args.rate:.0f} tuples/s per query")
    print("| user queries | batches | median batch s | p90 batch s | fits the budget |")
    print("|---|---|---|---|---|")
    for n in (int(c) for c in args.counts.split(",")):
        times = measure(spark, n, rate=args.rate, trigger_s=args.trigger, seconds=args.seconds)
        if not times:
            print(f"| {n} | 0 | n/a | n/a | no batch finished |")
            continue
        med, p90 = statistics.median(times), float(np.percentile(times, 90))
        print(
            f"| {n} | {len(times)} | {med:.2f} | {p90:.2f} | {'yes' if med <= budget else 'no'} |"
        )


if __name__ == "__main__":
    main()
