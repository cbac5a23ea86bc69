"""A spillway node on Spark: controller + channel + one streaming query per window + listener.

:class:`Node` is what the CLI runs (docs/design.md). Like THEMIS's node it has ONE input buffer and
takes one admission decision per interval: normally ONE Spark streaming query, fed by one
spillway source that carries the tuples of ALL the node's logical queries whatever their kind
(told apart by ``query_id``). Its ``foreachBatch`` sink evaluates every kind present in the
batch (:class:`~spillway.spark.sink.ResultSink`: the batch persisted once, each kind over its
queries' rows, the results unioned and collected in one job). Queries with different window
lengths cannot share a batch (a batch ends on a window boundary), so there is one plan per
window length. One plan means one fixed micro-batch overhead per interval, where a plan per
kind paid six on the THEMIS mix (measured on ``local[2]``: 6 s of overhead per 1 s interval,
no capacity left).

``start()`` wires, in the driver:

- one :class:`~spillway.spark.controller.PlanSpec` per window (:func:`plan_layout`), named after
  its kind when all its queries have one kind, ``mixed`` otherwise (``-<w>s`` appended when the
  node has several windows); query ids in config order;
- a feed per query (``spillway.feeds.make_feed``, seeded from the node seed and the query's
  position) and the :class:`~spillway.spark.controller.NodeController` with the policy
  (``config.make_policy()``: the named policy with its ``policy_options`` and the node's seed, unless one is given);
- the loopback :class:`~spillway.spark.channel.ControlServer` the sources talk to;
- a :class:`~spillway.spark.coordinator.QueryCoordinator` (query SIC, Eq. 4; created once the
  feed epoch is known, which is its origin) and a :class:`~spillway.spark.sink.ResultStore`;
- per plan one streaming query: ``readStream.format("spillway")`` → ``foreachBatch(ResultSink)``
  with a checkpoint (``<checkpoint_dir>/run/<plan>``) and a ``ProcessingTime(trigger_s)``
  trigger;
- the :class:`~spillway.spark.listener.ProgressListener` feeding the cost models (one per plan:
  the lanes of a plan share one per-tuple cost, see :mod:`spillway.spark.controller`).

``start()`` returns once every plan's source has connected to the controller; with the wall
clock, feed time 0 is that moment floored onto Spark's trigger grid (the feed does not pile up
while Spark starts; see the controller's "Clocks"). ``stop()``
first lets the micro-batches in flight finish (the controller hands out no new data), then
stops the queries: interrupting a running batch only makes Spark log errors. A node runs once;
its results, history and batches stay readable after ``stop()``.

Overload calibration (``NodeConfig.overload``)
----------------------------------------------
When ``overload`` is set, ``start()`` first measures the node's capacity, nothing shed, in
calibration rounds at rising arrival rates. A round runs the plan (a fresh streaming query) at a
fixed rate for at least its share of ``calibrate_s`` (half for the first round, a quarter for
each later one) and until :attr:`Node.calibration_min_batches` measured micro-batches; the
controller holds decisions back in a fixed pattern (batches span 1, 2, 1 or 3 intervals of
arrivals) so batch sizes vary and the cost model separates the fixed overhead ``o`` of a batch
from its per-tuple cost ``k`` (the fits carry over from round to round).

The capacity is what the node processes per second of micro-batch time at its *operating
point*: a batch of ``n* = (headroom · span · interval − o) / k`` rows fills the controller's
budget, so ``C = n* / (headroom · span · interval)`` tuples per second of batch time (``span``
from :func:`spillway.control.batch_span`). It is the same measure the run report gives
(``capacity_measured_tuples_per_s``: rows processed over batch time), so the overload the run
asked for is the overload it measures. Two rules keep ``C`` honest:

- it is never above what a measured batch achieved: ``C <= max rows / duration`` over the
  round's batches (the first :data:`WARMUP_BATCHES` of a streaming query left out). A fit from
  batches far below ``n*`` extrapolates (measured here: 3,000 rows/s fitted 1e-9 s a tuple, a
  "capacity" of 485 million rows/s), so the bound refuses to report more than was seen;
- so another round runs, at the rate that makes one interval's arrivals a batch of ``n*`` rows
  (at most :data:`CALIBRATION_STEP` times the rate before), until a round has batches at the
  operating point (:data:`NEAR_OPERATING_POINT`); their rows over their batch time is ``C``,
  measured rather than fitted (at most :data:`CALIBRATION_ROUNDS` rounds). Once a round's
  batches reached ``n*`` (the fit is local), the next one admits every interval as it comes, so
  its batches are all about ``n*`` rows.

Finally every query's rate is multiplied by ``overload · C / R`` (``R`` the configured total
rate), fixed from then on (arrivals never follow processing), and the node starts afresh (new
feeds, controller and checkpoints; the fitted cost model carried over). :attr:`Node.calibration`
records ``C``, the fits, the wall time and every round; :mod:`spillway.progress` reports each
round as it ends.

Clocks: ``clock=None``/``"wall"`` runs on wall time; ``"logical"`` advances feed time by exactly
one trigger interval per decision (epoch 0 by default; deterministic runs, reproducible when the
capacity is fixed with ``capacity_tuples_per_s``, since measured costs vary); a callable is a
wall clock to use.

Examples
--------
>>> from spillway.config import NodeConfig, QuerySpec
>>> cfg = NodeConfig(queries=(QuerySpec(name="a", kind="avg", feed="gaussian"),
...                           QuerySpec(name="b", kind="avg", feed="uniform", window_s=2.0),
...                           QuerySpec(name="c", kind="max", feed="gaussian")), stw_s=10.0)
>>> [(p.name, p.windows, p.kinds) for p in plan_layout(cfg)]
[('mixed', {0: 1.0, 1: 2.0, 2: 1.0}, {'avg': (0, 1), 'max': (2,)})]
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from spillway.config import USER_KIND, NodeConfig, QuerySpec, feed_settings
from spillway.control import CostModelState, batch_span, estimate
from spillway.errors import ConfigError, RunFailedError, SpillwayError
from spillway.events import Observer, bind_phase
from spillway.feeds import make_feed
from spillway.feeds.base import Feed
from spillway.files import replace_text
from spillway.policies.base import Policy
from spillway.progress import report
from spillway.quality import jain_index
from spillway.sinks import Sink, make_sink
from spillway.spark.batch_stop import stop_safe
from spillway.spark.channel import ControlServer
from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
from spillway.spark.coordinator import QueryCoordinator
from spillway.spark.dead_letters import DeadLetters
from spillway.spark.fed_results import NodeReporter
from spillway.spark.listener import ProgressListener
from spillway.spark.observed import observe_source
from spillway.spark.pools import POOL_PROPERTY, check_pools, configure_pools, pool_names
from spillway.spark.sink import MIXED_PLAN, ResultSink, ResultStore
from spillway.spark.source import FeedSpec, register_source, source_options
from spillway.spark.user import UserPart, check_schema, evaluate, resolve_function
from spillway.status import IntervalRecord, NodeSnapshot, QueryStatus

#: Columns of :meth:`Node.results` and :meth:`Node.exact_results` (``key``: the group of a
#: grouped kind's row as pandas' nullable ``Int64``, null for the other kinds).
RESULT_COLUMNS = (
    "query",
    "kind",
    "window_start",
    "key",
    "rank",
    "value",
    "sic",
    "latency_s",
    "produced_at",
    "n_in",
    "key_text",
    "window_end_feed_s",
)

#: How many intervals of arrivals calibration batches span, in turn.
CALIBRATION_GAPS = (1, 2, 1, 3)

#: A calibration round lasts its share of ``calibrate_s`` and at least this many measured
#: batches.
MIN_CALIBRATION_BATCHES = 5

#: The first batches of a streaming query start Python workers and generate code (measured: 7 s
#: for a batch that later takes 1.5 s); they are left out of the calibration's measured rates.
WARMUP_BATCHES = 2

#: At most this many calibration rounds; each runs at most :data:`CALIBRATION_STEP` times the
#: rate of the one before (a node at 400 tuples/s reaches 3 million in three steps).
CALIBRATION_ROUNDS = 5
CALIBRATION_STEP = 20.0

#: Batches whose rows are within this share of the operating point ``n*`` measure the capacity
#: directly (rows over batch time), without the fit.
NEAR_OPERATING_POINT = (0.7, 1.4)


class PlanLayout(NamedTuple):
    """A plan of the node: its name, every query's window, the query ids of each kind and the
    FAIR scheduler pool its streaming query runs in (None: the session's default)."""

    name: str
    windows: dict[int, float]
    kinds: dict[str, tuple[int, ...]]
    pool: str | None = None

    @property
    def query_ids(self) -> list[int]:
        """The plan's query ids, ascending (config order).

        >>> PlanLayout("mixed", {0: 1.0, 1: 1.0, 3: 2.0}, {"avg": (0, 3), "max": (1,)}).query_ids
        [0, 1, 3]
        """
        return sorted(i for ids in self.kinds.values() for i in ids)


def _cost_states(given: Mapping[str, CostModelState] | None) -> dict[str, CostModelState]:
    """``cost_states`` checked: a mapping of plan names to cost model states.

    >>> _cost_states(None)
    {}
    >>> _cost_states({"avg": 1.0})
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: cost_states must map plan names to CostModelState, got float for 'avg'
    """
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"cost_states must be a mapping or None, got {type(given).__name__}")
    for name, state in given.items():
        if not isinstance(state, CostModelState):
            raise ConfigError(
                "cost_states must map plan names to CostModelState, got "
                f"{type(state).__name__} for {name!r}"
            )
    return dict(given)


