"""``overload``: every policy at 3x and 10x overload, on generated feeds and on a Kafka topic fed
live by ``spillway produce``, beside plain Spark reading the same topic with nothing shed.

The promise under test (THEMIS §6's shedder, CoD §III, and spillway's own: results on time under
any overload up to 10x): with shedding, micro-batches stay under the trigger interval and result
latency stays within its bound, whatever the policy; without it, lag and latency grow.

Workload: CoD's grouped means (``spillway run --workload grouped``: the mean fare per route of the
``taxi`` feed and the mean CPU request per task class of the ``tasks`` feed, two sources each),
which every policy can shed (``cod`` per group, the others per lane). Per source of tuples:

- ``generated``: the capacity is measured first, as the rate the node sustains with one
  micro-batch a trigger: a node shedding an input far above it gives a rough figure (rows
  processed per second of batch time), two nodes that keep everything stream half and 1.5
  times that, and ``duration = fixed + per_row * rows`` fitted over their batches gives the
  rate whose batch fills the node's headroom of the trigger (:func:`headroom`, 0.8: what its
  controller targets; of several triggers when the fixed cost makes the controller's batches
  span them; :func:`~spillway.control.batch_fit.operating_capacity`); every run
  then streams the same queries with the rates scaled to ``level`` times it.
- ``kafka``: a broker on 127.0.0.1 (its own folder), one topic per query (a partition per
  source). The producers, the broker and Spark share the machine's cores, so the node's
  capacity depends on how fast the producers send: it is measured per level, with the
  producers sending what that level's runs will send. First a rough figure: nodes that keep
  everything read topics produced at :data:`KAFKA_PROBE` tuples/s, then at the first level
  times what that node processed per second of batch time; the fit over both runs' batches is
  the capacity with light producers (``capacity["kafka"]``). Then, per level, two nodes that
  keep everything read :data:`KEEP_ALL_FACTORS_KAFKA` times the current estimate while
  background producers (topics no node reads) send the rest of ``level`` times it, and the
  fit over their batches is that level's capacity (:func:`level_capacity`; measured again,
  at most :data:`LEVEL_ROUNDS` times, while it moves by more than
  :data:`LEVEL_TOLERANCE`). Each run then gets fresh topics and one ``spillway produce``
  process per query at ``level`` times its level's capacity (the rate each achieved is
  reported: a producer on a 2-core machine shared with Spark may not reach it, and the
  overload is then computed from what was sent). Plain Spark (its own Kafka source, the same
  grouped mean with ``from_json``, no ``maxOffsetsPerTrigger``) reads the same input as the
  highest level's runs: its per-batch offsets behind the latest and its window latency show
  what happens without shedding.

Per run: mean micro-batch time over the trigger, p95 window latency against the bound the run
report uses (``LATENCY_TRIGGERS`` triggers plus the window), the overload measured (arrivals over
the measured capacity), the kept fraction (about ``1 / level`` when dropping is cheap and the
capacity right), and the cost model's terms at the end (overhead, cost per admitted tuple, cost
per arrived tuple).

Examples
--------
>>> cfg = make_config(quick=True)
>>> cfg.policies, cfg.levels, cfg.sources
(('balance-sic', 'cod'), (3.0, 10.0), ('generated', 'kafka'))
>>> [q.kind for q in node_config(cfg, "cod", 1.0).queries]
['group_avg', 'group_avg']
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spillway.config import NodeConfig, QuerySpec
from spillway.control.batch_fit import operating_capacity
from spillway.errors import ConfigError, SpillwayError, UnknownNameError
from spillway.experiments._node_cpu import node_on_cores
from spillway.experiments._producers import Producers, TopicLoad
from spillway.experiments._spark_runs import (
    KEEP_ALL,
    LevelRun,
    batch_capacity,
    check_positive,
    experiment_spark,
    run_level,
)
from spillway.experiments.checks import Check, compare, every, not_applicable, within
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.federation.cpu import check_cores
from spillway.progress import report
from spillway.reporting import markdown_table, num
from spillway.run_report import LATENCY_TRIGGERS
from spillway.spark.batch_stop import stop_safe
from spillway.workloads import GROUPED_FEEDS

#: One line for ``spillway experiment --help``.
DESCRIPTION = "every policy at 3x and 10x overload, generated and Kafka, vs plain Spark (Spark)"

#: Policies compared.
POLICIES: tuple[str, ...] = ("random", "balance-sic", "uniform", "cod")

#: Where tuples come from.
SOURCES: tuple[str, ...] = ("generated", "kafka")

#: Per query of the grouped workload: (feed, feed settings, tuples/s per source before scaling).
QUERIES: dict[str, tuple[str, dict[str, Any], float]] = {
    name: (feed, options, rate)
    for (name, (feed, options, _)), rate in zip(
        GROUPED_FEEDS.items(), (2000.0, 1000.0), strict=True
    )
}

#: Sources (Kafka partitions) per query.
N_SOURCES = 2

#: The JSON values ``spillway produce`` writes for these feeds, as a schema.
SCHEMA = "source long, seq long, key long, value double, event_time timestamp"

#: Tuples/s offered to the first generated capacity run (a node shedding it): far above what a
#: 2-core node processes. Its rows over batch time are a first, rough figure.
GENERATED_PROBE = 2_000_000.0

#: The two keep-all generated runs offer these multiples of that first figure: batches of
#: different sizes, over which the batch cost is fitted (below the rough figure's double, so a
#: keep-all node's batches do not grow without bound).
KEEP_ALL_FACTORS = (0.5, 1.5)

#: Tuples/s the producers send in all to the first keep-all Kafka capacity run; the second
#: gets the first level times what that run processed per second of batch time.
KAFKA_PROBE = 30_000.0

#: Per level, the two keep-all Kafka capacity runs read these multiples of the current
#: estimate (background producers send the rest of the level's rate).
KEEP_ALL_FACTORS_KAFKA = (0.5, 1.0)

#: Most measurements of one level's Kafka capacity: measured again (with the producers at
#: ``level`` times the new figure) while it moves by more than :data:`LEVEL_TOLERANCE`.
LEVEL_ROUNDS = 2

#: Relative change of a level's capacity below which it is not measured again.
LEVEL_TOLERANCE = 0.2

#: ``kept_near_capacity``: a run at ``level`` times the capacity keeps between these multiples
#: of ``1 / level`` (what a node processing its capacity keeps). Below: dropping is not cheap
#: (per-arrived work, a key scan or a fetch, eats the budget); above: the node was not
#: overloaded as much as asked (the capacity was underestimated).
KEPT_BAND = (0.5, 1.25)

#: What the papers say about this promise.
PAPER = {
    "THEMIS §6": "the shedder keeps the processing within the node's capacity so that "
    "results stay within their latency bound under overload",
    "CoD §VII-C": "shedding keeps the p95 window latency more than 4x below normal processing",
}


@dataclass(frozen=True, kw_only=True)
class OverloadConfig:
    """Settings of the overload study.

    Parameters
    ----------
    policies : names in :data:`POLICIES`.
    levels : overloads (arrival rate over measured capacity), each > 1.
    sources : names in :data:`SOURCES`.
    duration_s : streaming time of each run once the node is warm.
    warmup_s : the first seconds of that are not measured.
    trigger_s : trigger interval = shedding interval = window of both queries.
    plain_spark : also run plain Spark on the Kafka input of the highest level.
    node_cpu : the node's own cores (a cgroup CPU quota on this process and its Spark JVM:
        :mod:`spillway.experiments._node_cpu`), producers and broker outside them; None: the
        node shares the machine with its input.
    seed : seed of feeds and policies.
    master : Spark master URL.
    """

    policies: tuple[str, ...] = POLICIES
    levels: tuple[float, ...] = (3.0, 10.0)
    sources: tuple[str, ...] = SOURCES
    duration_s: float = 60.0
    warmup_s: float = 10.0
    trigger_s: float = 1.0
    plain_spark: bool = True
    node_cpu: float | None = None
    seed: int = 0
    master: str = "local[2]"

    def __post_init__(self) -> None:
        for name, known in (("policies", POLICIES), ("sources", SOURCES)):
            vals = tuple(getattr(self, name))
            object.__setattr__(self, name, vals)
            if not vals:
                raise ConfigError(f"{name} must name at least one of {', '.join(known)}")
            for v in vals:
                if v not in known:
                    raise UnknownNameError(f"{name} must be among {', '.join(known)}; got {v!r}")
        object.__setattr__(self, "levels", tuple(float(x) for x in self.levels))
        if not self.levels or not all(math.isfinite(x) and x > 1 for x in self.levels):
            raise ConfigError(f"levels must be overloads > 1, got {self.levels!r}")
        for name in ("duration_s", "trigger_s"):
            check_positive(name, getattr(self, name))
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        if self.node_cpu is not None:
            object.__setattr__(self, "node_cpu", check_cores(self.node_cpu, "node_cpu"))
        if self.warmup_s >= self.duration_s:
            raise ConfigError(
                f"warmup_s ({self.warmup_s}) must be below duration_s ({self.duration_s})"
            )


def make_config(quick: bool = False, seed: int = 0) -> OverloadConfig:
    """Every policy, 60 s per run; or quick: balance-sic and cod, 20 s per run."""
    if quick:
        return OverloadConfig(
            policies=("balance-sic", "cod"), duration_s=20.0, warmup_s=6.0, seed=seed,
        )  # fmt: skip
    return OverloadConfig(seed=seed)


def node_config(
    cfg: OverloadConfig,
    policy: str,
    scale: float,
    *,
    topics: Mapping[str, str] | None = None,
    conn: Any = None,
) -> NodeConfig:
    """The grouped workload with every rate times ``scale``; with ``topics``, each query reads
    its topic (``conn``'s cluster) instead of generating tuples."""
    queries = []
    for name, (feed, options, rate) in QUERIES.items():
        if topics is None:
            q = QuerySpec(name=name, kind="group_avg", feed=feed, feed_options=options,
                          sources=N_SOURCES, rate=rate * scale, window_s=cfg.trigger_s)  # fmt: skip
        else:
            opts = {**conn.spark_options(), "subscribe": topics[name],
                    "startingOffsets": "earliest", "format": "json", "schema": SCHEMA,
                    "value_column": "value", "key_column": "key"}  # fmt: skip
            q = QuerySpec(name=name, kind="group_avg", feed="kafka", feed_options=opts,
                          window_s=cfg.trigger_s)  # fmt: skip
        queries.append(q)
    return NodeConfig(
        queries=tuple(queries), policy=policy, seed=cfg.seed, trigger_s=cfg.trigger_s,
        stw_s=10 * cfg.trigger_s, master=cfg.master,
    )  # fmt: skip


def base_rate() -> float:
    """Tuples/s of the workload before scaling (every query, every source)."""
    return sum(rate * N_SOURCES for _, _, rate in QUERIES.values())


# ------------------------------------------------------------------------------ measuring


def run_stats(lr: LevelRun, cfg: OverloadConfig, capacity: float) -> dict[str, Any]:
    """What one node run measured, after it was warm and ``warmup_s`` more: the intervals,
    windows and micro-batches from then on (a batch counts when its data ends after it).

    >>> import pandas as pd
    >>> from types import SimpleNamespace as NS
    >>> cold = [{"boundary": b, "rows": 9, "duration_s": 6.0} for b in (1, 2, 3)]
    >>> warm = [{"boundary": b, "rows": 9, "duration_s": 1.5} for b in (11, 12)]
    >>> res = pd.DataFrame({"query": ["q"], "window_start": [0], "t": [20.0], "latency_s": [3.0]})
    >>> lr = NS(ready_s=4.0, history=[], batches={"p": cold + warm}, results=res, attempts=1)
    >>> run_stats(lr, make_config(quick=True), 1000.0)["batch_mean_s"]  # from 4 + 6 s on
    1.5
    """
    start = lr.ready_s + cfg.warmup_s
    # every interval since the start: one that processed nothing (a batch still running, or
    # everything shed) still had arrivals
    hist = [r for r in lr.history if r.t >= start]
    # the batches of the same intervals (a batch's boundary ends its data)
    batches = [
        b
        for plan in lr.batches.values()
        for b in plan
        if b.get("boundary") is not None and b["boundary"] * cfg.trigger_s > start
    ]
    t_end = max((r.t for r in hist), default=start)
    span = max(t_end - start, cfg.trigger_s)
    arrived = sum(r.arrived_tuples for r in hist)
    kept = sum(r.admitted_tuples for r in hist)
    res = lr.results.drop_duplicates(["query", "window_start"])
    lat = res.loc[res["t"] >= start, "latency_s"].to_numpy(dtype=np.float64)
    last = lr.history[-1] if lr.history else None
    durations = [float(b["duration_s"]) for b in batches]
    return {
        "batch_mean_s": float(np.mean(durations)) if durations else math.nan,
        "latency_p95_s": float(np.quantile(lat, 0.95)) if lat.size else math.nan,
        "latency_bound_s": LATENCY_TRIGGERS * cfg.trigger_s + cfg.trigger_s,
        "windows": int(lat.size),
        "arrived_per_s": arrived / span,
        "overload_measured": arrived / span / capacity if capacity > 0 else math.nan,
        "kept_fraction": kept / arrived if arrived else math.nan,
        "overhead_s": last.overhead_s if last is not None else math.nan,
        "per_admitted_us": last.per_tuple_s * 1e6 if last is not None else math.nan,
        "per_arrived_us": last.per_arrived_s * 1e6 if last is not None else math.nan,
        "attempts": lr.attempts,
        # per-group policies: groups decided per interval (all queries), those of which
        # nothing was kept, and those a bounded read is estimated to have missed unseen
        "groups_mean": _grouped_mean(hist, lambda r: sum(r.query_groups.values())),
        "missing_groups_mean": _grouped_mean(hist, lambda r: sum(r.missing_groups.values())),
        "unseen_groups_mean": _grouped_mean(hist, lambda r: sum(r.query_groups_unseen.values())),
    }


def _grouped_mean(hist: list[Any], value: Any) -> float:
    """Mean of ``value(record)`` over the records of per-group decisions (NaN: none)."""
    got = [float(value(r)) for r in hist if r.query_groups]
    return float(np.mean(got)) if got else math.nan


def _guarded(fn: Any) -> dict[str, Any]:
    """``fn()``, or the one-line error of a run that failed (its figures then count as not
    measured: the checks fail on them, and the other runs still report)."""
    try:
        return dict(fn())
    except SpillwayError as e:
        report(f"overload: the run failed: {' '.join(str(e).split())[:200]}")
        return {"error": " ".join(str(e).split())[:300]}


def headroom(cfg: OverloadConfig) -> float:
    """The fraction of a trigger interval the experiment's node fills (its controller's
    target): the capacity is the rate whose batch fills that much, so that a node at ``level``
    times it keeps about ``1 / level``.

    >>> headroom(make_config(quick=True))
    0.8
    """
    return node_config(cfg, "random", 1.0).headroom


def _fit(runs: list[LevelRun], cfg: OverloadConfig, fallback: float) -> dict[str, Any]:
    """The capacity fitted over the batches of keep-all ``runs`` (the first two of each left
    out: Python workers starting), :func:`~spillway.control.batch_fit.operating_capacity` at
    the node's :func:`headroom`."""
    batches = [b for lr in runs for plan in lr.batches.values() for b in plan[2:]]
    return operating_capacity(batches, cfg.trigger_s, fallback, headroom(cfg))


def measure_generated(
    cfg: OverloadConfig, spark: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The generated-feed runs; (the capacity and how it was measured, one dict per run).

    The capacity is what the node sustains with one micro-batch a trigger: a node shedding
    (balance-sic) an input far above it (:data:`GENERATED_PROBE` tuples/s) gives a rough figure
    (its rows processed per second of batch time); two nodes that keep everything then stream
    :data:`KEEP_ALL_FACTORS` times that figure, and the rate whose batch fills the headroom of the trigger is
    fitted over their batches. (Rows over batch time alone spread the fixed cost of a batch
    over whatever size the batches had, so they are no capacity.)"""
    report(f"overload: generated capacity, {GENERATED_PROBE:,.0f} tuples/s offered")
    probe_s = max(cfg.warmup_s, cfg.duration_s / 3)
    probe = run_level(node_config(cfg, "balance-sic", GENERATED_PROBE / base_rate()),
                      spark=spark, duration_s=probe_s)  # fmt: skip
    rough = batch_capacity(probe)
    if not (math.isfinite(rough) and rough > 0):
        raise SpillwayError("the generated capacity run processed no measured batch")
    keep_all = []
    for f in KEEP_ALL_FACTORS:
        report(f"overload: generated capacity, every tuple kept at {f * rough:,.0f} tuples/s")
        keep_all.append(run_level(node_config(cfg, "balance-sic", f * rough / base_rate()),
                                  spark=spark, duration_s=probe_s,
                                  capacity_tuples_per_s=KEEP_ALL))  # fmt: skip
    fit = {**_fit(keep_all, cfg, rough), "rough_tuples_per_s": rough}
    capacity = fit["capacity_tuples_per_s"]
    runs = []
    for level in cfg.levels:
        for policy in cfg.policies:
            report(f"overload: generated, {policy} at {level:g}x of {capacity:,.0f} tuples/s")
            node = node_config(cfg, policy, level * capacity / base_rate())
            stats = _guarded(
                lambda n=node, c=capacity: run_stats(
                    run_level(n, spark=spark, duration_s=cfg.duration_s), cfg, c
                )
            )
            runs.append({"source": "generated", "policy": policy, "level": level, **stats})
    return fit, runs


def _producers(
    conn: Any, topics: Mapping[str, str], rate: float, seed: int, home: Path | None = None
) -> Producers:
    """One ``spillway produce`` per query's topic, ``rate`` tuples/s in all (split as the
    workload's base rates); with ``home``, started in that cgroup (outside the node's)."""
    if not (math.isfinite(rate) and rate > 0):
        raise SpillwayError(f"the producers' rate must be > 0 tuples/s, got {rate!r}")
    loads = {
        topics[name]: TopicLoad(feed=feed, options=options, sources=N_SOURCES,
                                per_source=rate * base / base_rate())
        for name, (feed, options, base) in QUERIES.items()
    }  # fmt: skip
    return Producers(conn, loads, seed, procs_file=home)


def _fresh_topics(conn: Any, tag: str) -> dict[str, str]:
    from spillway.kafka.admin import create_topic

    topics = {n: f"overload-{tag}-{n}-{time.time_ns()}" for n in QUERIES}
    for t in topics.values():
        create_topic(conn, t, partitions=N_SOURCES)
    return topics


def _kafka_run(cfg: OverloadConfig, spark: Any, conn: Any, policy: Any, rate: float,
               tag: str, *, keep_all: bool = False, duration_s: float | None = None,
               background_rate: float = 0.0,
               home: Path | None = None) -> tuple[LevelRun, dict[str, Any]]:  # fmt: skip
    """One node reading fresh topics produced at ``rate``; with ``background_rate``, more
    producers send that much to topics no node reads (the broker and the cores loaded as by
    a faster input); producers start in the cgroup ``home`` when given."""
    topics = _fresh_topics(conn, tag)
    name = policy if isinstance(policy, str) else policy.name
    node = node_config(cfg, name, 1.0, topics=topics, conn=conn)
    background = (
        _producers(conn, _fresh_topics(conn, f"{tag}-bg"), background_rate, cfg.seed + 100, home)
        if background_rate > 0
        else None
    )
    try:
        producers = _producers(conn, topics, rate, cfg.seed, home)
        try:

            def tick(_t: float) -> None:
                producers.check()
                if background is not None:
                    background.check()

            lr = run_level(node, spark=spark, duration_s=duration_s or cfg.duration_s,
                           policy=None if isinstance(policy, str) else policy,
                           capacity_tuples_per_s=KEEP_ALL if keep_all else None,
                           on_tick=tick)  # fmt: skip
        finally:
            produced = producers.stop()
    finally:
        extra = background.stop() if background is not None else None
    out = {**produced, "topics": topics}
    if extra is not None:
        out["background_rate"] = extra["achieved_rate"]
    return lr, out


def level_capacity(
    measure_at: Any, level: float, estimate: float, trigger_s: float, headroom: float = 1.0,
    ceiling: float = math.inf,
) -> dict[str, Any]:  # fmt: skip
    """The capacity of a node whose producers send ``level`` times it: measured with the
    producers at ``level * estimate``, then again at ``level`` times the new figure while it
    moves by more than :data:`LEVEL_TOLERANCE` (at most :data:`LEVEL_ROUNDS` measurements).
    A round's figure is at most ``ceiling`` (the capacity with light producers: more
    producers take cores, never give them), where two alike keep-all runs fitted a per-row
    cost near zero (0.63 us, 371,800 t/s where the light producers' fit was 74,800, in one run).

    ``measure_at(input_rate, background_rate)`` runs one keep-all node and returns its
    :class:`LevelRun`; the rounds' fits use :data:`KEEP_ALL_FACTORS_KAFKA` inputs each.

    >>> from types import SimpleNamespace as NS
    >>> def fake(rate, background):  # batches of a node 0.3 s + 4 us a row, slower when loaded
    ...     per_row = 4e-6 * (1 + (rate + background) / 1e6)
    ...     rows = [rate * k for k in (0.6, 0.8, 1.0, 1.2, 1.4)]
    ...     return NS(batches={"p": [{"rows": r, "duration_s": 0.3 + per_row * r} for r in rows]})
    >>> out = level_capacity(fake, 3.0, 200_000.0, 1.0)
    >>> [(round(r["producers_rate"]), round(r["capacity_tuples_per_s"])) for r in out["rounds"]]
    [(600000, 109375), (328125, 131765)]
    >>> round(out["capacity_tuples_per_s"])
    131765
    >>> level_capacity(fake, 3.0, 200_000.0, 1.0, ceiling=120_000.0)["capacity_tuples_per_s"]
    120000.0
    """
    rounds: list[dict[str, Any]] = []
    for _ in range(LEVEL_ROUNDS):
        total = level * estimate
        runs = [measure_at(f * estimate, total - f * estimate) for f in KEEP_ALL_FACTORS_KAFKA]
        batches = [b for lr in runs for plan in lr.batches.values() for b in plan[2:]]
        fit = operating_capacity(batches, trigger_s, estimate, headroom)
        if fit["capacity_tuples_per_s"] > ceiling:
            fit = {**fit, "capacity_tuples_per_s": ceiling, "fitted_tuples_per_s":
                   fit["capacity_tuples_per_s"], "capacity_method": "the light producers' "
                   f"capacity (a {fit['capacity_method']} above it)"}  # fmt: skip
        rounds.append({**fit, "producers_rate": total})
        moved = abs(fit["capacity_tuples_per_s"] - estimate) / estimate
        estimate = fit["capacity_tuples_per_s"]
        if moved <= LEVEL_TOLERANCE:
            break
    return {**rounds[-1], "rounds": rounds}


def plain_spark_run(
    cfg: OverloadConfig, spark: Any, conn: Any, rate: float, home: Path | None = None
) -> dict[str, Any]:
    """Spark's own Kafka source, the same grouped means, nothing shed, at ``rate``: per batch
    its rows, duration and consumer lag (the rows each batch found waiting); window latency;
    the rate the producers asked and achieved."""
    from pyspark.sql import functions as F

    from spillway.kafka.admin import create_topic

    topics = {n: f"overload-plain-{n}-{time.time_ns()}" for n in QUERIES}
    for t in topics.values():
        create_topic(conn, t, partitions=N_SOURCES)
    ckpt = tempfile.mkdtemp(prefix="spillway-overload-plain-")
    latencies: list[float] = []

    window = f"{cfg.trigger_s:g} seconds"

    def sink(df: Any, _batch_id: int) -> None:
        # per micro-batch and stateless, as spillway's sink evaluates one: the grouped means of
        # every window the batch holds, then when each window's result came out
        means = (
            df.select("topic", F.from_json(F.col("value").cast("string"), SCHEMA).alias("v"),
                      "timestamp")
            .groupBy("topic", F.window("timestamp", window), F.col("v.key"))
            .agg(F.avg("v.value").alias("value"))
            .groupBy("topic", "window").agg(F.count("*").alias("groups"))
            .select(F.col("window.end").alias("window_end"))
        )  # fmt: skip
        pdf = means.toPandas()
        now = time.time()
        for end in pdf["window_end"]:
            latencies.append(now - end.timestamp())

    rows = (
        spark.readStream.format("kafka").options(**conn.spark_options())
        .option("subscribe", ",".join(topics.values())).option("startingOffsets", "earliest")
        .load().select("topic", "value", "timestamp")
    )  # fmt: skip
    producers = _producers(conn, topics, rate, cfg.seed, home)
    query = (
        rows.writeStream.foreachBatch(stop_safe(sink, "the plain Spark query"))
        .option("checkpointLocation", ckpt).trigger(processingTime=window).start()
    )  # fmt: skip
    try:
        end = time.monotonic() + cfg.duration_s + 10.0
        while time.monotonic() < end:
            if query.exception() is not None:
                raise SpillwayError(f"the plain Spark query failed: {query.exception()}")
            time.sleep(0.5)
        progress = list(query.recentProgress)
    finally:
        query.stop()
        produced = producers.stop()
    batches = []
    for p in progress:
        # Without maxOffsetsPerTrigger a batch takes every record not yet processed when it
        # starts: its input rows are the consumer lag at that moment.
        batches.append({"rows": int(p.numInputRows), "duration_s": p.batchDuration / 1000.0,
                        "offsets_behind": int(p.numInputRows)})  # fmt: skip
    lat = np.array(latencies[len(latencies) // 4 :] or [math.nan])
    lag = [float(b["offsets_behind"]) for b in batches]
    third = max(1, len(lag) // 3)
    return {
        "batches": batches,
        "batch_mean_s": float(np.mean([b["duration_s"] for b in batches[2:]] or [math.nan])),
        "latency_p95_s": float(np.nanquantile(lat, 0.95)),
        "latency_first_s": float(latencies[0]) if latencies else math.nan,
        "latency_last_s": float(latencies[-1]) if latencies else math.nan,
        "behind_first": float(np.mean(lag[:third])) if lag else math.nan,
        "behind_last": float(np.mean(lag[-third:])) if lag else math.nan,
        "asked_rate": produced["asked_rate"],
        "achieved_rate": produced["achieved_rate"],
    }


def measure_kafka(cfg: OverloadConfig, spark: Any) -> dict[str, Any]:
    """The Kafka runs (a broker of its own): capacities, one dict per run, plain Spark.

    The capacity with light producers: a node that keeps everything reads topics produced at
    :data:`KAFKA_PROBE` tuples/s, then fresh topics produced at the first level times its rows
    over batch time; the rate whose batch fills the headroom of the trigger is fitted over both runs' batches
    (their sizes differ), as for the generated feeds. Then each level's own capacity, with the
    producers sending that level's rate (:func:`level_capacity`), and that level's runs."""
    from spillway.testing import running_broker

    out: dict[str, Any] = {"runs": [], "level_capacity": {}}
    # the broker starts before the node enters its group: it is input, like the producers
    with running_broker() as state, node_on_cores(spark, cfg.node_cpu) as home:
        conn = state.connection()
        probe_s = max(cfg.warmup_s, cfg.duration_s / 3)
        report(f"overload: kafka capacity, every tuple kept, producers at {KAFKA_PROBE:,.0f}")
        first, sent1 = _kafka_run(cfg, spark, conn, "balance-sic", KAFKA_PROBE, "capacity1",
                                  keep_all=True, duration_s=probe_s, home=home)  # fmt: skip
        rough = batch_capacity(first)
        if not (math.isfinite(rough) and rough > 0):
            raise SpillwayError(
                f"the Kafka capacity run processed no measured batch ({len(first.history)} "
                "intervals): run it longer (duration_s)"
            )
        second_rate = cfg.levels[0] * rough
        report(f"overload: kafka capacity, every tuple kept, producers at {second_rate:,.0f}")
        second, sent2 = _kafka_run(cfg, spark, conn, "balance-sic", second_rate, "capacity2",
                                   keep_all=True, duration_s=probe_s, home=home)  # fmt: skip
        fit = {**_fit([first, second], cfg, rough), "rough_tuples_per_s": rough}
        estimate = fit["capacity_tuples_per_s"]
        out["capacity_tuples_per_s"] = estimate
        out["capacity_fit"] = fit
        out["capacity_probe"] = [{"rate": KAFKA_PROBE, **sent1}, {"rate": second_rate, **sent2}]
        capacity = estimate
        for level in cfg.levels:

            def keep_all_at(rate: float, background: float, lv: float = level) -> LevelRun:
                report(f"overload: kafka capacity at {lv:g}x, every tuple kept, input "
                       f"{rate:,.0f}, background producers {background:,.0f} tuples/s")  # fmt: skip
                lr, _ = _kafka_run(cfg, spark, conn, "balance-sic", rate, f"cap{lv:g}x",
                                   keep_all=True, duration_s=probe_s,
                                   background_rate=background, home=home)  # fmt: skip
                return lr

            lc = level_capacity(keep_all_at, level, estimate, cfg.trigger_s, headroom(cfg),
                                ceiling=out["capacity_tuples_per_s"])  # fmt: skip
            capacity = lc["capacity_tuples_per_s"]
            out["level_capacity"][f"{level:g}x"] = lc
            estimate = capacity  # the next level starts from this one's
            for policy in cfg.policies:
                report(f"overload: kafka, {policy} at {level:g}x of {capacity:,.0f} tuples/s")

                def one(p: str = policy, lv: float = level, c: float = capacity) -> dict[str, Any]:
                    lr, produced = _kafka_run(cfg, spark, conn, p, lv * c, p, home=home)
                    produced.pop("topics")
                    return {**run_stats(lr, cfg, c), **produced, "capacity_tuples_per_s": c}

                out["runs"].append({"source": "kafka", "policy": policy, "level": level,
                                    **_guarded(one)})  # fmt: skip
        if cfg.plain_spark:
            top = cfg.levels[-1]
            report(f"overload: plain Spark's Kafka source at {top:g}x")
            plain = _guarded(lambda: plain_spark_run(cfg, spark, conn, top * capacity, home))
            if "error" not in plain:
                out["plain_spark"] = {**plain, "level": top, "rate": top * capacity}
            else:
                out["plain_spark_error"] = plain["error"]
    return out


def measure(cfg: OverloadConfig, spark: Any = None) -> dict[str, Any]:
    """Every run of the study (see the module docstring)."""
    spark = spark if spark is not None else experiment_spark(cfg.master)
    measured: dict[str, Any] = {"runs": [], "capacity": {}, "capacity_fit": {}}
    if "generated" in cfg.sources:
        with node_on_cores(spark, cfg.node_cpu):
            fit, runs = measure_generated(cfg, spark)
        measured["runs"] += runs
        measured["capacity"]["generated"] = fit["capacity_tuples_per_s"]
        measured["capacity_fit"]["generated"] = fit
    if "kafka" in cfg.sources:
        k = measure_kafka(cfg, spark)
        measured["runs"] += k.pop("runs")
        measured["capacity"]["kafka"] = k.pop("capacity_tuples_per_s")
        measured["capacity_fit"]["kafka"] = k.pop("capacity_fit")
        measured.update(k)  # level_capacity, capacity_probe, plain Spark
    return measured


# ------------------------------------------------------------------------------ analysis


def checks(measured: Mapping[str, Any]) -> list[Check]:
    """Per run: mean batch time below the trigger, p95 latency within the bound, the overload
    reached, the kept fraction near ``1 / level`` (each fails when not measured); and plain
    Spark's consumer lag growing (not applicable when plain Spark did not run).

    >>> r = {"source": "kafka", "policy": "cod", "level": 3.0, "batch_mean_s": 0.6,
    ...      "trigger_s": 1.0, "latency_p95_s": 2.0, "latency_bound_s": 4.0,
    ...      "overload_measured": 2.9, "kept_fraction": 0.3}
    >>> [(c.name, c.verdict) for c in checks({"runs": [r]})][:2]
    [('batch_below_trigger', 'pass'), ('latency_within_bound', 'pass')]
    >>> checks({"runs": [dict(r, batch_mean_s=1.4)]})[0].verdict
    'fail'
    >>> checks({"runs": [dict(r, kept_fraction=0.005)]})[3].why
    'failed at kafka cod 3x: kept fraction 0.005 is outside [0.1667, 0.4167]'
    """
    runs = list(measured.get("runs", []))
    batch, latency, over, kept = [], [], [], []
    for r in runs:
        label = f"{r['source']} {r['policy']} {r['level']:g}x"
        batch.append(compare(label, r.get("batch_mean_s"), "<", r.get("trigger_s", 1.0),
                             what=f"{label} mean batch (s)"))  # fmt: skip
        latency.append(compare(label, r.get("latency_p95_s"), "<=", r.get("latency_bound_s"),
                               what=f"{label} p95 latency (s)"))  # fmt: skip
        over.append(compare(label, r.get("overload_measured"), ">=", 0.8 * r["level"],
                            what=f"{label} overload measured"))  # fmt: skip
        kept.append(within(label, r.get("kept_fraction"), KEPT_BAND[0] / r["level"],
                           KEPT_BAND[1] / r["level"], what=f"{label} kept fraction"))  # fmt: skip
    none = "no run was measured"
    out = [
        every("batch_below_trigger", batch, none_why=none),
        every("latency_within_bound", latency, none_why=none),
        every("overload_reached_80pct", over, none_why=none),
        every("kept_near_capacity", kept, none_why=none),
    ]
    plain = measured.get("plain_spark")
    if plain is None and "plain_spark_error" in measured:
        plain = {}  # it ran and failed: the lag was not measured
    if plain is None:
        out.append(not_applicable("plain_spark_lag_grows", "plain Spark did not run (plain_spark "
                                  "is off): there is no consumer lag to compare"))  # fmt: skip
    else:
        out.append(
            compare(
                "plain_spark_lag_grows",
                plain.get("behind_last"),
                ">",
                2 * plain.get("behind_first", math.nan),
                what="plain Spark's consumer lag (rows a batch found waiting), last third",
            )
        )
    return out


def analyse(cfg: OverloadConfig, measured: Mapping[str, Any]) -> Analysis:
    """Values, checks, tables and figures of an overload study."""
    runs = [dict(r, trigger_s=cfg.trigger_s) for r in measured.get("runs", [])]
    m = {**measured, "runs": runs}
    figures = []
    for source in cfg.sources:
        rs = [r for r in runs if r["source"] == source]
        if not rs:
            continue
        groups = [f"{lv:g}x" for lv in cfg.levels]
        by = {(r["policy"], r["level"]): r for r in rs}
        figures.append(Figure(
            file=f"latency_{source}.png", groups=groups,
            bars={p: [by.get((p, lv), {}).get("latency_p95_s", math.nan) for lv in cfg.levels]
                  for p in cfg.policies},
            title=f"p95 window latency, {source}", ylabel="p95 latency (s)",
            xlabel="overload (arrivals over measured capacity)", paper=PAPER["THEMIS §6"],
        ))  # fmt: skip
    cols = ["source", "policy", "level", "overload_measured", "batch_mean_s", "latency_p95_s",
            "latency_bound_s", "kept_fraction", "overhead_s", "per_admitted_us",
            "per_arrived_us", "groups_mean", "missing_groups_mean", "unseen_groups_mean",
            "capacity_tuples_per_s", "achieved_rate", "asked_rate", "error"]  # fmt: skip
    sections = [("Runs", markdown_table(runs, [c for c in cols if any(c in r for r in runs)]))]
    plain = measured.get("plain_spark")
    values: dict[str, Any] = {"runs": runs, "capacity": measured.get("capacity", {}),
                              "paper": PAPER}  # fmt: skip
    tables = {"runs.csv": runs}
    if plain is not None:
        values["plain_spark"] = {k: v for k, v in plain.items() if k != "batches"}
        tables["plain_spark_batches.csv"] = plain["batches"]
        sections.append((
            f"Plain Spark, nothing shed (Kafka, {plain.get('level', cfg.levels[0]):g}x)",
            f"{_plain_input(plain)}Consumer lag when a batch starts (its input rows: without maxOffsetsPerTrigger it "
            f"takes all that waits), mean of the first / last third of the batches: "
            f"{plain['behind_first']:,.0f} / {plain['behind_last']:,.0f}; window latency first "
            f"/ last {plain['latency_first_s']:.1f} s / {plain['latency_last_s']:.1f} s, p95 "
            f"{plain['latency_p95_s']:.1f} s; mean batch {plain['batch_mean_s']:.2f} s.",
        ))  # fmt: skip
    if "plain_spark_error" in measured:
        values["plain_spark_error"] = measured["plain_spark_error"]
        sections.append(
            ("Plain Spark, nothing shed", f"The run failed: {measured['plain_spark_error']}")
        )
    for key in ("capacity_probe", "capacity_fit", "level_capacity"):
        if key in measured:
            values[key] = measured[key]
    return Analysis(
        values=values, checks=checks(m), tables=tables, figures=figures,
        setup=_setup(cfg, measured), paper="\n".join(f"- {k}: {v}" for k, v in PAPER.items()),
        notes=_NOTES, sections=sections,
    )  # fmt: skip


def _plain_input(plain: Mapping[str, Any]) -> str:
    """What the producers sent plain Spark, as the report's first words ('' when not recorded).

    >>> _plain_input({"asked_rate": 805600.0, "achieved_rate": 561234.5})
    'Producers asked 805,600 tuples/s and achieved 561,234. '
    """
    if "achieved_rate" not in plain:
        return ""
    return (f"Producers asked {plain['asked_rate']:,.0f} tuples/s and achieved "
            f"{plain['achieved_rate']:,.0f}. ")  # fmt: skip


def _setup(cfg: OverloadConfig, measured: Mapping[str, Any]) -> str:
    fits = measured.get("capacity_fit", {})

    def how(source: str) -> str:
        f = fits.get(source)
        if not f:
            return ""
        return (f": {f['capacity_method']}, fixed {num(f['fixed_s'])} s a batch and "
                f"{num(f['per_row_s'] * 1e6)} µs a row over keep-all batches, batches spanning "
                f"{f.get('span', 1)} trigger(s), rows over batch "
                f"time of a first run {f['rough_tuples_per_s']:,.0f}")  # fmt: skip

    caps = "; ".join(
        f"{k} {v:,.0f} tuples/s{how(k)}" for k, v in measured.get("capacity", {}).items()
    )
    levels = measured.get("level_capacity", {})
    if levels:
        caps += "; kafka with the producers sending each level's rate (the runs' capacity): " + (
            ", ".join(f"{lv} {c['capacity_tuples_per_s']:,.0f} tuples/s ({c['capacity_method']}, "
                      f"{len(c['rounds'])} measurement(s))" for lv, c in levels.items())
        )  # fmt: skip
    return (
        f"One spillway Node on Spark (`{cfg.master}`) per run: CoD's grouped means (taxi and "
        f"tasks feeds, {N_SOURCES} sources each, {cfg.trigger_s:g} s tumbling windows = trigger), "
        f"policies {', '.join(cfg.policies)}, overloads {', '.join(f'{x:g}x' for x in cfg.levels)}"
        f" of the measured capacity ({caps}); each run streams {cfg.duration_s:g} s once warm, "
        f"the first {cfg.warmup_s:g} s not measured; {_cores(cfg)}; seed {cfg.seed}."
    )


def _cores(cfg: OverloadConfig) -> str:
    """Whose cores the node ran on.

    >>> _cores(make_config(quick=True))
    'the node shared the machine with the broker and the producers'
    """
    if cfg.node_cpu is None:
        return "the node shared the machine with the broker and the producers"
    return (f"the node (the driver's process and the Spark JVM) limited to {num(cfg.node_cpu)} "
            "cores by a cgroup CPU quota, the broker and the producers outside it")  # fmt: skip


_NOTES = (
    "- One 2-core machine runs Spark, the broker and the producers: the Kafka capacity is "
    "measured with all of them running (with `node_cpu`, the node on a CPU quota of its own "
    "and the producers at a low CPU weight outside it), and a producer that cannot reach its "
    "rate lowers the overload actually run (`overload_measured`, `achieved_rate`).\n"
    "- A log's kept records are read as a few contiguous runs per partition "
    "(`spillway.spark.source.select_kept_runs`), so shed records are not fetched; CoD counts a "
    "log lane's groups from a bounded sample on the driver, and its executors read the whole "
    "range of a lane it decides per group.\n"
    "- Plain Spark here is Spark's own Kafka source with no `maxOffsetsPerTrigger`: every "
    "batch takes all that arrived, as a user without spillway would run it."
)


EXPERIMENT: Experiment[OverloadConfig, dict[str, Any]] = Experiment(
    name="overload",
    title="Every policy at 3x and 10x overload, generated and Kafka, vs plain Spark",
    config_type=OverloadConfig,
    measure=measure,
    analyse=analyse,
)


def run(config: OverloadConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run the study and write the report folder."""
    return EXPERIMENT.run(config, out_dir)


__all__ = ["EXPERIMENT", "OverloadConfig", "make_config", "measure", "analyse", "run"]
