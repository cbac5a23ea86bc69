"""Running one level of an experiment on a spillway Node and collecting what it measured.

An experiment level is one :class:`~spillway.spark.node.Node` run: start the node, sample its
snapshot every tick (query SIC over the STW, THEMIS Eq. 4; kept share; p95 latency), stop its
streaming queries, and optionally compute the exact answers of the same feeds with nothing
shed (the node's batch Spark job, :meth:`~spillway.spark.node.Node.exact_results`). The
experiments only analyse the returned :class:`LevelRun`; nothing here models Spark.

Which windows have exact answers: those each query's finished micro-batches had closed when
the node stopped (:attr:`LevelRun.closed_s`, from
:meth:`~spillway.spark.controller.NodeController.processed`), not every window ending by the
feed time at the stop. A node decides a window at the first decision at or after its end (one
every ``span`` intervals) and answers it when that batch finishes, so the last window or two
before the stop were not answered yet: compared with an exact answer they would read as a
loss (error 1, SIC 0) the shedding never caused. A closed window without a shed result still
has its exact answer, and counts as the loss it is (every tuple shed).

Feed time (seconds since the node's epoch) is the clock of every table: ``t`` columns are
feed seconds, so windows and ticks of one run line up.

Load relative to the measured capacity. An experiment that loads the node at several levels
measures the node's capacity ONCE for its query mix (:func:`measure_capacity`: the node's own
overload calibration, nothing shed, rows over batch time at the operating point, as ``spillway
run`` does), then sets each level's arrival rate as a multiple of it (:func:`at_rate`) and lets
the node's cost models budget every run. :func:`measured_overload` then gives, per run, the
arrival rate over the capacity that run's own batches achieved, so the overload asked for is
checked against the overload measured. A capacity typed into the config (a fixed budget) is
only a labelled option of the experiments.

Examples
--------
>>> import pandas as pd
>>> ts = pd.to_datetime([100.0, 101.0], unit="s", utc=True)
>>> feed_seconds(ts, epoch_s=99.0).tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import USER_KIND, NodeConfig
from spillway.errors import ConfigError, SpillwayError
from spillway.policies.base import Policy
from spillway.progress import report
from spillway.status import IntervalRecord

#: Failures worth a fresh start: Spark waits a fixed 10 s for a new Python worker to connect.
TRANSIENT = ("Python worker failed to connect back",)

#: A fixed capacity (tuples/s) far above any rate on this machine: a node given it keeps every
#: tuple, so its batches grow with what arrives. The experiments' capacity runs use it: a node
#: that sheds while it measures admits what its cost model allows, and a cold model (its prior
#: far from the plan's costs) can allow almost nothing (82 tuples/s at 30,000 produced, seen
#: in ``kafka-overload``).
KEEP_ALL = 1e9

#: Columns of :attr:`LevelRun.ticks`.
TICK_COLUMNS = (
    "t",
    "query",
    "kind",
    "sic",
    "kept_fraction",
    "latency_p95_s",
    "arrival_rate",
    "capacity_tuples_per_s",
    "processed_tuples_per_s",
)


def feed_seconds(timestamps: Any, epoch_s: float) -> np.ndarray:
    """UTC timestamps (pandas) as feed seconds since the node's epoch."""
    ts = pd.to_datetime(pd.Series(timestamps), utc=True)
    unix = (ts - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return unix.to_numpy(dtype=np.float64) - float(epoch_s)


@dataclass(frozen=True, kw_only=True)
class LevelRun:
    """What one node run measured.

    Attributes
    ----------
    results : shed result rows (``Node.results()`` plus ``query_id`` and feed-time ``t``).
    exact : exact result rows of the same windows with nothing shed (same columns), or None.
    ticks : one row per (tick, query) of the node's snapshots (:data:`TICK_COLUMNS`).
    history : the controller's interval records.
    until_s : feed time up to which exact answers were computed (0 without them): the latest
        of ``closed_s``.
    epoch_s : the node's feed-time origin in Unix seconds.
    ready_s : feed time when every plan had finished its first micro-batches (the cold start:
        Spark starting Python workers); measurements should start after it.
    wall_s : wall-clock seconds the run took (start to stop, exact job included).
    calibration : what the node's overload calibration measured (None without it).
    rate_scale : factor the node applied to every configured rate.
    batches : per plan, the measured micro-batches (rows, duration) the listener saw.
    attempts : starts it took (see ``retries`` of :func:`run_level`).
    user : per user query, its result rows (``Node.user_results``).
    user_exact : per user query, its function over everything that arrived in the windows of
        the exact answers (``Node.exact_user_results``), when ``exact`` was asked.
    set_aside : per query reading a log, its records set aside as ``malformed`` or ``late``
        (``Node.dead_letters.counts()``).
    closed_s : per query, the feed time up to which its finished micro-batches had closed its
        windows when the node stopped (NaN: none finished); ``exact`` and ``user_exact`` hold
        only the windows ending by it.
    stopped_s : feed time when the node was told to stop (its batches in flight then finish).
    """

    results: pd.DataFrame
    exact: pd.DataFrame | None
    ticks: pd.DataFrame
    history: list[IntervalRecord]
    until_s: float
    epoch_s: float
    ready_s: float
    wall_s: float
    calibration: dict[str, Any] | None = None
    rate_scale: float = 1.0
    batches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    attempts: int = 1
    user: dict[str, pd.DataFrame] = field(default_factory=dict)
    user_exact: dict[str, pd.DataFrame] = field(default_factory=dict)
    set_aside: dict[str, dict[str, int]] = field(default_factory=dict)
    closed_s: dict[str, float] = field(default_factory=dict)
    stopped_s: float = math.nan


def exact_span(closed_s: Iterable[float], span_s: float | None) -> tuple[float, float]:
    """Feed time ``(from, until)`` of the exact answers: until the latest window end the
    queries' finished micro-batches closed (0 when none finished), from ``span_s`` before it
    (None: from 0).

    >>> exact_span([126.0, 124.0], 30.0)
    (96.0, 126.0)
    >>> exact_span([float("nan")], None)
    (0.0, 0.0)
    """
    until = max((float(c) for c in closed_s if math.isfinite(c)), default=0.0)
    return (0.0 if span_s is None else max(0.0, until - span_s)), until


def closed_windows(rows: pd.DataFrame, closed_s: Mapping[str, float]) -> pd.DataFrame:
    """The result rows (columns ``query`` and ``window_end_feed_s``, as
    :meth:`~spillway.spark.node.Node.exact_results` gives them) of windows that end by their
    query's ``closed_s`` (a query missing from it, or NaN there, keeps none).

    >>> rows = pd.DataFrame({"query": ["a", "a", "b"], "window_end_feed_s": [124., 126., 126.]})
    >>> closed_windows(rows, {"a": 126.0, "b": 124.0})["window_end_feed_s"].tolist()
    [124.0, 126.0]
    """
    if rows.empty:
        return rows
    ends = rows["query"].map(lambda q: closed_s.get(str(q), math.nan)).astype(float)
    # 1 ms of slack: a replayed file's window end maps back to a feed time floored to 1 µs
    keep = rows["window_end_feed_s"].astype(float) <= ends + 1e-3
    return rows[keep.to_numpy()]


def input_rate(node: NodeConfig) -> float:
    """Total arrival rate of a node's queries (tuples/s, before any profile).

    >>> from spillway.config import QuerySpec
    >>> input_rate(NodeConfig(queries=(QuerySpec(name="a", kind="top5", feed="cluster",
    ...                                          rate=20.0),)))
    400.0
    """
    return float(sum(q.rate * q.n_sources for q in node.queries))


def at_rate(node: NodeConfig, rate: float) -> NodeConfig:
    """``node`` with every query's rate scaled (ratios kept) so the total is ``rate`` tuples/s,
    and no calibration of its own (``overload`` None).

    >>> from spillway.config import QuerySpec
    >>> cfg = NodeConfig(queries=(QuerySpec(name="a", kind="avg", feed="gaussian", rate=100.0),
    ...                           QuerySpec(name="b", kind="avg", feed="uniform", rate=300.0)))
    >>> [q.rate for q in at_rate(cfg, 2000.0).queries]
    [500.0, 1500.0]
    """
    check_positive("rate", rate)
    k = rate / input_rate(node)
    qs = tuple(replace(q, rate=q.rate * k) for q in node.queries)
    return replace(node, queries=qs, overload=None)


def measure_capacity(
    config: NodeConfig, *, spark: Any, calibrate_s: float | None = None, retries: int = 2
) -> dict[str, Any]:
    """The node's capacity for ``config``'s query mix, measured once (``Node.calibration``).

    The node's overload calibration (rounds at rising rates, nothing shed, until batches run at
    the operating point; capacity = their rows over batch time), then the node stops. Returns
    the calibration dict (``capacity_tuples_per_s``, ``rounds``, ``wall_s``, ...).

    Raises
    ------
    SpillwayError
        The calibration failed (after ``retries`` fresh starts on a transient failure).
    """
    from spillway.spark.node import Node

    cal_cfg = replace(config, overload=1.0)
    if calibrate_s is not None:
        cal_cfg = replace(cal_cfg, calibrate_s=check_positive("calibrate_s", calibrate_s))
    report(f"measuring the node's capacity for {len(config.queries)} queries (nothing shed)")
    for attempt in range(retries + 1):
        node = Node(cal_cfg, spark=spark)
        try:
            node.start()
        except SpillwayError as e:
            if attempt == retries or not any(m in str(e) for m in TRANSIENT):
                raise
            continue
        finally:
            node.stop()
        cal = node.calibration
        assert cal is not None
        report(f"measured capacity: {cal['capacity_tuples_per_s']:,.0f} tuples/s of batch time")
        return dict(cal)
    raise AssertionError("unreachable")  # the loop returns or raises


def batch_capacity(run: LevelRun, *, skip: int = 2) -> float:
    """Rows processed per second of micro-batch time over a run's batches after the first
    ``skip`` (a node shedding an input above its capacity works at its capacity: this is it).

    >>> lr = LevelRun(results=pd.DataFrame(), exact=None, ticks=pd.DataFrame(), history=[],
    ...               until_s=0.0, epoch_s=0.0, ready_s=0.0, wall_s=0.0,
    ...               batches={"p": [{"rows": 1, "duration_s": 9}] * 2
    ...                             + [{"rows": 300, "duration_s": 0.5}] * 2})
    >>> batch_capacity(lr)
    600.0
    """
    batches = [b for plan in run.batches.values() for b in plan][skip:]
    secs = sum(float(b["duration_s"]) for b in batches)
    rows = sum(int(b["rows"]) for b in batches)
    return rows / secs if secs > 0 else math.nan


def measured_overload(run: LevelRun, *, from_s: float) -> dict[str, float]:
    """Arrivals against what the run's own micro-batches achieved, over the intervals from
    feed time ``from_s`` (as the run report measures them).

    ``capacity_measured_tuples_per_s``: rows processed over micro-batch time;
    ``arrived_tuples_per_s``: arrivals per second of feed time; ``overload_measured``: their
    ratio; ``kept_fraction``: admitted over arrived.

    >>> from spillway.status import IntervalRecord as R
    >>> h = [R(t=float(t), capacity_tuples=100.0, arrived_tuples=300, admitted_tuples=100,
    ...        processed_tuples=100, batch_s=0.5) for t in range(1, 11)]
    >>> run = LevelRun(results=pd.DataFrame(), exact=None, ticks=pd.DataFrame(), history=h,
    ...                until_s=0.0, epoch_s=0.0, ready_s=0.0, wall_s=1.0)
    >>> measured_overload(run, from_s=2.0)
    {'capacity_measured_tuples_per_s': 200.0, 'arrived_tuples_per_s': 300.0, 'overload_measured': 1.5, 'kept_fraction': 0.3333333333333333}
    """
    hist = [r for r in run.history if r.t >= from_s]
    done = [r for r in hist if r.processed_tuples > 0 or r.batch_s > 0]
    batch = sum(r.batch_s for r in done)
    cap = sum(r.processed_tuples for r in done) / batch if batch > 0 else math.nan
    span = hist[-1].t - hist[0].t if len(hist) > 1 else math.nan
    arrived = sum(r.arrived_tuples for r in hist[1:]) / span if span and span > 0 else math.nan
    total = sum(r.arrived_tuples for r in hist)
    return {
        "capacity_measured_tuples_per_s": cap,
        "arrived_tuples_per_s": arrived,
        "overload_measured": arrived / cap if cap and cap > 0 else math.nan,
        "kept_fraction": sum(r.admitted_tuples for r in hist) / total if total else math.nan,
    }


def experiment_spark(
    master: str = "local[2]",
    app_name: str = "spillway-experiment",
    class_weights: Sequence[int] | None = None,
) -> Any:
    """A SparkSession for experiments (spillway's settings, :func:`configure_spark`); with
    ``class_weights``, in FAIR mode with a pool per priority class weighted by them
    (:mod:`spillway.spark.pools`: nodes with ``class_plans = "pools"`` run in it; a node of
    one plan runs in the default pool, as it would without FAIR mode)."""
    from pyspark.sql import SparkSession

    from spillway.spark.pools import configure_pools
    from spillway.spark.session import configure_spark

    builder = SparkSession.builder.master(master).appName(app_name)
    builder = configure_spark(builder, local=master.startswith("local"))
    if class_weights is None:
        spark = builder.getOrCreate()
    else:
        folder = tempfile.mkdtemp(prefix="spillway-pools-")
        try:  # the allocation file is read when the context starts
            spark = configure_pools(builder, class_weights, folder).getOrCreate()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    # Overloaded runs fall behind on purpose: Spark's per-batch warnings would flood the console.
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _with_time(df: pd.DataFrame, config: NodeConfig, epoch_s: float) -> pd.DataFrame:
    ids = {q.name: i for i, q in enumerate(config.queries)}
    out = df.copy()
    out["query_id"] = [ids[str(n)] for n in out["query"]]
    out["t"] = feed_seconds(out["window_start"], epoch_s) if len(out) else []
    return out


def run_level(
    config: NodeConfig,
    *,
    spark: Any,
    duration_s: float,
    policy: Policy | None = None,
    capacity_tuples_per_s: float | None = None,
    exact: bool = False,
    exact_span_s: float | None = None,
    tick_s: float = 1.0,
    on_tick: Callable[[float], None] | None = None,
    retries: int = 2,
    warm_batches: int = 2,
    ready_timeout_s: float = 300.0,
) -> LevelRun:
    """Run ``config`` on a Node for ``duration_s`` seconds of wall time and collect everything.

    The node's streaming queries are stopped before the exact job runs, so the two never share
    the cores: the node hands out no new data, the batches in flight finish, then the queries
    stop (:meth:`~spillway.spark.node.Node.halt`). ``spark`` must run nothing else meanwhile.

    Parameters
    ----------
    config : the node (queries, STW, trigger, seed, ``overload``).
    spark : the SparkSession (kept running afterwards).
    duration_s : how long the node streams once it is warm (every plan finished
        ``warm_batches`` micro-batches; after the calibration when ``overload`` is set).
    policy : policy object (default: the config's policy by name).
    capacity_tuples_per_s : fixed node capacity; None measures it (cost models).
    exact : also compute the exact answers of every window the run closed: per query, the
        windows ending by the last window its finished micro-batches closed
        (:attr:`LevelRun.closed_s`; module docstring).
    exact_span_s : only of the windows in the last ``exact_span_s`` seconds of feed time
        before the last window closed (the exact job re-reads every tuple that arrived, shed
        or not: at 10x overload ten times what the node processed); None: of the whole run.
    tick_s : snapshot period.
    on_tick : called with the feed time after each snapshot (progress display).
    retries : how many times a run that failed transiently (:data:`TRANSIENT`: a Python
        worker that did not connect back within Spark's fixed 10 s, which happens when other
        work saturates the cores) is started again from scratch.
    warm_batches : micro-batches every plan must finish before ``duration_s`` starts.
    ready_timeout_s : how long to wait for that.

    Raises
    ------
    SpillwayError
        A streaming query of the node failed.
    """
    report(
        f"running {len(config.queries)} queries for {duration_s:g} s (policy "
        f"{policy.name if policy is not None else config.policy})"
    )
    for attempt in range(retries + 1):
        try:
            return _run_once(
                config,
                spark=spark,
                duration_s=duration_s,
                policy=policy,
                capacity_tuples_per_s=capacity_tuples_per_s,
                exact=exact,
                exact_span_s=exact_span_s,
                tick_s=tick_s,
                on_tick=on_tick,
                attempt=attempt,
                warm_batches=warm_batches,
                ready_timeout_s=ready_timeout_s,
            )
        except SpillwayError as e:
            if attempt == retries or not any(m in str(e) for m in TRANSIENT):
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


def _run_once(
    config: NodeConfig,
    *,
    spark: Any,
    duration_s: float,
    policy: Policy | None,
    capacity_tuples_per_s: float | None,
    exact: bool,
    exact_span_s: float | None,
    tick_s: float,
    on_tick: Callable[[float], None] | None,
    attempt: int,
    warm_batches: int,
    ready_timeout_s: float,
) -> LevelRun:
    from spillway.spark.node import Node

    # Feed time 0 on a whole multiple of every window and of the trigger: tumbling windows
    # start at multiples of their length in Unix time (``floor(event_ts / window_s)``) while
    # batches end on multiples in feed time, so the two agree only when the epoch is aligned;
    # and Spark's trigger fires at multiples of its interval in Unix time, so an epoch off
    # that grid would make every result wait up to one more trigger (a random offset per run).
    lengths = [q.window_s for q in config.queries] + [config.trigger_s]
    align = math.lcm(*(max(1, round(x * 1000)) for x in lengths)) / 1000
    epoch = math.floor(time.time() / align) * align
    node = Node(
        config,
        spark=spark,
        policy=policy,
        capacity_tuples_per_s=capacity_tuples_per_s,
        epoch_s=epoch,
    )
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    try:
        node.start()
        ready = _wait_warm(node, warm_batches, ready_timeout_s)
        end = time.monotonic() + duration_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(tick_s, left))
            _raise_failed(node)
            snap = node.snapshot()
            for q in snap.queries:
                rows.append(
                    {
                        "t": snap.t,
                        "query": q.name,
                        "kind": q.kind,
                        "sic": q.sic,
                        "kept_fraction": q.kept_fraction,
                        "latency_p95_s": q.latency_p95_s,
                        "arrival_rate": q.arrival_rate,
                        "capacity_tuples_per_s": snap.capacity_tuples_per_s,
                        "processed_tuples_per_s": snap.processed_tuples_per_s,
                    }
                )
            if on_tick is not None:
                on_tick(snap.t)
        feed_end = node.controller.feed_time()
        with warnings.catch_warnings():  # a batch cut short by stop() warns from toPandas
            warnings.simplefilter("ignore", UserWarning)
            node.halt()
        epoch = node.controller.epoch_s
        done = node.controller.processed()[0] - epoch
        closed = {q.name: float(done[i]) for i, q in enumerate(config.queries)}
        results = _with_time(node.results(), config, epoch)
        history = node.history()
        batches = {p: node.controller.batches(p) for p in node.plans}
        exact_df = None
        until = 0.0
        users = [q.name for q in config.queries if q.kind == USER_KIND]
        user = {name: node.user_results(name) for name in users}
        user_exact: dict[str, pd.DataFrame] = {}
        if exact:
            start, until = exact_span(closed.values(), exact_span_s)
            exact_df = _with_time(node.exact_results(until, from_s=start), config, epoch)
            exact_df = closed_windows(exact_df, closed).reset_index(drop=True)
            user_exact = {
                n: node.exact_user_results(n, closed[n], from_s=start)
                if math.isfinite(closed[n])
                else pd.DataFrame()
                for n in users
            }
        set_aside = node.dead_letters.counts()
    finally:
        node.stop()
    return LevelRun(
        results=results,
        exact=exact_df,
        ticks=pd.DataFrame(rows, columns=list(TICK_COLUMNS)),
        history=history,
        until_s=until,
        epoch_s=float(epoch),
        ready_s=ready,
        wall_s=time.monotonic() - t0,
        calibration=node.calibration,
        rate_scale=node.rate_scale,
        batches=batches,
        attempts=attempt + 1,
        user=user,
        user_exact=user_exact,
        set_aside=set_aside,
        closed_s=closed,
        stopped_s=float(feed_end),
    )


