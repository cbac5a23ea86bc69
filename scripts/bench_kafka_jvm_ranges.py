"""What Spark's own Kafka reader costs on the offset ranges spillway keeps, on this machine.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_kafka_jvm_ranges.py

A design probe for reading a Kafka lane's kept records through the JVM instead of spillway's
Python reader. Starts its own broker, fills two partitions with 200,000 JSON messages each (the
``spillway produce`` shape), then times, four times each (seconds), on ``local[2]``, the grouped
mean of the parsed values (``from_json`` in Spark) over:

- ``full``: one batch read of ``[0, n)`` of both partitions, for n = 10,000, 50,000, 100,000
  (the first timings include the JVM's warm-up);
- ``runs``: the kept tenth of ``[0, total)`` read as R runs per partition, each run one batch
  read (``startingOffsets`` / ``endingOffsets`` per partition), unioned, coalesced to 2 tasks
  (``plan``: building that DataFrame alone, no job);
- ``filter``: the whole ``[0, total)`` read and the same share kept by a filter on the offset
  (every record fetched, as a reader that cannot skip does).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from pyspark.sql import functions as F

from spillway.kafka.admin import create_topic
from spillway.kafka.encode import encode
from spillway.kafka.writer import KafkaWriter
from spillway.testing import local_spark, running_broker

SCHEMA = "source long, seq long, key long, value double, event_time timestamp"
ROWS = 200_000


def _timed(fn: Callable[[], Any], times: int = 4) -> list[float]:
    out = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        out.append(round(time.perf_counter() - t0, 3))
    return out


def main() -> None:
    with running_broker() as state:
        conn = state.connection()
        create_topic(conn, "bench", partitions=2)
        now = int(time.time() * 1000)
        for p in (0, 1):
            cols = {
                "source": np.full(ROWS, p, dtype=np.int64),
                "seq": np.arange(ROWS, dtype=np.int64),
                "key": np.arange(ROWS, dtype=np.int64) % 1000,
                "value": np.random.default_rng(p).normal(50.0, 10.0, ROWS),
                "event_time": (now + np.arange(ROWS) // 10).astype("datetime64[ms]"),
            }
            with KafkaWriter(conn) as w:
                w.write("bench", encode(cols), keys=[str(k) for k in cols["key"]],
                        partitions=p, timestamps_ms=now + np.arange(ROWS))  # fmt: skip
        spark = local_spark("bench-kafka-jvm-ranges")
        opts = conn.spark_options()

        def read(ranges: dict[int, tuple[int, int]]) -> Any:
            return (
                spark.read.format("kafka").options(**opts)
                .option("assign", json.dumps({"bench": sorted(ranges)}))
                .option("startingOffsets",
                        json.dumps({"bench": {str(p): a for p, (a, _) in ranges.items()}}))
                .option("endingOffsets",
                        json.dumps({"bench": {str(p): b for p, (_, b) in ranges.items()}}))
                .load()
            )  # fmt: skip

        def query(df: Any) -> Any:
            v = df.select(
                "partition", F.from_json(F.col("value").cast("string"), SCHEMA).alias("v")
            )
            means = v.groupBy("partition", "v.key").agg(F.avg("v.value").alias("m"))
            return means.groupBy("partition").agg(F.count("*")).collect()

        for n in (10_000, 50_000, 100_000):
            print(json.dumps({"figure": "full", "rows_per_partition": n,
                              "s": _timed(lambda n=n: query(read({0: (0, n), 1: (0, n)})))}))  # fmt: skip
        for total, runs in ((100_000, 16), (100_000, 4), (200_000, 16)):
            keep = total // 10

            def unioned(total: int = total, runs: int = runs, keep: int = keep) -> Any:
                parts = []
                for i in range(runs):
                    a = i * (total // runs)
                    parts.append(read({0: (a, a + keep // runs), 1: (a, a + keep // runs)}))
                return functools.reduce(lambda x, y: x.unionByName(y), parts).coalesce(2)

            def filtered(total: int = total, runs: int = runs, keep: int = keep) -> Any:
                kept = F.pmod(F.col("offset"), F.lit(total // runs)) < keep // runs
                return query(read({0: (0, total), 1: (0, total)}).filter(kept))

            base = {"range_per_partition": total, "runs": runs, "kept_per_partition": keep}
            print(json.dumps({"figure": "plan", **base, "s": _timed(unioned)}))
            print(json.dumps({"figure": "runs", **base, "s": _timed(lambda u=unioned: query(u()))}))
            print(json.dumps({"figure": "filter", **base, "s": _timed(filtered)}))
        spark.stop()


if __name__ == "__main__":
    main()
