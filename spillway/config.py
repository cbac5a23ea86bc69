"""Frozen configs of a spillway node and its queries, and loading them from TOML.

A node hosts logical queries; queries with one window length share one Spark plan
(multiplexed by ``query_id``). The config is a value: validated on construction, round-trips
to a dict.

Examples
--------
>>> cfg = NodeConfig(queries=(QuerySpec(name="q1", kind="avg", feed="gaussian", rate=400.0),))
>>> cfg.queries[0].n_sources
1
>>> NodeConfig.from_dict(cfg.to_dict()) == cfg
True
>>> QuerySpec(name="bad", kind="median", feed="gaussian")
Traceback (most recent call last):
...
spillway.errors.UnknownNameError: query kind must be one of avg, avg_all, count, cov, group_avg, max, top5, user; got 'median'
>>> QuerySpec(name="fares", kind="group_avg", feed="taxi").n_sources
1
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError, InputDataError, SpillwayError, UnknownNameError

#: Default number of sources per query kind (THEMIS Table 1 and §7: AVG-all fragments have 10
#: sources, TOP-5 fragments 20 (10 CPU + 10 memory), COV 2; CoD's grouped aggregate one stream).
#: Its keys are the query kinds a config accepts (``spillway.spark.queries.QUERIES``).
DEFAULT_SOURCES: dict[str, int] = {
    "avg": 1,
    "max": 1,
    "count": 1,
    "avg_all": 10,
    "top5": 20,
    "cov": 2,
    "group_avg": 1,
    "user": 1,
}

#: The kind of a query the user writes: their own PySpark function over the query's rows
#: (:mod:`spillway.spark.user`).
USER_KIND = "user"

#: How a node's priority classes run on Spark (``NodeConfig.class_plans``): as lanes of one
#: plan, or one plan per class in FAIR scheduler pools.
CLASS_PLANS = ("lanes", "pools")


#: A function named in a config: ``module.path:attr`` or ``some/file.py:attr``.
_FUNCTION_REF = re.compile(r"[^:\s]+:[A-Za-z_][A-Za-z0-9_.]*")


#: Spark master URLs a node accepts (checked before Spark starts): ``local``, ``local[N]``,
#: ``local[*]``, ``local[N,F]``, ``local-cluster[N,C,M]``, ``spark://host:port[,host:port]``,
#: ``yarn``, ``k8s://...`` and ``mesos://...``.
MASTER_PATTERN = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?"
    r"|local-cluster\[\d+,\d+,\d+\]"
    r"|spark://[^\s:/,]+:\d+(,[^\s:/,]+:\d+)*"
    r"|yarn"
    r"|(k8s|mesos)://\S+"
)


def check_master(master: Any) -> None:
    """Raise :class:`ConfigError` unless ``master`` looks like a Spark master URL.

    >>> check_master("local[2]"), check_master("spark://127.0.0.1:7077")
    (None, None)
    >>> check_master("bogus://x")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: master must be a Spark master URL (local[2], local[*], spark://host:7077, yarn, k8s://...), got 'bogus://x'
    """
    if not (isinstance(master, str) and MASTER_PATTERN.fullmatch(master)):
        raise ConfigError(
            "master must be a Spark master URL (local[2], local[*], spark://host:7077, yarn, "
            f"k8s://...), got {master!r}"
        )


def feed_seed(seed: int, query_index: int) -> int:
    """Seed of the feed of the query at ``query_index`` (distinct per query, from the node seed).

    >>> feed_seed(0, 0) != feed_seed(0, 1)
    True
    """
    import numpy as np

    return int(np.random.SeedSequence([seed, query_index]).generate_state(1)[0])


def feed_settings(q: QuerySpec, seed: int, index: int, scale: float = 1.0) -> dict[str, Any]:
    """The keyword arguments of ``spillway.feeds.make_feed(q.feed, ...)`` for the query at
    ``index`` of a node seeded ``seed``: how a node builds its feeds, so anything that needs
    the node's feeds outside the node gets the same tuples.

    Parameters
    ----------
    q : the query.
    seed : the node's seed (``NodeConfig.seed``); the feed's seed is :func:`feed_seed`.
    index : the query's position in ``NodeConfig.queries``.
    scale : factor applied to the query's rate per source (the node's overload scale).

    Examples
    --------
    >>> s = feed_settings(QuerySpec(name="a", kind="avg", feed="gaussian", rate=100.0), 0, 1, 2.0)
    >>> s["rate"], s["seed"] == feed_seed(0, 1)
    (200.0, True)
    """
    return dict(
        n_sources=q.n_sources,
        rate=q.rate * scale,
        profile=q.profile,
        profile_options=dict(q.profile_options),
        seed=feed_seed(seed, index),
        **dict(q.feed_options),
        **({"records": True} if q.kind == USER_KIND and _is_log(q.feed) else {}),
    )


def _is_log(feed: str) -> bool:
    """Whether ``feed`` reads an external log (a user query then gets its whole records)."""
    from spillway.feeds import LOG_FEEDS

    return feed in LOG_FEEDS


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {rule}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class QuerySpec:
    """One logical query hosted by a node.

    Parameters
    ----------
    name : unique name of the query on the node.
    kind : query shape: ``avg``, ``max``, ``count``, ``avg_all``, ``top5``, ``cov`` (THEMIS
        Table 1) or ``group_avg`` (CoD's grouped aggregate: the mean value per ``key`` and
        window, e.g. on the ``taxi`` or ``tasks`` feed), or ``user``: the user's own PySpark
        function (``function``) over the query's rows of each micro-batch
        (:mod:`spillway.spark.user`). Every query of a node shares one Spark streaming query.
    feed : feed name in ``spillway.feeds.FEEDS`` (e.g. ``gaussian``, ``cluster``, ``replay``).
    feed_options : extra settings passed to the feed (e.g. ``path`` for ``replay``).
    sources : number of sources; default per kind (:data:`DEFAULT_SOURCES`).
    rate : tuples per second per source (mean, before the profile shapes it).
    profile : arrival-rate profile name in ``spillway.feeds.PROFILES`` (``constant``, ``step``,
        ``bursty``, ``pareto``).
    profile_options : extra settings of the profile.
    window_s : length of the query's tumbling window (results every window).
    latency_target_s : the result latency the user asks for; None means 3 trigger intervals
        plus the window length.
    function : a ``user`` query's function ``f(rows) -> DataFrame`` (rows: the query's
        DataFrame of one micro-batch, whole windows, with ``window_start`` and ``sic``), or its
        name as ``"module:function"`` or ``"path/to/file.py:function"`` (a relative path is
        taken from the config file's folder when read by :func:`load_config`, else from the
        working directory). Only for ``kind = "user"``, which needs it.
    sink : where a ``user`` query's results go, each batch exactly once: a table such as
        ``{kind = "parquet", path = "out/fares"}``, ``{kind = "kafka", topic = "fares-out"}``,
        ``{kind = "delta", path = "out/fares-delta"}`` or ``{kind = "console"}``
        (:mod:`spillway.sinks`), or a function ``f(rows, batch_id)``
        called with each batch's rows (pandas). None: the results stay in the node's store
        only.
    priority_class : the query's priority class (1 = highest) under the ``dilos`` policy
        (``NodeConfig.class_weights``); None: class 1.
    sic_sources : when the query is one fragment of a federated query, the sources of the
        whole query (``|S_q|`` of THEMIS Eq. 1 counts every fragment's sources), so a tuple
        carries its share of the federated query's SIC; None (default): ``sources``.
    """

    name: str
    kind: str
    feed: str
    feed_options: Mapping[str, Any] = field(default_factory=dict)
    sources: int | None = None
    rate: float = 400.0
    profile: str = "constant"
    profile_options: Mapping[str, Any] = field(default_factory=dict)
    window_s: float = 1.0
    latency_target_s: float | None = None
    function: str | Callable[..., Any] | None = None
    sink: Mapping[str, Any] | Callable[..., Any] | None = None
    priority_class: int | None = None
    sic_sources: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"query name must be a non-empty string, got {self.name!r}")
        if self.kind not in DEFAULT_SOURCES:
            kinds = ", ".join(sorted(DEFAULT_SOURCES))
            raise UnknownNameError(f"query kind must be one of {kinds}; got {self.kind!r}")
        if not isinstance(self.feed, str) or not self.feed:
            raise ConfigError(f"query {self.name!r}: feed must be a feed name, got {self.feed!r}")
        if self.sources is not None and (
            not isinstance(self.sources, int) or isinstance(self.sources, bool) or self.sources < 1
        ):
            raise ConfigError(
                f"query {self.name!r}: sources must be an int >= 1, got {self.sources!r}"
            )
        n = self.sic_sources
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ConfigError(
                f"query {self.name!r}: sic_sources must be an int >= 1 (the sources of the "
                f"whole federated query, THEMIS Eq. 1) or None, got {n!r}"
            )
        _positive(f"query {self.name!r}: rate", self.rate)
        _positive(f"query {self.name!r}: window_s", self.window_s)
        if self.latency_target_s is not None:
            _positive(f"query {self.name!r}: latency_target_s", self.latency_target_s)
        object.__setattr__(self, "feed_options", dict(self.feed_options))
        object.__setattr__(self, "profile_options", dict(self.profile_options))
        c = self.priority_class
        if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 1):
            raise ConfigError(
                f"query {self.name!r}: priority_class must be an int >= 1 (1 = highest), got {c!r}"
            )
        self._check_user_parts()

    def _check_user_parts(self) -> None:
        """``function`` and ``sink`` belong to user queries: needed there, refused elsewhere."""
        where = f"query {self.name!r}"
        if self.kind != USER_KIND:
            given = [k for k in ("function", "sink") if getattr(self, k) is not None]
            if given:
                raise ConfigError(
                    f"{where}: {' and '.join(given)} only apply to kind = 'user' (the user's own "
                    f"function); a {self.kind} query's results stay in the node's store"
                )
            return
        f = self.function
        if f is None:
            raise ConfigError(
                f"{where}: a user query needs a function: f(rows) -> DataFrame, or its name as "
                "'module:function' or 'path/to/file.py:function'"
            )
        if not callable(f) and not (isinstance(f, str) and _FUNCTION_REF.fullmatch(f)):
            raise ConfigError(
                f"{where}: function must be a callable or 'module:function' / "
                f"'path/to/file.py:function', got {f!r}"
            )
        if self.sink is not None and not callable(self.sink):
            if not isinstance(self.sink, Mapping) or not isinstance(self.sink.get("kind"), str):
                raise ConfigError(
                    f'{where}: sink must be a table with a kind (e.g. {{kind = "parquet", '
                    f'path = "out"}}) or a function f(rows, batch_id), got {self.sink!r}'
                )
            object.__setattr__(self, "sink", dict(self.sink))

    @property
    def n_sources(self) -> int:
        """Number of sources (the explicit value or the kind's default)."""
        return self.sources if self.sources is not None else DEFAULT_SOURCES[self.kind]


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """A spillway node: its queries, shedding policy and timing.

    Parameters
    ----------
    queries : the logical queries the node hosts (names unique).
    policy : policy name in ``spillway.policies.POLICIES``.
    policy_options : settings of the policy (its config class's fields, e.g. ``{"b": 0.98}``
        for ``cod`` or ``uniform``: a fixed shed fraction, shed at every interval); checked
        when the config is made.
    seed : seed of feeds and policy; the same seed and config give the same decisions.
    trigger_s : trigger interval = shedding interval (docs/design.md, "Data flow on Spark").
    stw_s : source time window for SIC (THEMIS §4; 10 s in the paper).
    overload : when set, the node first measures its capacity and then scales every query's
        rate so the total arrival rate is ``overload`` times that capacity.
    calibrate_s : how long the capacity measurement runs when ``overload`` is set.
    headroom : fraction of each interval the controller may fill (the rest absorbs noise).
    probe_every : every this many decisions, when the last batches finished within their
        budget, the node admits half as much again as its cost model allows, so the model
        sees batches of another size and can tell its per-tuple cost from its fixed one
        (:mod:`spillway.spark.controller`, "Probes"); 0 (default): never.
    master : Spark master URL (``local[2]`` or ``spark://127.0.0.1:7077``).
    checkpoint_dir : where streaming checkpoints go (None: a temporary folder).
    load_manager : a Pham load manager (``aurora``, ``ctrl``, ``seamless``, ``aloma``) that
        decides each interval's drop fraction from the statistics the node measures on Spark
        (:mod:`spillway.spark.load_control`); None (default): the cost-model budget decides.
    load_target_intervals : the load manager's delay target ``D``, in trigger intervals.
    load_manager_options : the load manager's own settings (e.g. ``{"capacity": 0.7}``, the
        headroom ``H`` of Aurora and CTRL, the initial one of SEaMLeSS and ALoMa). With the
        ``dilos`` policy the manager runs once per priority class (:meth:`class_control`).
    class_weights : the priority classes' weights, class 1 first (Pham QN-A: 6, 3, 1); only
        with the ``dilos`` policy.
    class_target_intervals : each class's delay target ``D`` in trigger intervals (3, 4, 5).
    class_redistribution : whether DILoS lends capacity between the classes (Pham §6.1.3);
        False: separate per-class managers, each held to its weights' share (nothing lent).
    class_crc_cycles : intervals per capacity redistribution cycle (Pham: 10).
    class_layout : who decides the classes' drops: ``per-class`` (default; one manager per
        class), ``common`` (one manager for the node, the same drop for every class) or
        ``none`` (nothing shed), Pham Table 8's configurations; ``common`` and ``none`` need
        ``class_redistribution = false``.
    class_plans : how the priority classes run on Spark (one of :data:`CLASS_PLANS`; only with
        the ``dilos`` policy): ``lanes`` (default), every class as lanes of the node's one
        plan (one streaming query, one fixed micro-batch cost per interval); ``pools``, one
        plan (streaming query) per class, each in its own Spark FAIR scheduler pool weighted
        by ``class_weights`` (:mod:`spillway.spark.pools`; docs/design.md, "Priority classes
        on the Spark node").
    class_scheduler : how the classes' admitted windows reach the batches (one of
        :data:`~spillway.spark.class_control.SCHEDULERS`; only with the ``dilos`` policy):
        ``none`` (default), all in the next batch; ``cqc``, Pham's CQC weighted round robin:
        the windows a class cannot run within its quota of the batch wait for later ones, so
        an overloaded class's own latency grows, not every class's.

    >>> q = QuerySpec(name="q", kind="avg", feed="gaussian", priority_class=1)
    >>> NodeConfig(queries=(q,), policy="dilos", load_manager="aurora", class_plans="pool")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: class_plans must be one of lanes, pools, got 'pool'
    """

    queries: tuple[QuerySpec, ...]
    policy: str = "balance-sic"
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    trigger_s: float = 1.0
    stw_s: float = 10.0
    overload: float | None = None
    calibrate_s: float = 20.0
    headroom: float = 0.8
    probe_every: int = 0
    master: str = "local[2]"
    checkpoint_dir: str | None = None
    load_manager: str | None = None
    load_target_intervals: float = 3.0
    load_manager_options: Mapping[str, Any] = field(default_factory=dict)
    class_weights: tuple[int, ...] = (6, 3, 1)
    class_target_intervals: tuple[float, ...] = (3.0, 4.0, 5.0)
    class_redistribution: bool = True
    class_crc_cycles: int = 10
    class_layout: str = "per-class"
    class_plans: str = "lanes"
    class_scheduler: str = "none"

    def __post_init__(self) -> None:
        qs = tuple(self.queries)
        object.__setattr__(self, "queries", qs)
        if not qs:
            raise ConfigError("a node needs at least one query: add a [[query]] table")
        names = [q.name for q in qs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"query names must be unique, repeated: {', '.join(dup)}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")
        if not isinstance(self.policy_options, Mapping):
            raise ConfigError(
                f"policy_options must be a table of policy settings, got {self.policy_options!r}"
            )
        object.__setattr__(self, "policy_options", dict(self.policy_options))
        if self.policy_options:
            self.make_policy()  # the options must fit the policy: fail now, not at run time
        _positive("trigger_s", self.trigger_s)
        _positive("stw_s", self.stw_s)
        _positive("calibrate_s", self.calibrate_s)
        if self.stw_s < self.trigger_s:
            raise ConfigError(
                f"stw_s must be >= trigger_s (the STW slides once per trigger), got {self.stw_s}"
            )
        if self.overload is not None:
            _positive("overload", self.overload)
        if not (0 < self.headroom <= 1):
            raise ConfigError(f"headroom must be in (0, 1], got {self.headroom!r}")
        every = self.probe_every
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ConfigError(f"probe_every must be an int >= 0 (0: no probes), got {every!r}")
        check_master(self.master)
        if not isinstance(self.load_manager_options, Mapping):
            raise ConfigError(
                "load_manager_options must be a table of load manager settings, got "
                f"{self.load_manager_options!r}"
            )
        object.__setattr__(self, "load_manager_options", dict(self.load_manager_options))
        if self.load_manager is None and self.load_manager_options:
            raise ConfigError(
                "load_manager_options are set but load_manager is not: name the load manager "
                "(aurora, ctrl, seamless or aloma) or remove the options"
            )
        self.load_control()  # a bad name, target or setting fails now, not at run time
        object.__setattr__(self, "class_weights", tuple(self.class_weights))
        object.__setattr__(self, "class_target_intervals", tuple(self.class_target_intervals))
        if self.policy != "dilos":
            classed = [q.name for q in qs if q.priority_class is not None]
            if classed:
                raise ConfigError(
                    f"queries {classed} set priority_class but the policy is {self.policy!r}: "
                    'classes need policy = "dilos" (or remove priority_class)'
                )
        elif self.load_manager is None:
            raise ConfigError(
                'policy "dilos" runs one load manager per priority class: set load_manager '
                "(aurora, ctrl, seamless or aloma)"
            )
        self.class_control()  # bad classes, weights or targets fail now
        if self.class_plans not in CLASS_PLANS:
            raise ConfigError(
                f"class_plans must be one of {', '.join(CLASS_PLANS)}, got {self.class_plans!r}"
            )
        for name, value, default in (
            ("class_plans", self.class_plans, "lanes"),
            ("class_scheduler", self.class_scheduler, "none"),
        ):
            if value != default and self.policy != "dilos":
                raise ConfigError(
                    f"{name} {value!r} runs priority classes, which need policy = "
                    f'"dilos" (the policy is {self.policy!r}): set {name} = "{default}"'
                )

    def class_control(self) -> Any:
        """The :class:`~spillway.spark.class_control.ClassControlConfig` of the ``dilos``
        policy (one ``load_manager`` per priority class), or None for any other policy.

        >>> cfg = NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="gaussian",
        ...                                     priority_class=2),),
        ...                  policy="dilos", load_manager="aloma")
        >>> cc = cfg.class_control()
        >>> cc.query_class, cc.weights, cc.target_intervals, cc.dilos
        ((2,), (6, 3, 1), (3.0, 4.0, 5.0), True)
        >>> cfg.load_control() is None
        True
        """
        if self.policy != "dilos":
            return None
        from spillway.spark.class_control import ClassControlConfig

        assert self.load_manager is not None
        return ClassControlConfig(
            manager=self.load_manager,
            query_class=tuple(q.priority_class or 1 for q in self.queries),
            weights=self.class_weights,
            target_intervals=self.class_target_intervals,
            dilos=self.class_redistribution,
            crc_cycles=self.class_crc_cycles,
            settings=self.load_manager_options,
            layout=self.class_layout,
            scheduler=self.class_scheduler,
        )

    def load_control(self) -> Any:
        """The :class:`~spillway.spark.load_control.LoadControlConfig` this config names, or
        None (the cost-model budget decides, or the ``dilos`` policy runs the manager per
        class: :meth:`class_control`).

        >>> cfg = NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="gaussian"),),
        ...                  load_manager="aloma", load_target_intervals=4)
        >>> cfg.load_control().manager, cfg.load_control().target_intervals
        ('aloma', 4)
        """
        if self.load_manager is None or self.policy == "dilos":
            return None
        from spillway.spark.load_control import LoadControlConfig

        return LoadControlConfig(
            manager=self.load_manager,
            target_intervals=self.load_target_intervals,
            settings=self.load_manager_options,
        )

    def check_feeds(self) -> None:
        """Build every query's feed (and its rate profile) once, so a bad feed name, option,
        profile or unreadable file fails now, naming the query, before Spark starts.

        >>> cfg = NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="gaussian",
        ...                                     feed_options={"sd": 1.0}),))
        >>> cfg.check_feeds()
        Traceback (most recent call last):
        ...
        spillway.errors.ConfigError: query 'q' (feed 'gaussian'): feed 'gaussian': unknown option(s) sd; known: mean, std
        """
        from spillway.feeds import LOG_FEEDS, make_feed

        for i, q in enumerate(self.queries):
            if self.overload is not None and q.feed in LOG_FEEDS:
                raise ConfigError(
                    f"query {q.name!r} (feed {q.feed!r}): overload scales the rates of generated "
                    "feeds, and a log's rate is its producer's; remove overload (the node sheds "
                    "at the capacity it measures) or produce at the rate you want"
                )
            try:
                make_feed(q.feed, **feed_settings(q, self.seed, i))
            except SpillwayError as e:
                raise type(e)(f"query {q.name!r} (feed {q.feed!r}): {e}") from None
            except TypeError as e:
                raise ConfigError(f"query {q.name!r} (feed {q.feed!r}): {e}") from None

    def make_policy(self) -> Any:
        """The policy this config names, with its options and the node's seed.

        >>> NodeConfig(queries=(QuerySpec(name="q", kind="group_avg", feed="taxi"),),
        ...            policy="cod", policy_options={"b": 0.98}).make_policy().config.b
        0.98
        >>> NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="gaussian"),),
        ...            policy="cod", policy_options={"bb": 0.9})
        Traceback (most recent call last):
        ...
        spillway.errors.ConfigError: policy 'cod' has no setting bb; its settings are: allocation, b, confidence, kind, n_min, over_budget, seed, target_error
        """
        from spillway.policies import make_policy

        return make_policy(self.policy, seed=self.seed, **self.policy_options)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (TOML/JSON-ready) that :meth:`from_dict` turns back into this config."""
        d = asdict(self)
        d["queries"] = [
            {k: _named(v) if k in ("function", "sink") else v for k, v in asdict(q).items()}
            for q in self.queries
        ]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeConfig:
        """Build a config from a dict (as read from TOML); unknown keys are errors."""
        data = dict(data)
        queries = data.pop("queries", data.pop("query", None))
        if not isinstance(queries, list):
            raise ConfigError("config needs a list of queries ([[query]] tables in TOML)")
        _reject_unknown("node", data, cls)
        qs = []
        for i, q in enumerate(queries):
            if not isinstance(q, Mapping):
                raise ConfigError(f"query #{i + 1} must be a table, got {type(q).__name__}")
            _reject_unknown(f"query #{i + 1}", q, QuerySpec)
            lacking = [k for k in ("name", "kind", "feed") if k not in q]
            if lacking:
                raise ConfigError(
                    f"query #{i + 1}: missing required key(s) {', '.join(lacking)}; every "
                    "[[query]] needs name, kind and feed"
                )
            qs.append(QuerySpec(**q))
        return cls(queries=tuple(qs), **data)


def _named(value: Any) -> Any:
    """A callable as its ``module:qualname`` (what a config file would name), else as is."""
    if callable(value):
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', '?')}"
    return value


def _reject_unknown(where: str, data: Mapping[str, Any], cls: type) -> None:
    known = {f.name for f in fields(cls)} - {"queries"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The TOML table in ``path``; ``what`` names the file in errors.

    Raises
    ------
    InputDataError
        The file cannot be read or is not valid TOML (one line naming the file).

    >>> read_toml("/nonexistent.toml", "federation file")
    Traceback (most recent call last):
    ...
    spillway.errors.InputDataError: cannot read federation file '/nonexistent.toml': No such file or directory
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputDataError(f"cannot read {what} {str(p)!r}: {e.strerror or e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputDataError(f"{what} {str(p)!r} is not valid TOML: {e}") from None


def load_config(path: str | Path, **overrides: Any) -> NodeConfig:
    """Read a node config from a TOML file; ``overrides`` (not None) replace top-level keys.

    Raises
    ------
    InputDataError
        The file cannot be read or is not valid TOML.
    ConfigError
        A value breaks a rule (the message names it).
    """
    data = read_toml(path, "config file")
    data.update({k: v for k, v in overrides.items() if v is not None})
    for q in data.get("query", data.get("queries", [])) or []:
        if isinstance(q, dict):  # a user query's function file is found beside the config
            q["function"] = _beside(Path(path), q.get("function"))
    return NodeConfig.from_dict(data)


def _beside(config: Path, function: Any) -> Any:
    """A ``"file.py:function"`` with a relative file, made relative to the config's folder.

    >>> _beside(Path("conf/node.toml"), "queries.py:mean")
    'conf/queries.py:mean'
    >>> _beside(Path("conf/node.toml"), "mypkg.queries:mean")
    'mypkg.queries:mean'
    """
    if not isinstance(function, str) or ":" not in function:
        return function
    where, _, attr = function.rpartition(":")
    if not where.endswith(".py") or Path(where).expanduser().is_absolute():
        return function
    return f"{config.parent / where}:{attr}"
