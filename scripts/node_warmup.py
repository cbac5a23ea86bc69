"""Does a node get faster as it runs? A keep-all node at a constant input, its batches over time.

Runs a node of two AVG queries over the ``cluster`` feed (10 sources each, ``--rate`` tuples/s
per source) on ``local[2]`` keeping every tuple for ``--duration`` seconds, then prints, for
each sixth of its micro-batches in order, the median rows and duration and the rows per second
of batch time. At a constant input every batch holds the same rows, so a falling duration is
the node itself getting faster (the JVM compiling its hot code, caches filling).
``--burners N`` runs N CPU-burning processes beside it (the cores shared, as in a federation of
three nodes or a run with its producers on the same machine); ``--java-opts`` is passed to the
driver's JVM (``spark.driver.extraJavaOptions``; give it with ``=``, as its value starts with
a dash: ``--java-opts=-XX:TieredStopAtLevel=1``).

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/node_warmup.py --burners 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def slices(batches: Sequence[Mapping[str, Any]], parts: int = 6) -> list[dict[str, Any]]:
    """The batches (in order) cut into ``parts`` consecutive slices: per slice the first and
    last batch's index, median rows and duration, and rows per second of batch time.

    >>> b = [{"rows": 100, "duration_s": d} for d in (2.0, 2.0, 1.0, 1.0)]
    >>> [(s["first"], s["last"], s["duration_s"], s["rows_per_s"]) for s in slices(b, 2)]
    [(0, 1, 2.0, 50.0), (2, 3, 1.0, 100.0)]
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    n = len(batches)
    size = max(1, -(-n // parts))
    out = []
    for i in range(0, n, size):
        part = batches[i : i + size]
        rows = [float(b["rows"]) for b in part]
        dur = [float(b["duration_s"]) for b in part]
        out.append({
            "first": i, "last": i + len(part) - 1,
            "rows": statistics.median(rows), "duration_s": statistics.median(dur),
            "rows_per_s": sum(rows) / sum(dur) if sum(dur) > 0 else float("nan"),
        })  # fmt: skip
    return out


def _burn() -> None:
    while True:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=4000.0, help="tuples/s per source (20 sources)")
    p.add_argument("--duration", type=float, default=150.0, help="seconds once warm")
    p.add_argument("--burners", type=int, default=0, help="CPU-burning processes beside it")
    p.add_argument("--java-opts", default="", help="the driver JVM's extra options")
    p.add_argument("--out", type=Path, default=None, help="write the batches here (JSON)")
    args = p.parse_args(argv)

    from pyspark.sql import SparkSession

    from spillway.config import NodeConfig
    from spillway.experiments._spark_runs import KEEP_ALL, run_level
    from spillway.spark.session import configure_spark

    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    try:
        builder = configure_spark(SparkSession.builder.master("local[2]"), local=True)
        if args.java_opts:
            builder = builder.config("spark.driver.extraJavaOptions", args.java_opts)
        spark = builder.appName("node-warmup").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        query = {"kind": "avg", "feed": "cluster", "sources": 10, "rate": args.rate}
        cfg = NodeConfig.from_dict({"policy": "random", "seed": 1, "trigger_s": 1.0,
                                    "query": [{"name": "q1", **query}, {"name": "q2", **query}]})  # fmt: skip
        t0 = time.monotonic()
        run = run_level(cfg, spark=spark, duration_s=args.duration, capacity_tuples_per_s=KEEP_ALL)
        wall = time.monotonic() - t0
    finally:
        for b in burners:
            b.terminate()
    batches = sorted((b for bs in run.batches.values() for b in bs),
                     key=lambda b: b["boundary"] or 0)  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps([dict(b) for b in batches]))
    print(f"burners {args.burners}, java opts {args.java_opts or '-'}, {len(batches)} batches, "
          f"{wall:.0f} s")  # fmt: skip
    for s in slices(batches):
        print(f"batches {s['first']:3d}-{s['last']:3d}: rows {s['rows']:8.0f}, duration "
              f"{s['duration_s']:.3f} s (median), {s['rows_per_s']:9.0f} rows/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
