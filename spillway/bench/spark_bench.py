"""The Spark part of ``spillway bench``: source throughput, and latency at 3x overload.

Two comparisons, each measured inside one run on one machine:

1. **Source throughput.** The same AVG query (THEMIS Table 1, 1 s tumbling window, the same
   ``foreachBatch`` sink a node uses) fed once by the spillway source through a
   :class:`~spillway.spark.node.Node` with nothing shed (rows carry their SIC) and once by
   Spark's built-in JVM ``rate`` source, each run alternately at two offered rates. From
   Spark's own progress figures (input rows, micro-batch duration) a least-squares fit gives
   each source's fixed cost per micro-batch and cost per row, and from them the rows/s it
   sustains when one batch fills one trigger interval (``source_rows_per_s``,
   ``rate_source_rows_per_s``, and their ratio ``source_ratio``). Pooled rows over batch time
   are reported too, but they favour a source that falls behind (its batches grow and spread
   the fixed cost). The reader's own generation speed outside Spark is measured alongside.
2. **3x overload.** A node first measures its capacity (overload calibration) and then receives
   3 times that, once shed by BALANCE-SIC and once with no shedding at all (every arrived tuple
   admitted), on identical input. Reported: p95 result latency of both
   (``latency_p95_shed_s``, ``latency_p95_noshed_s``), how latency grows through each run
   (slope of latency against time, and first vs last results), and ``utilisation``: the rate
   the shedding node processed over the capacity it measured.

Without shedding, every micro-batch holds all arrivals since the previous one, so at 3x
overload each batch is longer than the last; a memory guard ends that run early
when the rows admitted but not yet processed exceed ``max_backlog_rows`` (the report says so).

Examples
--------
>>> cfg = make_config(quick=True, seed=0)
>>> cfg.overload, cfg.overload_duration_s
(3.0, 45.0)
>>> latency_growth([0.0, 10.0, 20.0], [1.0, 6.0, 11.0])
0.5
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.control.batch_fit import fit_batch_cost, sustainable_rows_per_s
from spillway.errors import ConfigError, SpillwayError
from spillway.experiments.checks import Check, compare
from spillway.policies.base import Admission, Backlog, Policy, admit_all
from spillway.progress import report
from spillway.reporting import line_plot, markdown_table, num, write_csv

#: Tuples/s per source the overload workload is configured with before the calibration scales
#: it: high enough that calibration batches hold hundreds of thousands of rows, so the per-tuple
#: cost is measured rather than extrapolated from batches that only show the fixed cost.
BASE_RATE = 1000.0


class NoShedding(Policy):
    """Admit every waiting tuple, whatever the capacity: plain Spark without load shedding.

    The baseline of the overload comparison. It breaks the :class:`Policy` capacity rule on
    purpose (it is the behaviour shedding is compared against).

    >>> b = Backlog(lane_query=[0], lane_source=[0], count=[7], tuple_sic=[0.1], query_sic=[0.0])
    >>> NoShedding().decide(b, 1.0).keep.tolist()
    [7]
    """

    name = "none"

    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Keep everything."""
        return admit_all(backlog)