def plan_layout(config: NodeConfig) -> list[PlanLayout]:
    """The node's plans: ONE, carrying every query whatever its kind and window; with
    priority classes and ``class_plans = "pools"``, one per class.

    A plan is named after its kind when all its queries have one kind, else
    :data:`~spillway.spark.sink.MIXED_PLAN`; ``kinds`` maps each kind to its query ids, in
    config order. Queries with different windows share the plan: each query's part of a batch
    ends on a multiple of its own window (:mod:`spillway.spark.controller`), so one streaming
    query (one fixed micro-batch cost per interval) serves them all. Earlier, one plan per
    window length made two or three streaming queries compete for two cores: their fixed costs
    filled the interval and a 5 s query starved beside 0.5 s and 1 s ones.

    With ``class_plans = "pools"`` (``dilos`` policy) each priority class that has queries gets
    its own plan, ``class<k>``, in the FAIR pool of its class (:mod:`spillway.spark.pools`),
    class 1 first: the classes' micro-batches are separate, at one fixed cost each.

    >>> qs = tuple(QuerySpec(name=n, kind="avg", feed="gaussian", priority_class=c)
    ...            for n, c in (("a", 2), ("b", 1), ("c", 2)))
    >>> cfg = NodeConfig(queries=qs, policy="dilos", load_manager="aurora", class_plans="pools")
    >>> [(p.name, p.query_ids, p.pool) for p in plan_layout(cfg)]
    [('class1', [1], 'spillway-class1'), ('class2', [0, 2], 'spillway-class2')]
    """
    if config.class_plans == "pools":
        pools = pool_names(len(config.class_weights))
        by_class: dict[int, list[int]] = {}
        for i, q in enumerate(config.queries):
            by_class.setdefault(q.priority_class or 1, []).append(i)
        return [
            _layout(config, by_class[c], name=f"class{c}", pool=pools[c - 1])
            for c in sorted(by_class)
        ]
    return [_layout(config, list(range(len(config.queries))))]


def _layout(
    config: NodeConfig, ids: list[int], *, name: str | None = None, pool: str | None = None
) -> PlanLayout:
    """The plan of queries ``ids``, named ``name`` (default: after its kind, or mixed)."""
    kinds: dict[str, list[int]] = {}
    for i in ids:
        kinds.setdefault(config.queries[i].kind, []).append(i)
    if name is None:
        name = next(iter(kinds)) if len(kinds) == 1 else MIXED_PLAN
    windows = {i: float(config.queries[i].window_s) for i in ids}
    return PlanLayout(name, windows, {k: tuple(v) for k, v in kinds.items()}, pool)


#: File in a federated node's checkpoint folder: the last batch its coordinator received
#: (:meth:`~spillway.spark.fed_results.NodeReporter.keep_record`).
REPORTED_FILE = "reported.json"

#: File in a checkpoint folder naming each user query's sink lineage (:mod:`spillway.sinks`).
LINEAGE_FILE = "sink-lineage.json"


def sink_lineage(root: Path, query: str) -> str:
    """The lineage of ``query``'s sink in the checkpoint folder ``root``: read back when a driver
    restarts from it, made (and written down) on the first run.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> sink_lineage(root, "fares") == sink_lineage(root, "fares") != sink_lineage(root, "b")
    True
    """
    path = root / LINEAGE_FILE
    known = json.loads(path.read_text()) if path.exists() else {}
    if query not in known:
        known[query] = uuid.uuid4().hex[:12]
        replace_text(path, json.dumps(known, indent=1, sort_keys=True))
    return str(known[query])


def _user_part(query_id: int, q: QuerySpec, feed: Any) -> UserPart:
    """The sink's view of a user query: its function, window and (for a log) record schema."""
    assert q.function is not None  # QuerySpec checks it for kind = "user"
    schema = getattr(feed, "schema_ddl", None) if feed.log else None
    if schema is not None:
        check_schema(schema, query=q.name)
    return UserPart(
        query_id=query_id,
        name=q.name,
        fn=resolve_function(q.function),
        window_us=int(round(q.window_s * 1e6)),
        record_schema=schema,
    )


