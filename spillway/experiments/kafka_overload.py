"""``kafka-overload``: user queries over three Kafka topics fed live at 3x the node's measured
capacity on average, BALANCE-SIC shedding, each result's error against the exact answer beside
its SIC.

The end-to-end promise of spillway for a user with real streams (THEMIS §6 and §7.1 on one
node): their own PySpark queries over topics that arrive faster than the node can process keep
their results on time, every result carries its SIC, and the SIC says how far the result is
from the exact answer.

Set-up: a broker on 127.0.0.1 (its own folder) and three topics, each fed by its own
``spillway produce`` process (the ``taxi`` feed: route keys, fares as values):

- ``fares``: the README's query (:func:`spillway.examples.own_query.mean_fare`): the mean fare
  per route and 2 s window;
- ``pickups`` and ``dropoffs``: a stream-stream join (:func:`route_join`): per window, the
  routes seen on both topics and their mean fare over both.

Steps: (1) a first capacity: a node that keeps every tuple reads the topics produced at
:data:`PROBE_RATE`, above what it processes, and its rows processed per second of micro-batch
time are a first figure; (2) the capacity while shedding: fresh topics produced at ``level``
times that first figure, the node shedding with ``policy`` by its own cost model, and the
capacity is its rows processed per second of micro-batch time over the second half of that
run (its batches then fill the headroom its controller gives them: the operating point of
:mod:`spillway.spark.node`'s calibration, with the cost of shedding a log in it). A node that
keeps every tuple reads each log from end to end; a shedding one reads its kept runs from logs
several times longer, and that cost more a kept row (a 1.5-core node: 73,510 rows a second of
batch time keeping every tuple, 30,780 while shedding at 3x; EXPERIMENTS.md), so a capacity
measured keeping every tuple is not the one the run has. The node has ``node_cpu`` cores of its
own (:mod:`spillway.experiments._node_cpu`) so that its capacity does not depend on how fast
the producers send; (3) the run:
fresh topics produced together at a rate that steps through ``steps`` times that capacity
(1.5x, 3.5x, 4x, ``step_s`` = 10 s each, repeated: a mean of ``level`` = 3x), so the windows
are overloaded unequally and differ in SIC for a real reason (at one constant rate every window
kept about the same share and SIC could not be shown to track the error), the node shedding
with BALANCE-SIC for ``duration_s``, each query writing its results to a Parquet folder; (4) the exact answers: the
same functions over everything that arrived in the windows of the last ``exact_span_s`` seconds
(a keep-all batch read of the same topic offsets) that the node's finished micro-batches had
closed when it stopped (:func:`~spillway.experiments._spark_runs.run_level`): the window or two
not yet decided or still in a batch at the stop are not scored, since the run could not have
answered them yet, while a closed window without a result is scored as the loss it is; (5) the restart: the checkpoint is left as a
driver killed right after its sinks wrote the last batch would leave it, and a new Python
process restarts the node from it (:mod:`spillway.experiments._kafka_replay`); the sinks must
then hold each result once, with the run's values and SIC, and the batch run again must give
the same rows.

Per query: the windows scored (``scored_from_s`` to ``scored_until_s``, feed time; the run
stopped at ``stopped_s``), window SIC (the result's SIC mass over the exact answer's, the mass of everything
that arrived), window error (mean over the exact answer's routes of the relative error of the
value; a route missing from the shed result counts 1), and Spearman's rank correlation between
them; p95 result latency against 3 trigger intervals plus the window; Jain's index over the
queries' SIC (reported: on one node every lane of a query shares one decision, so it is an
invariant, not a finding).

Examples
--------
>>> cfg = make_config(quick=True)
>>> cfg.duration_s, cfg.level, cfg.policy, cfg.steps, cfg.step_s
(120.0, 3.0, 'balance-sic', (1.5, 3.5, 4.0), 10.0)
>>> profile, opts, first = rate_pattern(cfg)   # the producers' profile, relative to step 1
>>> profile, opts["times"], [round(f, 4) for f in opts["factors"]], opts["period_s"], first
('step', [10.0, 20.0], [2.3333, 2.6667], 30.0, 0.5)
>>> window_errors(
...     pd.DataFrame({"window_start": [0, 0], "key": [1, 2], "mean_fare": [11.0, 20.0],
...                   "sic": [0.1, 0.1]}),
...     pd.DataFrame({"window_start": [0, 0, 0], "key": [1, 2, 3], "mean_fare": [10.0, 20.0, 5.0],
...                   "sic": [0.1, 0.1, 0.1]}),
...     "mean_fare")[["error", "sic_window"]].round(3).values.tolist()
[[0.367, 0.667]]
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError, SpillwayError
from spillway.experiments._node_cpu import node_on_cores
from spillway.experiments._producers import Producers, TopicLoad
from spillway.experiments._spark_runs import (
    KEEP_ALL,
    LevelRun,
    batch_capacity,
    check_positive,
    exact_span,
    experiment_spark,
    measured_overload,
    run_level,
)
from spillway.experiments.checks import Check, check, compare, every, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.federation.cpu import check_cores, find_controller
from spillway.progress import report
from spillway.quality import jain_index
from spillway.quality.metrics import spearman_rho
from spillway.reporting import markdown_table, num
from spillway.run_report import LATENCY_TRIGGERS
from spillway.status import IntervalRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: One line for ``spillway experiment --help``.
DESCRIPTION = (
    "user queries over 3 Kafka topics at 1.5-4x (mean 3x) measured capacity: error beside SIC "
    "(Spark)"
)

#: The README's user query (``mean_fare``), as shipped.
EXAMPLE = Path(str(files("spillway") / "examples" / "own_query.py"))

#: The JSON values ``spillway produce`` writes, as a schema.
SCHEMA = "source long, seq long, key long, value double, event_time timestamp"

#: Topics (each its own ``spillway produce --feed taxi`` process) and their share of the load.
TOPICS: dict[str, float] = {"fares": 0.5, "pickups": 0.25, "dropoffs": 0.25}

#: Partitions (sources) per topic.
PARTITIONS = 2

#: Value column of each query's result (its error is this column's relative error).
VALUES: dict[str, str] = {"fares": "mean_fare", "trips": "mean_fare"}

#: First capacity run: the producers send this many tuples/s in all, above what the node
#: processes on this 2-core machine but not so far above that the producers alone fill both
#: cores, as they did at 150,000 tuples/s.
PROBE_RATE = 30_000.0

#: The node's cores by default (``KafkaOverloadConfig.node_cpu``): on 2 cores, the rest is the
#: input's (the producers at 3x the capacity and the broker took about half a core: module
#: note in :mod:`spillway.experiments._node_cpu`).
NODE_CPU = 1.5

#: The producers' rate (tuples/s in all) while a node warms up (see :func:`_phase`).
WARM_RATE = 2_000.0

#: Micro-batches the node runs at the warm-up rate before the load starts (see :func:`_phase`).
WARM_BATCHES = 4

#: BALANCE-SIC's settings here: a query keeps every lane in the same proportion (module note 9
#: of :mod:`spillway.policies.balance_sic`). ``trips`` joins its pickups lanes with its
#: dropoffs lanes; highest SIC first keeps whole lanes in tuple-SIC order, and a topic whose
#: producer ran 2 % faster came last: kov2 kept none of its records and the join had no row at
#: 44.5 % kept (``tests/kafka/test_join_shedding.py`` shows it on a small topic).
BALANCE_OPTIONS: dict[str, Any] = {"lanes": "proportional"}

#: What the papers say.
PAPER = {
    "THEMIS §7.1": "result SIC correlates with result error: lower SIC, larger error "
    "(strongest for COUNT; a negative rank correlation between SIC and error)",
    "THEMIS §6": "the shedder keeps processing within capacity so results stay on time",
}


def route_join(rows: DataFrame, left: str = "pickups", right: str = "dropoffs") -> DataFrame:
    """A stream-stream join within each window: the routes seen on both topics (``left`` and
    ``right`` name them; a topic's name may carry a suffix), with their mean fare over both.

    >>> from spillway.testing import local_spark
    >>> rows = local_spark().createDataFrame(
    ...     [("pickups-1", 0, 1, 10.0), ("dropoffs-1", 0, 1, 30.0), ("pickups-1", 0, 2, 5.0)],
    ...     "topic string, window_start int, key long, value double")
    >>> [(r.key, r.mean_fare, r.rides) for r in route_join(rows).collect()]
    [(1, 20.0, 2)]
    """

    from pyspark.sql import functions as F

    def side(name: str, tag: str) -> DataFrame:
        return (
            rows.filter(F.col("topic").startswith(name))
            .groupBy("window_start", "key")
            .agg(F.sum("value").alias(f"{tag}_sum"), F.count(F.lit(1)).alias(f"{tag}_n"))
        )

    both = side(left, "l").join(side(right, "r"), ["window_start", "key"])
    n = F.col("l_n") + F.col("r_n")
    return both.select(
        "window_start",
        "key",
        ((F.col("l_sum") + F.col("r_sum")) / n).alias("mean_fare"),
        n.alias("rides"),
    )


@dataclass(frozen=True, kw_only=True)
class KafkaOverloadConfig:
    """Settings of the study.

    Parameters
    ----------
    level : arrivals over the measured capacity (> 1), on average over the run.
    steps : the run's arrivals over the measured capacity, each for ``step_s``, in turn and
        repeated; their mean must be ``level`` (empty: ``level`` throughout).
    step_s : how long each of ``steps`` lasts (s).
    policy : the shedding policy.
    duration_s : streaming time of the run once the node is warm.
    probe_s : streaming time of the capacity run.
    warmup_s : the first seconds of the run that are not measured.
    trigger_s : trigger interval = window of both queries.
    lateness_s : how long after a window ends its records may still arrive (the topics'
        ``lateness_s``); a window is decided at the first trigger at least this long after
        its end.
    headroom : fraction of each trigger interval the node may fill (``NodeConfig.headroom``).
    exact_span_s : the exact answers cover the windows of the last this many seconds.
    seed : seed of the producers.
    master : Spark master URL.
    node_cpu : the node's own cores: a cgroup CPU quota on this process and its Spark JVM
        (:mod:`spillway.experiments._node_cpu`), the broker and the producers outside it, so
        that the node's capacity does not depend on how fast its input is sent; None, or a
        machine without a writable cgroup CPU controller (the report says which): the node
        shares the machine's cores with its input.
    """

    level: float = 3.0
    steps: tuple[float, ...] = (1.5, 3.5, 4.0)
    step_s: float = 10.0
    policy: str = "balance-sic"
    duration_s: float = 600.0
    probe_s: float = 60.0
    warmup_s: float = 30.0
    trigger_s: float = 2.0
    lateness_s: float = 0.0
    headroom: float = 0.8
    exact_span_s: float = 60.0
    seed: int = 0
    master: str = "local[2]"
    node_cpu: float | None = NODE_CPU

    def __post_init__(self) -> None:
        if self.node_cpu is not None:
            object.__setattr__(self, "node_cpu", check_cores(self.node_cpu, "node_cpu"))
        if not (isinstance(self.level, int | float) and math.isfinite(self.level)) or not (
            self.level > 1
        ):
            raise ConfigError(f"level must be an overload > 1, got {self.level!r}")
        steps = tuple(check_positive(f"steps[{i}]", v) for i, v in enumerate(self.steps))
        object.__setattr__(self, "steps", steps)  # a list from a JSON spec, kept as a tuple
        if steps and not math.isclose(float(np.mean(steps)), self.level, rel_tol=1e-6):
            raise ConfigError(
                f"steps {list(steps)} have mean {float(np.mean(steps)):g}, not the level "
                f"{self.level:g}: the run's mean overload is the level"
            )
        for name in ("duration_s", "probe_s", "trigger_s", "exact_span_s", "step_s"):
            check_positive(name, getattr(self, name))
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        check_positive("lateness_s", self.lateness_s, allow_zero=True)
        if not (isinstance(self.headroom, int | float) and 0 < self.headroom <= 1):
            raise ConfigError(f"headroom must be a fraction in (0, 1], got {self.headroom!r}")
        if self.warmup_s >= self.duration_s:
            raise ConfigError(
                f"warmup_s ({self.warmup_s}) must be below duration_s ({self.duration_s})"
            )


def make_config(quick: bool = False, seed: int = 0) -> KafkaOverloadConfig:
    """10 minutes at 1.5x, 3.5x, 4x in turn, 10 s each (3x on average; 1 minute per capacity
    run, the first 30 s of the run not measured); or quick: 2 minutes (40 s per capacity run,
    20 s not measured), 30 s of exact answers (one period of the steps)."""
    if quick:
        return KafkaOverloadConfig(
            duration_s=120.0, probe_s=40.0, warmup_s=20.0, exact_span_s=30.0, seed=seed
        )
    return KafkaOverloadConfig(seed=seed)


def rate_pattern(cfg: KafkaOverloadConfig) -> tuple[str, dict[str, Any], float]:
    """The run's producers' arrival-rate profile (:class:`~spillway.feeds.profiles.StepProfile`
    repeated every period, rates relative to the first step) with its settings, and the first
    step's rate over the mean (``constant``, no settings and 1 without steps)."""
    if len(cfg.steps) < 2:
        return "constant", {}, 1.0
    first = cfg.steps[0]
    times = [round(cfg.step_s * k, 6) for k in range(1, len(cfg.steps))]
    factors = [v / first for v in cfg.steps[1:]]
    period = round(cfg.step_s * len(cfg.steps), 6)
    return "step", {"times": times, "factors": factors, "period_s": period}, first / cfg.level


def node_config(
    cfg: KafkaOverloadConfig,
    topics: Mapping[str, str],
    conn: Any,
    checkpoint: str,
    *,
    sinks: Mapping[str, str] | None = None,
) -> NodeConfig:
    """The two user queries over ``topics`` (``{role: topic name}``) of ``conn``'s cluster,
    each writing to a Parquet folder of ``sinks`` (``{query: folder}``) if given."""
    from spillway.spark.user import resolve_function

    mean_fare = resolve_function(f"{EXAMPLE}:mean_fare")  # the README's query, as shipped

    def opts(subscribe: str) -> dict[str, Any]:
        return {**conn.spark_options(), "subscribe": subscribe, "startingOffsets": "earliest",
                "format": "json", "schema": SCHEMA, "lateness_s": cfg.lateness_s}  # fmt: skip

    left, right = topics["pickups"], topics["dropoffs"]

    def join(rows: DataFrame) -> DataFrame:
        return route_join(rows, left, right)

    def sink(name: str) -> dict[str, Any] | None:
        return {"kind": "parquet", "path": sinks[name]} if sinks else None

    queries = (
        QuerySpec(name="fares", kind="user", feed="kafka", feed_options=opts(topics["fares"]),
                  window_s=cfg.trigger_s, function=mean_fare, sink=sink("fares")),
        QuerySpec(name="trips", kind="user", feed="kafka", feed_options=opts(f"{left},{right}"),
                  window_s=cfg.trigger_s, function=join, sink=sink("trips")),
    )  # fmt: skip
    options = BALANCE_OPTIONS if cfg.policy == "balance-sic" else {}
    return NodeConfig(
        queries=queries, policy=cfg.policy, policy_options=options, seed=cfg.seed,
        trigger_s=cfg.trigger_s,
        stw_s=10 * cfg.trigger_s, master=cfg.master, checkpoint_dir=checkpoint,
        headroom=cfg.headroom,
    )  # fmt: skip


# ------------------------------------------------------------------------------ measuring


def _producers(
    conn: Any,
    topics: Mapping[str, str],
    rate: float,
    seed: int,
    pattern: tuple[str, dict[str, Any], float] | None = None,
    home: Path | None = None,
) -> Producers:
    """One ``spillway produce --feed taxi`` per topic, ``rate`` tuples/s in all on average,
    constant or following ``pattern`` (:func:`rate_pattern`), started in the cgroup whose
    ``cgroup.procs`` is ``home`` (outside the node's quota) if given."""
    profile, options, first = pattern or ("constant", {}, 1.0)
    loads = {
        topic: TopicLoad(feed="taxi", sources=PARTITIONS, profile=profile,
                         profile_options=options,
                         per_source=rate * first * TOPICS[role] / PARTITIONS)
        for role, topic in topics.items()
    }  # fmt: skip
    return Producers(conn, loads, seed, procs_file=home)


def _topics(conn: Any, tag: str) -> dict[str, str]:
    from spillway.kafka.admin import create_topic

    stamp = time.time_ns()
    topics = {role: f"{role}-{tag}-{stamp}" for role in TOPICS}
    for t in topics.values():
        create_topic(conn, t, partitions=PARTITIONS)
    return topics


def _phase(
    cfg: KafkaOverloadConfig,
    conn: Any,
    spark: Any,
    folder: str,
    tag: str,
    rate: float,
    duration_s: float,
    *,
    exact: bool = False,
    keep_all: bool = False,
    pattern: tuple[str, dict[str, Any], float] | None = None,
    home: Path | None = None,
) -> tuple[LevelRun, dict[str, Any], dict[str, str], NodeConfig]:
    """Fresh topics and the node on them: producers at :data:`WARM_RATE` tuples/s in all while
    the node warms up (:data:`WARM_BATCHES` micro-batches), then at ``rate`` on average (in
    the rate ``pattern`` if given) for ``duration_s``; the producers start in ``home`` (a
    ``cgroup.procs`` file, :func:`~spillway.experiments._node_cpu.node_on_cores`) if given.
    Returns the run, what the ``rate`` producers sent (with ``from_s``, the feed time they
    started at), the topics and the node's config.

    Why a trickle first: the node's cost model starts from a prior (2 µs a tuple) far below
    what this plan costs, and Spark's first batches start its Python workers and take tens of
    seconds; fed at the full rate from the start, the first batches admit hundreds of
    thousands of rows and last tens of seconds each, and the cost model then learns from
    batches no later one resembles (docs/design.md, "Known limits")."""
    topics = _topics(conn, tag)
    sinks = {q: f"{folder}/sink/{q}" for q in VALUES} if exact else None
    node = node_config(cfg, topics, conn, f"{folder}/{tag}", sinks=sinks)
    warm = _producers(conn, topics, WARM_RATE, cfg.seed + 100, home=home)
    feeding: list[Producers] = []
    started: list[float] = []

    def tick(t: float) -> None:
        if not feeding:  # the node is warm: the load starts now
            warm.stop()
            started.append(t)
            feeding.append(_producers(conn, topics, rate, cfg.seed, pattern, home))
        feeding[0].check()

    try:
        lr = run_level(node, spark=spark, duration_s=duration_s, exact=exact,
                       capacity_tuples_per_s=KEEP_ALL if keep_all else None,
                       exact_span_s=cfg.exact_span_s if exact else None, on_tick=tick,
                       warm_batches=WARM_BATCHES)  # fmt: skip
    finally:
        sent = feeding[0].stop() if feeding else warm.stop()
    return lr, {**sent, "from_s": started[0] if started else math.nan}, topics, node


def _loaded(run: LevelRun, from_s: float, trigger_s: float) -> dict[str, list[dict[str, Any]]]:
    """The run's batches decided after the load started at feed time ``from_s``, per plan."""
    return {p: [b for b in bs if (b["boundary"] or 0) * trigger_s > from_s]
            for p, bs in run.batches.items()}  # fmt: skip


def _capacity(run: LevelRun, from_s: float, trigger_s: float, what: str) -> float:
    """Rows over batch time of the batches decided after the load started at feed time
    ``from_s``."""
    capacity = batch_capacity(replace(run, batches=_loaded(run, from_s, trigger_s)), skip=0)
    if not (math.isfinite(capacity) and capacity > 0):
        raise SpillwayError(f"the {what} run processed no measured batch")
    return capacity


def shedding_capacity(run: LevelRun, settled_s: float, trigger_s: float) -> dict[str, Any]:
    """The capacity of a node that sheds: its rows over batch time over the batches decided
    after feed time ``settled_s`` (once its cost model has met the load, its controller fills
    the headroom of each batch: the operating point), with their count and mean duration (to
    set beside the budget, headroom x trigger).

    >>> lr = LevelRun(results=pd.DataFrame(), exact=None, ticks=pd.DataFrame(), history=[],
    ...               until_s=0.0, epoch_s=0.0, ready_s=0.0, wall_s=0.0,
    ...               batches={"p": [{"rows": 90_000, "duration_s": 3.0, "boundary": 1}]
    ...                             + [{"rows": 30_000, "duration_s": 1.5, "boundary": b}
    ...                                for b in (10, 11)]})
    >>> shedding_capacity(lr, settled_s=10.0, trigger_s=2.0)  # batches decided after 10 s
    {'capacity_tuples_per_s': 20000.0, 'capacity_method': 'rows over batch time while shedding', 'capacity_batch_s': 1.5, 'capacity_batches': 2}

    Raises
    ------
    SpillwayError
        No batch was decided after ``settled_s``.
    """
    durations = [b["duration_s"] for bs in _loaded(run, settled_s, trigger_s).values() for b in bs]
    return {
        "capacity_tuples_per_s": _capacity(run, settled_s, trigger_s, "shedding capacity"),
        "capacity_method": "rows over batch time while shedding",
        "capacity_batch_s": float(np.mean(durations)),
        "capacity_batches": len(durations),
    }


def measure(cfg: KafkaOverloadConfig, spark: Any = None) -> dict[str, Any]:
    """Capacity (twice), the run with its exact answers, and the restart (module docstring)."""
    from spillway.experiments._kafka_replay import restart
    from spillway.testing import running_broker

    spark = spark if spark is not None else experiment_spark(cfg.master)
    cores = cfg.node_cpu if cfg.node_cpu is not None and find_controller() is not None else None
    if cores != cfg.node_cpu:
        report("kafka-overload: no writable cgroup CPU controller here: the node shares the "
               "machine's cores with the broker and the producers")  # fmt: skip
    out: dict[str, Any] = {"node_cpu": cores}
    # the broker starts before the node enters its group: it is input, like the producers
    with (
        running_broker() as state,
        node_on_cores(spark, cores) as home,
        tempfile.TemporaryDirectory() as tmp,
    ):
        conn = state.connection()
        report(f"kafka-overload: capacity, producers at {PROBE_RATE:,.0f} tuples/s")
        probe, sent, _, _ = _phase(cfg, conn, spark, tmp, "probe", PROBE_RATE, cfg.probe_s,
                                   keep_all=True, home=home)  # fmt: skip
        out["probe_producers"] = sent
        first = _capacity(probe, sent["from_s"], cfg.trigger_s, "first capacity")
        out["capacity_probe_tuples_per_s"] = first
        report(f"kafka-overload: capacity while shedding, producers at {cfg.level:g}x "
               f"{first:,.0f}")  # fmt: skip
        loaded, sent, _, _ = _phase(cfg, conn, spark, tmp, "loaded", cfg.level * first,
                                    cfg.probe_s, home=home)  # fmt: skip
        out["loaded_producers"] = sent
        out.update(shedding_capacity(loaded, sent["from_s"] + cfg.probe_s / 2, cfg.trigger_s))
        capacity = out["capacity_tuples_per_s"]
        rate = cfg.level * capacity
        report(f"kafka-overload: {_steps_text(cfg)} of {capacity:,.0f} tuples/s, "
               f"{cfg.duration_s:g} s")  # fmt: skip
        lr, out["producers"], topics, node = _phase(cfg, conn, spark, tmp, "run", rate,
                                                    cfg.duration_s, exact=True,
                                                    pattern=rate_pattern(cfg),
                                                    home=home)  # fmt: skip
        out["asked_rate"] = rate
        start = out["producers"]["from_s"] + cfg.warmup_s
        load = measured_overload(lr, from_s=start)
        out["arrived_tuples_per_s"] = load["arrived_tuples_per_s"]
        out["run_capacity_tuples_per_s"] = load["capacity_measured_tuples_per_s"]
        out["overload_measured"] = load["arrived_tuples_per_s"] / capacity
        out["kept_fraction"] = load["kept_fraction"]
        hist = [r for r in lr.history if r.t >= start and r.processed_tuples > 0]
        out["intervals"] = [dict(_interval(r), measured=r.t >= start) for r in lr.history]
        out["batches"] = [dict(b, plan=p) for p, bs in lr.batches.items() for b in bs]
        book = lr.results[lr.results["t"] >= start]
        out["latency_s"] = book["latency_s"].dropna().tolist()
        loaded = lr.results[lr.results["t"] >= out["producers"]["from_s"]]
        out["latency_windows"] = loaded[["query", "t", "latency_s"]].to_dict("records")
        out["set_aside"] = lr.set_aside
        out["query_sic"] = {
            q: float(np.nanmean([r.query_sic.get(q, math.nan) for r in hist] or [math.nan]))
            for q in VALUES
        }
        first, _ = exact_span(lr.closed_s.values(), cfg.exact_span_s)
        out["stopped_s"] = lr.stopped_s
        out["scored"] = {q: {"from_s": first, "until_s": lr.closed_s.get(q, math.nan)}
                         for q in VALUES}  # fmt: skip
        out["windows"] = {
            q: window_errors(lr.user.get(q, pd.DataFrame()), lr.user_exact.get(q, pd.DataFrame()),
                             VALUES[q]).to_dict("records")
            for q in VALUES
        }  # fmt: skip
        report("kafka-overload: the driver restarted from the checkpoint in a new process")
        assert node.checkpoint_dir is not None
        out.update(restart(cfg, topics=topics, bootstrap=conn.bootstrap_servers,
                           checkpoint=node.checkpoint_dir, sinks=_sinks(node),
                           epoch_s=lr.epoch_s, first=lr.user, work=f"{tmp}/restart"))  # fmt: skip
    return out


def _sinks(node: NodeConfig) -> dict[str, str]:
    return {q.name: str(q.sink["path"]) for q in node.queries if isinstance(q.sink, Mapping)}


def _interval(r: IntervalRecord) -> dict[str, Any]:
    """One decision of the run as a table row (its per-query dicts left out)."""
    return {k: v for k, v in asdict(r).items() if not isinstance(v, dict)}


def window_errors(shed: pd.DataFrame, exact: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per window of the exact answer: ``error`` (mean over its routes of the shed value's
    relative error, 1 for a route the shed result lacks) and ``sic_window`` (the shed result's
    SIC mass over the exact answer's)."""
    cols = ["window_start", "error", "sic_window", "routes", "missing"]
    if exact.empty:
        return pd.DataFrame(columns=cols)
    e = exact[["window_start", "key", value, "sic"]]
    s = shed[["window_start", "key", value, "sic"]] if not shed.empty else e.iloc[:0]
    both = e.merge(s, on=["window_start", "key"], how="left", suffixes=("_exact", "_shed"))
    rel = (both[f"{value}_shed"] - both[f"{value}_exact"]).abs() / both[f"{value}_exact"].abs()
    both["err"] = rel.where(both[f"{value}_shed"].notna(), 1.0)
    mass_exact = e.groupby("window_start")["sic"].sum()
    mass_shed = s.groupby("window_start")["sic"].sum()
    per = both.groupby("window_start").agg(
        error=("err", "mean"),
        routes=("key", "size"),
        missing=(f"{value}_shed", lambda v: v.isna().sum()),
    )
    per["sic_window"] = mass_shed.reindex(per.index).fillna(0.0) / mass_exact.reindex(per.index)
    return per.reset_index()[cols]


# ------------------------------------------------------------------------------ analysis


def checks(cfg: KafkaOverloadConfig, measured: Mapping[str, Any]) -> list[Check]:
    """Latency within its bound, the overload reached, the node keeping about what the
    capacity allows, error falling with SIC per query, the restart identical.

    >>> m = {"latency_s": [1.0, 2.0], "overload_measured": 2.9, "replay_identical": True,
    ...      "kept_fraction": 0.35,
    ...      "windows": {"fares": [{"sic_window": s, "error": 1 - s} for s in (.2, .5, .9)]}}
    >>> [(c.name, c.verdict) for c in checks(make_config(quick=True), m)][1:3]
    [('overload_reached_80pct', 'pass'), ('kept_near_capacity', 'pass')]
    >>> checks(make_config(quick=True), dict(m, kept_fraction=0.007))[2].why
    'kept fraction 0.007 outside [0.1667, 0.4167] (1/level if the node processes the capacity measured)'
    """
    lat = np.asarray(measured.get("latency_s", []), dtype=np.float64)
    bound = LATENCY_TRIGGERS * cfg.trigger_s + cfg.trigger_s
    p95 = float(np.quantile(lat, 0.95)) if lat.size else math.nan
    out = [
        compare("latency_within_bound", p95, "<=", bound, what="p95 result latency (s)"),
        compare(
            "overload_reached_80pct",
            measured.get("overload_measured"),
            ">=",
            0.8 * cfg.level,
            what="arrivals over measured capacity",
        ),  # fmt: skip
    ]
    kept = measured.get("kept_fraction")
    low, high = 0.5 / cfg.level, 1.25 / cfg.level
    near = isinstance(kept, int | float) and low <= kept <= high
    out.append(
        check("kept_near_capacity", near,
              f"kept fraction {num(kept)} {'within' if near else 'outside'} [{num(low)}, "
              f"{num(high)}] (1/level if the node processes the capacity measured)")
    )  # fmt: skip
    parts = []
    for q, rows in measured.get("windows", {}).items():
        sic = np.array([r["sic_window"] for r in rows], dtype=np.float64)
        err = np.array([r["error"] for r in rows], dtype=np.float64)
        ok = np.isfinite(sic) & np.isfinite(err)
        if ok.sum() < 3 or np.ptp(sic[ok]) < 0.05:
            parts.append(
                not_applicable(q, f"{q}: window SIC spans under 0.05 ({ok.sum()} windows)")
            )
            continue
        rho = spearman_rho(sic[ok], err[ok])
        parts.append(compare(q, rho, "<", 0.0, what=f"{q} Spearman(SIC, error)"))
    none = "no query had 3 windows with an exact answer whose SIC spans 0.05 or more"
    out.append(every("error_falls_with_sic", parts, none_why=none))
    replay = measured.get("replay_identical")
    out.append(
        check("replay_identical", bool(replay), str(measured.get("replay_why", "not run")))
        if replay is not None
        else not_applicable("replay_identical", "the replay did not run")
    )
    return out


def analyse(cfg: KafkaOverloadConfig, measured: Mapping[str, Any]) -> Analysis:
    """Values (the names the issue fixes: ``jain``, ``latency_p95_s``, ``latency_bound_s``,
    ``queries`` with ``error_mean`` and ``sic_mean``, ``replay_identical``), checks, tables."""
    lat = np.asarray(measured.get("latency_s", []), dtype=np.float64)
    queries = {}
    tables: dict[str, list[dict[str, Any]]] = {}
    series = {}
    for q, rows in measured.get("windows", {}).items():
        sic = np.array([r["sic_window"] for r in rows], dtype=np.float64)
        err = np.array([r["error"] for r in rows], dtype=np.float64)
        ok = np.isfinite(sic) & np.isfinite(err)
        queries[q] = {
            "sic_mean": measured.get("query_sic", {}).get(q, math.nan),
            "window_sic_mean": float(np.mean(sic[ok])) if ok.any() else math.nan,
            "window_sic_min": float(np.min(sic[ok])) if ok.any() else math.nan,
            "window_sic_max": float(np.max(sic[ok])) if ok.any() else math.nan,
            "error_mean": float(np.mean(err[ok])) if ok.any() else math.nan,
            "spearman_sic_error": spearman_rho(sic[ok], err[ok]) if ok.sum() >= 3 else math.nan,
            "windows": int(ok.sum()),
            "scored_from_s": measured.get("scored", {}).get(q, {}).get("from_s", math.nan),
            "scored_until_s": measured.get("scored", {}).get(q, {}).get("until_s", math.nan),
        }
        tables[f"windows_{q}.csv"] = [dict(r, query=q) for r in rows]
        series[q] = (sic[ok].tolist(), err[ok].tolist())
    if measured.get("intervals"):
        tables["intervals.csv"] = list(measured["intervals"])
    if measured.get("batches"):
        tables["batches.csv"] = list(measured["batches"])
    if measured.get("latency_windows"):
        tables["latency.csv"] = list(measured["latency_windows"])
    sics = [v["sic_mean"] for v in queries.values() if math.isfinite(v["sic_mean"])]
    seen = decision_overloads(measured.get("intervals", []), measured.get("capacity_tuples_per_s"))
    values = {
        "rate_pattern": {
            "overloads": list(cfg.steps) or [cfg.level],
            "step_s": cfg.step_s,
            "mean_overload": cfg.level,
            "profile": rate_pattern(cfg)[:2],
        },
        "decision_overload_min": float(np.min(seen)) if seen.size else math.nan,
        "decision_overload_median": float(np.median(seen)) if seen.size else math.nan,
        "decision_overload_max": float(np.max(seen)) if seen.size else math.nan,
        "node_cpu": measured.get("node_cpu"),
        "capacity_probe_tuples_per_s": measured.get("capacity_probe_tuples_per_s"),
        "probe_producers": measured.get("probe_producers"),
        "capacity_tuples_per_s": measured.get("capacity_tuples_per_s"),
        "capacity_method": measured.get("capacity_method"),
        "capacity_batch_s": measured.get("capacity_batch_s"),
        "capacity_batches": measured.get("capacity_batches"),
        "loaded_producers": measured.get("loaded_producers"),
        "asked_rate": measured.get("asked_rate"),
        "producers": measured.get("producers"),
        "arrived_tuples_per_s": measured.get("arrived_tuples_per_s"),
        "run_capacity_tuples_per_s": measured.get("run_capacity_tuples_per_s"),
        "overload_vs_run_capacity": _ratio(
            measured.get("arrived_tuples_per_s"), measured.get("run_capacity_tuples_per_s")
        ),
        "overload_measured": measured.get("overload_measured"),
        "kept_fraction": measured.get("kept_fraction"),
        "set_aside": measured.get("set_aside"),
        "latency_p95_s": float(np.quantile(lat, 0.95)) if lat.size else math.nan,
        "latency_bound_s": LATENCY_TRIGGERS * cfg.trigger_s + cfg.trigger_s,
        "latency_p95_all_s": _p95([r["latency_s"] for r in measured.get("latency_windows", [])]),
        "jain": float(jain_index(np.array(sics))) if sics else math.nan,
        "queries": queries,
        "stopped_s": measured.get("stopped_s"),
        "replay_identical": measured.get("replay_identical"),
        "replay_batch": measured.get("replay_batch"),
        "replay_rows": measured.get("replay_rows"),
        "replay_why": measured.get("replay_why"),
        "paper": PAPER,
    }
    figures = [
        Figure(file="sic_error.png", series=series, scatter=True,
               title="Window error against the exact answer vs window SIC",
               xlabel="window SIC (shed SIC mass / exact)", ylabel="mean relative error",
               paper=PAPER["THEMIS §7.1"])
    ] if series else []  # fmt: skip
    rows = [{"query": q, **v} for q, v in queries.items()]
    sections = [("Queries", markdown_table(rows, ["query", "sic_mean", "window_sic_mean",
                                                    "window_sic_min", "window_sic_max",
                                                    "error_mean", "spearman_sic_error",
                                                    "windows", "scored_from_s",
                                                    "scored_until_s"]))]  # fmt: skip
    return Analysis(
        values=values, checks=checks(cfg, measured), tables=tables, figures=figures,
        setup=_setup(cfg, measured), paper="\n".join(f"- {k}: {v}" for k, v in PAPER.items()),
        notes=_NOTES, sections=sections,
    )  # fmt: skip


def decision_overloads(intervals: Any, capacity: Any) -> np.ndarray:
    """Per measured decision of the run after the first: the tuples that arrived since the
    previous decision per second over ``capacity`` (tuples/s): the overload each decision saw.

    >>> rows = [{"t": 4.0, "arrived_tuples": 900, "measured": True},
    ...         {"t": 8.0, "arrived_tuples": 400, "measured": True},
    ...         {"t": 12.0, "arrived_tuples": 1600, "measured": True}]
    >>> decision_overloads(rows, 100.0).tolist(), decision_overloads(rows, None).size
    ([1.0, 4.0], 0)
    """
    ok = isinstance(capacity, int | float) and math.isfinite(capacity) and capacity > 0
    rows = [r for r in intervals if r.get("measured")]
    if not ok or len(rows) < 2:
        return np.zeros(0)
    t = np.array([r["t"] for r in rows], dtype=np.float64)
    arrived = np.array([r["arrived_tuples"] for r in rows[1:]], dtype=np.float64)
    dt = np.diff(t)
    good = dt > 0
    return arrived[good] / dt[good] / float(capacity)


def _steps_text(cfg: KafkaOverloadConfig) -> str:
    """The run's overload pattern in words.

    >>> _steps_text(make_config(quick=True))
    '1.5x, 3.5x, 4x in turn, 10 s each, repeated (mean 3x)'
    >>> _steps_text(KafkaOverloadConfig(steps=()))
    '3x throughout'
    """
    if len(cfg.steps) < 2:
        return f"{cfg.level:g}x throughout"
    each = ", ".join(f"{v:g}x" for v in cfg.steps)
    return f"{each} in turn, {cfg.step_s:g} s each, repeated (mean {cfg.level:g}x)"


def _overload_range(measured: Mapping[str, Any]) -> str:
    """The overloads the measured decisions saw, as ``min-max (median m)``.

    >>> rows = [{"t": 4.0 * i, "arrived_tuples": a, "measured": True}
    ...         for i, a in enumerate([0, 600, 1500, 1600])]
    >>> _overload_range({"intervals": rows, "capacity_tuples_per_s": 100.0})
    '1.5x-4x (median 3.75x)'
    >>> _overload_range({})
    'not measured'
    """
    seen = decision_overloads(measured.get("intervals", []), measured.get("capacity_tuples_per_s"))
    if not seen.size:
        return "not measured"
    return f"{num(seen.min())}x-{num(seen.max())}x (median {num(float(np.median(seen)))}x)"


def _ratio(a: Any, b: Any) -> float:
    """``a / b``, NaN when either is missing or ``b`` is not > 0.

    >>> _ratio(6.0, 2.0), _ratio(None, 2.0)
    (3.0, nan)
    """
    ok = all(isinstance(v, int | float) and math.isfinite(v) for v in (a, b))
    return float(a) / float(b) if ok and b > 0 else math.nan


def _p95(values: Any) -> float:
    """The 95th percentile of the finite ``values`` (NaN if none).

    >>> _p95([1.0, 2.0, float("nan")]), _p95([])
    (1.95, nan)
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(np.quantile(v, 0.95)) if v.size else math.nan


def _setup(cfg: KafkaOverloadConfig, measured: Mapping[str, Any]) -> str:
    cap = measured.get("capacity_tuples_per_s", math.nan)
    first = measured.get("capacity_probe_tuples_per_s", math.nan)
    return (
        f"One spillway Node on Spark (`{cfg.master}`), {cfg.policy}"
        f"{' (every lane of a query kept in the same proportion)' if cfg.policy == 'balance-sic' else ''}"
        f", two user queries (the "
        f"README's mean fare per route over `fares`; a stream-stream join of `pickups` and "
        f"`dropoffs`), {cfg.trigger_s:g} s windows = trigger; three topics of {PARTITIONS} "
        f"partitions fed by `spillway produce --feed taxi`, their combined rate "
        f"{_steps_text(cfg)} of the capacity "
        f"({cap:,.0f} tuples/s: rows over batch time of a node shedding with {cfg.policy}, "
        f"its {measured.get('capacity_batches', 0)} batches over the second half of a "
        f"{cfg.probe_s:g} s run, {num(measured.get('capacity_batch_s', math.nan))} s each on "
        f"average against a budget of {num(cfg.headroom * cfg.trigger_s)} s, with producers at "
        f"{cfg.level:g}x the {first:,.0f} rows over batch time of a keep-all run at "
        f"{PROBE_RATE:,.0f} tuples/s) together; the arrivals between two "
        f"of the node's measured decisions were {_overload_range(measured)} the capacity; "
        f"{cfg.duration_s:g} s once warm, the first {cfg.warmup_s:g} s not measured; exact "
        f"answers of the windows of the last {cfg.exact_span_s:g} s the node's finished "
        f"micro-batches had closed when it stopped (at feed time "
        f"{num(measured.get('stopped_s', math.nan))} s; per query the span scored is in the "
        f"table); results to one Parquet folder per query; {_cores(measured.get('node_cpu'))}."
    )


def _cores(node_cpu: float | None) -> str:
    """Whose cores the node ran on.

    >>> print(_cores(1.5))  # doctest: +NORMALIZE_WHITESPACE
    the node (the driver's process and the Spark JVM) on a cgroup CPU quota of 1.5 cores,
    the broker and the producers outside it
    """
    if node_cpu is None:
        return "the node shared the machine's cores with the broker and the producers"
    return (f"the node (the driver's process and the Spark JVM) on a cgroup CPU quota of "
            f"{num(node_cpu)} cores, the broker and the producers outside it")  # fmt: skip


_NOTES = (
    "- Spark micro-batches on one 2-core machine that also runs the broker and the producers, "
    "not THEMIS's engine: the node has its own CPU quota (`node_cpu`), but shares the "
    "machine's memory, caches and loopback network with its input; the capacity is measured "
    "with all of them running, the second time with the producers near the run's rate.\n"
    "- The taxi feed is a synthetic stand-in for the NYC taxi data (routes and fares).\n"
    "- Window SIC here is the result's SIC mass over the exact answer's (the keep-all read "
    "spreads a lane's mass evenly over its tuples), not the node's Eq. 4 account."
)


EXPERIMENT: Experiment[KafkaOverloadConfig, dict[str, Any]] = Experiment(
    name="kafka-overload",
    title="User queries over Kafka topics at 1.5-4x (mean 3x) measured capacity: error beside SIC",
    config_type=KafkaOverloadConfig,
    measure=measure,
    analyse=analyse,
)


def run(config: KafkaOverloadConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run the study and write the report folder."""
    return EXPERIMENT.run(config, out_dir)


__all__ = [
    "EXPERIMENT",
    "KafkaOverloadConfig",
    "analyse",
    "make_config",
    "measure",
    "run",
    "shedding_capacity",
]