@dataclass(frozen=True, kw_only=True)
class SparkBenchConfig:
    """Settings of the Spark benchmarks.

    Parameters
    ----------
    source_rate : rows/s offered to both sources in the throughput comparison.
    source_sources : sources of the spillway AVG query (lanes spread over the partitions).
    source_duration_s : streaming time of each throughput run.
    source_rounds : throughput runs per source, alternated (spillway, rate, spillway, ...).
    warmup_batches : micro-batches each throughput run finishes before ``source_duration_s``
        starts; they are not counted.
    overload : arrival rate over measured capacity in the overload comparison.
    overload_queries : TOP-5 queries (20 sources = 10 machines each) of the overload workload.
    overload_duration_s : streaming time of each overload run (3 minutes by default).
    calibrate_s : capacity calibration before the overload runs.
    warmup_s : results and intervals before this feed time are ignored.
    headroom : share of each interval the shedding node may fill.
    max_backlog_rows : memory guard of the no-shedding run.
    trigger_s : trigger interval of the throughput runs.
    overload_trigger_s : trigger interval (= shedding interval) of the overload runs. A
        micro-batch's fixed cost is 0.5-1.5 s on this 2-core machine, so a 1 s interval would
        leave the shedding node little room besides it (utilisation = (headroom x interval -
        fixed cost) / (interval - fixed cost)).
    seed : seed of feeds and policy.
    master : Spark master URL.
    """

    source_rate: float = 200_000.0
    source_sources: int = 4
    source_duration_s: float = 60.0
    source_rounds: int = 2
    warmup_batches: int = 3
    overload: float = 3.0
    overload_queries: int = 4
    overload_duration_s: float = 180.0
    calibrate_s: float = 60.0
    warmup_s: float = 10.0
    headroom: float = 0.95
    max_backlog_rows: int = 40_000_000
    trigger_s: float = 1.0
    overload_trigger_s: float = 3.0
    seed: int = 0
    master: str = "local[2]"

    def __post_init__(self) -> None:
        for name in ("source_rate", "source_duration_s", "overload", "overload_duration_s",
                     "calibrate_s", "trigger_s", "overload_trigger_s"):  # fmt: skip
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and v > 0)
            ):
                raise ConfigError(f"{name} must be a finite number > 0, got {v!r}")
        for name in ("source_sources", "source_rounds", "overload_queries", "max_backlog_rows"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
        if (
            isinstance(self.warmup_batches, bool)
            or not isinstance(self.warmup_batches, int)
            or (self.warmup_batches < 0)
        ):
            raise ConfigError(f"warmup_batches must be an int >= 0, got {self.warmup_batches!r}")
        if not (0 <= self.warmup_s < self.overload_duration_s):
            raise ConfigError(
                f"warmup_s must be >= 0 and below overload_duration_s, got {self.warmup_s!r}"
            )
        if not 0 < self.headroom <= 1:
            raise ConfigError(f"headroom must be in (0, 1], got {self.headroom!r}")


def make_config(quick: bool, seed: int = 0) -> SparkBenchConfig:
    """The full benchmark (3-minute overload runs) or a quick one (45 s runs)."""
    if quick:
        return SparkBenchConfig(
            source_duration_s=20.0, overload_duration_s=45.0, calibrate_s=40.0, seed=seed
        )
    return SparkBenchConfig(seed=seed)


# ------------------------------------------------------------------------------ pure helpers


def rows_per_second(batches: Sequence[Mapping[str, Any]], *, skip: int) -> dict[str, float]:
    """Input rows over batch time, summed over the batches after the first ``skip``.

    Batches of 0 rows (nothing arrived) are left out: they measure no processing.

    >>> rows_per_second([{"rows": 10, "duration_s": 9.0}, {"rows": 500, "duration_s": 0.5},
    ...                  {"rows": 700, "duration_s": 0.5}], skip=1)
    {'rows_per_s': 1200.0, 'batches': 2, 'rows': 1200, 'batch_s': 1.0}
    """
    used = [b for b in list(batches)[skip:] if b["rows"] > 0]
    rows = int(sum(b["rows"] for b in used))
    secs = float(sum(b["duration_s"] for b in used))
    return {
        "rows_per_s": rows / secs if secs > 0 else math.nan,
        "batches": len(used),
        "rows": rows,
        "batch_s": secs,
    }


def pooled(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rows over batch time summed over several throughput runs of one source.

    >>> pooled([{"rows": 300, "batch_s": 1.0, "batches": 2},
    ...         {"rows": 100, "batch_s": 1.0, "batches": 1}])
    {'rows_per_s': 200.0, 'batches': 3, 'rows': 400, 'batch_s': 2.0}
    """
    rows = int(sum(r["rows"] for r in runs))
    secs = float(sum(r["batch_s"] for r in runs))
    return {
        "rows_per_s": rows / secs if secs > 0 else math.nan,
        "batches": int(sum(r["batches"] for r in runs)),
        "rows": rows,
        "batch_s": secs,
    }


def source_speed(
    runs: Sequence[Mapping[str, Any]], batches: Sequence[Mapping[str, Any]], cfg: SparkBenchConfig
) -> dict[str, Any]:
    """One source's throughput: fitted fixed and per-row cost, the rows/s it sustains at the
    trigger interval, and rows over batch time pooled over its runs."""
    fixed, per_row = fit_batch_cost(batches)
    raw = pooled(runs)
    return {
        "rows_per_s": sustainable_rows_per_s(fixed, per_row, cfg.trigger_s),
        "fixed_s": fixed,
        "per_row_us": per_row * 1e6,
        "batch_rows_per_s": raw["rows_per_s"],
        "batches": raw["batches"],
        "rows": raw["rows"],
        "batch_s": raw["batch_s"],
    }


def latency_growth(t: Sequence[float], latency: Sequence[float]) -> float:
    """Least-squares slope of latency against time (seconds of latency per second of run).

    NaN with fewer than two distinct times.
    """
    x = np.asarray(t, dtype=np.float64)
    y = np.asarray(latency, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan
    return round(float(np.polyfit(x, y, 1)[0]), 12)


def latency_stats(results: pd.DataFrame, *, epoch_s: float, warmup_s: float) -> dict[str, Any]:
    """p50/p95/max result latency after ``warmup_s``, its growth, first and last results.

    One latency per (query, window) (a TOP-5 window's rows share it). ``t`` is when the result
    was produced, in feed seconds.

    >>> res = pd.DataFrame({"query": ["a", "a", "a"], "window_start": [1.0, 2.0, 3.0],
    ...     "produced_at": [102.0, 103.0, 104.0], "latency_s": [1.0, 1.0, 1.0]})
    >>> s = latency_stats(res, epoch_s=100.0, warmup_s=0.0)
    >>> s["p95_s"], s["growth_s_per_s"], s["windows"]
    (1.0, 0.0, 3)
    """
    if results.empty:
        return {"p50_s": math.nan, "p95_s": math.nan, "max_s": math.nan,
                "growth_s_per_s": math.nan, "first_s": math.nan, "last_s": math.nan,
                "windows": 0}  # fmt: skip
    w = results.drop_duplicates(["query", "window_start"])
    t = w["produced_at"].to_numpy(dtype=np.float64) - epoch_s
    lat = w["latency_s"].to_numpy(dtype=np.float64)
    sel = t >= warmup_s
    t, lat = t[sel], lat[sel]
    if lat.size == 0:
        return latency_stats(results.iloc[0:0], epoch_s=epoch_s, warmup_s=warmup_s)
    order = np.argsort(t, kind="stable")
    t, lat = t[order], lat[order]
    return {
        "p50_s": float(np.quantile(lat, 0.5)),
        "p95_s": float(np.quantile(lat, 0.95)),
        "max_s": float(lat.max()),
        "growth_s_per_s": latency_growth(t, lat),
        "first_s": float(lat[0]),
        "last_s": float(lat[-1]),
        "windows": int(lat.size),
    }


def processed_rate(history: Sequence[Any], *, warmup_s: float, trigger_s: float) -> float:
    """Tuples/s the node processed: the admitted tuples of the intervals decided after
    ``warmup_s`` whose micro-batch Spark finished, over those intervals' time.

    The admitted count is used rather than Spark's ``numInputRows``: a plan that reads its
    source twice (TOP-5 joins two aggregates of the same rows) reports every row twice.
    Intervals whose batch had not finished when the run stopped are left out.

    >>> from spillway.status import IntervalRecord
    >>> h = [IntervalRecord(t=float(t), capacity_tuples=900.0, arrived_tuples=3000,
    ...      admitted_tuples=a, processed_tuples=p, batch_s=0.8) for t, a, p in
    ...      [(1, 50, 100), (2, 880, 1760), (3, 920, 1840), (4, 900, 0)]]
    >>> processed_rate(h, warmup_s=2.0, trigger_s=1.0)
    900.0
    """
    rows = [r for r in history if r.t >= warmup_s]
    while rows and rows[-1].processed_tuples == 0 and rows[-1].admitted_tuples > 0:
        rows.pop()
    if not rows:
        return math.nan
    done = sum(r.admitted_tuples for r in rows if r.processed_tuples > 0)
    return float(done) / (len(rows) * trigger_s)


def unprocessed(history: Sequence[Any]) -> int:
    """Tuples admitted in intervals whose micro-batch has not finished (held by Spark).

    >>> from spillway.status import IntervalRecord
    >>> unprocessed([IntervalRecord(t=1.0, capacity_tuples=1.0, arrived_tuples=9,
    ...     admitted_tuples=9, processed_tuples=0, batch_s=0.0)])
    9
    """
    return int(sum(r.admitted_tuples for r in history if r.processed_tuples == 0))


# ------------------------------------------------------------------------------ throughput


def _throughput_node(cfg: SparkBenchConfig, offered: float) -> NodeConfig:
    rate = offered / cfg.source_sources
    q = QuerySpec(name="avg", kind="avg", feed="gaussian", sources=cfg.source_sources, rate=rate)
    return NodeConfig(queries=(q,), policy="none", seed=cfg.seed, trigger_s=cfg.trigger_s,
                      master=cfg.master)  # fmt: skip


def spillway_source_throughput(
    spark: Any, cfg: SparkBenchConfig, offered: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The AVG query fed by the spillway source (SIC on, nothing shed) at ``offered`` rows/s:
    (rows over batch time, the measured batches after the warm-up)."""
    from spillway.spark.node import Node

    node = Node(_throughput_node(cfg, offered), spark=spark, policy=NoShedding())
    try:
        node.start()
        plan = node.plans[0]
        _wait_batches(lambda: len(node.controller.batches(plan)), cfg.warmup_batches,
                      lambda: _raise_failed(node))  # fmt: skip
        _stream_for(node, cfg.source_duration_s)
        batches = node.controller.batches(plan)
    finally:
        node.stop()
    used = [b for b in batches[cfg.warmup_batches :] if b["rows"] > 0]
    return {"source": "spillway", **rows_per_second(used, skip=0)}, used


def rate_source_throughput(
    spark: Any, cfg: SparkBenchConfig, offered: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The same AVG query and sink fed by Spark's JVM ``rate`` source at ``offered`` rows/s."""
    from pyspark.sql import functions as F

    from spillway.spark.sink import ResultSink, ResultStore

    n = cfg.source_sources
    sic = 1.0 / (offered * 10.0)  # Eq. 1 with a 10 s STW: the column is there, as in ours
    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", int(offered))
        .option("numPartitions", max(1, int(spark.sparkContext.defaultParallelism)))
        .load()
        .select(
            F.lit(0).cast("int").alias("query_id"),
            (F.col("value") % n).cast("int").alias("source_id"),
            F.lit(0).cast("long").alias("key"),
            (F.col("value") % 100).cast("double").alias("value"),
            F.lit(sic).alias("sic"),
            F.col("timestamp").alias("event_ts"),
            F.col("timestamp").alias("arrival_ts"),
        )
    )
    sink = ResultSink("avg", 1.0, ResultStore())
    query = (
        rows.writeStream.queryName(f"bench-rate-{id(cfg):x}")
        .foreachBatch(sink)
        .trigger(processingTime=f"{cfg.trigger_s} seconds")
        .start()
    )

    def check() -> None:
        if query.exception() is not None:
            raise SpillwayError(f"the rate-source benchmark query failed: {query.exception()}")

    try:
        _wait_batches(lambda: len(query.recentProgress), cfg.warmup_batches, check)
        end = time.monotonic() + cfg.source_duration_s
        while time.monotonic() < end:
            time.sleep(0.5)
            check()
        progress = list(query.recentProgress)
    finally:
        query.stop()
    batches = [
        {"rows": int(p.numInputRows), "duration_s": float(p.batchDuration) / 1000.0}
        for p in progress
    ]
    used = [b for b in batches[cfg.warmup_batches :] if b["rows"] > 0]
    return {"source": "rate", **rows_per_second(used, skip=0)}, used


def reader_rows_per_s(cfg: SparkBenchConfig, rows: int = 500_000, repeats: int = 3) -> float:
    """Rows/s the spillway reader generates on one core, outside Spark: one partition of the
    throughput query's lanes (numpy feed values, admission hashes, timestamps, Arrow batch).

    Sets the source's own generation speed beside what Spark achieves with it, so the report
    can say where the time goes.
    """
    from spillway.feeds import make_feed
    from spillway.spark.source import FeedSpec, SpillwayPartition, read_partition

    n_src = cfg.source_sources
    settings: dict[str, Any] = {"n_sources": n_src, "rate": cfg.source_rate / n_src,
                                "seed": cfg.seed}  # fmt: skip
    make_feed("gaussian", **settings)  # validates the settings
    spec = FeedSpec.registered("gaussian", **settings)
    per = rows // n_src
    part = SpillwayPartition(
        plan="avg", seed=cfg.seed, epoch_us=0, feeds=(spec.dump(),),
        query_id=np.zeros(n_src, np.int32), source_id=np.arange(n_src, dtype=np.int32),
        feed=np.zeros(n_src, np.int64), lo=np.zeros(n_src, np.int64),
        hi=np.full(n_src, per, np.int64), keep=np.full(n_src, per, np.int64),
        sic=np.full(n_src, 1.0 / (cfg.source_rate * 10.0)),
    )  # fmt: skip
    read_partition(part)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch = read_partition(part)
        best = min(best, time.perf_counter() - t0)
    return batch.num_rows / best


def _raise_failed(node: Any) -> None:
    for plan in node.plans:
        err = node.query_error(plan)
        if err is not None:
            raise SpillwayError(f"the streaming query of plan {plan!r} failed: {err}")


def _stream_for(node: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        _raise_failed(node)


def _wait_batches(
    count: Callable[[], int], n: int, check: Callable[[], None], timeout_s: float = 300.0
) -> None:
    """Wait until ``count()`` reaches ``n`` (the warm-up batches: Spark starting workers)."""
    deadline = time.monotonic() + timeout_s
    while count() < n:
        check()
        if time.monotonic() > deadline:
            raise SpillwayError(f"the benchmark query did not finish {n} batches in {timeout_s} s")
        time.sleep(0.2)


# ------------------------------------------------------------------------------ overload


def overload_node(cfg: SparkBenchConfig) -> NodeConfig:
    """The overload workload: ``overload_queries`` TOP-5 queries (THEMIS's heaviest: per
    machine averages, a join and a top-k over 10 machines), calibrated to ``overload`` times
    the measured capacity.

    One Spark plan, since the node's budget charges every plan its fixed cost per interval. A
    heavy query keeps the no-shedding run's backlog (which Spark must hold in memory) small
    enough to watch its latency grow over several micro-batches.
    """
    qs = tuple(
        QuerySpec(name=f"top5/{i}", kind="top5", feed="cluster", sources=20, rate=BASE_RATE)
        for i in range(cfg.overload_queries)
    )
    return NodeConfig(queries=qs, policy="balance-sic", seed=cfg.seed,
                      trigger_s=cfg.overload_trigger_s, stw_s=10 * cfg.overload_trigger_s,
                      headroom=cfg.headroom, overload=cfg.overload, calibrate_s=cfg.calibrate_s,
                      master=cfg.master)  # fmt: skip


def _run_overload(
    spark: Any, node_cfg: NodeConfig, policy: Policy, cfg: SparkBenchConfig, *, guard: bool
) -> dict[str, Any]:
    from spillway.spark.node import Node

    node = Node(node_cfg, spark=spark, policy=policy)
    stopped_early = None
    try:
        node.start()
        end = time.monotonic() + cfg.overload_duration_s
        while time.monotonic() < end:
            time.sleep(0.5)
            for plan in node.plans:
                err = node.query_error(plan)
                if err is not None:
                    raise SpillwayError(f"the streaming query of plan {plan!r} failed: {err}")
            if guard and unprocessed(node.history()) > cfg.max_backlog_rows:
                stopped_early = node.controller.feed_time()
                break
        epoch = node.controller.epoch_s
        results = node.results()
        history = node.history()
        feed_end = node.controller.feed_time()
    finally:
        node.stop()
    lat = latency_stats(results, epoch_s=epoch, warmup_s=cfg.warmup_s)
    admitted = sum(r.admitted_tuples for r in history)
    return {
        "latency": lat,
        "results": results,
        "epoch_s": epoch,
        "history": history,
        "calibration": node.calibration,
        "rate_scale": node.rate_scale,
        "processed_tuples_per_s": processed_rate(
            history, warmup_s=cfg.warmup_s, trigger_s=cfg.overload_trigger_s
        ),
        "admitted_tuples": admitted,
        "unprocessed_at_end": unprocessed(history),
        "stopped_early_at_s": stopped_early,
        "feed_end_s": feed_end,
    }


def overload_comparison(spark: Any, cfg: SparkBenchConfig) -> dict[str, Any]:
    """BALANCE-SIC vs no shedding at ``cfg.overload`` times the measured capacity."""
    from spillway.policies.balance_sic import BalanceSIC

    node_cfg = overload_node(cfg)
    shed = _run_overload(spark, node_cfg, BalanceSIC(seed=cfg.seed), cfg, guard=False)
    cal = shed["calibration"] or {}
    scale = float(shed["rate_scale"])
    same_input = replace(
        node_cfg,
        queries=tuple(replace(q, rate=q.rate * scale) for q in node_cfg.queries),
        overload=None,
    )
    noshed = _run_overload(spark, same_input, NoShedding(), cfg, guard=True)
    capacity = float(cal.get("capacity_tuples_per_s", math.nan))
    return {
        "shed": shed,
        "noshed": noshed,
        "capacity_tuples_per_s": capacity,
        "input_tuples_per_s": sum(q.rate * q.n_sources for q in same_input.queries),
        "utilisation": shed["processed_tuples_per_s"] / capacity if capacity > 0 else math.nan,
    }


# ------------------------------------------------------------------------------ checks

#: Goals of the Spark benchmarks (THEMIS §7.6 and §6: shedding keeps latency bounded and the
#: node busy; the source should not cost much more than Spark's own).
SOURCE_RATIO_GOAL = 0.8
UTILISATION_GOAL = 0.85
#: Latency counts as bounded while it grows by at most this many seconds per second of run
#: (1 s more per 50 s); without shedding it must grow by at least :data:`NOSHED_GROWTH_MIN`.
LATENCY_GROWTH_MAX = 0.02
NOSHED_GROWTH_MIN = 0.1


def spark_checks(summary: Mapping[str, Any]) -> list[Check]:
    """The Spark benchmarks' goals, evaluated on one run's summary (:func:`run`'s keys).

    - ``latency_grows_without_shedding``: the no-shedding run's latency grows by at least
      :data:`NOSHED_GROWTH_MIN` s per s (else the overload was not real and the comparison
      shows nothing);
    - ``latency_bounded_with_shedding``: the shedding run's latency grows by at most
      :data:`LATENCY_GROWTH_MAX` s per s;
    - ``latency_p95_shed_below_noshed``: p95 latency with BALANCE-SIC below p95 without;
    - ``utilisation_ge_0.85``: processed rate over the measured capacity;
    - ``source_ratio_ge_0.8``: sustained rows/s of the spillway source over the ``rate``
      source's (a goal; ``why`` names the per-row costs when it is missed).

    >>> s = {"latency_shed": {"growth_s_per_s": 0.0}, "latency_noshed": {"growth_s_per_s": 0.7},
    ...      "latency_p95_shed_s": 4.8, "latency_p95_noshed_s": 21.4, "utilisation": 1.03,
    ...      "source_ratio": 0.48, "source_per_row_us": {"spillway": 0.94, "rate": 0.48}}
    >>> [(c.name, c.verdict) for c in spark_checks(s)]  # doctest: +NORMALIZE_WHITESPACE
    [('latency_grows_without_shedding', 'pass'), ('latency_bounded_with_shedding', 'pass'),
     ('latency_p95_shed_below_noshed', 'pass'), ('utilisation_ge_0.85', 'pass'),
     ('source_ratio_ge_0.8', 'fail')]
    """
    shed = summary.get("latency_shed") or {}
    noshed = summary.get("latency_noshed") or {}
    ratio = compare(
        f"source_ratio_ge_{SOURCE_RATIO_GOAL}", summary.get("source_ratio"), ">=",
        SOURCE_RATIO_GOAL, what="spillway source rows/s over the rate source's",
    )  # fmt: skip
    per_row = summary.get("source_per_row_us") or {}
    if ratio.failed and per_row:
        ratio = Check(
            name=ratio.name, verdict=ratio.verdict,
            why=f"{ratio.why}; cost per row in Spark {num(per_row.get('spillway'), 3)} us "
            f"(spillway) vs {num(per_row.get('rate'), 3)} us (rate): Spark's path for a Python "
            "data source",
        )  # fmt: skip
    return [
        compare(
            "latency_grows_without_shedding", noshed.get("growth_s_per_s"), ">=",
            NOSHED_GROWTH_MIN, what="latency growth without shedding (s per s)",
        ),
        compare(
            "latency_bounded_with_shedding", shed.get("growth_s_per_s"), "<=",
            LATENCY_GROWTH_MAX, what="latency growth with BALANCE-SIC (s per s)",
        ),
        compare(
            "latency_p95_shed_below_noshed", summary.get("latency_p95_shed_s"), "<",
            summary.get("latency_p95_noshed_s"), what="p95 latency with BALANCE-SIC (s)",
        ),
        compare(
            f"utilisation_ge_{UTILISATION_GOAL}", summary.get("utilisation"), ">=",
            UTILISATION_GOAL, what="processed rate over the measured capacity",
        ),
        ratio,
    ]  # fmt: skip


# ------------------------------------------------------------------------------ entry point


def run(quick: bool, out_dir: Path | str, seed: int = 0, spark: Any = None) -> dict[str, Any]:
    """Run both Spark benchmarks; write CSVs and the plot into ``out_dir``; return summary keys.

    Writes ``spark_source.csv`` (both sources' throughput), ``spark_overload_latency.csv``
    (every result's latency in both overload runs), ``spark_overload_intervals.csv`` (every
    shedding interval: capacity, arrived, admitted, processed) and
    ``spark_overload_latency.png``. :func:`report_markdown` turns the returned dict into a
    report section. Returns ``source_rows_per_s``, ``rate_source_rows_per_s``, ``source_ratio``,
    ``latency_p95_shed_s``, ``latency_p95_noshed_s``, ``utilisation`` (the documented keys) plus the
    latency growth of both runs, the measured capacity and the settings.
    """
    from spillway.experiments._spark_runs import experiment_spark

    cfg = make_config(quick, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spark = spark if spark is not None else experiment_spark(cfg.master, "spillway-bench")
    runs: list[dict[str, Any]] = []
    batches: dict[str, list[dict[str, Any]]] = {"spillway": [], "rate": []}
    for r in range(cfg.source_rounds):
        # Alternated (drifting machine load hits both alike), at the full and half rate in
        # turn (batch sizes vary, so each source's fixed and per-row costs can be fitted).
        offered = cfg.source_rate / (2 if r % 2 else 1)
        for fn in (spillway_source_throughput, rate_source_throughput):
            report(
                f"bench spark: source round {r + 1}/{cfg.source_rounds}, "
                f"{fn.__name__.split('_')[0]} source at {offered:,.0f} rows/s"
            )
            res, used = fn(spark, cfg, offered)
            runs.append({"round": r, "offered_rows_per_s": offered, **res})
            batches[res["source"]] += [{"round": r, "source": res["source"], **b} for b in used]
    write_csv(out / "spark_source.csv", runs)
    write_csv(out / "spark_source_batches.csv", batches["spillway"] + batches["rate"])
    ours = source_speed([x for x in runs if x["source"] == "spillway"], batches["spillway"], cfg)
    theirs = source_speed([x for x in runs if x["source"] == "rate"], batches["rate"], cfg)
    report("bench spark: reader rows/s on one core")
    reader = reader_rows_per_s(cfg)
    report("bench spark: latency under overload, with and without shedding")
    ov = overload_comparison(spark, cfg)
    summary = _summary(cfg, ours, theirs, ov)
    summary["reader_rows_per_s_one_core"] = reader
    _write_overload_tables(out, ov)
    return summary


def _summary(
    cfg: SparkBenchConfig, ours: Mapping[str, Any], theirs: Mapping[str, Any], ov: Mapping
) -> dict[str, Any]:
    shed, noshed = ov["shed"], ov["noshed"]
    ratio = ours["rows_per_s"] / theirs["rows_per_s"] if theirs["rows_per_s"] > 0 else math.nan
    return {
        "source_rows_per_s": ours["rows_per_s"],
        "rate_source_rows_per_s": theirs["rows_per_s"],
        "source_ratio": ratio,
        "source_batches": {"spillway": ours["batches"], "rate": theirs["batches"]},
        "source_fixed_s": {"spillway": ours["fixed_s"], "rate": theirs["fixed_s"]},
        "source_per_row_us": {"spillway": ours["per_row_us"], "rate": theirs["per_row_us"]},
        "source_batch_rows_per_s": {
            "spillway": ours["batch_rows_per_s"],
            "rate": theirs["batch_rows_per_s"],
        },
        "source_batch_s": {
            "spillway": ours["batch_s"] / ours["batches"] if ours["batches"] else math.nan,
            "rate": theirs["batch_s"] / theirs["batches"] if theirs["batches"] else math.nan,
        },
        "source_batch_rows": {
            "spillway": ours["rows"] / ours["batches"] if ours["batches"] else math.nan,
            "rate": theirs["rows"] / theirs["batches"] if theirs["batches"] else math.nan,
        },
        "latency_p95_shed_s": shed["latency"]["p95_s"],
        "latency_p95_noshed_s": noshed["latency"]["p95_s"],
        "latency_shed": shed["latency"],
        "latency_noshed": noshed["latency"],
        "utilisation": ov["utilisation"],
        "capacity_tuples_per_s": ov["capacity_tuples_per_s"],
        "processed_tuples_per_s_shed": shed["processed_tuples_per_s"],
        "input_tuples_per_s": ov["input_tuples_per_s"],
        "noshed_unprocessed_at_end": noshed["unprocessed_at_end"],
        "noshed_stopped_early_at_s": noshed["stopped_early_at_s"],
        "calibration": shed["calibration"],
        "spark_bench_config": asdict(cfg),
    }


def _write_overload_tables(out: Path, ov: Mapping[str, Any]) -> None:
    series = {}
    rows = []
    for name, key in (("balance-sic", "shed"), ("no shedding", "noshed")):
        r = ov[key]
        res = r["results"]
        if res.empty:
            continue
        w = res.drop_duplicates(["query", "window_start"])
        t = (w["produced_at"] - r["epoch_s"]).to_numpy(dtype=np.float64)
        lat = w["latency_s"].to_numpy(dtype=np.float64)
        order = np.argsort(t, kind="stable")
        series[name] = (t[order].tolist(), lat[order].tolist())
        rows += [{"run": name, "t": float(a), "latency_s": float(b)} for a, b in
                 zip(t[order], lat[order], strict=True)]  # fmt: skip
    write_csv(out / "spark_overload_latency.csv", rows)
    hist = [
        {"run": name, **asdict(h)}
        for name, key in (("balance-sic", "shed"), ("no shedding", "noshed"))
        for h in ov[key]["history"]
    ]
    for h in hist:
        h.pop("query_sic", None)
        h.pop("query_kept", None)
        h.pop("query_latency_s", None)
    write_csv(out / "spark_overload_intervals.csv", hist)
    if series:
        line_plot(
            out / "spark_overload_latency.png",
            series,
            title="Result latency at 3x overload: BALANCE-SIC vs no shedding",
            xlabel="time the result was produced (s since the node started)",
            ylabel="result latency (s)",
            scatter=True,
        )


#: The keys of :func:`run`'s result that ``spillway bench``'s summary.json lifts to its top level.
SUMMARY_KEYS = ("source_rows_per_s", "rate_source_rows_per_s", "source_ratio",
                "latency_p95_shed_s", "latency_p95_noshed_s", "utilisation")  # fmt: skip


def figure_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's figures as ``{"figure", "measured"}`` rows (a CSV or markdown table)."""
    return [
        {"figure": "spillway source, AVG query, SIC on: sustained rows/s at the trigger",
         "measured": summary["source_rows_per_s"]},
        {"figure": "Spark rate source, same query and sink: sustained rows/s at the trigger",
         "measured": summary["rate_source_rows_per_s"]},
        {"figure": "source_ratio (goal >= 0.8)", "measured": summary["source_ratio"]},
        {"figure": "fixed cost per micro-batch, spillway / rate (s)",
         "measured": f"{summary['source_fixed_s']['spillway']:.3f} / "
                     f"{summary['source_fixed_s']['rate']:.3f}"},
        {"figure": "cost per row, spillway / rate (us)",
         "measured": f"{summary['source_per_row_us']['spillway']:.3f} / "
                     f"{summary['source_per_row_us']['rate']:.3f}"},
        {"figure": "rows over batch time, spillway / rate (rows/s)",
         "measured": f"{summary['source_batch_rows_per_s']['spillway']:,.0f} / "
                     f"{summary['source_batch_rows_per_s']['rate']:,.0f}"},
        {"figure": "mean micro-batch, spillway source (rows / s)",
         "measured": f"{summary['source_batch_rows']['spillway']:,.0f} / "
                     f"{summary['source_batch_s']['spillway']:.2f}"},
        {"figure": "mean micro-batch, rate source (rows / s)",
         "measured": f"{summary['source_batch_rows']['rate']:,.0f} / "
                     f"{summary['source_batch_s']['rate']:.2f}"},
        {"figure": "spillway reader alone, outside Spark, 1 core (rows/s)",
         "measured": summary.get("reader_rows_per_s_one_core", math.nan)},
        {"figure": "p95 latency, BALANCE-SIC at 3x (s)", "measured": summary["latency_p95_shed_s"]},
        {"figure": "p95 latency, no shedding at 3x (s)",
         "measured": summary["latency_p95_noshed_s"]},
        {"figure": "latency growth, BALANCE-SIC (s per s)",
         "measured": summary["latency_shed"]["growth_s_per_s"]},
        {"figure": "latency growth, no shedding (s per s)",
         "measured": summary["latency_noshed"]["growth_s_per_s"]},
        {"figure": "utilisation = processed / measured capacity (goal >= 0.85)",
         "measured": summary["utilisation"]},
        {"figure": "measured capacity (tuples/s)", "measured": summary["capacity_tuples_per_s"]},
        {"figure": "offered at 3x (tuples/s)", "measured": summary["input_tuples_per_s"]},
    ]  # fmt: skip


def report_markdown(summary: Mapping[str, Any]) -> str:
    """A markdown section with the Spark benchmark figures of one run (for report.md)."""
    cfg = summary["spark_bench_config"]
    rows = figure_rows(summary)
    early = summary["noshed_stopped_early_at_s"]
    note = (
        f"Throughput: each source runs {cfg['source_rounds']} times, alternated with the "
        f"other, offered {cfg['source_rate']:,.0f} and half that rows/s in turn, "
        f"{cfg['source_duration_s']:g} s after {cfg['warmup_batches']} warm-up batches. A "
        "least-squares fit of batch duration against rows over its batches gives each "
        "source's fixed cost per micro-batch and cost per row; the sustained rows/s is "
        f"(trigger - fixed) / per-row / trigger at the {cfg['trigger_s']:g} s trigger (the rate "
        "at which one batch fills one interval), so a source that falls behind and one that "
        "idles are compared alike; `spark_source_batches.csv` has every batch. "
        f"Overload: {cfg['overload_queries']} TOP-5 "
        f"queries (20 sources each) calibrated to {cfg['overload']:g}x the measured "
        f"capacity, trigger {cfg['overload_trigger_s']:g} s, "
        f"{cfg['overload_duration_s']:g} s per run, headroom {cfg['headroom']:g}, results "
        f"after {cfg['warmup_s']:g} s."
    )
    reader = summary.get("reader_rows_per_s_one_core", math.nan)
    ours = summary["source_rows_per_s"]
    if math.isfinite(reader) and math.isfinite(ours) and ours > 0 and reader > 2 * ours:
        note += (
            f" The spillway reader alone (numpy values, admission hashes, timestamps, one Arrow "
            f"batch) generates {reader:,.0f} rows/s on one core outside Spark, "
            f"{reader / ours:.0f}x what Spark sustains from it, so generation is not what "
            "limits `source_ratio`: the difference lies in Spark's path for a Python data "
            "source (rows leave a Python worker as Arrow batches and become JVM rows; compare "
            "the costs per row) and in each micro-batch's fixed cost (planning in a Python "
            "worker, offsets negotiated with the controller over the loopback channel; compare "
            "the fixed costs), which the JVM `rate` source does not pay."
        )
    if early is not None:
        note += (
            f" The no-shedding run was stopped at {early:.0f} s by the memory guard "
            f"(more than {cfg['max_backlog_rows']:,} admitted rows not yet processed)."
        )
    return markdown_table(rows) + "\n\n" + note + "\n\n![latency](spark_overload_latency.png)"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spillway.bench.spark_bench [--quick] [--seed N] --out DIR``."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m spillway.bench.spark_bench")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    from spillway.experiments.checks import as_dicts, console_lines, counts
    from spillway.reporting import write_report, write_summary

    summary = run(a.quick, a.out, a.seed)
    found = spark_checks(summary)
    summary = {**summary, "checks": as_dicts(found), "verdicts": counts(found)}
    write_summary(a.out, summary, significant=4)
    print("\n".join(console_lines(found)))
    title = "spillway Spark benchmarks" + (" (quick)" * a.quick)
    write_report(a.out, title, [("Spark", report_markdown(summary))])
    print(json.dumps({k: summary[k] for k in ("source_ratio", "utilisation")}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