class Node:
    """One spillway node on one Spark application (see the module docstring).

    Parameters
    ----------
    config : the node's config.
    spark : a SparkSession; None creates one with :func:`~spillway.spark.session.configure_spark`
        on ``config.master`` (stopped again by :meth:`stop`).
    clock : ``None``/``"wall"``, ``"logical"``, or a callable returning Unix seconds.
    policy : a policy object instead of ``config.make_policy()``.
    capacity_tuples_per_s : fix the capacity (tuples/s) instead of the cost models.
    epoch_s : feed time 0 in Unix seconds (default: when the queries are up, on the trigger
        grid; 0.0 with the logical clock).
    on_batch : called as ``on_batch(plan, batch_id)`` before each micro-batch's sink (fault
        injection in tests; an exception kills that plan's streaming query).
    log_level : Spark's log level (``"ERROR"``, ``"WARN"``, ...) for the session the node
        creates (set before it starts, so its own start-up warnings are filtered too), or set
        on the given ``spark``; None keeps the session's.
    keep_source_mass : keep every SIC-mass record of the run (the coordinator's archive), so
        that after the run each result window's SIC can be set against the mass that arrived
        in it (:mod:`spillway.run_exact`); off by default (it grows with the run).
    federation : a :class:`~spillway.spark.fed_results.NodeReporter` when the node is part of
        a federation and its queries are their queries' roots: every new batch of results is
        reported to the query coordinator with it (as query results: not for a node whose
        results are partial, an upstream fragment's), and the controller balances the view it keeps (the coordinator's values projected
        over this node's shedding, THEMIS §6; the local view while it has none). Its clock,
        when not given, is the controller's. None (default): a single node.
    cost_states : per plan name, a cost model to start from instead of the priors (a
        calibrated node's :attr:`cost_states`): runs compared with each other then start from
        one measurement, not each from its own. A calibration replaces them.
    """

    def __init__(
        self,
        config: NodeConfig,
        *,
        spark: Any = None,
        clock: str | Callable[[], float] | None = None,
        policy: Policy | None = None,
        capacity_tuples_per_s: float | None = None,
        epoch_s: float | None = None,
        on_batch: Callable[[str, int], None] | None = None,
        log_level: str | None = None,
        keep_source_mass: bool = False,
        federation: NodeReporter | None = None,
        cost_states: Mapping[str, CostModelState] | None = None,
    ) -> None:
        if not isinstance(config, NodeConfig):
            raise ConfigError(f"config must be a NodeConfig, got {type(config).__name__}")
        if isinstance(clock, str) and clock not in ("wall", "logical"):
            raise ConfigError(f"clock must be 'wall', 'logical' or a callable, got {clock!r}")
        if capacity_tuples_per_s is not None and not (
            isinstance(capacity_tuples_per_s, int | float) and capacity_tuples_per_s >= 0
        ):
            raise ConfigError(
                f"capacity_tuples_per_s must be a number >= 0, got {capacity_tuples_per_s!r}"
            )
        self.config = config
        self._spark = spark
        self._own_spark = spark is None
        self._mode = "logical" if clock == "logical" else "wall"
        self._clock_fn = clock if callable(clock) else time.time
        self._policy = policy
        self._capacity = capacity_tuples_per_s
        self._epoch_s = epoch_s if epoch_s is not None else (0.0 if clock == "logical" else None)
        self._on_batch = on_batch
        if log_level is not None and not (isinstance(log_level, str) and log_level.strip()):
            raise ConfigError(
                f"log_level must be a Spark log level name or None, got {log_level!r}"
            )
        self._log_level = log_level
        if not isinstance(keep_source_mass, bool):
            raise ConfigError(f"keep_source_mass must be True or False, got {keep_source_mass!r}")
        self._keep_source_mass = keep_source_mass
        if federation is not None and not isinstance(federation, NodeReporter):
            raise ConfigError(
                f"federation must be a NodeReporter or None, got {type(federation).__name__}"
            )
        self.federation = federation
        if spark is not None and log_level is not None:
            spark.sparkContext.setLogLevel(log_level)
        config.check_feeds()  # a bad feed, option or file fails here, before Spark starts
        self._layout = plan_layout(config)
        #: Whether the plans run in the classes' FAIR pools (``class_plans = "pools"``).
        self._pools = any(p.pool is not None for p in self._layout)
        self._tmpdir: str | None = None
        if spark is not None and self._pools:
            check_pools(spark, config.class_weights)
        self._scale = 1.0
        self._calibration: dict[str, Any] | None = None
        self._carry_costs: dict[str, CostModelState] = _cost_states(cost_states)
        self._controller: NodeController | None = None
        self._server: ControlServer | None = None
        self._listener: ProgressListener | None = None
        self._queries: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.store = ResultStore()
        self.coordinator: QueryCoordinator | None = None
        #: How long :meth:`start` waits for the streaming queries' sources to connect.
        self.ready_timeout_s = 180.0
        #: Measured micro-batches per plan a calibration round needs.
        self.calibration_min_batches = MIN_CALIBRATION_BATCHES
        self._feed_ends: dict[str, float | None] = {}
        #: The malformed and late records of the node's logs (Kafka topics, folders).
        self.dead_letters = DeadLetters([q.name for q in config.queries])
        self._key_texts: dict[str, dict[int, str]] = {}
        self._user_sinks: dict[str, Sink] = {}
        self._feeds: list[Feed] = []  # every feed made (their consumers close at stop)
        self._user_parts: list[UserPart] = []
        #: Why the run failed (plan, phase, last finished batch, full error), or None.
        self.failure: dict[str, Any] | None = None
        self._phase = "start"
        #: Called as ``observer(phase, event)`` with every decision, measured batch and batch
        #: of results (:mod:`spillway.events`); the live views and metrics listen here.
        self.observers: list[Observer] = []

    # ------------------------------------------------------------------------- properties

    @property
    def spark(self) -> Any:
        """The SparkSession (created on :meth:`start` when none was given)."""
        if self._spark is None:
            from pyspark.sql import SparkSession

            from spillway.spark.session import configure_spark

            master = self.config.master
            builder = configure_spark(
                SparkSession.builder.master(master).appName("spillway"),
                local=master.startswith("local"),
            )
            if self._pools:  # the classes' FAIR pools are read when the context starts
                builder = configure_pools(builder, self.config.class_weights, self._scratch())
            if self._log_level is not None:
                builder = builder.config("spark.log.level", self._log_level)
            try:
                self._spark = builder.getOrCreate()
            except Exception as e:  # the JVM did not start: Java, master, ports
                raise RunFailedError(
                    f"Spark could not start on master {self.config.master!r}: {short_error(str(e))}"
                ) from None
            if self._pools:  # a session already running in this process ignored the pools
                check_pools(self._spark, self.config.class_weights)
        return self._spark

    def _scratch(self) -> Path:
        """The node's folder: the checkpoint directory, else a temporary one (removed by
        :meth:`stop`)."""
        if self.config.checkpoint_dir is not None:
            return Path(self.config.checkpoint_dir)
        if self._tmpdir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="spillway-")
        return Path(self._tmpdir)

    @property
    def controller(self) -> NodeController:
        """The running controller."""
        if self._controller is None:
            raise SpillwayError("the node is not started: call node.start()")
        return self._controller

    @property
    def plans(self) -> list[str]:
        """Plan names in order."""
        return [p.name for p in self._layout]

    @property
    def calibration(self) -> dict[str, Any] | None:
        """What the overload calibration measured (None without ``overload``)."""
        return self._calibration

    @property
    def feeds_end_s(self) -> dict[str, float | None]:
        """Per query, the feed time its feed ends (a replayed file without ``loop``) or None."""
        return dict(self._feed_ends)

    @property
    def cost_states(self) -> dict[str, CostModelState]:
        """Per plan, the cost model the node's runs start from: the last calibration
        round's fit once calibrated, else what was given (``cost_states``); pass them to
        another node of the same query mix to start it from this one's measurement."""
        return dict(self._carry_costs)

    @property
    def rate_scale(self) -> float:
        """Factor applied to every configured rate (1 unless calibrated for overload)."""
        return self._scale

    # ------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Build everything, start one streaming query per plan and return once every plan's
        source has connected to the controller (wall clock: feed time 0 is about that moment).

        Raises
        ------
        SpillwayError
            Already started, or a streaming query failed or did not start in time.
        """
        with self._lock:
            if self._controller is not None:
                raise SpillwayError("the node is already started")
            register_source(self.spark)
            self._scratch()
            try:
                if self.config.overload is not None and self._calibration is None:
                    self._calibrate()
                self._launch("run")
            except BaseException:
                self._stop_queries()
                self._controller = None
                raise

    def _checkpoint_root(self, phase: str) -> Path:
        root = Path(self.config.checkpoint_dir or self._tmpdir or ".") / phase
        if phase == "calibrate":  # a calibration always starts afresh
            shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        return root

    def _launch(self, phase: str, *, calibrating: bool = False, vary: bool = True) -> None:
        self._phase = phase
        cfg = self.config
        policy = self._policy if self._policy is not None else self._make_policy()
        plans = []
        logs: dict[str, str | None] = {}
        dead_topics: dict[str, Any] = {}
        user_parts: list[UserPart] = []
        self._user_parts = user_parts
        for layout in self._layout:
            queries = []
            for i in layout.query_ids:
                q = cfg.queries[i]
                settings = feed_settings(q, cfg.seed, i, self._scale)
                feed = make_feed(q.feed, **settings)
                self._feeds.append(feed)
                if feed.log:
                    logs[q.name] = feed.dead_letter
                    writer = feed.dead_letter_writer()
                    if writer is not None:
                        dead_topics[q.name] = writer
                self._feed_ends[q.name] = feed.end_s()
                if feed.text_keys:
                    self._key_texts[q.name] = feed.key_texts()
                spec = (
                    FeedSpec.of(feed) if feed.portable else FeedSpec.registered(q.feed, **settings)
                )
                if q.kind == USER_KIND:
                    user_parts.append(_user_part(i, q, feed))
                    if q.sink is not None and not calibrating and q.name not in self._user_sinks:
                        lineage = sink_lineage(self._checkpoint_root(phase), q.name)
                        self._user_sinks[q.name] = make_sink(q.sink, query=q.name, lineage=lineage)
                queries.append(
                    PlanQuery(
                        query_id=i,
                        name=q.name,
                        feed=feed,
                        spec=spec,
                        kind=q.kind,
                        window_s=q.window_s,
                        sic_sources=q.sic_sources,
                    )
                )
            plans.append(
                PlanSpec(name=layout.name, window_s=cfg.queries[0].window_s, queries=tuple(queries))
            )
        cap = None
        if self._capacity is not None and not calibrating:
            cap = self._capacity * cfg.trigger_s
        ccfg = ControllerConfig(
            trigger_s=cfg.trigger_s,
            stw_s=cfg.stw_s,
            headroom=cfg.headroom,
            seed=cfg.seed,
            clock=self._mode,
            capacity_tuples=cap,
            probe_every=cfg.probe_every,
            # calibration measures the capacity with nothing shed: no load manager there
            load_control=None if calibrating else cfg.load_control(),
            class_control=None if calibrating else cfg.class_control(),
        )
        root = self._checkpoint_root(phase)
        # With a checkpoint directory the run's results are kept beside Spark's offset log, so
        # a driver restarted from it still has the batches it finished (a replayed batch
        # replaces its own rows).
        keep = cfg.checkpoint_dir is not None and not calibrating
        self.store = ResultStore(root / "results.csv", resume=True) if keep else ResultStore()
        clocks: list[tuple[float, float] | None] = [None] * len(cfg.queries)
        for p in plans:
            for pq in p.queries:
                clocks[pq.query_id] = pq.feed.event_clock()
        coordinator = QueryCoordinator(
            len(cfg.queries),
            cfg.stw_s,
            windows_s=[q.window_s for q in cfg.queries],
            event_clocks=clocks,
            archive=self._keep_source_mass and not calibrating,
        )
        self.coordinator = coordinator
        controller = NodeController(
            ccfg,
            plans,
            policy,
            clock=self._clock_fn,
            epoch_s=self._epoch_s,
            coordinator=coordinator,
            federation=None if self.federation is None or calibrating else self.federation.view,
        )
        for plan, state in self._carry_costs.items():
            controller.set_cost_state(plan, state)
        if calibrating:  # admit everything; vary batch sizes unless measuring at one size
            controller.set_calibration(
                _calibration_hold(controller) if vary else (lambda k_last, k: False)
            )
        self._controller = controller
        if self.federation is not None and not calibrating:
            if self.federation.clock is None:
                self.federation.clock = controller.now
            self.federation.progress = controller.processed  # this phase's controller
            if keep:  # beside the results a restarted driver resumes from
                self.federation.keep_record(root / REPORTED_FILE)
            self.store.listeners.append(self.federation)
        if self.observers:
            controller.observers.append(bind_phase(self.observers, phase))
            self.store.listeners.append(bind_phase(self.observers, phase))
        self._server = ControlServer(controller.handle)
        names = {p.name: f"spillway-{p.name}-{id(self):x}" for p in plans}
        self._listener = ProgressListener(controller, {v: k for k, v in names.items()})
        self.spark.streams.addListener(self._listener)
        self._query_names = names
        self._checkpoints = {p.name: str(root / p.name) for p in plans}
        self.dead_letters = DeadLetters(
            [q.name for q in cfg.queries],
            folders={n: f for n, f in logs.items() if f is not None},
            topics=dead_topics,
            logs=list(logs),
        )
        self._sinks = {
            p.name: ResultSink(
                p.kinds,
                p.windows,
                self.store,
                coordinator,
                clock=controller.now,
                plan=p.name,
                logs=any(q.name in logs for q in p.queries),
                dead_letters=self.dead_letters.record,
                key_texts=(  # only a plan with text keys learns their texts
                    self._learn_key_texts
                    if any(q.name in self._key_texts for q in p.queries)
                    else None
                ),
                user=[u for u in user_parts if u.query_id in p.kinds.get(USER_KIND, ())],
                user_sinks={} if calibrating else self._user_sinks,
            )
            for p in plans
        }
        for p in plans:
            self._start_query(p.name)
        self._wait_ready(controller)

    def _wait_ready(self, controller: NodeController) -> None:
        """Wait until every plan's source has asked for an offset (Spark is up)."""
        deadline = time.monotonic() + self.ready_timeout_s
        while controller.plans_asked() != set(self._queries):
            self._raise_failed()
            if time.monotonic() > deadline:
                missing = sorted(set(self._queries) - controller.plans_asked())
                raise SpillwayError(
                    f"the streaming queries of plans {missing} did not start within "
                    f"{self.ready_timeout_s:g} s"
                )
            time.sleep(0.05)

    def _start_query(self, plan: str) -> None:
        assert self._server is not None
        sink = self._sinks[plan]
        hook = self._on_batch

        def run_batch(df: Any, batch_id: int) -> None:
            if hook is not None:
                hook(plan, batch_id)
            sink(df, batch_id)

        opts = source_options(
            self._server.address_text,
            self._server.authkey,
            plan,
            partitions=max(1, int(self.spark.sparkContext.defaultParallelism)),
        )
        stream = self.spark.readStream.format("spillway").options(**opts).load()
        stream = observe_source(stream, [q.name for q in self.config.queries])
        writer = (
            stream.writeStream.queryName(self._query_names[plan])
            .foreachBatch(stop_safe(run_batch, f"plan {plan!r}"))
            .option("checkpointLocation", self._checkpoints[plan])
            .trigger(processingTime=f"{self.config.trigger_s} seconds")
        )
        pool = next(p.pool for p in self._layout if p.name == plan)
        if pool is None:
            self._queries[plan] = writer.start()
            return
        # The query's execution thread inherits this thread's local properties when it
        # starts, so its micro-batches (foreachBatch included) run in the class's pool.
        sc = self.spark.sparkContext
        sc.setLocalProperty(POOL_PROPERTY, pool)
        try:
            self._queries[plan] = writer.start()
        finally:
            sc.setLocalProperty(POOL_PROPERTY, None)  # later jobs of this thread: default pool

    def restart_plan(self, plan: str) -> None:
        """Restart ``plan``'s streaming query from its checkpoint (after it failed or stopped).

        Spark replays the last logged but uncommitted micro-batch with its logged offsets, so
        the shedding decision of that batch is exactly the one taken before.
        """
        q = self._queries.get(plan)
        if q is None:
            raise ConfigError(f"unknown plan {plan!r}; this node runs {', '.join(self.plans)}")
        if q.isActive:
            q.stop()
        self._start_query(plan)

    def query_error(self, plan: str) -> str | None:
        """The exception that stopped ``plan``'s streaming query, if any."""
        q = self._queries.get(plan)
        if q is None or q.isActive:
            return None
        exc = q.exception()
        return None if exc is None else str(exc)

    def _stop_queries(self, drain_s: float = 30.0, *, keep_channel: bool = False) -> None:
        """Stop the streaming queries: first let the batches in flight finish (the controller
        hands out no new data), then stop; interrupting a running batch makes Spark log errors.
        ``keep_channel`` leaves the control channel open (:meth:`halt`).
        """
        if self._controller is not None:
            self._controller.pause()
        deadline = time.monotonic() + drain_s
        for plan, q in self._queries.items():
            with contextlib.suppress(Exception):
                while q.isActive and q.status["isTriggerActive"] and time.monotonic() < deadline:
                    time.sleep(0.05)
            if self.failure is None:  # a query that died before we stopped it: remember why
                with contextlib.suppress(Exception):
                    err = self.query_error(plan)
                    if err is not None:
                        self.failure = {
                            "plan": plan,
                            "phase": self._phase,
                            "after_batch": None,
                            "error": err,
                        }
            with contextlib.suppress(Exception):
                q.stop()
        self._queries = {}
        if self._listener is not None:
            with contextlib.suppress(Exception):
                # Let the listener bus deliver the last progress events before the listener
                # goes away (else py4j logs a failed callback at exit).
                self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(5000)
            with contextlib.suppress(Exception):
                self.spark.streams.removeListener(self._listener)
            self._listener = None
        if keep_channel:
            return
        if self._server is not None:
            self._server.close()
        self._server = None

    def halt(self) -> None:
        """Stop the streaming queries (batches in flight finish first) but keep the control
        channel and the feeds up, so :meth:`exact_results` can still read the run's input
        without competing with the streaming queries for the cores; :meth:`stop` ends the rest.
        """
        with self._lock:
            self._stop_queries(keep_channel=True)

    def stop(self) -> None:
        """Stop the streaming queries, the channel, the user queries' sinks and (if the node
        made it) the session."""
        with self._lock:
            self._stop_queries()
            for sink in self._user_sinks.values():
                with contextlib.suppress(Exception):
                    sink.close()
            self._user_sinks = {}
            for feed in self._feeds:
                with contextlib.suppress(Exception):
                    feed.close()
            self._feeds = []
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self._tmpdir = None
            if self._own_spark and self._spark is not None:
                self._spark.stop()
                self._spark = None

    def run(
        self,
        duration_s: float,
        on_tick: Callable[[NodeSnapshot], None] | None = None,
        tick_s: float = 1.0,
        before_stop: Callable[[Node], None] | None = None,
    ) -> None:
        """Start, call ``on_tick(snapshot)`` every ``tick_s`` seconds for ``duration_s``, stop.

        ``before_stop(node)``, when given, is called once the run's time is up and the
        streaming queries have stopped (:meth:`halt`), before the channel and the session stop
        (after-run work on the same input, e.g. :meth:`exact_results`); not after a failure.

        Raises
        ------
        RunFailedError
            A streaming query failed (the node is stopped first; :attr:`failure` says where).
        """
        if not (duration_s > 0 and tick_s > 0):
            raise ConfigError(f"duration_s and tick_s must be > 0, got {duration_s}, {tick_s}")
        self.start()
        try:
            end = time.monotonic() + duration_s
            while (left := end - time.monotonic()) > 0:
                time.sleep(min(tick_s, left))
                self._raise_failed()
                if on_tick is not None:
                    on_tick(self.snapshot())
            if before_stop is not None:
                self.halt()
                if self.failure is None:
                    before_stop(self)
        finally:
            self.stop()
        if self.failure is not None:  # a query died during the last tick or the drain
            raise RunFailedError(
                f"the streaming query of plan {self.failure['plan']!r} failed while "
                f"{self._phase_text()}: {short_error(self.failure['error'])}"
            )

    def _raise_failed(self) -> None:
        for plan in list(self._queries):
            err = self.query_error(plan)
            if err is not None:
                self._fail(plan, err)

    def _fail(self, plan: str, err: str) -> None:
        """Record the failure of ``plan``'s streaming query and raise :class:`RunFailedError`."""
        batches = self._controller.batches(plan) if self._controller is not None else []
        self.failure = {
            "plan": plan,
            "phase": self._phase,
            "after_batch": batches[-1]["batch_id"] if batches else None,
            "error": err,
        }
        raise RunFailedError(
            f"the streaming query of plan {plan!r} failed while {self._phase_text()}: "
            f"{short_error(err)}"
        )

    def _phase_text(self) -> str:
        return "measuring capacity" if self._phase.startswith("calibrate") else "running"

    def _make_policy(self) -> Policy:
        policy: Policy = self.config.make_policy()
        return policy

    # ------------------------------------------------------------------------- calibration

    def _calibrate(self) -> None:
        cfg = self.config
        assert cfg.overload is not None
        total = sum(q.rate * q.n_sources for q in cfg.queries)
        rounds: list[dict[str, Any]] = []
        scale = 1.0
        vary = True
        began = time.monotonic()
        self._calibration_rounds = rounds
        for r in range(CALIBRATION_ROUNDS):
            self._scale = scale
            share = 0.5 if r == 0 else 0.25
            states, batches = self._calibration_round(
                f"calibrate-{r}", share * cfg.calibrate_s, vary=vary
            )
            self._carry_costs = dict(states)
            rnd = calibration_round_capacity(
                states,
                batches,
                rate=total * scale,
                trigger_s=cfg.trigger_s,
                headroom=cfg.headroom,
            )
            rounds.append(rnd)
            report(
                f"measuring capacity, round {r + 1}: {rnd['rate']:,.0f} tuples/s arriving, "
                f"batches up to {rnd['largest_batch']:,} rows (operating point "
                f"{rnd['operating_rows']:,.0f}), capacity {rnd['capacity_tuples_per_s']:,.0f} "
                "tuples per second of batch time"
            )
            if not rnd["capacity_tuples_per_s"] > 0:
                raise RunFailedError(
                    f"calibration measured no capacity: the fixed cost of a micro-batch "
                    f"({rnd['overhead_s']:.2f} s) fills the budget of "
                    f"{ControllerConfig().span_limit} trigger intervals (headroom "
                    f"{cfg.headroom:g} x {cfg.trigger_s:g} s); raise trigger_s"
                )
            if rnd["batches_at_operating_point"] >= 2:
                break  # measured at the operating point itself
            # Measure again at the operating point: one interval's arrivals make a batch of n*
            # rows (at most CALIBRATION_STEP times the rate of this round). Once the fit is
            # local (this round's batches reached n*), that round keeps every batch at one
            # interval of arrivals: batches of n* rows, measured directly.
            vary = rnd["largest_batch"] < rnd["operating_rows"]
            need = rnd["operating_rows"] / cfg.trigger_s / total
            scale = min(scale * CALIBRATION_STEP, need)
        cap = rounds[-1]["capacity_tuples_per_s"]
        self._scale = cfg.overload * cap / total
        self._calibration = {
            "capacity_tuples_per_s": cap,
            "reached_operating_point": rounds[-1]["batches_at_operating_point"] >= 2,
            "configured_rate": total,
            "scale": self._scale,
            "target_rate": cfg.overload * cap,
            "overhead_s": rounds[-1]["overhead_s"],
            "per_tuple_s": rounds[-1]["per_tuple_s"],
            "wall_s": time.monotonic() - began,
            "rounds": rounds,
        }

    def _calibration_round(
        self, phase: str, min_s: float, vary: bool = True
    ) -> tuple[dict[str, CostModelState], list[dict[str, Any]]]:
        """Run the plan at the current rate scale, nothing shed, for at least ``min_s`` and
        :attr:`calibration_min_batches` measured batches (batch sizes varied unless ``vary``
        is False); the cost states and the batches."""
        self._launch(phase, calibrating=True, vary=vary)
        try:
            start = time.monotonic()
            # a round's batches can take 10-15 s when a shared machine is busy (a property
            # test's round saw 4 of its 5 in 62 s under a full test run): wait 2 minutes
            give_up = start + 4 * min_s + 120.0
            while True:
                time.sleep(0.25)
                self._raise_failed()
                observed = {p: len(self.controller.batches(p)) for p in self.plans}
                now = time.monotonic()
                enough = min(observed.values()) >= self.calibration_min_batches
                if enough and now - start >= min_s:
                    batches = [b for p in self.plans for b in self.controller.batches(p)]
                    return self.controller.cost_states(), batches
                if now > give_up:
                    raise RunFailedError(
                        f"calibration saw only {observed} micro-batches in {now - start:.0f} s "
                        f"(needs {self.calibration_min_batches}); the node is too slow for its "
                        "trigger interval: raise trigger_s"
                    )
        finally:
            self._stop_queries()
            self._controller = None

    @property
    def calibration_rounds(self) -> list[dict[str, Any]]:
        """The calibration rounds finished so far (also while calibrating)."""
        return list(getattr(self, "_calibration_rounds", []))

    # ------------------------------------------------------------------------- reporting

    def history(self) -> list[IntervalRecord]:
        """Every interval: estimated capacity vs processed, admissions, query SIC and kept.

        ``query_latency_s`` holds, per query, the largest latency of the results whose window
        ended in that interval (after the previous record's time, up to this one's).
        """
        hist = self.controller.history()
        df = self.store.to_pandas()
        if not hist or df.empty:
            return hist
        names = [q.name for q in self.config.queries]
        start_s = df["window_start"].map(pd.Timestamp.timestamp).to_numpy(dtype=np.float64)
        assert self.coordinator is not None
        _, end_feed = self.coordinator.feed_window(df["query_id"].to_numpy(), start_s)
        times = np.array([r.t for r in hist])
        slot = np.searchsorted(times, end_feed - 1e-6, side="left")
        per: dict[int, dict[str, float]] = {}
        for k, q, lat in zip(slot, df["query_id"], df["latency_s"], strict=True):
            if k < len(hist) and np.isfinite(lat):
                d = per.setdefault(int(k), {})
                name = names[int(q)]
                d[name] = max(d.get(name, -math.inf), float(lat))
        return [replace(r, query_latency_s=per.get(i, {})) for i, r in enumerate(hist)]

    def results(self) -> pd.DataFrame:
        """Result rows so far: :data:`RESULT_COLUMNS` (query name instead of query id)."""
        df = self.store.to_pandas()
        names = [q.name for q in self.config.queries]
        if df.empty:
            return pd.DataFrame(columns=list(RESULT_COLUMNS))
        df = df.assign(query=[names[int(i)] for i in df["query_id"]])
        return self._annotate(df)[list(RESULT_COLUMNS)].reset_index(drop=True)

    def user_results(self, query: str) -> pd.DataFrame:
        """The result rows of the user query ``query`` so far, in batch order: the function's
        columns with ``window_start``, ``sic``, ``query`` and ``batch_id`` (what its sink got).

        Raises
        ------
        ConfigError
            ``query`` is not a user query of this node.
        """
        users = [q.name for q in self.config.queries if q.kind == USER_KIND]
        if query not in users:
            raise ConfigError(
                f"{query!r} is not a user query of this node; its user queries: {users}"
            )
        qid = [q.name for q in self.config.queries].index(query)
        sink = self._sinks.get(self._plan_holding(qid)) if self._sinks else None
        if sink is None:
            return pd.DataFrame()
        return sink.user_store.rows_of(query).drop(columns=["plan"], errors="ignore")

    def _plan_holding(self, query_id: int) -> str:
        """The name of the plan that runs query ``query_id``."""
        return next(p.name for p in self._layout if query_id in p.windows)

    def _learn_key_texts(self, texts: pd.DataFrame) -> None:
        """Remember the texts of keys a log plan read (``query_id, key, key_text`` rows)."""
        names = [q.name for q in self.config.queries]
        for q, k, t in zip(texts["query_id"], texts["key"], texts["key_text"], strict=True):
            self._key_texts.setdefault(names[int(q)], {})[int(k)] = str(t)

    def _annotate(self, df: pd.DataFrame) -> pd.DataFrame:
        """Add ``key_text`` (the text of a text key, else null) and ``window_end_feed_s`` (the
        window's end in feed seconds: data time mapped back for a replayed file)."""
        texts = [
            self._key_texts.get(self.config.queries[int(q)].name, {}).get(int(k))
            if not pd.isna(k)
            else None
            for q, k in zip(df["query_id"], df["key"], strict=True)
        ]
        start = df["window_start"].map(pd.Timestamp.timestamp).to_numpy(dtype=np.float64)
        end = (
            self.coordinator.feed_window(df["query_id"].to_numpy(), start)[1]
            if self.coordinator is not None and self.coordinator.epoch_s is not None
            else np.full(len(df), np.nan)
        )
        return df.assign(
            key_text=pd.Series(texts, index=df.index, dtype=object), window_end_feed_s=end
        )

    def exact_results(self, until_s: float, *, from_s: float = 0.0) -> pd.DataFrame:
        """The exact answers (nothing shed) of every window ending by feed time ``until_s``
        (and starting at or after ``from_s``).

        A batch Spark job over the keep-all batch read of the spillway source; same columns as
        :meth:`results` (latency and production time are NaN: nothing was streamed).
        """
        from pyspark.sql import functions as F

        from spillway.spark.exact import exact_results

        if self._server is None:
            raise SpillwayError("exact_results needs a started node (its feeds serve the read)")
        frames = []
        for p in self._layout:
            by_window: dict[float, dict[str, list[int]]] = {}
            for kind, ids in p.kinds.items():
                if kind == USER_KIND:  # the user's own function: not a built-in exact answer
                    continue
                for i in ids:
                    by_window.setdefault(p.windows[i], {}).setdefault(kind, []).append(i)
            for w, kinds in by_window.items():
                until = math.floor(until_s / w + 1e-9) * w
                start = max(math.ceil(from_s / w - 1e-9) * w, 0.0)
                if until <= start:
                    continue
                opts = source_options(
                    self._server.address_text,
                    self._server.authkey,
                    p.name,
                    from_s=start,
                    until_s=until,
                )
                ids_w = [i for v in kinds.values() for i in v]
                df = self.spark.read.format("spillway").options(**opts).load()
                df = df.filter(F.col("query_id").isin(ids_w))
                if "error" in df.columns:  # a log's malformed records: set aside, not input
                    df = df.filter(F.col("error").isNull())
                df = df.persist()
                try:
                    for kind, kind_ids in kinds.items():
                        rows = (
                            df if len(kinds) == 1 else df.filter(F.col("query_id").isin(kind_ids))
                        )
                        exact = exact_results(kind, rows, w).assign(kind=kind)
                        frames.append(self._ending_by(exact, w, until))
                finally:
                    df.unpersist()
        names = [q.name for q in self.config.queries]
        if not frames:
            return pd.DataFrame(columns=list(RESULT_COLUMNS))
        out = pd.concat(frames, ignore_index=True)
        out = out.assign(query=[names[int(i)] for i in out["query_id"]])
        for c in ("latency_s", "produced_at"):
            if c not in out:
                out[c] = np.nan
        return self._annotate(out)[list(RESULT_COLUMNS)].reset_index(drop=True)

    def exact_user_results(
        self, query: str, until_s: float, *, from_s: float = 0.0
    ) -> pd.DataFrame:
        """The user query ``query``'s function over everything that arrived (nothing shed) in
        its windows within feed time ``[from_s, until_s)``: a keep-all batch read of the same
        input (for a topic, the same offsets its time index gives) and the same function;
        columns as :meth:`user_results` (``batch_id`` -1).

        Raises
        ------
        ConfigError
            ``query`` is not a user query of this node.
        SpillwayError
            The node was not started.
        """
        part = next((u for u in self._user_parts if u.name == query), None)
        if part is None:
            users = [u.name for u in self._user_parts]
            raise ConfigError(
                f"{query!r} is not a user query of this node; its user queries: {users}"
            )
        if self._server is None:
            raise SpillwayError(
                "exact_user_results needs a started node (its feeds serve the read)"
            )
        from pyspark.sql import functions as F

        w = part.window_us / 1e6
        until = math.floor(until_s / w + 1e-9) * w
        start = max(math.ceil(from_s / w - 1e-9) * w, 0.0)
        if until <= start:
            return pd.DataFrame()
        plan = self._plan_holding(part.query_id)
        opts = source_options(
            self._server.address_text, self._server.authkey, plan, from_s=start, until_s=until
        )
        rows = self.spark.read.format("spillway").options(**opts).load()
        rows = rows.filter(F.col("query_id") == part.query_id).filter("error IS NULL").persist()
        try:
            res, _ = evaluate(part, rows, -1)
        finally:
            rows.unpersist()
        return self._ending_by(res, w, until).reset_index(drop=True)

    def _ending_by(self, rows: pd.DataFrame, window_s: float, until_s: float) -> pd.DataFrame:
        """The rows of windows that end by feed time ``until_s``: the keep-all read takes the
        tuples that arrived by then, and one arriving exactly at ``until_s`` would otherwise
        open a window the streaming run had not closed."""
        if rows.empty:
            return rows
        end = self.controller.epoch_s + until_s + 1e-6
        starts = pd.to_datetime(rows["window_start"], utc=True)
        unix = (starts - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
        return rows[unix + window_s <= end]

    def snapshot(self) -> NodeSnapshot:
        """The node now: per query rate, kept share, result SIC, p95 latency vs target; per
        priority class (``dilos`` policy) its kept share and p95 latency over the STW against
        its delay target, and its manager's headroom."""
        c = self.controller
        cfg = self.config
        # One clock reading: the snapshot's feed time and the coordinator's Eq. 4 window end.
        t, now = c.read_clock()
        view = c.stw_view()
        window = float(view["window_s"]) or cfg.trigger_s
        sic = (
            self.coordinator.query_sic(now)
            if self.coordinator is not None
            else np.zeros(len(cfg.queries))
        )
        p95 = (
            self.coordinator.latency_p95(now)
            if self.coordinator is not None
            else np.full(len(cfg.queries), np.nan)
        )
        queries = []
        for i, q in enumerate(cfg.queries):
            arrived = int(view["arrived"][i])
            decided, kept = int(view["decided"][i]), int(view["admitted"][i])
            target = q.latency_target_s or (3 * cfg.trigger_s + q.window_s)
            end = self._feed_ends.get(q.name)
            queries.append(
                QueryStatus(
                    name=q.name,
                    kind=q.kind,
                    arrival_rate=arrived / window,
                    kept_fraction=kept / decided if decided else 1.0,
                    sic=float(sic[i]),
                    latency_p95_s=float(p95[i]),
                    latency_target_s=float(target),
                    rows_in=decided,
                    rows_kept=kept,
                    ended=end is not None and t >= end,
                )
            )
        hist = c.history()
        cap, processed = _recent_rates(hist, cfg.stw_s, cfg.trigger_s)
        return NodeSnapshot(
            t=t,
            capacity_tuples_per_s=float(cap),
            processed_tuples_per_s=float(processed),
            jain=float(jain_index(sic[np.isfinite(sic)])) if np.isfinite(sic).any() else math.nan,
            queries=tuple(queries),
            policy=cfg.policy if self._policy is None else self._policy.name,
            classes=c.class_status(t, cfg.stw_s),
        )


def _recent_rates(
    hist: list[IntervalRecord], stw_s: float, trigger_s: float
) -> tuple[float, float]:
    """(estimated capacity, processed) in tuples/s over the latest finished intervals that span
    one STW (``stw_s``), like the run report's rates.

    An interval whose micro-batch has not finished has processed nothing yet, so counting it
    would understate the rate: only finished intervals count (processed rows or a batch time).
    Each spans the time since the record before it (the first ``trigger_s``). Without a
    finished interval: the last record's capacity and 0 processed.

    >>> rec = lambda t, p, b: IntervalRecord(t=t, capacity_tuples=100.0, arrived_tuples=300,
    ...                                      admitted_tuples=100, processed_tuples=p, batch_s=b)
    >>> _recent_rates([rec(1.0, 100, 0.5), rec(2.0, 90, 0.5), rec(3.0, 0, 0.0)], 10.0, 1.0)
    (100.0, 95.0)
    >>> _recent_rates([rec(1.0, 100, 0.5), rec(2.0, 90, 0.5), rec(3.0, 0, 0.0)], 1.0, 1.0)
    (100.0, 90.0)
    """
    spans = [
        trigger_s if i == 0 or r.t <= hist[i - 1].t else r.t - hist[i - 1].t
        for i, r in enumerate(hist)
    ]
    cap = done = span = 0.0
    for r, dt in zip(reversed(hist), reversed(spans), strict=True):
        if span >= stw_s - 1e-9:
            break
        if r.processed_tuples > 0 or r.batch_s > 0:
            cap, done, span = cap + r.capacity_tuples, done + r.processed_tuples, span + dt
    if span <= 0:
        return (hist[-1].capacity_tuples / spans[-1] if hist else math.nan), 0.0
    return cap / span, done / span


def calibration_round_capacity(
    states: dict[str, CostModelState],
    batches: list[dict[str, Any]],
    *,
    rate: float,
    trigger_s: float,
    headroom: float,
) -> dict[str, Any]:
    """What one calibration round measured (module docstring, "Overload calibration").

    ``capacity_tuples_per_s`` is the throughput measured on the round's batches at the operating
    point (rows within :data:`NEAR_OPERATING_POINT` of ``n*``; at least two of them), else the
    fitted throughput at the operating point, at most the best measured ``rows / duration`` of
    the round's batches (the first :data:`WARMUP_BATCHES` left out; batches with no rows do not
    count). ``per_tuple_s`` is the fitted cost of one row, its kept-tuple and arrived-tuple
    terms together (nothing is shed while calibrating).

    >>> from spillway.control import CostModelConfig, initial_state, observe
    >>> cfg = CostModelConfig(warmup_batches=0)
    >>> st = initial_state(cfg)
    >>> for n in (1000, 2000, 1000, 3000) * 40:        # o = 0.2 s, k = 1e-4 s
    ...     st = observe(cfg, st, n, 0.2 + 1e-4 * n)
    >>> seen = [{"rows": n, "duration_s": 0.2 + 1e-4 * n} for n in (0, 0, 1000, 6000)]
    >>> r = calibration_round_capacity({"p": st}, seen, rate=1000.0, trigger_s=1.0,
    ...                                headroom=0.8)
    >>> round(r["operating_rows"], -2), round(r["capacity_tuples_per_s"], -2)
    (6000.0, 7500.0)
    >>> r = calibration_round_capacity({"p": st}, seen[:3], rate=1000.0, trigger_s=1.0,
    ...                                headroom=0.8)
    >>> round(r["capacity_tuples_per_s"])          # bounded by the best batch: 1000 / 0.3 s
    3333
    """
    est = [estimate(st) for st in states.values()]
    overhead = sum(e.overhead_s for e in est)
    # nothing is shed while calibrating: an admitted tuple costs its kept and its arrived part
    per_tuple = float(np.mean([e.per_tuple_s + e.per_arrived_s for e in est])) if est else math.nan
    span = batch_span(overhead, trigger_s, headroom, limit=ControllerConfig().span_limit)
    budget = headroom * span * trigger_s
    rows = (budget - overhead) / per_tuple if per_tuple > 0 else math.inf
    fitted = max(rows, 0.0) / budget
    seen = [b for b in batches[WARMUP_BATCHES:] if b["rows"] > 0 and b["duration_s"] > 0]
    best = max((b["rows"] / b["duration_s"] for b in seen), default=0.0)
    lo, hi = NEAR_OPERATING_POINT
    near = [b for b in seen if lo * rows <= b["rows"] <= hi * rows]
    if len(near) >= 2:  # batches at the operating point: their throughput, measured
        capacity = sum(b["rows"] for b in near) / sum(b["duration_s"] for b in near)
    else:
        capacity = min(fitted, best)
    return {
        "rate": float(rate),
        "batches": len(batches),
        "largest_batch": max((int(b["rows"]) for b in batches[WARMUP_BATCHES:]), default=0),
        "overhead_s": overhead,
        "per_tuple_s": per_tuple,
        "span": span,
        "operating_rows": max(rows, 0.0) if math.isfinite(rows) else math.inf,
        "fitted_tuples_per_s": fitted,
        "best_batch_tuples_per_s": best,
        "batches_at_operating_point": len(near),
        "capacity_tuples_per_s": capacity,
    }


def short_error(text: str, limit: int = 300) -> str:
    r"""One line out of a Spark/py4j error: the Python error a failed ``foreachBatch`` or
    worker reported when there is one, else the first line, at most ``limit`` characters.

    >>> short_error("org.apache.spark.SparkException: [FOREACH_BATCH_USER_FUNCTION_ERROR] An"
    ...             " error occurred\n  File x\nValueError: boom\n\tat org.apache...")
    'ValueError: boom'
    >>> short_error("java.io.EOFException\n\tat java.io.DataInputStream")
    'java.io.EOFException'
    """
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    py = [
        ln
        for ln in lines
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*:", ln)
        and not ln.startswith(("org.", "java.", "py4j.", "scala."))
    ]
    line = py[-1] if py else (lines[0] if lines else "unknown error")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _calibration_hold(controller: NodeController) -> Callable[[int, int], bool]:
    def hold(k_last: int, k: int) -> bool:
        gap = CALIBRATION_GAPS[controller.decisions % len(CALIBRATION_GAPS)]
        return k - k_last < gap

    return hold
