"""Measure spillway's Kafka plumbing on this machine: writer rate, range-reader rows/s.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_kafka_io.py [--rows 2000000]

Starts its own broker in a temporary folder (stopped at the end), fills one partition with
``--rows`` JSON messages of the ``spillway produce`` shape (about 100 bytes), then reports, as
one JSON object per line: the encoding rate (columns to JSON values), the writer's rate (queue
and acknowledge), and the reader's rows/s for the whole partition at once and for consecutive
ranges of 50,000 and 10,000 offsets (the shape of a source's micro-batches), the seconds a
tenth of the partition takes as one range and as 16 runs spread over it (a shedding lane's
kept runs, each a re-seek), and
``KafkaFeed.records`` over the whole partition (read, then parse the JSON values with the
schema: the source's Python side), each the median of three runs, and the kept records of 20
small lanes (9,500 records each, a third kept: ``small_lanes_seconds``) read as 16 runs a lane
and as :func:`~spillway.spark.source.log_runs`'s runs. ``--spark`` adds Spark's
own Kafka source counting the same partition (batch read).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from spillway.kafka.admin import create_topic
from spillway.kafka.encode import encode
from spillway.kafka.feed import KafkaFeed
from spillway.kafka.reader import RangeReader
from spillway.kafka.writer import KafkaWriter
from spillway.testing import running_broker


def _median_rate(rows: int, runs: list[float]) -> float:
    return rows / statistics.median(runs)


def _print_rate(figure: str, rows: int, runs: list[float], **extra: object) -> None:
    """One JSON line: ``figure``, the median rows/s over ``runs`` (seconds), the runs, ``extra``."""
    value = round(_median_rate(rows, runs))
    print(json.dumps({"figure": figure, **extra, "value": value,
                      "runs_s": [round(x, 3) for x in runs]}))  # fmt: skip


#: spark-federation's node ``c`` (EXPERIMENTS.md "Node c reads its input whole"): 20 lanes
#: of about 9,500 records a decision, keeping about a third.
SMALL_LANES, SMALL_LANE_RECORDS, SMALL_LANE_KEPT = 20, 9_500, 0.35


def _small_lanes(feed: KafkaFeed, n: int) -> None:
    """Seconds to fetch and parse the kept records of :data:`SMALL_LANES` lanes of
    :data:`SMALL_LANE_RECORDS` (consecutive ranges of the partition), as an executor does
    (``KafkaFeed.records`` on the kept indices, gaps under ``read_gap`` read through): with
    the 16 kept runs a lane always had, and with :func:`~spillway.spark.source.log_runs`'s,
    each the median of three."""
    from spillway.spark.source import LOG_RUNS, log_runs, select_kept_runs

    lanes = min(SMALL_LANES, n // SMALL_LANE_RECORDS)
    keep = int(SMALL_LANE_RECORDS * SMALL_LANE_KEPT)
    for rule in ("16", "log_runs"):
        took = []
        for rep in range(3):
            t0 = time.perf_counter()
            got = 0
            for lane in range(lanes):
                lo = lane * SMALL_LANE_RECORDS
                hi = lo + SMALL_LANE_RECORDS
                runs = LOG_RUNS if rule == "16" else log_runs(hi - lo, keep, feed.read_gap)
                idx = select_kept_runs(lo, hi, keep, rep * 1000 + lane, runs)
                got += len(feed.records(0, idx)["key"])
            took.append(time.perf_counter() - t0)
            assert got == lanes * keep, (got, lanes * keep)
        print(json.dumps({"figure": "small_lanes_seconds", "runs": rule, "lanes": lanes,
                          "lane_records": SMALL_LANE_RECORDS, "kept": lanes * keep,
                          "value": round(statistics.median(took), 3),
                          "runs_s": [round(x, 3) for x in took]}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--spark", action="store_true", help="also time Spark's Kafka source")
    ap.add_argument("--partition-fetch-bytes", type=int, default=None,
                    help="the reader's max.partition.fetch.bytes (default: the reader's own)")  # fmt: skip
    args = ap.parse_args()
    n = args.rows
    fetch = {} if args.partition_fetch_bytes is None else {
        "max_partition_fetch_bytes": args.partition_fetch_bytes}  # fmt: skip
    with running_broker() as state:
        conn = state.connection()
        create_topic(conn, "bench", partitions=1)
        now = int(time.time() * 1000)
        cols = {
            "source": np.zeros(n, dtype=np.int64),
            "seq": np.arange(n, dtype=np.int64),
            "key": np.arange(n, dtype=np.int64) % 1000,
            "value": np.random.default_rng(0).normal(50.0, 10.0, n),
            "event_time": (now + np.arange(n) // 10).astype("datetime64[ms]"),
        }
        t0 = time.perf_counter()
        values = encode(cols)
        encode_s = time.perf_counter() - t0
        keys = [str(k) for k in cols["key"]]
        t0 = time.perf_counter()
        with KafkaWriter(conn) as w:
            w.write("bench", values, keys=keys, partitions=0, timestamps_ms=now + np.arange(n))
        write_s = time.perf_counter() - t0
        mean_bytes = sum(map(len, values[:10_000])) / 10_000
        print(json.dumps({"figure": "encode_json_rows_per_s", "value": round(n / encode_s)}))
        print(
            json.dumps(
                {
                    "figure": "writer_rows_per_s",
                    "value": round(n / write_s),
                    "value_bytes": round(mean_bytes, 1),
                    "note": "queue + flush until acknowledged, 1 partition, lz4",
                }
            )
        )
        for chunk in (n, 50_000, 10_000):
            runs = []
            for _ in range(3):
                with RangeReader(conn, **fetch) as r:
                    t0 = time.perf_counter()
                    got = sum(
                        r.read("bench", 0, a, min(a + chunk, n)).num_rows
                        for a in range(0, n, chunk)
                    )
                    runs.append(time.perf_counter() - t0)
                assert got == n, (got, n)
            _print_rate("reader_rows_per_s", n, runs, range_rows=chunk)
        # a lane that sheds reads its kept records as runs spread over its range (16 runs of
        # a tenth of it, as select_kept_runs does), each a re-seek: against one range
        kept = min(n, 200_000) // 10
        for runs in (1, 16):
            took = []
            for rep in range(3):
                with RangeReader(conn, **fetch) as r:
                    r.read("bench", 0, 0, 1)
                    t0 = time.perf_counter()
                    got = 0
                    for i in range(runs):
                        a = i * (n // runs) + rep * 7
                        got += r.read("bench", 0, a, a + kept // runs).num_rows
                    took.append(time.perf_counter() - t0)
            print(json.dumps({"figure": "reader_runs_seconds", "runs": runs, "rows": got,
                              "value": round(statistics.median(took), 3),
                              "runs_s": [round(x, 3) for x in took]}))  # fmt: skip
        # the source's whole Python side for one range: read, then parse the JSON values
        # with the user's schema into the columns a micro-batch carries (KafkaFeed.records)
        feed = KafkaFeed(
            subscribe="bench",
            startingOffsets="earliest",
            schema="source long, seq long, key long, value double",
            value_column="value",
            key_column="key",
            **{"kafka.bootstrap.servers": conn.bootstrap_servers},
        )
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            got = len(feed.records(0, np.arange(n, dtype=np.int64))["key"])
            runs.append(time.perf_counter() - t0)
            assert got == n, (got, n)
        _print_rate("feed_records_rows_per_s", n, runs, range_rows=n,
                    note="KafkaFeed.records: read + parse JSON with the schema")  # fmt: skip
        _small_lanes(feed, n)
        feed.close()
        if args.spark:
            from spillway.testing import local_spark

            spark = local_spark("bench-kafka-io")
            df = (
                spark.read.format("kafka")
                .options(**conn.spark_options())
                .option("subscribe", "bench")
                .load()
            )
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                assert df.count() == n
                runs.append(time.perf_counter() - t0)
            _print_rate("spark_kafka_source_count_rows_per_s", n, runs,
                        note="spark.read.format('kafka').load().count(), local[2], 1 partition")  # fmt: skip
            spark.stop()


if __name__ == "__main__":
    main()
