"""Time a plan's sink over one batch of built-in queries: the per-batch cost of the statement.

Builds a batch of ``--rows`` source rows spread over ``--queries`` logical queries, their kinds
cycling through the THEMIS mix (AVG, MAX, COUNT, AVG-all, TOP-5, COV) and GROUP-AVG, two 1 s
windows, and runs one :class:`~spillway.spark.sink.ResultSink` (every kind in one plan) on it
``--repeats`` times after one warm-up; prints the median and p90 seconds per batch.

Run under the shared lock (2 cores)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_sink_kinds.py --queries 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from spillway.spark.sink import ResultSink, ResultStore
from spillway.testing import local_spark

KINDS = ("avg", "max", "count", "avg_all", "top5", "cov", "group_avg")
SOURCES = {"avg": 1, "max": 1, "count": 1, "avg_all": 10, "top5": 20, "cov": 2, "group_avg": 1}


def batch_rows(n_queries: int, n_rows: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """Source rows (query, source, key, value, sic, t) and ``{kind: query ids}``."""
    rng = np.random.default_rng(seed)
    kinds: dict[str, list[int]] = {}
    for q in range(n_queries):
        kinds.setdefault(KINDS[q % len(KINDS)], []).append(q)
    q = rng.integers(0, n_queries, n_rows)
    kind = np.array([KINDS[i % len(KINDS)] for i in range(n_queries)])[q]
    n_src = np.array([SOURCES[k] for k in kind])
    src = (rng.random(n_rows) * n_src).astype(np.int32)
    key = np.where(
        kind == "top5", src // 2, np.where(kind == "group_avg", rng.integers(0, 40, n_rows), 0)
    )
    mem = (kind == "top5") & (src % 2 == 1)
    value = np.where(mem, rng.uniform(5e4, 2.5e5, n_rows), rng.uniform(0, 100, n_rows))
    t = 1_700_000_000.0 + rng.uniform(0, 2, n_rows)
    pdf = pd.DataFrame(
        {"query_id": q.astype(np.int32), "source_id": src, "key": key.astype(np.int64),
         "value": value, "sic": 1.0 / n_rows, "t": t}
    )  # fmt: skip
    return pdf, kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    spark = local_spark()
    pdf, kinds = batch_rows(a.queries, a.rows, a.seed)
    ts = F.timestamp_seconds("t")
    df = spark.createDataFrame(pdf).withColumn("event_ts", ts).withColumn("arrival_ts", ts)
    df = df.drop("t").cache()
    df.count()
    sink = ResultSink(kinds, 1.0, ResultStore(), clock=time.time)
    times = []
    for i in range(a.repeats + 1):
        start = time.perf_counter()
        sink(df, i)
        if i:
            times.append(time.perf_counter() - start)
    rows = len(sink.store)
    print(
        f"queries={a.queries} rows={a.rows} result_rows/batch={rows // (a.repeats + 1)} "
        f"median_s={np.median(times):.3f} p90_s={np.quantile(times, 0.9):.3f}"
    )


if __name__ == "__main__":
    main()