def _wait_warm(node: Any, batches: int, timeout_s: float) -> float:
    """Wait until every plan of ``node`` finished ``batches`` micro-batches; its feed time."""
    deadline = time.monotonic() + timeout_s
    while any(len(node.controller.batches(p)) < batches for p in node.plans):
        _raise_failed(node)
        if time.monotonic() > deadline:
            raise SpillwayError(
                f"the node's plans did not finish {batches} micro-batches within {timeout_s:g} s"
            )
        time.sleep(0.2)
    return float(node.controller.feed_time())


def _raise_failed(node: Any) -> None:
    for plan in node.plans:
        err = node.query_error(plan)
        if err is not None:
            raise SpillwayError(f"the streaming query of plan {plan!r} failed: {err}")


def per_query_mean(ticks: pd.DataFrame, column: str, *, from_s: float) -> pd.Series:
    """Mean of ``column`` per query over the ticks at feed time ``>= from_s`` (query order kept).

    >>> ticks = pd.DataFrame({"t": [1.0, 2.0, 3.0, 3.0], "query": ["a", "a", "a", "b"],
    ...                       "sic": [0.0, 0.4, 0.6, 0.9]})
    >>> per_query_mean(ticks, "sic", from_s=2.0).to_dict()
    {'a': 0.5, 'b': 0.9}
    """
    sel = ticks[ticks["t"] >= from_s]
    order = list(dict.fromkeys(ticks["query"]))
    means = sel.groupby("query", sort=False)[column].mean()
    return means.reindex([q for q in order if q in means.index])


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Validate an experiment setting that must be a finite number > 0 (or >= 0).

    >>> check_positive("duration_s", 5)
    5.0
    >>> check_positive("duration_s", -1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: duration_s must be a finite number > 0, got -1
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {rule}, got {value!r}")
    return float(value)


def check_levels(name: str, levels: Any) -> tuple[int, ...]:
    """Validate a load sweep: a non-empty, strictly increasing tuple of ints >= 1.

    >>> check_levels("levels", [1, 2, 4])
    (1, 2, 4)
    >>> check_levels("levels", (2, 2))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: levels must be strictly increasing ints >= 1 (queries per step), got (2, 2); list each load step once, smallest first
    """
    vals = tuple(levels) if isinstance(levels, list | tuple) else ()
    ok = bool(vals) and all(isinstance(v, int) and not isinstance(v, bool) for v in vals)
    ok = ok and vals[0] >= 1 and all(b > a for a, b in zip(vals, vals[1:], strict=False))
    if not ok:
        raise ConfigError(
            f"{name} must be strictly increasing ints >= 1 (queries per step), got {levels!r}; "
            "list each load step once, smallest first"
        )
    return vals
