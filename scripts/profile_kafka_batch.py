"""Where a spillway micro-batch over Kafka spends its time, with producers feeding the topics.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/profile_kafka_batch.py \
        --rate 30000 [--policy balance-sic] [--keep-all] [--duration 30] [--trigger 2] \
        [--node-cpu 1.0]

Starts its own broker, feeds the ``overload`` experiment's topics with ``spillway produce`` at
``--rate`` tuples/s and runs that experiment's Kafka node (its grouped means, a 2 s trigger or ``--trigger``) for
``--duration`` seconds, with Spark's event log on; with ``--node-cpu``, the node on that
many cores and the producers outside them, as the experiment's ``node_cpu`` does. Then prints, as JSON lines, the medians over
the batches after the first three:

- ``progress``: Spark's own ``durationMs`` parts of a batch (``latestOffset`` holds the
  controller's decision, ``addBatch`` the read and the sink, ``walCommit`` and
  ``commitOffsets`` the checkpoint's logs) and its input rows;
- ``jobs``: per micro-batch's SQL execution, the wall time of the jobs that read the source (the
  Python reader on the executors, with the cache writes of its rows; a job reads the source
  when a task of it took rows without reading bytes, as a cached batch's reads do), of the
  other Spark jobs (the results' statement over the cached batch), and what is left: the
  driver's own time (the ``foreachBatch`` function, planning, collecting to pandas).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from spillway.experiments import overload as ov
from spillway.experiments._node_cpu import node_on_cores
from spillway.spark.session import configure_spark
from spillway.testing import running_broker


class _Progress(StreamingQueryListener):
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        pass

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        p = event.progress
        self.batches.append({"rows": p.numInputRows, **dict(p.durationMs)})


def _executions(log: Path) -> list[dict[str, Any]]:
    """Per SQL execution of the event log: its span and its jobs' spans, and whether each job
    read the source (a stage over a ``DataSourceRDD``)."""
    execs: dict[int, dict[str, Any]] = {}
    job_exec: dict[int, int] = {}
    # a stage reads the source when its tasks took rows from it: input records but no input
    # bytes (a read of the cached batch counts the bytes of its column batches)
    records: dict[int, int] = {}
    in_bytes: dict[int, int] = {}
    for line in log.read_text().splitlines():
        e = json.loads(line)
        kind = e["Event"]
        if kind.endswith("SQLExecutionStart"):
            execs[e["executionId"]] = {"start": e["time"], "jobs": {}}
        elif kind.endswith("SQLExecutionEnd") and e["executionId"] in execs:
            execs[e["executionId"]]["end"] = e["time"]
        elif kind == "SparkListenerTaskEnd":
            got = (e.get("Task Metrics") or {}).get("Input Metrics") or {}
            stage = e["Stage ID"]
            records[stage] = records.get(stage, 0) + int(got.get("Records Read", 0))
            in_bytes[stage] = in_bytes.get(stage, 0) + int(got.get("Bytes Read", 0))
        elif kind == "SparkListenerJobStart":
            ex = e.get("Properties", {}).get("spark.sql.execution.id")
            if ex is not None and int(ex) in execs:
                job_exec[e["Job ID"]] = int(ex)
                execs[int(ex)]["jobs"][e["Job ID"]] = {
                    "start": e["Submission Time"],
                    "stages": e["Stage IDs"],
                }
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in job_exec:
            execs[job_exec[e["Job ID"]]]["jobs"][e["Job ID"]]["end"] = e["Completion Time"]
    out = []
    for ex in execs.values():
        for job in ex["jobs"].values():
            job["reads"] = any(
                records.get(s, 0) > 0 and in_bytes.get(s, 0) == 0 for s in job["stages"]
            )
        out.append(ex)
    return out


def _union_ms(spans: list[tuple[int, int]]) -> int:
    """Milliseconds covered by the union of ``spans``."""
    total, last = 0, None
    for a, b in sorted(spans):
        if last is None or a > last:
            total += b - a
            last = b
        elif b > last:
            total += b - last
            last = b
    return total


def _job_split(execs: list[dict[str, Any]]) -> list[dict[str, int]]:
    """Per micro-batch execution (the outermost spans that hold the source's read), the wall
    of its reading jobs, of its other jobs, and the rest of its span."""
    rows = []
    for ex in execs:
        if "end" not in ex:
            continue
        inner = [x for x in execs if x is not ex and "end" in x
                 and ex["start"] <= x["start"] and x["end"] <= ex["end"]]  # fmt: skip
        jobs = [j for x in (ex, *inner) for j in x["jobs"].values() if "end" in j]
        if not any(j["reads"] for j in jobs) or any(
            x["start"] <= ex["start"] and ex["end"] <= x["end"] and x is not ex
            for x in execs
            if "end" in x
        ):
            continue  # not a micro-batch's outermost execution
        read = _union_ms([(j["start"], j["end"]) for j in jobs if j["reads"]])
        every = _union_ms([(j["start"], j["end"]) for j in jobs])
        span = ex["end"] - ex["start"]
        rows.append({"span_ms": span, "read_jobs_ms": read, "other_jobs_ms": every - read,
                     "driver_ms": span - every})  # fmt: skip
    return rows


def _medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for r in rows for k in r})
    return {k: statistics.median(float(r.get(k, 0)) for r in rows) for k in keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=30_000.0, help="producers' tuples/s in all")
    ap.add_argument("--policy", default="balance-sic")
    ap.add_argument("--keep-all", action="store_true", help="shed nothing (capacity runs)")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--trigger", type=float, default=2.0, help="trigger interval (s)")
    ap.add_argument("--node-cpu", type=float, default=None, help="the node's cores (cgroup)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the node's session (repeatable)")  # fmt: skip
    args = ap.parse_args()
    cfg = ov.OverloadConfig(sources=("kafka",), trigger_s=args.trigger, duration_s=args.duration,
                            warmup_s=3 * args.trigger, plain_spark=False,
                            node_cpu=args.node_cpu)  # fmt: skip
    logs = Path(tempfile.mkdtemp(prefix="spillway-profile-"))
    builder = (
        SparkSession.builder.master(cfg.master).appName("profile-kafka-batch")
        .config("spark.eventLog.enabled", "true").config("spark.eventLog.compress", "false")
        .config("spark.eventLog.dir", logs.as_uri())
    )  # fmt: skip
    for kv in args.conf:
        key, _, value = kv.partition("=")
        builder = builder.config(key, value)
    spark = configure_spark(builder, local=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    progress = _Progress()
    spark.streams.addListener(progress)
    with running_broker() as state, node_on_cores(spark, cfg.node_cpu) as home:
        conn = state.connection()
        lr, produced = ov._kafka_run(cfg, spark, conn, args.policy, args.rate, "profile",
                                     keep_all=args.keep_all, home=home)  # fmt: skip
    spark.stop()
    log = next(p for p in logs.rglob("*") if p.is_file() and not p.name.startswith((".", "app")))
    steady = progress.batches[3:]
    split = _job_split(_executions(log))[3:]
    print(json.dumps({"figure": "producers", "asked_rate": args.rate,
                      "achieved_rate": round(produced["achieved_rate"])}))  # fmt: skip
    print(json.dumps({"figure": "progress", "batches": len(steady), **_medians(steady)}))
    print(json.dumps({"figure": "jobs", "batches": len(split), **_medians(split)}))
    # the batches as the controller saw them, and what its cost model makes of the median one
    plans = [b for plan in lr.batches.values() for b in plan][3:]
    med = _medians([{"rows": b["rows"], "duration_s": b["duration_s"]} for b in plans])
    last = lr.history[-1]
    model = last.overhead_s + last.per_tuple_s * med.get("rows", 0.0)
    print(json.dumps({"figure": "model", "batches": len(plans), **med,
                      "overhead_s": last.overhead_s, "per_tuple_us": last.per_tuple_s * 1e6,
                      "per_arrived_us": last.per_arrived_s * 1e6,
                      "model_s_without_arrived": round(model, 3)}))  # fmt: skip


if __name__ == "__main__":
    main()
