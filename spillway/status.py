"""What a running node reports: live snapshots and per-interval records.

The Spark runtime produces these values; the live terminal view and the run report consume them.
They are plain frozen values with no Spark inside, so views and reports are testable alone.

Examples
--------
>>> q = QueryStatus(name="q1", kind="avg", arrival_rate=400.0, kept_fraction=0.5, sic=0.5,
...                 latency_p95_s=1.2, latency_target_s=4.0, rows_in=4000, rows_kept=2000)
>>> q.on_target
True
>>> snap = NodeSnapshot(t=10.0, capacity_tuples_per_s=800.0, processed_tuples_per_s=790.0,
...                     jain=1.0, queries=(q,))
>>> snap.utilisation
0.9875
>>> c = ClassStatus(klass=3, weight=1, queries=("q3",), arrived=1000, dropped=250,
...                 latency_p95_s=4.5, latency_target_s=5.0, headroom=0.08, share=0.1,
...                 arrived_total=9000, dropped_total=4500)
>>> c.kept_fraction, c.loss, c.on_target
(0.75, 0.5, True)
>>> c.as_dict()["class"], c.as_dict()["loss"]
(3, 0.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class QueryStatus:
    """One logical query as the node sees it now (rates over the recent STW).

    ``sic`` is the query's result SIC over the STW (THEMIS Eq. 4); ``kept_fraction`` is admitted /
    arrived tuples; latencies run from tuple arrival to the result being available; ``ended``
    says the query's feed has ended (a replayed file without ``loop``): no more results come.
    """

    name: str
    kind: str
    arrival_rate: float
    kept_fraction: float
    sic: float
    latency_p95_s: float
    latency_target_s: float
    rows_in: int
    rows_kept: int
    ended: bool = False

    @property
    def on_target(self) -> bool:
        """Whether the p95 latency meets the target (NaN, i.e. no result yet, does not; a query
        whose feed ended is not held to it)."""
        if self.ended:
            return True
        return math.isfinite(self.latency_p95_s) and self.latency_p95_s <= self.latency_target_s


@dataclass(frozen=True, kw_only=True)
class ClassStatus:
    """One priority class as the node sees it now (``dilos`` policy,
    :mod:`spillway.spark.class_control`), from the class controller's per-interval records.

    ``arrived`` and ``dropped`` are the class's tuples decided and shed by the decisions of the
    recent STW (``kept_fraction`` their complement, 1 when nothing arrived); ``latency_p95_s``
    the row-weighted p95 response time (arrival → result) of the class's rows whose batches
    finished in that STW (NaN: none did), against its delay target ``latency_target_s`` (D);
    ``headroom`` the class manager's capacity estimate H after the latest decision (CPU-seconds
    per second; NaN without a manager) and ``share`` the class's share of the node's capacity;
    ``arrived_total`` and ``dropped_total`` count since the run began (``loss``, the run
    report's figure).
    """

    klass: int
    weight: int
    queries: tuple[str, ...]
    arrived: int
    dropped: int
    latency_p95_s: float
    latency_target_s: float
    headroom: float
    share: float
    arrived_total: int = 0
    dropped_total: int = 0

    @property
    def kept_fraction(self) -> float:
        """Kept over decided tuples in the recent STW (1 when nothing arrived)."""
        return 1.0 - self.dropped / self.arrived if self.arrived > 0 else 1.0

    @property
    def loss(self) -> float:
        """Shed over arrived tuples since the run began (NaN before any arrived)."""
        return self.dropped_total / self.arrived_total if self.arrived_total > 0 else math.nan

    @property
    def on_target(self) -> bool:
        """Whether the p95 response time meets D (NaN, no result yet, does not)."""
        return math.isfinite(self.latency_p95_s) and self.latency_p95_s <= self.latency_target_s

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain values (``class`` for ``klass``), derived ones included."""
        return {
            "class": self.klass,
            "weight": self.weight,
            "queries": list(self.queries),
            "arrived": self.arrived,
            "dropped": self.dropped,
            "kept_fraction": self.kept_fraction,
            "latency_p95_s": self.latency_p95_s,
            "latency_target_s": self.latency_target_s,
            "on_target": self.on_target,
            "headroom": self.headroom,
            "share": self.share,
            "arrived_total": self.arrived_total,
            "dropped_total": self.dropped_total,
            "loss": self.loss,
        }


@dataclass(frozen=True, kw_only=True)
class NodeSnapshot:
    """The node now: estimated capacity, what it processed, fairness, every query and, on a
    node with priority classes, every class (empty otherwise)."""

    t: float
    capacity_tuples_per_s: float
    processed_tuples_per_s: float
    jain: float
    queries: tuple[QueryStatus, ...] = ()
    policy: str = ""
    classes: tuple[ClassStatus, ...] = ()

    @property
    def utilisation(self) -> float:
        """Processed rate over estimated capacity (NaN before the capacity is known)."""
        if not self.capacity_tuples_per_s > 0:
            return math.nan
        return self.processed_tuples_per_s / self.capacity_tuples_per_s


@dataclass(frozen=True, kw_only=True)
class IntervalRecord:
    """One shedding interval (one micro-batch decision) of the node.

    ``capacity_tuples`` is what the cost model estimated the interval could process;
    ``processed_tuples`` is what Spark actually processed for that interval's batches;
    ``batch_s`` is the measured micro-batch duration; ``span`` the intervals the decision's
    batch spans, ``overhead_s``, ``per_tuple_s`` (a kept tuple) and ``per_arrived_s`` (any
    arrived tuple, kept or shed) the cost model's fit when it was made; ``probe`` whether the
    decision probed the cost model (``capacity_tuples`` raised by ``probe_gain``:
    :mod:`spillway.spark.controller`, "Probes"). Per-query dicts are keyed by query name:
    ``query_sic`` is the SIC measured at the decision (THEMIS Eq. 4 over the query's latest
    complete STW, :mod:`spillway.quality.stw_account`), ``query_sic_projected`` what the
    shedder projected for the STW its decision ends (THEMIS §6 local projection);
    ``query_arrived`` and ``query_admitted`` the query's tuples decided and kept (``query_kept``
    is their ratio, 1 when nothing arrived).

    ``query_groups`` and ``query_groups_kept`` are filled only by decisions of a policy that
    admits per group (``Policy.needs_groups``, e.g. CoD): per query, the distinct group keys
    among the tuples decided, and those of which at least one tuple was kept; their difference
    is CoD's "missing groups" (§VII-C2). Empty when the decision did not look at groups.
    ``query_groups_unseen``: per query, the groups estimated to have arrived without a tuple in
    a bounded group read's sample (:mod:`spillway.quality.unseen`), lost without being seen;
    0 for a query whose arrivals were all read.

    >>> r = IntervalRecord(t=1.0, capacity_tuples=50.0, arrived_tuples=900, admitted_tuples=50,
    ...                    processed_tuples=0, batch_s=0.0, query_groups={"q": 40},
    ...                    query_groups_kept={"q": 38})
    >>> r.missing_groups
    {'q': 2}
    """

    t: float
    capacity_tuples: float
    arrived_tuples: int
    admitted_tuples: int
    processed_tuples: int
    batch_s: float
    query_sic: dict[str, float] = field(default_factory=dict)
    query_sic_projected: dict[str, float] = field(default_factory=dict)
    query_kept: dict[str, float] = field(default_factory=dict)
    query_arrived: dict[str, int] = field(default_factory=dict)
    query_admitted: dict[str, int] = field(default_factory=dict)
    query_latency_s: dict[str, float] = field(default_factory=dict)
    query_groups: dict[str, int] = field(default_factory=dict)
    query_groups_kept: dict[str, int] = field(default_factory=dict)
    query_groups_unseen: dict[str, float] = field(default_factory=dict)
    span: int = 1
    overhead_s: float = math.nan
    per_tuple_s: float = math.nan
    per_arrived_s: float = math.nan
    probe: bool = False

    @property
    def missing_groups(self) -> dict[str, int]:
        """Per query, groups with tuples decided of which nothing was kept (empty when the
        decision did not look at groups)."""
        return {q: n - self.query_groups_kept.get(q, 0) for q, n in self.query_groups.items()}


@dataclass(frozen=True, kw_only=True)
class CalibrationProgress:
    """The node's capacity measurement while it runs (``spillway.spark.node``, "Overload
    calibration"): the round under way and the rounds finished.

    ``round`` counts from 1 (at most ``max_rounds``); ``elapsed_s`` runs from the first
    calibration event, ``min_s`` is the configured ``calibrate_s``. For the round under way:
    ``arrival_rate`` (tuples/s decided over its feed time), its measured ``batches``, the
    ``largest_batch`` in rows and ``best_tuples_per_s``, the best rows per second of batch
    time of a batch after the warm-up ones: the bound a round's capacity cannot exceed.
    ``capacity_tuples_per_s`` is the last finished round's capacity (NaN before the first);
    ``rounds`` holds ``(arrival rate, capacity)`` of every finished round, in tuples/s.

    >>> p = CalibrationProgress(round=2, elapsed_s=14.0, min_s=20.0, batches=3,
    ...                         capacity_tuples_per_s=24000.0)
    >>> round(p.done, 2)
    0.7
    """

    round: int
    elapsed_s: float
    min_s: float
    max_rounds: int = 5
    arrival_rate: float = math.nan
    batches: int = 0
    largest_batch: int = 0
    best_tuples_per_s: float = math.nan
    capacity_tuples_per_s: float = math.nan
    rounds: tuple[tuple[float, float], ...] = ()

    @property
    def done(self) -> float:
        """Share of the planned minimum time elapsed, in [0, 1] (a round may run longer)."""
        if not self.min_s > 0:
            return 1.0
        return min(max(self.elapsed_s / self.min_s, 0.0), 1.0)
