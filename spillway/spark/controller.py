"""NodeController: one joint shedding decision per interval over every plan of the node.

The controller lives in the driver. The spillway sources of the node's Spark plans reach it over
the loopback channel (:mod:`spillway.spark.channel`); the progress listener feeds it measured
batches (:mod:`spillway.spark.listener`). It holds, per plan (one Spark streaming query per
window length, normally exactly one per node, multiplexing every logical query of that window
whatever its kind, :class:`PlanSpec`), the plan's lanes (query, source), the feeds, and per
lane the index up to which tuples have been decided (admitted or shed).

Cost per plan, shared by its lanes
----------------------------------
Each plan has one cost model (:mod:`spillway.control.cost_model`: overhead + per-tuple cost
per micro-batch), fed with the plan's measured batches. The kinds of a mixed plan run in one
Spark job, so the time of one kind is not separable from the others' and every lane of a plan
costs the same fitted per-tuple time: the mean cost of a tuple in the mix the plan processed.
Consequences: the policy cannot prefer cheap tuples (an AVG tuple costs less than a TOP-5
tuple, but shedding one saves the same budget), which is THEMIS's node model (the buffer is
charged per tuple, not per operator); and when shedding changes the mix of admitted kinds, the
real mean cost drifts from the fitted one until the model (forgetting, shift detection)
catches up: the budget is the same, the tuples that fit it change. One plan also means one
fixed overhead per interval instead of one per kind.

One decision per interval boundary, for ALL plans
--------------------------------------------------
Interval boundaries are multiples of the trigger interval in feed time (seconds since the node's
epoch). When a plan's source asks for its next offset and a new boundary ``k`` is due, the
controller decides for every plan at once (THEMIS's node-level shedder over the whole input
buffer):

1. per plan, the batch end ``t_end = floor(k·trigger / window) · window`` (batches hold whole
   windows, docs/design.md), and per lane the tuples arrived by then (``feed.count``);
2. backlog per lane = arrived by ``t_end`` − decided;
3. tuple SIC per lane from a :class:`~spillway.quality.StwCounter` pushed with every slide's
   arrivals (THEMIS Eq. 1 over the sliding STW, re-estimated every interval); a link lane's
   tuples are priced with the SIC they carry instead (below, "Link lanes");
4. capacity: a fixed number of tuples per interval when configured, else the node budget of
   executor time (:func:`spillway.control.node_budget`: ``headroom · interval − Σ overheads`` of
   the plans that run) with each lane costing its plan's fitted per-tuple time, at most
   ``capacity_reach`` times the rows the plans have shown they process (below); the overload
   detector (:func:`spillway.control.detect`) decides whether to shed at all, unless the policy
   ``sheds_always`` (a shed fraction the user fixed, e.g. CoD or Uniform with ``b = 0.98``):
   that policy is asked at every decision, with the detector's admit budget under overload and
   the capacity otherwise (the backlog's total cost when there is no capacity); calibration
   still admits everything;
5. the query SIC base (below) and the policy's ``decide(backlog, capacity)``; the policy's RNG
   is re-seeded from ``(seed, k)`` first, so a decision is a pure function of the state and the
   input (replays and logical-clock runs give identical decisions). What the policy is given
   depends on what it says it needs (:class:`~spillway.policies.base.Policy`):

   - ``needs_groups`` (CoD grouped and join): every lane is split into *units*, one per
     distinct ``key`` among its waiting tuples ``[decided, arrived)``: one vectorised key scan
     (``feed.keys``; of a bounded sample scaled to the lane when the range is long:
     :data:`GROUP_SAMPLE`, :data:`LOG_GROUP_SAMPLE` for logs) and one count of the distinct
     keys per lane (``np.bincount`` when the keys span a small range, ``np.unique``
     otherwise); units inherit the lane's query, source, tuple
     SIC and per-tuple cost (Eq. 1 is per source, so all tuples of a lane share one SIC); a
     lane with nothing waiting stays as one empty unit, so a join still sees all its streams.
     The lane's keep is the sum of its units' keeps;
   - ``needs_stats`` (CoD scalar): the mean and population variance of the ``value`` of every
     lane's (or unit's) waiting tuples, from one payload scan, in ``Backlog.stats``.

   The scans run only when the policy is asked: a node that admits everything needs neither.
   Reason for scanning at decision time rather than counting groups as tuples arrive: the
   controller never sees tuples (feeds are pure functions of the tuple index), and one scan of
   the keys costs about 0.6 of generating the whole payload (taxi feed, 50,000 tuples: 341 ns
   against 580 ns a tuple), a few milliseconds per decision at 50,000 tuples a second;
6. every lane is now decided up to its ``t_end``; each plan gets a *segment* (boundary, start
   and end indices, keep counts, SIC and, for a per-group decision, every group's key, count
   and keep per lane) appended to its pending list.

A plan's source gets its pending segments merged into one offset: end indices of the last,
keep counts summed (they cover consecutive ranges), SIC keep-weighted (so the SIC the batch
carries equals the SIC admitted), and per group the keeps summed over the segments. Segments
keep the full per-group arrays (every group of the range, kept whole or not), so a group absent
from a segment simply had no tuple there; a segment that kept a lane whole without a per-group
decision (not overloaded) adds its range's groups as kept whole, from a key scan made only in
that case. Only then is the map sparsified: the offset lists only the groups kept partly
(:attr:`~spillway.spark.source.PlanOffset.groups`), which keeps the offset log small (with
CoD's equal allocation every group at or below the water level is kept whole and not listed).
The history, the query SIC ledger and the records stay per lane: a lane's keep is the sum of
its groups' keeps, and all of them carry the lane's SIC. Segments stay pending until the plan's
next request (or its ``commit``) shows Spark processed them, so a request repeated after a
crash gets the same answer. One plan asking first therefore cannot take the whole budget: the budget was divided
over all plans' backlogs when the decision was made, and each plan receives its share.

Link lanes
----------
A feed whose tuples already carry their SIC (:attr:`~spillway.feeds.base.Feed.carries_sic`: a
federation link topic read with the Kafka feed's ``sic_column``, an upstream fragment's result
rows) is not priced by Eq. 1: its rows' SIC is what the upstream node kept of the query's
sources (THEMIS Eq. 3 across nodes), which Eq. 1 over the downstream arrivals cannot see. At
each decision every such lane's tuple SIC is the mean SIC its waiting rows ``[decided,
arrived)`` carry (:meth:`~spillway.feeds.base.Feed.carried_sic`, read on the driver), so the
policy, the SIC ledger and the projection weigh the SIC that is really there, and a lane
keeping ``k`` of ``n`` rows is priced at ``k`` times that mean (exact on the rows' sum; the
executors then give each kept row its own carried SIC).

Capacity reach
--------------
A capacity from the cost model is an extrapolation beyond the batch sizes the model has seen.
When the node is not overloaded every batch has about the same size (all that arrived), so the
fit cannot tell the per-tuple cost from the overhead, and when batches then run faster than
predicted (other work on the machine stopped) the per-tuple estimate can drift to its floor:
measured here, a run's mean estimated capacity of 144 million tuples/s for a node processing
63,000 a second. So the capacity in tuples is capped at ``capacity_reach`` (default 2) times the
largest batch of the last :data:`REACH_BATCHES` measured batches (summed over the plans that
run). Under overload the admitted batches are the capacity itself, so the cap only limits how
fast the capacity may grow: doubling per interval.

Cold start: before a plan's first measured batch the cost model holds only its prior (2 µs a
tuple by default), which is not safe: a plan costing ten times that admits ten times what fits,
and at 3x overload the first batches of ``spillway experiment kafka-overload`` admitted hundreds
of thousands of rows and lasted tens of seconds each. With ``cold_start_rows`` set (for
example 10,000), a plan with no measured batch counts in the reach as that many shown rows: its
first batches stay small whatever the prior says, the node measures them, and from then on the
reach grows the capacity from its own measured batches (doubling per interval) while the cost
model learns from batches like the ones that follow. It is off by default (None) until the
experiments and the main job have been rerun with it: their first batches, and the figures
drawn from them, would change.

Probes
------
An overloaded node's batches are the size its cost model allows, so they barely vary, and the
fit cannot tell the per-tuple cost from the fixed one: it keeps the slope it learnt from
batches of other sizes, however long ago (a cold JVM's first batches, the prior's large
ones), and the capacity it gives back only confirms itself (spark-federation's node ``c``
kept 28,000-42,000 tuples a decision at a fitted 15.6-16.6 µs a tuple for two minutes of its
calibration, every batch near its prediction; EXPERIMENTS.md "Run 10"). With
``probe_every`` set, every that many decisions, when the last batch of every running plan
finished within its budget (``headroom · interval``), the decision admits ``1 +
probe_gain`` times the capacity (still within the reach): a batch of another size, which
tells the fit its slope. If the model was right the probe's batch runs over its budget by
``probe_gain`` of the per-tuple part, within the interval at the default headroom 0.8 and
gain 0.5 when the fixed cost is at least a third of the budget; the next decisions shrink
back. Off by default (0), like ``cold_start_rows``, until the runs drawn from the cost model
are repeated with it.

Bounded group reads
-------------------
A per-group decision (CoD) needs every waiting tuple's group key, and deriving a generated
tuple's key costs about what generating it does (45-86 ns a tuple on the taxi and tasks feeds,
``scripts/bench_cod_keep.py``). Under overload every arrived tuple paid it twice (a sample on
the driver, all of them on the executors), so at 10x the key scan ate the batch's budget. So,
under overload and unless the policy ``sheds_always``, the decision reads at most
``group_read`` (default 2) times the capacity in tuples: each generated lane's share (in
proportion to its backlog) is a systematic sample of :data:`~spillway.spark.source.READ_RUNS`
contiguous runs of its waiting range (:func:`~spillway.spark.source.read_index`, keyed by the
lane, so driver, executors and replays pick the same tuples). The policy decides on the exact
group counts of that sample (CoD's concept of the window is then estimated from a uniform
sample of it, CoD §V), the offset carries the sample's size per lane and range
(:attr:`~spillway.spark.source.PlanOffset.read`), executors derive the keys of the sample only
and keep within it, and every other tuple is shed unread, as a log lane's tuples already are.
The read is ``group_read`` times the capacity it is sized by, so that capacity pays for it:
a kept tuple costs its per-tuple time plus ``group_read`` per-arrived times, and the capacity
is what the budget left after the fixed cost buys at that price (``_capacity``).
A group with no tuple in the sample is not seen at all (CoD's missing groups count only the
groups seen). A log lane (Kafka, a folder) is read the same way, in at most
:data:`~spillway.spark.source.LOG_RUNS` runs (each is a seek; fewer where the shed records
could not keep them the reader's gap apart, :func:`~spillway.spark.source.log_runs`): its
executors fetch and parse
only the bounded read, once, and keep from what they fetched; its driver counts groups on at
most :data:`LOG_GROUP_SAMPLE` records of the read (:data:`LOG_SAMPLE_RUNS` runs of it), scaled
to the read, as it does on a whole log range without a bound.

Batch span
----------
A micro-batch costs a fixed overhead whatever it holds (0.3-1 s on ``local[2]``). When the
fitted overhead takes more than three quarters of the budget ``headroom · interval``, shedding
cannot bring
a batch under the interval (even an empty one overruns), so before every decision the controller
re-chooses how many intervals the batch spans (:func:`spillway.control.batch_span`): the
next decision waits for that many boundaries, and its budget is ``headroom · span · interval −
overhead``. The span grows at once and falls one step at a time with slack, at most
``span_limit`` (a node whose overhead does not fit even that keeps shedding to its budget and
its latency shows the miss). Results then come every ``span`` intervals; windows are unchanged.

Query SIC base (THEMIS §6 local projection), precisely
-------------------------------------------------------
``local_q`` = SIC the node admitted for query ``q`` in decisions over the last STW
``[τ − STW, τ)`` (a :class:`~spillway.quality.QuerySicLedger` of admissions, extrapolated for
young queries like Eq. 4). Without a coordinator the base is ``local_q``. With one, the base is
corrected by the measured result SIC ``r_q`` (Eq. 4 over the STW, from processed batches):
``base_q = local_q + (r_q − local_q^processed) = r_q + inflight_q``, where ``inflight_q`` is the
SIC admitted in segments Spark has not processed yet (pending). The correction replaces the
node's own bookkeeping by what the results really carried (windows that lost SIC, other nodes'
fragments of a federated query) and keeps what only the node knows yet: its own admissions in
flight (THEMIS's "subtract the queued batches, add back what is kept"). In a federation the
local base is per fragment: a fragment's own sources and its link input (two local queries)
are summed and balanced as one (``_projection``), as THEMIS Fig. 4's uncoordinated nodes
balance the SIC their admissions give each fragment.

Federated base (THEMIS §5.2 ``updateSIC``, §6)
----------------------------------------------
In a federation the node is given a :class:`~spillway.federation.view.CoordinatorView`: the
last :class:`~spillway.federation.update.NodeUpdate` the coordinator service returned (each
hosted query's result SIC over the STW, Eq. 4, summed over every node's results) and this
node's own admissions since. Then the base is the view's projection instead of the local one:
``base_q = (sic_q + own_q(now) − own_q(as_of − lag)) / ceiling_q``, and the tuple SICs are
the SIC the tuples carry over the same ceiling (not the share of what arrived here), so
BALANCE-SIC raises the queries whose global SIC is lowest. The backlog's SIC is not subtracted
from the base (THEMIS §6 "assumes that all batches in the IB are discarded"): Eq. 4 sums
results only, so the waiting tuples are already absent from ``sic_q``, and subtracting them
would count their loss twice (a query whose rows carry much SIC would then look poorer than
one that already lost most upstream). Thus a
query whose upstream fragment already lost most of its SIC is kept more here than one that
lost little, where the local view (each query's kept share of what reached this node) would
keep both alike. Every decision records the SIC it admitted per query in the view. Without a
usable update (none yet, or older than the view's ``stale_s``) the decision falls back to the
local base above; the view counts each fallback and logs the first. A query whose fragment the
update marks *orphaned* (its consumers are lost, so its output reaches no result) offers the
policy nothing: its tuples are shed whatever the load, and the capacity goes to the others
(its arrivals still count as arrived; nothing of it is kept).

Restarts
--------
Every ``latest`` request carries Spark's current position (the start offset). A controller that
restarted (a new driver resuming from checkpoints) re-syncs to it: the lanes count as decided up
to the offset's ends, the offset's epoch and boundary are adopted, and no decision is made until
every plan has reported its position (a plan not heard from would count tuples already decided
as backlog). Segments handed out but not yet processed are kept, so Spark re-asking after a
crash gets the same offset; an offset already in Spark's log is replayed by Spark itself.
:meth:`NodeController.pause` makes every later request return its start (no new data), which
lets the batches in flight finish before the queries stop.

Clocks
------
``wall`` (default): feed time = clock() − epoch; the boundary due is ``floor(feed time /
trigger)``; one decision covers all boundaries passed since the previous one (capacity of one
interval: the budget is per interval, so a node that fell behind catches up by shedding).
``logical``: every decision advances feed time by exactly one trigger interval, whatever the
wall clock says: deterministic runs and replay comparisons. The epoch is fixed when first
needed (the first request) unless given. In ``wall`` mode it is then floored to a multiple of
the trigger interval in Unix time: Spark's ``ProcessingTime`` trigger fires at multiples of
its interval since the Unix epoch, so with an aligned epoch every trigger that is on time finds
a boundary that has just passed and decides at once. With an arbitrary epoch the boundary and
the trigger are out of phase by a random ``0..trigger`` seconds, which every result waits in
addition (and the live view shows as latency).

What is recorded
----------------
Per decision an :class:`~spillway.status.IntervalRecord`: the capacity in tuples (a fixed one,
or the budget divided by the backlog's mean per-tuple cost), the tuples decided and admitted,
per query the projected SIC after the decision (base + gain) and the kept share, and, for a
per-group decision, per query the distinct groups waiting and those with a tuple kept (CoD's
"missing groups" are the difference); the listener
adds the rows Spark processed and the batch duration to the record of the boundary the batch's
offset ends at (a merged batch counts at its last boundary).

Examples
--------
>>> from spillway.testing import ListFeed
>>> from spillway.policies.base import admit_all, Policy
>>> class KeepAll(Policy):
...     def decide(self, backlog, capacity):
...         return admit_all(backlog)
>>> feed = ListFeed(times=[[0.1, 0.5, 1.5, 2.5]], values=[[1.0, 2.0, 3.0, 4.0]])
>>> plan = PlanSpec(name="avg", kind="avg", window_s=1.0,
...                 queries=(PlanQuery(query_id=0, name="q", feed=feed),))
>>> c = NodeController(ControllerConfig(clock="logical", stw_s=2.0), [plan], KeepAll(),
...                    epoch_s=0.0)
>>> start = c.initial_offset("avg")
>>> off = c.latest_offset("avg", start)
>>> off["end"], off["keep"], off["t_us"]
([2], [2], 1000000)
>>> c.latest_offset("avg", off)["end"]
[3]
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from spillway.control import (
    CostEstimate,
    CostModelConfig,
    CostModelState,
    OverloadConfig,
    OverloadDecision,
    batch_span,
    detect,
    estimate,
    initial_state,
    node_budget,
    observe,
)
from spillway.control.cqc import dispatch
from spillway.errors import ConfigError, InputDataError, UnknownNameError
from spillway.events import BatchEvent, DecisionEvent, notify
from spillway.federation.view import CoordinatorView
from spillway.feeds.base import Feed
from spillway.policies.base import Admission, Backlog, Policy
from spillway.quality import QuerySicLedger, StwConfig, StwCounter
from spillway.quality.stw_account import SourceTimeAccount
from spillway.quality.unseen import unseen_groups
from spillway.spark.class_control import ClassControl, ClassControlConfig
from spillway.spark.load_control import LoadControl, LoadControlConfig
from spillway.spark.source import (
    FeedSpec,
    PlanDescription,
    PlanOffset,
    lane_key,
    read_index,
    select_kept_runs,
    shed_read,
)
from spillway.status import ClassStatus, IntervalRecord

CLOCKS = ("wall", "logical")

#: The cost model the controller uses by default: two warm-up batches ignored, because the first
#: micro-batch of a streaming query with data also starts the executors' Python workers and
#: generates code (measured here: 7 s for a batch that takes 1.5 s later), and one such outlier
#: as the first fitted point drags the overhead estimate for many batches.
DEFAULT_COST_MODEL = CostModelConfig(warmup_batches=2)

#: Prior standard deviation of the per-arrived cost (s) when the policy reads nothing of a shed
#: tuple: a generated lane kept in part is hashed to choose (:func:`~spillway.spark.source.
#: select_kept`: 10-30 ns a tuple measured on 24,000-300,000 tuples), a log's shed records are
#: never fetched. The default prior (5 µs, a log record fetched for its key) let the fit take a
#: batch's fixed cost as per-arrived: an overloaded node's arrivals barely vary, so the data
#: cannot tell the two apart and the wider prior gets it. Node c of spark-federation
#: fitted 1.85 µs an arrival (0.55 s an interval) and kept nothing for 50 s.
HASHED_ARRIVED_STD_S = 2e-7

#: The capacity reach looks at this many of a plan's latest measured batches.
REACH_BATCHES = 20

#: A log lane's groups are counted from at most this many of its waiting records, scaled to the
#: lane (a per-group policy on a Kafka partition: fetching and parsing the whole backlog on the
#: driver at every decision would cost more than the batch; CoD's estimates are per group).
#: The driver fetches them inside the batch's planning: 20,000 a lane as 16 runs (a seek each)
#: took 0.84-1.24 s a decision over four Kafka partitions, half of a 2 s trigger (CoD at 3x,
#: ``scripts/profile_kafka_cod.py``), for group counts the executors' read makes exact anyway.
LOG_GROUP_SAMPLE = 4_000

#: Runs (each a seek) a log lane's driver sample is fetched in (:data:`LOG_GROUP_SAMPLE`).
LOG_SAMPLE_RUNS = 4

#: Any other lane's groups are counted from at most this many of its waiting tuples, scaled to
#: the lane. A generated key costs about 0.1 µs to scan on the driver, and the scan runs inside
#: the batch's planning: at 10x overload (4.3 M tuples an interval here) a full scan took half
#: of a 1 s trigger's budget (``spillway experiment overload``: cod kept 0.45 % at 10x, the
#: others 21-24 %). 200,000 keys cost about 20 ms and still see every group of the built-in
#: feeds; a group the sample misses is not listed in the offset, so it is kept whole (as for
#: logs: docs/design.md, "Executors read only what is kept").
GROUP_SAMPLE = 200_000

_SAMPLE_KEY = 0x5A3B1E


def scaled_counts(counts: np.ndarray, total: int) -> np.ndarray:
    """Sample counts scaled to ``total`` (largest remainders, so they sum to it exactly).

    >>> scaled_counts(np.array([3, 1]), 10).tolist()
    [8, 2]
    >>> int(scaled_counts(np.array([1, 1, 1]), 10).sum())
    10
    """
    c = np.asarray(counts, dtype=np.float64)
    exact = c * (total / c.sum()) if c.sum() > 0 else c
    out = np.floor(exact).astype(np.int64)
    short = int(total - out.sum())
    if short > 0:
        out[np.argsort(-(exact - out), kind="stable")[:short]] += 1
    return out


@dataclass(frozen=True, kw_only=True)
class PlanQuery:
    """One logical query of a plan: its node-wide id, name, feed and (optionally) kind.

    ``spec`` tells executors how to rebuild the feed (default: the feed object pickled);
    ``kind`` is the query kind (``spark.queries.QUERIES`` key), default the plan's;
    ``window_s`` is the query's tumbling window, default the plan's; ``sic_sources`` the
    ``|S_q|`` of THEMIS Eq. 1 when the query is one fragment of a federated query (the whole
    query's sources), default the feed's sources.
    """

    query_id: int
    name: str
    feed: Feed
    spec: FeedSpec | None = None
    kind: str | None = None
    window_s: float | None = None
    sic_sources: int | None = None

    def __post_init__(self) -> None:
        w = self.window_s
        if w is not None and not (isinstance(w, int | float) and math.isfinite(w) and w > 0):
            raise ConfigError(f"query {self.name!r}: window_s must be > 0 or None, got {w!r}")

    @property
    def feed_spec(self) -> FeedSpec:
        """The spec shipped to executors."""
        return self.spec if self.spec is not None else FeedSpec.of(self.feed)


@dataclass(frozen=True, kw_only=True)
class PlanSpec:
    """A Spark plan of the node: many logical queries of any kinds and window lengths.

    A node runs one plan: one streaming query, one spillway source carrying every lane of its
    queries, one sink evaluating every kind present. Each query's part of a batch ends on a
    multiple of its own window (module docstring), so a batch holds whole windows of every
    query.

    Parameters
    ----------
    name : the plan's name (also the streaming query's name suffix and the source's ``plan``).
    kind : the query kind of queries that do not name their own (``spark.queries.QUERIES``
        key); None when every query names its kind.
    window_s : tumbling window of the plan's queries that do not name their own.
    queries : the plan's logical queries.

    Examples
    --------
    >>> from spillway.testing import ListFeed
    >>> feed = ListFeed(times=[[0.5]], values=[[1.0]])
    >>> plan = PlanSpec(name="mixed", window_s=1.0, queries=(
    ...     PlanQuery(query_id=0, name="a", feed=feed, kind="avg"),
    ...     PlanQuery(query_id=1, name="t", feed=feed, kind="top5"),
    ...     PlanQuery(query_id=2, name="b", feed=feed, kind="avg")))
    >>> plan.kinds
    {'avg': (0, 2), 'top5': (1,)}
    """

    name: str
    window_s: float
    queries: tuple[PlanQuery, ...]
    kind: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "queries", tuple(self.queries))
        if not self.queries:
            raise ConfigError(f"plan {self.name!r} needs at least one query")
        if not (isinstance(self.window_s, int | float) and self.window_s > 0):
            raise ConfigError(f"plan {self.name!r}: window_s must be > 0, got {self.window_s!r}")
        untyped = [q.name for q in self.queries if (q.kind or self.kind) is None]
        if untyped:
            raise ConfigError(
                f"plan {self.name!r}: queries {untyped} have no kind; give the plan a kind or "
                "each query its own"
            )

    @property
    def kinds(self) -> dict[str, tuple[int, ...]]:
        """Query ids per query kind, kinds in order of first appearance."""
        out: dict[str, list[int]] = {}
        for q in self.queries:
            out.setdefault(str(q.kind or self.kind), []).append(q.query_id)
        return {k: tuple(v) for k, v in out.items()}

    def window_of(self, q: PlanQuery) -> float:
        """The window of the plan's query ``q`` (its own, else the plan's)."""
        return float(q.window_s if q.window_s is not None else self.window_s)

    @property
    def windows(self) -> dict[int, float]:
        """Window length (s) of every query id."""
        return {q.query_id: self.window_of(q) for q in self.queries}


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """Settings of the node controller.

    Parameters
    ----------
    trigger_s : shedding interval = trigger interval (s).
    stw_s : source time window (s), a whole multiple of ``trigger_s`` (it slides per interval).
    headroom : fraction of each interval the admitted work may fill.
    seed : seed of keep selection and of the policy's per-decision RNG.
    clock : ``"wall"`` or ``"logical"`` (see the module docstring).
    capacity_tuples : a fixed capacity in tuples per interval (the cost models are then only
        recorded, not used); None: capacity from the cost models.
    cost_model : settings of every plan's cost model.
    overload : settings of the overload detector.
    history : number of interval records kept.
    capacity_reach : a cost-model capacity is at most this many times the largest recent
        batch (module docstring, "Capacity reach"); None: no cap.
    cold_start_rows : the rows a plan with no measured batch counts as having shown in the
        reach (module docstring, "Cold start"); None: no cap until every running plan has a
        measured batch (the prior alone decides the first batches).
    span_limit : a micro-batch spans at most this many intervals when its fixed cost does not
        fit one (:func:`spillway.control.batch_span`; module docstring, "Batch span"); 1 keeps
        one decision per interval.
    load_control : a Pham load manager deciding each interval's drop fraction from the
        statistics measured on Spark (:mod:`spillway.spark.load_control`) instead of the
        overload detector; None (default): the cost-model budget and the detector decide.
    class_control : priority classes, each with its own load manager and budget
        (:mod:`spillway.spark.class_control`); not with ``load_control``. None (default): no
        classes.
    probe_every : every this many decisions, when every running plan's last batch finished
        within its budget, the capacity is raised by ``probe_gain`` (module docstring,
        "Probes"); 0 (default): never.
    probe_gain : the fraction a probe adds to the capacity.
    group_read : a per-group decision (``Policy.needs_groups``) under overload reads at most
        this many times the capacity in tuples of a generated lane's waiting tuples, spread
        over the lanes by their backlog (module docstring, "Bounded group reads"); the rest
        is shed unread. None: every waiting tuple's group key is derived, on the driver (a
        sample) and on the executors (all of them). Not applied to logs, nor to a policy that
        ``sheds_always`` (a shed fraction the user fixed).
    """

    trigger_s: float = 1.0
    stw_s: float = 10.0
    headroom: float = 0.8
    seed: int = 0
    clock: str = "wall"
    capacity_tuples: float | None = None
    cost_model: CostModelConfig = field(default_factory=lambda: DEFAULT_COST_MODEL)
    overload: OverloadConfig = field(default_factory=OverloadConfig)
    history: int = 100_000
    capacity_reach: float | None = 2.0
    cold_start_rows: int | None = None
    span_limit: int = 4
    load_control: LoadControlConfig | None = None
    class_control: ClassControlConfig | None = None
    group_read: float | None = 2.0
    probe_every: int = 0
    probe_gain: float = 0.5

    def __post_init__(self) -> None:
        for name in ("trigger_s", "stw_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise ConfigError(f"{name} must be a number > 0, got {v!r}")
        if round(self.trigger_s * 1e6) < 1:
            raise ConfigError(f"trigger_s must be >= 1 microsecond, got {self.trigger_s!r}")
        StwConfig(stw_s=self.stw_s, slide_s=self.trigger_s)  # validates the multiple
        if not 0 < self.headroom <= 1:
            raise ConfigError(f"headroom must be in (0, 1], got {self.headroom!r}")
        if self.clock not in CLOCKS:
            raise UnknownNameError(f"clock must be one of {', '.join(CLOCKS)}; got {self.clock!r}")
        if self.capacity_tuples is not None and not (
            isinstance(self.capacity_tuples, int | float) and self.capacity_tuples >= 0
        ):
            raise ConfigError(
                f"capacity_tuples must be a number >= 0 or None, got {self.capacity_tuples!r}"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")
        every = self.probe_every
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ConfigError(f"probe_every must be an int >= 0 (0: no probes), got {every!r}")
        gain = self.probe_gain
        if isinstance(gain, bool) or not isinstance(gain, int | float) or not 0 < gain <= 4:
            raise ConfigError(f"probe_gain must be a number in (0, 4], got {gain!r}")
        reach = self.capacity_reach
        if reach is not None and (
            isinstance(reach, bool) or not isinstance(reach, int | float) or not reach >= 1
        ):
            raise ConfigError(f"capacity_reach must be a number >= 1 or None, got {reach!r}")
        cold = self.cold_start_rows
        if cold is not None and (isinstance(cold, bool) or not isinstance(cold, int) or cold < 1):
            raise ConfigError(
                f"cold_start_rows must be an int >= 1 or None, got {cold!r}: the rows a plan's "
                "first batches may hold before the node has measured one"
            )
        lim = self.span_limit
        if isinstance(lim, bool) or not isinstance(lim, int) or lim < 1:
            raise ConfigError(f"span_limit must be an int >= 1, got {lim!r}")
        if self.load_control is not None and not isinstance(self.load_control, LoadControlConfig):
            raise ConfigError(
                f"load_control must be a LoadControlConfig or None, got {self.load_control!r}"
            )
        cc = self.class_control
        if cc is not None and not isinstance(cc, ClassControlConfig):
            raise ConfigError(f"class_control must be a ClassControlConfig or None, got {cc!r}")
        gr = self.group_read
        if gr is not None and (
            isinstance(gr, bool) or not isinstance(gr, int | float) or not gr >= 1
        ):
            raise ConfigError(
                f"group_read must be a number >= 1 or None, got {gr!r}: how many times the "
                "capacity a per-group decision reads of the waiting tuples"
            )
        if cc is not None and self.load_control is not None:
            raise ConfigError(
                "load_control and class_control are both set: one load manager decides the "
                "node's drop, or one per class; set only one"
            )

    @property
    def trigger_us(self) -> int:
        """The interval in microseconds."""
        return int(round(self.trigger_s * 1e6))


@dataclass
class _Segment:
    boundary: int
    t_us: int
    start: np.ndarray  # per plan lane: decided before this segment (its range's first index)
    end: np.ndarray
    keep: np.ndarray
    sic: np.ndarray
    # plan lane -> (group keys, counts, keeps) of EVERY group of the lane's range, for lanes a
    # per-group decision covered; lanes absent were kept whole or decided per lane.
    groups: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    cut: np.ndarray | None = None  # per plan lane: its query's decided-through time (µs)
    # per plan lane: the tuples of [start, end) a bounded group read looked at (None: all)
    read: np.ndarray | None = None


@dataclass
class _Units:
    """The backlog as the policy sees it: lanes, or lanes split into groups (sub-lanes)."""

    lane: np.ndarray  # node lane of every unit, ascending
    key: np.ndarray  # group key (0 when not grouped or for an empty lane's placeholder)
    count: np.ndarray
    stats: dict[str, np.ndarray]
    grouped: bool
    keep: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the decision
    read: np.ndarray | None = None  # per node lane: the tuples read (bounded read), or None


@dataclass
class _PlanState:
    spec: PlanSpec
    index: int
    lanes: np.ndarray  # node-wide lane indices of this plan
    desc: PlanDescription
    cost: CostModelState
    acked_b: int = 0
    acked_t_us: int = 0
    acked_end: np.ndarray | None = None
    #: With the class scheduler: each query's cut (µs) at the acknowledged boundary.
    acked_cut: np.ndarray | None = None
    #: The last boundary of a batch the progress listener saw finish (:meth:`observe_batch`).
    done_b: int = 0
    pending: list[_Segment] = field(default_factory=list)
    batches: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=10_000))


@dataclass
class _Interval:
    t: float
    capacity_tuples: float
    arrived: int
    admitted: int
    overloaded: bool
    query_sic: dict[str, float]
    query_kept: dict[str, float]
    query_sic_projected: dict[str, float] = field(default_factory=dict)
    query_arrived: dict[str, int] = field(default_factory=dict)
    query_admitted: dict[str, int] = field(default_factory=dict)
    query_groups: dict[str, int] = field(default_factory=dict)
    query_groups_kept: dict[str, int] = field(default_factory=dict)
    query_groups_unseen: dict[str, float] = field(default_factory=dict)
    span: int = 1
    overhead_s: float = math.nan
    per_tuple_s: float = math.nan
    per_arrived_s: float = math.nan
    probe: bool = False
    processed: int = 0
    batch_s: float = 0.0


def _group_counts(
    keys: np.ndarray, *, inverse: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Distinct keys (ascending), their counts and, if asked, every key's position among them.

    Keys spanning a small range (route, class or machine ids) are counted with one
    ``np.bincount`` (O(n): 0.08 ms against 0.24 ms for ``np.unique`` on 50,000 taxi keys);
    others with ``np.unique`` (a sort).

    >>> u, c, inv = _group_counts(np.array([9, 4, 9, 9]), inverse=True)
    >>> u.tolist(), c.tolist(), inv.tolist()
    ([4, 9], [1, 3], [1, 0, 1, 1])
    """
    if keys.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, (empty if inverse else None)
    lo = int(keys.min())
    span = int(keys.max()) - lo + 1
    if span > 4 * keys.size + 1024:
        if inverse:
            uniq, where, cnt = np.unique(keys, return_inverse=True, return_counts=True)
            return uniq, cnt.astype(np.int64), where.reshape(-1).astype(np.int64)
        uniq, cnt = np.unique(keys, return_counts=True)
        return uniq, cnt.astype(np.int64), None
    counts = np.bincount(keys - lo, minlength=span)
    present = np.flatnonzero(counts)
    inv: np.ndarray | None = None
    if inverse:
        table = np.zeros(span, np.int64)
        table[present] = np.arange(present.size)
        inv = table[keys - lo]
    return present + lo, counts[present].astype(np.int64), inv


def _covered(
    start: Any,
    end: Any,
    unread: Sequence[bool] | None = None,
    read_through: Callable[[int, int, int, int], int] | None = None,
) -> int | None:
    """Tuples between two offsets of a plan (kept or shed) that cost something when shed;
    None when either offset is missing or not a spillway offset. ``unread`` marks, per lane of
    the plan, a log read as its kept runs (:func:`~spillway.spark.source.select_kept_runs`): a
    shed record there is not fetched, so such a lane counts only where the end offset decides
    it per group (its whole range is read then, the keys decide what is kept); with
    ``read_through(lane, lo, hi, keep)`` it counts the records its reader fetches: the kept
    ones and the shed ones between two kept runs close together
    (:func:`~spillway.spark.source.shed_read`). A lane
    the end offset reads in part (a bounded group read,
    :attr:`~spillway.spark.source.PlanOffset.read`) counts only the tuples it reads: the
    others are shed unread, so cost nothing either.

    >>> a = {"v": 1, "plan": "p", "epoch_us": 0, "b": 1, "t_us": 1, "end": [5, 7], "keep": [1, 1],
    ...      "sic": [0.1, 0.1]}
    >>> _covered(a, dict(a, b=2, end=[9, 10])), _covered(None, a)
    (7, None)
    >>> _covered(a, dict(a, b=2, end=[9, 10]), unread=[False, True])  # lane 1: a log
    4
    >>> _covered(a, dict(a, b=2, end=[9, 10], groups={"1": [[3], [0]]}), unread=[False, True])
    7
    >>> _covered(a, dict(a, b=2, end=[9, 10], read={"0": [[5, 9, 1]]}))  # lane 0 reads 1 of 4
    4
    >>> _covered(a, dict(a, b=2, end=[9, 10], read={"1": [[7, 10, 2]]}), unread=[False, True])
    6
    >>> _covered(a, dict(a, b=2, end=[9, 10]), unread=[False, True],
    ...          read_through=lambda j, lo, hi, keep: hi - lo - keep)  # lane 1 read whole
    7
    """
    if start is None or end is None:
        return None
    try:
        s, e = PlanOffset.from_json(start), PlanOffset.from_json(end)
    except InputDataError:
        return None
    if s.n_lanes != e.n_lanes or (unread is not None and len(unread) != e.n_lanes):
        return None
    skip = (
        [bool(unread[j]) and j not in e.groups and j not in e.read for j in range(e.n_lanes)]
        if unread
        else None
    )
    lanes = list(enumerate(zip(s.end, e.end, strict=True)))
    n = sum(
        sum(t[2] for t in e.read[j]) if j in e.read else max(b - a, 0)
        for j, (a, b) in lanes
        if skip is None or not skip[j]
    )
    if skip is not None and read_through is not None:
        n += sum(
            min(e.keep[j], b - a) + read_through(j, a, b, e.keep[j])
            for j, (a, b) in lanes
            if skip[j] and b > a
        )
    return int(n)


def _distinct_per_query(query: np.ndarray, key: np.ndarray, n_queries: int) -> np.ndarray:
    """Number of distinct keys per query among the (query, key) pairs (vectorised).

    >>> _distinct_per_query(np.array([0, 0, 1, 0]), np.array([5, 5, 5, 7]), 3).tolist()
    [2, 1, 0]
    """
    key_q, _ = _per_key(query, key, np.zeros(query.size, np.int64))
    return np.bincount(key_q, minlength=n_queries)


def _per_key(
    query: np.ndarray, key: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (query, key) pairs, ordered by query then key: each pair's query and the
    sum of ``count`` over its entries.

    >>> q, c = _per_key(np.array([1, 0, 1]), np.array([4, 4, 4]), np.array([2, 3, 5]))
    >>> q.tolist(), c.tolist()
    ([0, 1], [3, 7])
    """
    if query.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, count.dtype)
    o = np.lexsort((key, query))
    qs, ks = query[o], key[o]
    new = np.ones(qs.size, dtype=bool)
    new[1:] = (qs[1:] != qs[:-1]) | (ks[1:] != ks[:-1])
    starts = np.flatnonzero(new)
    return qs[starts], np.add.reduceat(count[o], starts)


def _unseen_per_query(
    query: np.ndarray, key: np.ndarray, count: np.ndarray, bounded: np.ndarray
) -> np.ndarray:
    """Per query, the groups a bounded group read is estimated to have missed
    (:func:`spillway.quality.unseen.unseen_groups` over the query's sample counts per key,
    pooled over its lanes); 0 for a query ``bounded`` does not mark (every arrival read).

    >>> q, k = np.array([0, 0, 0, 0, 1]), np.array([1, 2, 3, 3, 1])
    >>> _unseen_per_query(q, k, np.array([1, 1, 1, 1, 1]), np.array([True, True])).tolist()
    [0.375, 0.0]
    >>> _unseen_per_query(q, k, np.array([1, 1, 1, 1, 1]), np.array([False, True])).tolist()
    [0.0, 0.0]
    """
    out = np.zeros(bounded.size)
    key_q, per_key = _per_key(query, key, count)
    edges = np.searchsorted(key_q, np.arange(bounded.size + 1))
    for i in np.flatnonzero(bounded).tolist():
        out[i] = unseen_groups(per_key[edges[i] : edges[i + 1]])
    return out


def fragment_sums(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per local query, ``values`` summed over the local queries of its fragment (``group``:
    per local query, its federated query, as ``NodeController._balance_query``).

    >>> fragment_sums(np.array([1.0, 2.0, 4.0]), np.array([0, 1, 0])).tolist()
    [5.0, 2.0, 5.0]
    """
    return np.bincount(group, weights=values, minlength=int(group.max()) + 1)[group]


class NodeController:
    """The driver-side shedding controller of one node (see the module docstring).

    Parameters
    ----------
    config : :class:`ControllerConfig`.
    plans : the node's plans; query ids must be ``0..Q-1`` across them, each once.
    policy : the shedding policy (WHAT to shed).
    clock : Unix seconds now (wall mode); default :func:`time.time`.
    epoch_s : the node's start in Unix seconds (feed time 0); default: ``clock()`` at the
        first request (so the feed starts when the streaming queries are up, not while Spark
        is still starting them), floored to a multiple of ``trigger_s`` in ``wall`` mode.
    coordinator : optional object with ``query_sic(now) -> array (Q,)`` (measured result SIC
        over the STW, ``now`` in Unix seconds); see the module docstring.
    federation : the node's :class:`~spillway.federation.view.CoordinatorView` in a
        federation (module docstring, "Federated base"), its ``query_ids`` the global index of
        each of this node's queries; None (default): a single node.
    """

    def __init__(
        self,
        config: ControllerConfig,
        plans: Sequence[PlanSpec],
        policy: Policy,
        *,
        clock: Callable[[], float] | None = None,
        epoch_s: float | None = None,
        coordinator: Any = None,
        federation: CoordinatorView | None = None,
    ) -> None:
        if not isinstance(config, ControllerConfig):
            raise ConfigError(f"config must be a ControllerConfig, got {type(config).__name__}")
        if not isinstance(policy, Policy):
            raise ConfigError(f"policy must be a spillway Policy, got {type(policy).__name__}")
        self.config = config
        self.policy = policy
        #: Every plan's cost model settings: ``config.cost_model``; the default one with a
        #: per-arrived prior of :data:`HASHED_ARRIVED_STD_S` when the policy reads nothing of
        #: what it sheds (a cost model the caller gave is used as given).
        self._cost_model = (
            replace(DEFAULT_COST_MODEL, prior_per_arrived_std_s=HASHED_ARRIVED_STD_S)
            if config.cost_model is DEFAULT_COST_MODEL
            and not (policy.needs_groups or policy.needs_stats)
            else config.cost_model
        )
        self.coordinator = coordinator
        if federation is not None and not isinstance(federation, CoordinatorView):
            raise ConfigError(
                f"federation must be a CoordinatorView or None, got {type(federation).__name__}"
            )
        self.federation = federation
        #: Per local query, the one query BALANCE-SIC sees it as: the local queries of one
        #: federated query (a fragment's sources and its link input) are one query there, as
        #: THEMIS's node balances queries, not fragments; None when none share a query.
        self._balance_query: np.ndarray | None = None
        self._clock = clock or time.time
        self._lock = threading.RLock()
        self._epoch_us: int | None = None
        self._build(plans)
        if federation is not None and federation.query_ids.size != self.n_queries:
            raise ConfigError(
                f"the federation view lists {federation.query_ids.size} queries, the node runs "
                f"{self.n_queries}: give CoordinatorView the global index of each of its queries"
            )
        if epoch_s is not None:
            self._set_epoch(int(round(epoch_s * 1e6)))
        self._k_last = 0
        self._decisions = 0
        #: Decisions that probed (module docstring, "Probes").
        self.probes = 0
        #: Whether the latest decision probed.
        self._probed = False
        self._overload: OverloadDecision | None = None
        self._intervals: dict[int, _Interval] = {}
        self._order: deque[int] = deque()
        self._hold: Callable[[int, int], bool] | None = None
        self._span = 1
        self._asked: set[str] = set()
        self._paused = False
        self._resuming = False
        self._admit_all = False
        #: The plans' costs the load managers measure the load at, once frozen
        #: (:meth:`freeze_load_costs`); None: the costs fitted so far, at every decision.
        self._load_costs: dict[str, Any] | None = None
        #: The load manager deciding the drop fraction (``config.load_control``), or None.
        self.load_control = (
            None
            if config.load_control is None
            else LoadControl(config.load_control, trigger_s=config.trigger_s)
        )
        #: The classes' load managers (``config.class_control``), or None.
        self.class_control = None
        if config.class_control is not None:
            if policy.needs_groups or policy.needs_stats:
                raise ConfigError(
                    f"class_control needs a policy that decides per lane; policy {policy!r} "
                    "needs groups or statistics: use the dilos or random policy"
                )
            query_class = np.asarray(config.class_control.query_class, dtype=np.int64)
            lane_class = query_class[self.lane_query]
            # a plan per class (FAIR pools): each class's results come in its own batches
            shared = any(
                np.unique(lane_class[self.lane_plan == p]).size > 1
                for p in range(len(self._plan_names))
            )
            self.class_control = ClassControl(
                config.class_control,
                trigger_s=config.trigger_s,
                n_queries=self.n_queries,
                shared_batches=shared,
            )
            self._lane_class = self.class_control.query_index[self.lane_query]
            if config.class_control.scheduler == "cqc":
                held = [
                    q.name
                    for i, q in enumerate(self._queries)
                    if self._event_clock[i] is not None
                    or self._lane_log[self._query_lanes[i]].any()
                ]
                if held:
                    raise ConfigError(
                        f"class_scheduler cqc holds back generated feeds' windows; query "
                        f"{held[0]!r} reads a log or replays a file with its own event clock, "
                        'whose windows it cannot hold back yet: set class_scheduler = "none"'
                    )
        #: Per plan, per decision not yet in a finished batch: each group's mean arrival time
        #: and kept rows (:meth:`_note_rows`).
        self._row_mid: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        #: Called with a :class:`~spillway.events.DecisionEvent` after every decision and a
        #: :class:`~spillway.events.BatchEvent` after every measured batch, under the lock
        #: (quick, never calling back); their errors go to :attr:`observer_errors`.
        self.observers: list[Callable[[Any], None]] = []
        self.observer_errors: list[str] = []

    # ---------------------------------------------------------------------------- structure

    def _build(self, plans: Sequence[PlanSpec]) -> None:
        plans = list(plans)
        if not plans:
            raise ConfigError("a node controller needs at least one plan")
        names = [p.name for p in plans]
        if len(set(names)) != len(names):
            raise ConfigError(f"plan names must be unique, got {names}")
        queries = [q for p in plans for q in p.queries]
        ids = sorted(q.query_id for q in queries)
        if ids != list(range(len(queries))):
            raise ConfigError(f"query ids must be 0..{len(queries) - 1}, each once; got {ids}")
        self.n_queries = len(queries)
        self.query_names = [""] * self.n_queries
        self.query_plan = [""] * self.n_queries
        for p in plans:
            for q in p.queries:
                self.query_names[q.query_id] = q.name
                self.query_plan[q.query_id] = p.name
        self._queries = sorted(queries, key=lambda q: q.query_id)
        lane_query: list[int] = []
        lane_source: list[int] = []
        lane_plan: list[int] = []
        self._query_lanes: list[np.ndarray] = [np.empty(0, np.int64)] * self.n_queries
        self._plans: dict[str, _PlanState] = {}
        for pi, p in enumerate(plans):
            start = len(lane_query)
            feeds: list[bytes] = []
            lane_feed: list[int] = []
            lane_ns: list[int] = []
            for qi, q in enumerate(p.queries):
                n = q.feed.n_sources
                first = len(lane_query)
                lane_query += [q.query_id] * n
                lane_source += list(range(n))
                lane_plan += [pi] * n
                lane_feed += [qi] * n
                lane_ns += [q.sic_sources or n] * n
                feeds.append(q.feed_spec.dump())
                self._query_lanes[q.query_id] = np.arange(first, first + n)
            lanes = np.arange(start, len(lane_query))
            desc = PlanDescription(
                plan=p.name,
                seed=self.config.seed,
                epoch_us=0,  # set by describe()
                stw_s=self.config.stw_s,
                lane_query=tuple(lane_query[start:]),
                lane_source=tuple(lane_source[start:]),
                lane_feed=tuple(lane_feed),
                lane_n_sources=tuple(lane_ns),
                feeds=tuple(feeds),
            )
            st = _PlanState(
                spec=p,
                index=pi,
                lanes=lanes,
                desc=desc,
                cost=initial_state(self._cost_model),
            )
            st.acked_end = np.zeros(len(lanes), dtype=np.int64)
            self._plans[p.name] = st
        self.lane_query = np.array(lane_query, dtype=np.int64)
        self._one_group = np.zeros(len(self.lane_query), dtype=np.int64)  # the node: one group
        fv = self.federation
        if fv is not None and fv.query_ids.size == self.n_queries:
            uniq, inv = np.unique(fv.query_ids, return_inverse=True)
            if uniq.size < self.n_queries:
                self._balance_query = inv.astype(np.int64)
        self.lane_source = np.array(lane_source, dtype=np.int64)
        self.lane_plan = np.array(lane_plan, dtype=np.int64)
        #: Lanes of a log (read as their kept runs: a shed record is not fetched, unless it
        #: lies in a gap the reader reads through, ``_lane_gap``).
        self._lane_log = np.array(
            [bool(getattr(self._queries[q].feed, "log", False)) for q in lane_query], dtype=bool
        )
        #: Per log lane, the gap between two kept runs its reader reads through (0: none;
        #: :attr:`Feed.read_gap <spillway.feeds.base.Feed.read_gap>`).
        self._lane_gap = (
            np.array(
                [int(getattr(self._queries[q].feed, "read_gap", 0)) for q in lane_query],
                dtype=np.int64,
            )
            * self._lane_log
        )
        self._plan_names = [p.name for p in plans]
        self._lane_plan_names = [self._plan_names[i] for i in lane_plan]
        #: Every lane's key (:func:`~spillway.spark.source.lane_key`): a bounded group read
        #: picks its tuples from it, on the driver as on the executors.
        self._read_keys = [
            lane_key(self.config.seed, self._plan_names[p], q, s)
            for p, q, s in zip(lane_plan, lane_query, lane_source, strict=True)
        ]
        self.lane_n_sources = np.array(
            [self._queries[q].sic_sources or self._queries[q].feed.n_sources for q in lane_query],
            dtype=np.int64,
        )
        n_lanes = len(lane_query)
        #: Every lane's first tuple index (a Kafka partition's start offset; 0 otherwise).
        self._start = np.concatenate(
            [np.asarray(q.feed.start_offsets(), dtype=np.int64) for q in self._queries]
        )
        self._decided = self._start.copy()
        #: Every lane's arrivals up to its query's last due window end, decided or held back
        #: by the class scheduler (``scheduler = "cqc"``: :meth:`_hold_back`).
        self._due_end = self._start.copy()
        #: The class scheduler's credit per class (:func:`spillway.control.cqc.dispatch`).
        self._cqc_credit: tuple[float, ...] | None = None
        #: With the class scheduler, per decision not yet acknowledged: each query's cut (µs).
        self._cut_at: dict[int, np.ndarray] = {}
        #: Every lane's kept share at its last decision with arrivals (the shedding in effect).
        self._kept_share = np.ones(n_lanes)
        self._arrived_tau = np.zeros(n_lanes, dtype=np.int64)
        stw = StwConfig(stw_s=self.config.stw_s, slide_s=self.config.trigger_s)
        self._stw = StwCounter(stw, n_lanes=n_lanes)
        windows = {i: w for p in plans for i, w in p.windows.items()}
        self.query_window_us = np.array(
            [int(round(windows[i] * 1e6)) for i in range(self.n_queries)], dtype=np.int64
        )
        #: Feed time (µs) up to which every query's input has been decided.
        self._query_t_us = np.zeros(self.n_queries, dtype=np.int64)
        #: Per query, (origin, speed) of its feed's own event clock, or None (the node's clock).
        self._event_clock = [q.feed.event_clock() for q in self._queries]
        #: Per query, how late its records may arrive (µs): a log's windows are decided that
        #: long after they end, so records still on their way are not late (Feed.lateness_s).
        self._lateness_us = np.array(
            [int(round(float(getattr(q.feed, "lateness_s", 0.0)) * 1e6)) for q in self._queries],
            dtype=np.int64,
        )
        account = getattr(self.coordinator, "account", None)
        #: SIC mass by source time (arrived, admitted and, with a coordinator, results).
        self.account: SourceTimeAccount = (
            account
            if isinstance(account, SourceTimeAccount)
            else SourceTimeAccount(self.n_queries, self.config.stw_s)
        )
        self._admitted_n = QuerySicLedger(stw, n_queries=self.n_queries)
        self._arrived_n = QuerySicLedger(stw, n_queries=self.n_queries)
        self._tuple_sic = np.zeros(n_lanes)
        #: Lanes whose tuples carry their own SIC (a federation link: Feed.carries_sic), and
        #: the mean SIC a waiting tuple of each carried at the last decision that saw one.
        self._lane_carries = np.array(
            [bool(self._queries[q].feed.carries_sic) for q in lane_query], dtype=bool
        )
        self._carried_mean = np.zeros(n_lanes)

    def _plan(self, name: str) -> _PlanState:
        try:
            return self._plans[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown plan {name!r}; this node runs {', '.join(self._plans)}"
            ) from None

    @property
    def plan_names(self) -> list[str]:
        """The node's plans, in order."""
        return list(self._plan_names)

    def describe(self, plan: str) -> PlanDescription:
        """What the plan's source needs (lanes, feed specs, seed, epoch)."""
        with self._lock:
            return replace(self._plan(plan).desc, epoch_us=self.epoch_us)

    # ---------------------------------------------------------------------------- time

    @property
    def epoch_us(self) -> int:
        """Feed time 0 in Unix microseconds (fixed on first use when not given)."""
        with self._lock:
            if self._epoch_us is None:
                now_us = int(round(self._clock() * 1e6))
                if self.config.clock == "wall":  # on Spark's trigger grid (module docstring)
                    now_us -= now_us % self.config.trigger_us
                self._set_epoch(now_us)
            assert self._epoch_us is not None
            return self._epoch_us

    def _set_epoch(self, epoch_us: int) -> None:
        self._epoch_us = epoch_us
        for q in self._queries:
            q.feed.attach(epoch_us / 1e6)
        if self.coordinator is not None and hasattr(self.coordinator, "epoch_s"):
            self.coordinator.epoch_s = epoch_us / 1e6

    @property
    def epoch_s(self) -> float:
        """Feed time 0 in Unix seconds."""
        return self.epoch_us / 1e6

    def feed_time(self) -> float:
        """Feed time now (s): wall clock minus epoch, or the last decision's time (logical)."""
        if self.config.clock == "logical":
            return self._k_last * self.config.trigger_s
        return self._clock() - self.epoch_s

    def now(self) -> float:
        """Unix seconds now, on the controller's clock (logical: epoch + last decision time).

        Give this to the result sink and the coordinator so logical runs are deterministic.
        """
        return self.read_clock()[1]

    def read_clock(self) -> tuple[float, float]:
        """``(feed time, Unix seconds)`` from ONE clock reading: ``epoch + feed time`` is the
        Unix time, where :meth:`feed_time` then :meth:`now` would read the clock twice.

        With a clock that moves on every reading (as wall time does):

        >>> from spillway.policies import make_policy
        >>> from spillway.testing import ListFeed
        >>> ticks = iter(range(100, 200))
        >>> feed = ListFeed(times=[[0.5]], values=[[1.0]])
        >>> plan = PlanSpec(name="avg", kind="avg", window_s=1.0,
        ...                 queries=(PlanQuery(query_id=0, name="q", feed=feed),))
        >>> c = NodeController(ControllerConfig(), [plan], make_policy("random", seed=0),
        ...                    clock=lambda: float(next(ticks)), epoch_s=100.0)
        >>> t, now = c.read_clock()
        >>> t, now, c.feed_time(), c.now()
        (0.0, 100.0, 1.0, 102.0)
        """
        with self._lock:
            t = self.feed_time()
            return t, self.epoch_s + t

    # ---------------------------------------------------------------------------- requests

    def handle(self, request: Mapping[str, Any]) -> Any:
        """Serve one control-channel request (``describe``, ``initial``, ``latest``, ``commit``).

        Raises
        ------
        UnknownNameError
            Unknown operation or plan.
        """
        op = request.get("op")
        plan = str(request.get("plan", ""))
        if op == "describe":
            return self.describe(plan).to_dict()
        if op == "initial":
            return self.initial_offset(plan)
        if op == "latest":
            return self.latest_offset(plan, request.get("start"))
        if op == "commit":
            self.commit(plan, request.get("end"))
            return None
        raise UnknownNameError(f"unknown control operation {op!r}")

    def initial_offset(self, plan: str) -> dict[str, Any]:
        """The plan's offset before anything arrived (every lane at its first index)."""
        st = self._plan(plan)
        first = PlanOffset.initial(plan, n_lanes=len(st.lanes), epoch_us=self.epoch_us)
        return replace(first, end=tuple(self._start[st.lanes].tolist())).to_json()

    def latest_offset(self, plan: str, start: Mapping[str, Any] | None) -> dict[str, Any]:
        """The plan's next end offset after ``start`` (``start`` itself when nothing is due).

        ``start`` is Spark's current position; a controller that does not know it yet (it
        restarted) re-syncs to it: lanes are decided up to ``start``'s ends and, before its
        first decision, the controller adopts the offset's epoch and boundary, and waits until
        every plan has reported its position.
        """
        with self._lock:
            st = self._plan(plan)
            self._asked.add(plan)
            s = (
                PlanOffset.from_json(start)
                if start is not None
                else PlanOffset.from_json(self.initial_offset(plan))
            )
            self._sync(st, s)
            if self._paused:
                return s.to_json()
            if self._due(st):
                self._decide_due()
            if not st.pending:
                return s.to_json()
            return self._merge(st, s).to_json()

    def commit(self, plan: str, end: Mapping[str, Any] | None) -> None:
        """Spark finished the batch ending at ``end``: its segments are processed."""
        if end is None:
            return
        with self._lock:
            self._sync(self._plan(plan), PlanOffset.from_json(end))

    def _sync(self, st: _PlanState, s: PlanOffset) -> None:
        if s.plan != st.spec.name or s.n_lanes != len(st.lanes):
            raise InputDataError(
                f"offset of plan {s.plan!r} with {s.n_lanes} lanes does not fit plan "
                f"{st.spec.name!r} with {len(st.lanes)} lanes: the checkpoint belongs to another "
                "node config; use a new checkpoint directory"
            )
        if self._decisions == 0 and s.boundary > 0:
            self._resuming = True  # Spark resumes from a checkpoint: wait for every plan
        if s.epoch_us != self.epoch_us:
            if self._decisions == 0 and s.boundary > 0:
                self._adopt_epoch(s.epoch_us)
            elif s.boundary > 0:
                raise InputDataError(
                    f"offset of plan {s.plan!r} was written by a node started at epoch "
                    f"{s.epoch_us} us, this node started at {self.epoch_us} us: the checkpoint "
                    "belongs to another run; use a new checkpoint directory"
                )
        if s.boundary < st.acked_b:
            return  # an older position (Spark re-asks after a crash): nothing to acknowledge
        end = np.asarray(s.end, dtype=np.int64)
        st.pending = [g for g in st.pending if g.boundary > s.boundary]
        st.acked_b, st.acked_t_us, st.acked_end = s.boundary, s.t_us, end
        if self._cut_at:  # the cuts no plan can ask for again (processed, _sync)
            oldest = min(max(p.acked_b, p.done_b) for p in self._plans.values())
            for b in [b for b in self._cut_at if b < oldest]:
                del self._cut_at[b]
        # Re-sync: a restarted controller has not decided what Spark already has.
        self._decided[st.lanes] = np.maximum(self._decided[st.lanes], end)
        qids = np.array([q.query_id for q in st.spec.queries], dtype=np.int64)
        done_us = self._done_us(st, s.boundary, s)
        st.acked_cut = done_us
        self._query_t_us[qids] = np.maximum(self._query_t_us[qids], done_us)
        self._due_end[st.lanes] = np.maximum(self._due_end[st.lanes], end)
        for t in np.unique(done_us):
            self.account.set_processed(qids[done_us == t], t / 1e6)
        if not st.pending and s.boundary > self._k_last:
            self._k_last = s.boundary

    def _done_us(self, st: _PlanState, k: int, offset: PlanOffset | None = None) -> np.ndarray:
        """Feed time (µs) a batch of ``st`` ending at boundary ``k`` decided its queries up to
        (by its queries' ids): :meth:`_t_end_us`, unless the class scheduler may have held
        some back: then each query's cut at that decision, remembered, or read from the
        batch's ``offset`` (its ``cut``; all zeros when omitted), or the one acknowledged."""
        qids = np.array([q.query_id for q in st.spec.queries], dtype=np.int64)
        cc = self.class_control
        if cc is None or cc.config.scheduler != "cqc":
            return self._t_end_us(k, qids)
        if k in self._cut_at:
            return self._cut_at[k][qids]
        if offset is not None:
            cut = np.zeros(self.n_queries, dtype=np.int64)
            cut[self.lane_query[st.lanes]] = np.asarray(offset.cut, dtype=np.int64)
            return cut[qids]
        if k == st.acked_b and st.acked_cut is not None:
            return st.acked_cut
        return self._t_end_us(k, qids)

    def _t_end_us(self, k: int, qids: np.ndarray) -> np.ndarray:
        """Feed time (µs) the decision at boundary ``k`` decides the queries ``qids`` up to:
        the last end of each query's window at or before ``k · trigger`` (less the feed's
        ``lateness_s``: a log's window is decided once its late records had time to arrive). Windows are aligned
        to multiples of their length in Unix time (as the sink and Spark's ``window`` compute
        them), not to the epoch, which is only on the trigger's grid; 0 before the first
        window end after the epoch (the first window holds what arrived since the epoch).
        A feed with its own event clock (a replayed file) has windows in the data's time: the
        arrival time (rounded down to µs) of the last window end in its event time."""
        w = self.query_window_us[qids]
        e = self.epoch_us
        now = e + k * self.config.trigger_us - self._lateness_us[qids]
        out = np.maximum((now // w) * w - e, 0)
        for j, q in enumerate(qids.tolist()):
            clock = self._event_clock[q]
            if clock is not None:
                origin, speed = clock
                end = self._event_end(k, q)
                out[j] = max(int(math.floor((end - origin) / speed * 1e6)), 0)
        return out

    def _event_end(self, k: int, q: int) -> float:
        """The last window end (event seconds) of query ``q`` at or before boundary ``k``, for
        a feed with its own event clock."""
        clock = self._event_clock[q]
        assert clock is not None
        origin, speed = clock
        w = self.query_window_us[q] / 1e6
        now = origin + speed * k * self.config.trigger_s
        return math.floor(now / w + 1e-9) * w

    def _adopt_epoch(self, epoch_us: int) -> None:
        self._set_epoch(epoch_us)

    def _due(self, st: _PlanState) -> bool:
        if self._resuming and self._decisions == 0 and self._asked != set(self._plans):
            # A restarted controller decides only once every plan told it where Spark is:
            # a plan not heard from yet would count its already-decided tuples as backlog.
            return False
        if self.config.clock == "logical":
            return not st.pending
        return self._boundary_now() >= self._k_last + self._span

    def _boundary_now(self) -> int:
        return int(math.floor((self._clock() - self.epoch_s) / self.config.trigger_s + 1e-9))

    def _decide_due(self) -> None:
        self._update_span()
        logical = self.config.clock == "logical"
        k = self._k_last + self._span if logical else self._boundary_now()
        if k < self._k_last + self._span:
            return  # the span grew: this batch waits for more intervals
        if self._hold is not None and self._hold(self._k_last, k):
            return
        self.decide(k)

    def _update_span(self) -> None:
        """Re-choose how many intervals the next batch spans (module docstring, "Batch
        span"): only with a capacity from the cost models, never while calibrating."""
        cfg = self.config
        if cfg.capacity_tuples is not None or self._admit_all or cfg.span_limit == 1:
            return
        est = self.cost_estimates()
        overhead = max((e.overhead_s for e in est.values()), default=0.0)
        self._span = batch_span(
            overhead,
            cfg.trigger_s,
            cfg.headroom,
            current=self._span,
            limit=cfg.span_limit,
        )

    @property
    def span(self) -> int:
        """Intervals the next micro-batch spans (1 unless its fixed cost needs more)."""
        return self._span

    # ---------------------------------------------------------------------------- deciding

    def decide(self, k: int) -> Admission:
        """Make the joint decision for interval boundary ``k`` (feed time ``k · trigger``).

        Normally called by :meth:`latest_offset`; public for tests and the simulator-style use.

        Raises
        ------
        ConfigError
            ``k`` is not after the last decided boundary.
        """
        with self._lock:
            return self._decide(k)

    def _decide(self, k: int) -> Admission:
        cfg = self.config
        if k <= self._k_last:
            raise ConfigError(f"boundary {k} is not after the last decision {self._k_last}")
        tau_us = k * cfg.trigger_us
        tau = tau_us / 1e6
        self._push_slides(k)
        sic = self._stw.tuple_sic(self.lane_n_sources)
        qids = np.arange(self.n_queries)
        t0_us = self._query_t_us.copy()
        t1_us = np.maximum(self._t_end_us(k, qids), t0_us)
        drops: tuple[float, ...] | None = None
        if self._cqc_on():
            drops, t1_us = self._hold_back(k, tau, t0_us, t1_us)
        arrived_end = self._decided.copy()
        for q in self._queries:
            i = q.query_id
            if t1_us[i] > t0_us[i]:
                arrived_end[self._query_lanes[i]] = (
                    q.feed.count(t1_us[i] / 1e6)
                    if self._event_clock[i] is None
                    else q.feed.count_until_event(self._event_end(k, i))
                )
        count = np.maximum(arrived_end - self._decided, 0)
        lo = self._decided.copy()
        sic = self._carried(sic, lo, arrived_end)
        self._tuple_sic = sic
        mass_in = np.bincount(self.lane_query, weights=count * sic, minlength=self.n_queries)
        fed = self._federated_base(tau)
        group = self._balance_query
        if fed is None:
            base, norm = self._projection(t0_us / 1e6, t1_us / 1e6, mass_in, group)
            reported = None
        else:
            base, norm, reported = fed
        pol_query, pol_base = self.lane_query, base
        if group is not None and reported is not None:
            pol_query, pol_base = self._merged_queries(base, reported)
        elif group is not None:  # the local view: one base per fragment already (_projection)
            pol_query = group[self.lane_query]
            pol_base = np.zeros(int(group.max()) + 1)
            pol_base[group] = base
        # an orphaned fragment's tuples are shed whatever the load (module docstring)
        offered = np.where(self._orphaned(tau)[self.lane_query], 0, count)
        capacity, cost, cap_tuples = self._capacity(offered)
        est = self._load_costs if self._load_costs is not None else self.cost_estimates()
        backlog = Backlog(
            lane_query=pol_query,
            lane_source=self.lane_source,
            count=offered,
            tuple_sic=sic / norm[self.lane_query],
            query_sic=pol_base,
            cost=cost,
        )
        backlog_cost = backlog.total_cost
        sheds_always = bool(self.policy.sheds_always) and not self._admit_all
        ask: float | None = None
        if self._admit_all or capacity is None:
            self._overload = None
            if sheds_always:
                ask = capacity if capacity is not None else backlog_cost
        elif self.class_control is not None:
            self._overload = None  # the classes' managers decide (below)
        elif self.load_control is not None:
            self._overload = None
            drop = self._load_drop(k, tau, count, est)
            if drop > 0 or sheds_always:
                ask = (1.0 - drop) * backlog_cost
        else:
            d = detect(
                cfg.overload, backlog_cost=backlog_cost, budget=capacity, previous=self._overload
            )
            self._overload = d
            if d.overloaded:
                ask = d.admit
            elif sheds_always:
                ask = capacity
        units: _Units | None = None
        if self.class_control is not None and not (self._admit_all or capacity is None):
            if drops is None:
                drops = self._class_drops(k, tau, count, est)
            keep = self._class_keep(k, backlog, lo, drops, sheds_always)
        elif ask is None:
            keep = offered.copy()
        else:
            read = self._group_read(offered, cap_tuples, sheds_always)
            keep, units = self._ask_policy(k, backlog, lo, lo + offered, ask, read=read)
        if self.class_control is not None:
            n_c = self.class_control.config.n_classes
            arr_c = np.bincount(self._lane_class, weights=count, minlength=n_c)
            drop_c = np.bincount(self._lane_class, weights=count - keep, minlength=n_c)
            self.class_control.note(
                arrived=arr_c.astype(np.int64).tolist(),
                dropped=drop_c.astype(np.int64).tolist(),
                t=tau,
            )
            self._note_rows(k, count, keep, t0_us, t1_us, self._lane_class, n_c)
        if self.load_control is not None:
            self.load_control.note_dropped(int((count - keep).sum()))
            self._note_rows(k, count, keep, t0_us, t1_us, self._one_group, 1)
        self._decided = np.maximum(self._decided, arrived_end)
        self._due_end = np.maximum(self._due_end, self._decided)
        if self.class_control is not None and self.class_control.config.scheduler == "cqc":
            self._cut_at[k] = t1_us.copy()
        self._kept_share = np.where(count > 0, keep / np.maximum(count, 1), self._kept_share)
        grouped = units is not None and units.grouped
        bounds = None
        if units is not None and units.grouped:
            lanes = np.arange(len(self.lane_query))
            bounds = (
                np.searchsorted(units.lane, lanes, side="left"),
                np.searchsorted(units.lane, lanes, side="right"),
            )
        advanced = t1_us > t0_us
        for st in self._plans.values():
            ln = st.lanes
            if not advanced[self.lane_query[ln]].any():
                continue  # no query of the plan completed a window: no batch
            seg_groups: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
            if bounds is not None and units is not None:
                for j, lane in enumerate(ln.tolist()):
                    a, b = int(bounds[0][lane]), int(bounds[1][lane])
                    if count[lane] > 0:
                        seg_groups[j] = (
                            units.key[a:b].copy(),
                            units.count[a:b].copy(),
                            units.keep[a:b].copy(),
                        )
            st.pending.append(
                _Segment(
                    boundary=k,
                    t_us=tau_us,
                    start=np.minimum(lo[ln], arrived_end[ln]),
                    end=arrived_end[ln].copy(),
                    keep=keep[ln].copy(),
                    sic=sic[ln].copy(),
                    groups=seg_groups,
                    cut=t1_us[self.lane_query[ln]].copy(),
                    read=(
                        units.read[ln].copy()
                        if units is not None and units.read is not None
                        else None
                    ),
                )
            )
        adm = Admission(keep=keep)
        # per local query (the policy may have balanced merged ones: _merged_queries)
        gain = np.bincount(
            self.lane_query, weights=keep * backlog.tuple_sic, minlength=self.n_queries
        )
        # a fragment's local queries share the base of the local view, so the gain too
        gained = gain if group is None or reported is not None else fragment_sums(gain, group)
        if self.federation is not None:  # the node's own admissions, for its projection
            self.federation.record(
                self.epoch_s + tau,
                np.bincount(self.lane_query, weights=keep * sic, minlength=self.n_queries),
            )
        self._record_masses(k, qids[advanced], t0_us, t1_us, lo, arrived_end, keep, sic)
        self._query_t_us = t1_us
        kept_q = np.bincount(self.lane_query, weights=keep, minlength=self.n_queries)
        count_q = np.bincount(self.lane_query, weights=count, minlength=self.n_queries)
        self._admitted_n.add(np.full(self.n_queries, tau), qids, kept_q)
        self._arrived_n.add(np.full(self.n_queries, tau), qids, count_q)
        measured = self._measured(t1_us / 1e6)
        groups_seen: dict[str, int] = {}
        groups_kept: dict[str, int] = {}
        groups_unseen: dict[str, float] = {}
        if grouped and units is not None:
            uq = self.lane_query[units.lane]
            live = units.count > 0
            seen = _distinct_per_query(uq[live], units.key[live], self.n_queries)
            got = units.keep > 0
            kept = _distinct_per_query(uq[got], units.key[got], self.n_queries)
            groups_seen = {n: int(seen[i]) for i, n in enumerate(self.query_names)}
            groups_kept = {n: int(kept[i]) for i, n in enumerate(self.query_names)}
            # a bounded read drops unread tuples whatever their group: the groups it never saw
            # are lost to the results without a trace, so their number is estimated
            partial = (
                units.read < count if units.read is not None else np.zeros(count.size, dtype=bool)
            )
            bounded_q = np.bincount(self.lane_query[partial], minlength=self.n_queries) > 0
            est_unseen = _unseen_per_query(uq[live], units.key[live], units.count[live], bounded_q)
            groups_unseen = {n: float(est_unseen[i]) for i, n in enumerate(self.query_names)}
        self._record(
            k,
            _Interval(
                t=tau,
                capacity_tuples=cap_tuples,
                arrived=int(count.sum()),
                admitted=int(keep.sum()),
                overloaded=bool(self._overload is not None and self._overload.overloaded),
                query_sic={n: float(measured[i]) for i, n in enumerate(self.query_names)},
                query_sic_projected={
                    n: float(base[i] + gained[i]) for i, n in enumerate(self.query_names)
                },
                query_kept={
                    n: float(kept_q[i] / count_q[i]) if count_q[i] else 1.0
                    for i, n in enumerate(self.query_names)
                },
                query_arrived={n: int(count_q[i]) for i, n in enumerate(self.query_names)},
                query_admitted={n: int(kept_q[i]) for i, n in enumerate(self.query_names)},
                query_groups=groups_seen,
                query_groups_kept=groups_kept,
                query_groups_unseen=groups_unseen,
                span=self._span,
                overhead_s=sum(e.overhead_s for e in est.values()),
                per_tuple_s=float(np.mean([e.per_tuple_s for e in est.values()])),
                per_arrived_s=float(np.mean([e.per_arrived_s for e in est.values()])),
                probe=self._probed,
            ),
        )
        self._k_last = k
        self._decisions += 1
        if self.observers:
            self.observer_errors += notify(
                self.observers,
                DecisionEvent(
                    t=tau,
                    queries=tuple(self.query_names),
                    lane_query=self.lane_query,
                    lane_source=self.lane_source,
                    arrived=count.copy(),
                    kept=keep.copy(),
                ),
            )
        return adm

    def _load_drop(
        self,
        k: int,
        tau: float,
        count: np.ndarray,
        est: Mapping[str, CostEstimate],
    ) -> float:
        """The load manager's drop fraction for decision ``k`` (feed time ``tau``), from the
        measured statistics and the plans' fitted costs ``est``
        (:mod:`spillway.spark.load_control`)."""
        lc = self.load_control
        assert lc is not None
        interval_s = self._covered_s(k)
        pending = lc.pending_drop  # the drop already decided for these arrivals, if any
        share = None if pending is None else np.full(len(count), 1.0 - pending)
        w, q = self._work_and_queued(self._one_group, 1, count, est, share)
        work, queued = float(w[0]), float(q[0])
        total = float(count.sum())
        decision = lc.decide(
            t=tau,
            interval_s=interval_s,
            load=work / interval_s,
            arrived=int(total),
            queued_load=queued,
        )
        return decision.drop

    def _covered_s(self, k: int) -> float:
        """The feed time decision ``k``'s arrivals came in: from the last decided boundary to
        ``k``. A decision that came late (the batch before it ran long) covers more intervals
        than the span planned for it; at the planned span the load was that many times too
        high."""
        return self.config.trigger_s * max(k - self._k_last, 1)

    def _work_and_queued(
        self,
        lane_group: np.ndarray,
        n_groups: int,
        count: np.ndarray,
        est: Mapping[str, CostEstimate],
        share: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per group of lanes (``lane_group``: each lane's group, ``n_groups`` of them): the
        executor time ``count`` arrivals need at the plans' fitted costs ``est`` with nothing
        shed (a plan's overhead split over the groups by their arrivals, every arrival at its
        kept and its arrived cost, as the calibration measures the node's capacity), and the
        queued load (SEaMLeSS Eq. 4.1): the time of the admitted tuples not yet processed
        (their kept cost and their segments' arrived cost) plus the time the ``count``
        arrivals need after the shedding in effect: each lane's kept ``share`` when given
        (the share a manager already decided for them), else its kept share at its last
        decision. One group: the whole node.

        The arrivals count in the queue at the shedding in effect, not at their full cost:
        Pham's AQSIOS embeds the shedder in the source operators (§6.1.1, §6.1.4), so tuples
        waiting unread at a source are read through it, and Eq. 4.1 weights them by the load
        coefficient of the branch behind the source, whose measured selectivity is the kept
        share. At full cost (before) the
        queue held the arrivals this decision sheds, counted again as the load ``L`` it sheds
        from: SEaMLeSS's estimate ``qL / H`` then had a floor ``L·T / H`` no shedding lowers,
        and above ``D`` its controller wound up to the highest drop.

        Both per-tuple terms count: when nothing is shed the cost model cannot tell them apart
        and its prior splits them, while a run that sheds fits the split, so a load at the
        kept cost alone differed between runs of the same arrivals by how much they shed."""
        work = np.zeros(n_groups)
        queued = np.zeros(n_groups)
        kept = self._kept_share if share is None else share
        for st in self._plans.values():
            e = est[st.spec.name]
            ln = st.lanes
            per_g = np.bincount(lane_group[ln], weights=count[ln], minlength=n_groups)
            total = float(per_g.sum())
            if total > 0:
                fixed = e.overhead_s * per_g / total + e.per_arrived_s * per_g
                work += fixed + e.per_tuple_s * per_g
                kept_g = np.bincount(
                    lane_group[ln], weights=count[ln] * kept[ln], minlength=n_groups
                )
                queued += fixed + e.per_tuple_s * kept_g
            for seg in st.pending:
                queued += e.per_tuple_s * np.bincount(
                    lane_group[ln], weights=seg.keep, minlength=n_groups
                ) + e.per_arrived_s * np.bincount(
                    lane_group[ln], weights=seg.end - seg.start, minlength=n_groups
                )
        return work, queued

    def _class_drops(
        self,
        k: int,
        tau: float,
        count: np.ndarray,
        est: Mapping[str, CostEstimate],
        waiting: np.ndarray | None = None,
    ) -> tuple[float, ...]:
        """Every class's drop fraction for decision ``k`` at feed time ``tau``
        (:mod:`spillway.spark.class_control`):
        per class its arrivals, their load at the plans' fitted costs (a plan's overhead split
        by the classes' arrivals) and its queued load (:meth:`_work_and_queued`): of the
        ``waiting`` arrivals when given (the class scheduler holds some back), else of
        ``count``."""
        cc = self.class_control
        assert cc is not None
        n_c = cc.config.n_classes
        interval_s = self._covered_s(k)
        work, queued = self._work_and_queued(self._lane_class, n_c, count, est)
        if waiting is not None:
            _, queued = self._work_and_queued(self._lane_class, n_c, waiting, est)
        arrived = np.bincount(self._lane_class, weights=count, minlength=n_c)
        d = cc.decide(
            t=tau,
            interval_s=interval_s,
            loads=(work / interval_s).tolist(),
            arrived=arrived.astype(np.int64).tolist(),
            queued_loads=queued.tolist(),
        )
        return d.drops

    def _cqc_on(self) -> bool:
        """Whether this decision's windows go through the class scheduler (``cqc``): classes
        with a scheduler, outside calibration (which admits everything)."""
        cc = self.class_control
        return cc is not None and cc.config.scheduler == "cqc" and not self._admit_all

    def _hold_back(
        self, k: int, tau: float, t0_us: np.ndarray, due_us: np.ndarray
    ) -> tuple[tuple[float, ...], np.ndarray]:
        """The classes' drops for decision ``k`` and each query's cut: CQC's round robin
        (:func:`spillway.control.cqc.dispatch`) over every class's windows due and not yet
        run, at the time they need at the class's drop.

        The managers decide from what came since the last decision (the load), whether it
        runs now or waits: the queue a class builds is its own queued load and, once run, its
        own response time (its rows' arrival to their result). A class's windows run oldest
        first; a window runs whole (its result needs all its rows in one batch). The batch has
        the node's whole interval (``headroom`` 1 less the plans' fixed costs: the managers'
        ``H`` is their own margin); each window's time is its arrivals' per-arrived time and
        its kept rows' per-tuple time at the plans' fitted costs."""
        cc = self.class_control
        assert cc is not None
        n_c = cc.config.n_classes
        est = self._load_costs if self._load_costs is not None else self.cost_estimates()
        due = self._due_end.copy()
        for q in self._queries:
            i = q.query_id
            if due_us[i] > t0_us[i]:
                due[self._query_lanes[i]] = q.feed.count(due_us[i] / 1e6)
        new = np.maximum(due - self._due_end, 0)
        self._due_end = np.maximum(self._due_end, due)
        waiting = np.maximum(due - self._decided, 0)
        drops = self._class_drops(k, tau, new, est, waiting=waiting)
        per_tuple = np.array([est[p].per_tuple_s for p in self._lane_plan_names])
        per_arrived = np.array([est[p].per_arrived_s for p in self._lane_plan_names])
        kept = 1.0 - np.asarray(drops, dtype=np.float64)[self._lane_class]
        each = kept * per_tuple + per_arrived  # a lane's time per arrival at its class's drop
        queues: list[list[float]] = []
        cuts: list[list[np.ndarray]] = []  # per class, per window: each query's cut after it
        for c in range(n_c):
            ends_q = {
                i: self._window_ends_us(k, i, int(t0_us[i]), int(due_us[i]))
                for i in np.flatnonzero(cc.query_index == c).tolist()
                if due_us[i] > t0_us[i]
            }
            times: list[float] = []
            per_window: list[np.ndarray] = []
            before = 0.0
            for e in sorted({e for v in ends_q.values() for e in v}):
                cut, n = t0_us.copy(), self._decided.copy()
                for i, v in ends_q.items():  # each query up to its last window end by e
                    j = bisect.bisect_right(v, e)
                    if j:
                        cut[i] = v[j - 1]
                        n[self._query_lanes[i]] = self._queries[i].feed.count(cut[i] / 1e6)
                total = float((np.maximum(n - self._decided, 0) * each).sum())
                times.append(max(total - before, 0.0))
                per_window.append(cut)
                before = total
            queues.append(times)
            cuts.append(per_window)
        available = node_budget(
            est, interval_s=self.config.trigger_s * self._span, headroom=1.0
        ).available_s
        d = dispatch(
            priorities=cc.config.weights, capacity=available, queues=queues,
            credit=self._cqc_credit,
        )  # fmt: skip
        self._cqc_credit = d.credit
        t1_us = t0_us.copy()
        for c, ran in enumerate(d.windows):
            mine = cc.query_index == c
            if ran:
                t1_us[mine] = np.maximum(cuts[c][ran - 1][mine], t0_us[mine])
        return drops, t1_us

    def _class_keep(
        self,
        k: int,
        backlog: Backlog,
        lo: np.ndarray,
        drops: Sequence[float],
        sheds_always: bool,
    ) -> np.ndarray:
        """Per-lane keeps: the policy asked once per class, over that class's lanes only, to
        keep ``(1 − drop)`` of the class's backlog cost."""
        keep = backlog.count.astype(np.int64).copy()
        for c, drop in enumerate(drops):
            if drop <= 0 and not sheds_always:
                continue
            mine = self._lane_class == c
            count_c = np.where(mine, backlog.count, 0)
            if not count_c.any():
                continue
            sub = Backlog(
                lane_query=backlog.lane_query,
                lane_source=backlog.lane_source,
                count=count_c,
                tuple_sic=backlog.tuple_sic,
                query_sic=backlog.query_sic,
                cost=backlog.cost,
            )
            kept, _ = self._ask_policy(k, sub, lo, lo + count_c, (1.0 - drop) * sub.total_cost)
            keep[mine] = kept[mine]
        return keep

    def _note_rows(
        self,
        k: int,
        count: np.ndarray,
        keep: np.ndarray,
        t0_us: np.ndarray,
        t1_us: np.ndarray,
        lane_group: np.ndarray,
        n_groups: int,
    ) -> None:
        """Remember, per plan, each group's (class's, or the node's: one group) kept rows of
        decision ``k`` and their mean arrival time (the midpoint of each query's decided span,
        weighted by its arrivals), for the response times of the batches that hold them."""
        mid_lane = ((t0_us + t1_us) / 2e6)[self.lane_query]
        for st in self._plans.values():
            ln = st.lanes
            g = lane_group[ln]
            n = np.bincount(g, weights=count[ln], minlength=n_groups)
            kept = np.bincount(g, weights=keep[ln], minlength=n_groups)
            if not kept.any():
                continue
            at = np.bincount(g, weights=count[ln] * mid_lane[ln], minlength=n_groups)
            mid = np.divide(at, n, out=np.full(n_groups, np.nan), where=n > 0)
            self._row_mid.setdefault(st.spec.name, {})[k] = (mid, kept)

    def _done_rows(self, plan: str, boundary: int) -> list[tuple[float, float]]:
        """A batch of ``plan`` ending at ``boundary`` finished: per group, the kept rows of
        every decision it held (one decision, or several merged into one batch) and their
        mean arrival time, weighted by those rows; the decisions are consumed.

        >>> from spillway.testing import ListFeed
        >>> from spillway.policies import make_policy
        >>> feed = ListFeed(times=[[0.1, 0.2]], values=[[1.0, 2.0]])
        >>> plan = PlanSpec(name="p", kind="avg", window_s=1.0,
        ...                 queries=(PlanQuery(query_id=0, name="q", feed=feed),))
        >>> c = NodeController(ControllerConfig(clock="logical"), [plan], make_policy("uniform"))
        >>> one, a = np.zeros(1, dtype=np.int64), np.array
        >>> c._note_rows(1, a([10]), a([10]), a([0.0]), a([1e6]), one, 1)
        >>> c._note_rows(2, a([30]), a([30]), a([1e6]), a([2e6]), one, 1)
        >>> c._done_rows("p", 2)                # 10 rows from 0.5 s, 30 from 1.5 s: mean 1.25 s
        [(40.0, 1.25)]
        >>> c._done_rows("p", 2)
        [(0.0, nan)]
        """
        pending = self._row_mid.get(plan, {})
        done = [k for k in pending if k <= boundary]
        n_groups = len(next(iter(pending.values()))[1]) if pending else 1
        out: list[tuple[float, float]] = []
        for c in range(n_groups):
            rows = float(sum(float(pending[k][1][c]) for k in done))
            at = sum(float(pending[k][0][c] * pending[k][1][c]) for k in done if pending[k][1][c])
            out.append((rows, at / rows if rows > 0 else math.nan))
        for k in done:
            del pending[k]
        return out

    def _observe_classes(self, plan: str, boundary: int) -> None:
        """A batch of ``plan`` ending at ``boundary`` finished: each class's rows of the
        decisions it held got results now."""
        cc = self.class_control
        assert cc is not None
        now = self.feed_time()
        for c, (rows, mid) in enumerate(self._done_rows(plan, boundary)):
            if rows > 0:
                cc.observe(c, rows=int(round(rows)), response_s=now - mid, t=now)

    def _group_read(
        self, count: np.ndarray, cap_tuples: float, sheds_always: bool
    ) -> np.ndarray | None:
        """Per lane, the tuples a per-group decision reads (module docstring, "Bounded group
        reads"), or None when it reads them all.

        ``group_read · cap_tuples`` tuples in all, shared over the lanes in proportion
        to their backlog (at least one tuple of a lane with any), when their backlog is larger.

        >>> from spillway.testing import ListFeed
        >>> from spillway.policies import make_policy
        >>> feed = ListFeed(times=[[0.1] * 4, [0.2] * 6], values=[[1.0] * 4, [2.0] * 6])
        >>> plan = PlanSpec(name="g", kind="group_avg", window_s=1.0,
        ...                 queries=(PlanQuery(query_id=0, name="q", feed=feed),))
        >>> c = NodeController(ControllerConfig(clock="logical"), [plan], make_policy("cod"),
        ...                    epoch_s=0.0)
        >>> c._group_read(np.array([3000, 1000]), 200.0, False).tolist()
        [300, 100]
        >>> c._group_read(np.array([300, 100]), 200.0, False) is None
        True
        """
        factor = self.config.group_read
        if (
            factor is None
            or sheds_always
            or not self.policy.needs_groups
            or not math.isfinite(cap_tuples)
        ):
            return None
        bound = factor * max(cap_tuples, 0.0)
        total = float(count.sum())
        if total <= bound:
            return None
        share = np.ceil(count * (bound / total)).astype(np.int64)
        return np.minimum(np.maximum(share, (count > 0).astype(np.int64)), count)

    def _ask_policy(
        self,
        k: int,
        backlog: Backlog,
        lo: np.ndarray,
        hi: np.ndarray,
        capacity: float,
        *,
        read: np.ndarray | None = None,
    ) -> tuple[np.ndarray, _Units | None]:
        """The policy's per-lane keep counts for ``backlog`` (tuples ``[lo, hi)`` per lane).

        A policy that needs groups or statistics gets the backlog split into units
        (:meth:`_units`); its keep counts per unit are summed back per lane and also returned
        in the units (``keep``), for the segments. With ``read`` (a bounded group read: per
        lane the tuples looked at), the units count only those tuples, exactly.
        """
        pol = self.policy
        rng = np.random.default_rng(np.random.SeedSequence([self.config.seed, k]))
        snap = pol.snapshot()
        snap["rng"] = rng.bit_generator.state
        pol.restore(snap)
        units: _Units | None = None
        asked = backlog
        if pol.needs_groups or pol.needs_stats:
            units = self._units(lo, hi, groups=pol.needs_groups, stats=pol.needs_stats, read=read)
            u = units.lane
            asked = Backlog(
                lane_query=backlog.lane_query[u],
                lane_source=backlog.lane_source[u],
                count=units.count,
                tuple_sic=backlog.tuple_sic[u],
                query_sic=backlog.query_sic,
                cost=None if backlog.cost is None else backlog.cost[u],
                lane_group=units.key if pol.needs_groups else None,
                stats=units.stats,
            )
        adm = pol.decide(asked, capacity)
        keep = np.asarray(adm.keep, dtype=np.int64)
        if keep.shape != asked.count.shape or (keep < 0).any() or (keep > asked.count).any():
            raise ConfigError(f"policy {pol!r} returned keep counts outside [0, count]")
        if units is None:
            return keep, None
        units.keep = keep
        lane_keep = np.bincount(units.lane, weights=keep, minlength=backlog.n_lanes)
        return np.rint(lane_keep).astype(np.int64), units

    def _units(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        *,
        groups: bool,
        stats: bool,
        read: np.ndarray | None = None,
    ) -> _Units:
        """Split every lane's waiting tuples ``[lo, hi)`` by group key (one unit per distinct
        key, counted by :func:`_group_counts` after one vectorised key scan; an empty lane keeps one unit of count
        0, so every (query, source) stays visible, e.g. to a join's stream count) and/or
        attach the value's mean and population variance per unit (one payload scan)."""
        parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for lane in range(len(self.lane_query)):
            a, b = int(lo[lane]), int(hi[lane])
            if b <= a:
                z = np.zeros(1)
                parts.append((lane, np.zeros(1, np.int64), np.zeros(1, np.int64), z, z))
                continue
            feed = self._queries[int(self.lane_query[lane])].feed
            src = int(self.lane_source[lane])
            bounded = read is not None and int(read[lane]) < b - a
            whole = int(read[lane]) if bounded and read is not None else b - a
            idx = (
                self._log_sample(
                    lane,
                    read_index(
                        ((a, b, whole),),
                        self._read_keys[lane],
                        log=bool(self._lane_log[lane]),
                        gap=int(self._lane_gap[lane]),
                    ),
                )
                if bounded
                else self._scan_index(lane, a, b)
            )
            values = None
            if stats:
                payload = feed.payload(src, idx)
                values = np.asarray(payload["value"], dtype=np.float64)
                keys = np.asarray(payload["key"], dtype=np.int64) if groups else None
            else:
                keys = np.asarray(feed.keys(src, idx), dtype=np.int64)
            if keys is not None:
                uniq, cnt, inv = _group_counts(keys, inverse=values is not None)
            else:
                uniq, cnt = np.zeros(1, np.int64), np.array([idx.size], np.int64)
                inv = np.zeros(idx.size, np.int64)
            mean = var = np.zeros(uniq.size)
            if values is not None and inv is not None:
                mean = np.bincount(inv, weights=values, minlength=uniq.size) / cnt
                dev = values - mean[inv]
                var = np.bincount(inv, weights=dev * dev, minlength=uniq.size) / cnt
            if idx.size < whole:  # a sample: its counts scaled to the lane (or to its read)
                cnt = scaled_counts(cnt, whole)
            parts.append((lane, uniq, cnt.astype(np.int64), mean, var))
        lane_arr = np.concatenate([np.full(p[1].size, p[0], np.int64) for p in parts])
        return _Units(
            lane=lane_arr,
            key=np.concatenate([p[1] for p in parts]),
            count=np.concatenate([p[2] for p in parts]),
            grouped=groups,
            stats=(
                {
                    "mean": np.concatenate([p[3] for p in parts]),
                    "var": np.concatenate([p[4] for p in parts]),
                }
                if stats
                else {}
            ),
            read=read,
        )

    def _carried(self, sic: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``sic`` with every link lane's entry replaced by the mean SIC its waiting tuples
        ``[lo, hi)`` carry (module docstring, "Link lanes"); a link lane with nothing waiting
        keeps the mean of the last decision that saw one of its tuples."""
        if not self._lane_carries.any():
            return sic
        out = sic.copy()
        for lane in np.flatnonzero(self._lane_carries).tolist():
            n = int(hi[lane] - lo[lane])
            if n > 0:
                feed = self._queries[int(self.lane_query[lane])].feed
                mass = feed.carried_sic(int(self.lane_source[lane]), int(lo[lane]), int(hi[lane]))
                self._carried_mean[lane] = mass / n
            out[lane] = self._carried_mean[lane]
        return out

    def _push_slides(self, k: int) -> None:
        """Push every slide since the last decision into the STW counter (at most one STW)."""
        cfg = self.config
        n_slots = self._stw.config.n_slots
        first = max(self._k_last + 1, k - n_slots)
        if first > self._k_last + 1 or self._decisions == 0:
            # A gap longer than the STW (earlier slides are gone), or the first decision
            # (possibly after a re-sync to a later boundary): start counting at ``first - 1``.
            prev = self._arrivals_at((first - 1) * cfg.trigger_us)
        else:
            prev = self._arrived_tau
        for j in range(first, k + 1):
            now = self._arrivals_at(j * cfg.trigger_us)
            self._stw.push(np.maximum(now - prev, 0))
            prev = now
        self._arrived_tau = prev

    def _arrivals_at(self, t_us: int) -> np.ndarray:
        out = np.zeros(len(self.lane_query), dtype=np.int64)
        for q in self._queries:
            out[self._query_lanes[q.query_id]] = q.feed.count(t_us / 1e6)
        return out

    def _record_masses(
        self,
        k: int,
        queries: np.ndarray,
        t0_us: np.ndarray,
        t1_us: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        keep: np.ndarray,
        sic: np.ndarray,
    ) -> None:
        """Record, per window of every query the decision advanced, the SIC mass that arrived
        and the mass admitted (:mod:`spillway.quality.stw_account`). Per window, not per
        decision: a decision that covers several windows at different rates (after a slow
        batch, or a rate step) spreads its mass by where the tuples arrived, which is what the
        query's results carry; the admitted mass is split like the arrivals (the kept sample
        is uniform over the range)."""
        for q in queries.tolist():
            lanes = self._query_lanes[q]
            ends = self._window_ends_us(k, q, int(t0_us[q]), int(t1_us[q]))
            feed = self._queries[q].feed
            clock = self._event_clock[q]
            cuts = [lo[lanes]]
            w_s = self.query_window_us[q] / 1e6
            for t_us in ends[:-1]:
                if clock is None:
                    at = feed.count(t_us / 1e6)
                else:  # the exact window end in event time (the µs floor undone)
                    at = feed.count_until_event(
                        round((clock[0] + clock[1] * t_us / 1e6) / w_s) * w_s
                    )
                cuts.append(np.clip(np.asarray(at, dtype=np.int64), lo[lanes], hi[lanes]))
            cuts.append(hi[lanes])
            # A log's cuts are looked up one by one while producers append: keep them in order
            # (a cut below an earlier one would give a window a negative count)
            n = np.diff(np.maximum.accumulate(np.stack(cuts), axis=0), axis=0).astype(np.float64)
            total = np.maximum(hi[lanes] - lo[lanes], 1)
            arrived = n @ sic[lanes]
            kept = n @ (keep[lanes] / total * sic[lanes])
            starts = np.array([t0_us[q], *ends[:-1]], dtype=np.float64) / 1e6
            stops = np.array(ends, dtype=np.float64) / 1e6
            self.account.add("arrived", np.full(len(stops), q), starts, stops, arrived)
            self.account.add("admitted", np.full(len(stops), q), starts, stops, kept)

    def _window_ends_us(self, k: int, q: int, t0_us: int, t1_us: int) -> list[int]:
        """Feed times (µs) of query ``q``'s window ends in ``(t0_us, t1_us]``, ``t1_us`` last
        (for a feed with an event clock, the event-time window ends mapped to arrival time)."""
        w = int(self.query_window_us[q])
        clock = self._event_clock[q]
        if clock is None:
            e = self.epoch_us
            first = ((e + t0_us) // w + 1) * w - e
            ends = list(range(first, t1_us, w))
        else:
            origin, speed = clock
            w_s = w / 1e6
            a = math.floor((origin + speed * t0_us / 1e6) / w_s + 1e-9) + 1
            ends = []
            while True:
                t = int(math.floor((a * w_s - origin) / speed * 1e6))
                if t >= t1_us:
                    break
                if t > t0_us:
                    ends.append(t)
                a += 1
        return [*ends, t1_us]

    def _projection(
        self,
        decided_s: np.ndarray,
        until_s: np.ndarray,
        mass_in: np.ndarray,
        group: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every query's SIC over the STW ending at ``until_s`` before this decision, and the
        mass that normalises it (THEMIS §6 local projection, in source time).

        ``W = [until − STW, until)``; the query's input is decided up to ``decided_s`` and this
        decision's backlog (SIC mass ``mass_in``) covers ``[decided_s, until)``. The SIC kept
        in ``W`` so far is the results' mass where the input is processed (``E``, with a
        coordinator) and the admitted mass where it is in flight (``[E, decided_s)``, or all of
        ``W`` without a coordinator: the node's own bookkeeping). It is divided by the mass
        that arrived in ``W`` (:mod:`spillway.quality.stw_account`: a ratio, so rate changes
        do not read as gains), as are the tuple SICs the policy adds to it, so the policy
        balances the share of each query's SIC its results will carry.

        With ``group`` (per local query, its federated query: ``_balance_query``) the local
        queries of one query are one fragment (THEMIS Fig. 4, top: a node balances the SIC
        its admissions give each of its fragments): its own sources and the rows its upstream
        fragments sent are summed, and every one of them gets the fragment's base and norm.
        Balanced apart, a fragment's link lane (a few rows carrying what upstream kept) would
        reach its level at once and its sources would be balanced alone against the node's
        other queries.

        Returns ``(base, norm)``: the projected SIC before this decision and the arrived mass
        of ``W`` (1 for a query with nothing arrived, so its tuples keep their stamps).
        """
        lo = until_s - self.config.stw_s
        acc = self.account
        if self.coordinator is not None:
            done = np.clip(acc.processed, lo, decided_s)
            kept = acc.mass("results", lo, done) + acc.mass("admitted", done, decided_s)
        else:
            kept = acc.mass("admitted", lo, decided_s)
        norm = acc.mass("arrived", lo, decided_s) + mass_in
        if group is not None:
            kept, norm = fragment_sums(kept, group), fragment_sums(norm, group)
        empty = norm <= 0
        norm = np.where(empty, 1.0, norm)
        return np.where(empty, 1.0, kept / norm), norm

    def _orphaned(self, tau: float) -> np.ndarray:
        """Per query, whether the coordinator's last usable update marks its fragment orphaned
        (its output no longer reaches a result); all False without a federation (Q,)."""
        if self.federation is None:
            return np.zeros(self.n_queries, dtype=bool)
        return self.federation.orphaned(self.epoch_s + tau)

    def _merged_queries(
        self, base: np.ndarray, reported: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per lane the query BALANCE-SIC sees (``_balance_query``) and per such query its
        projected SIC: the update's value plus what every local query of it projects on top
        (each local query's ``base`` adds only its own admissions since the update's STW end)."""
        group = self._balance_query
        assert group is not None
        n = int(group.max()) + 1
        merged = np.zeros(n)
        merged[group] = reported  # one value per federated query
        merged += np.bincount(group, weights=base - reported, minlength=n)
        return group[self.lane_query], merged

    def _federated_base(
        self, tau: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """``(base, norm, reported)`` from the coordinator's last update projected over this
        node's own shedding (module docstring, "Federated base"; ``reported``: the update's own
        SIC over its ceiling, before the projection), or None to fall back to the local view
        (no federation, no update yet, or a stale one: the view counts and logs it)."""
        if self.federation is None:
            return None
        got = self.federation.base(self.epoch_s + tau)
        if got is None:
            return None
        return got.base, np.where(got.ceiling > 0, got.ceiling, 1.0), got.reported

    def _measured(self, until_s: np.ndarray) -> np.ndarray:
        """The query SIC recorded per interval: with a coordinator the measured Eq. 4 over the
        latest complete STW (results mass over arrived mass); without one the admitted share
        of the mass that arrived in the STW ending at ``until_s``."""
        if self.coordinator is not None:
            return self.account.measured(float(until_s.max()) if until_s.size else None)
        return self.account.fraction(until_s - self.config.stw_s, until_s, numerator="admitted")

    def log_lag(self) -> dict[str, dict[str, int]]:
        """Per query reading a log: per partition (``topic/partition``), the records in the log
        that Spark has not processed yet (the log's end minus the end of the last batch Spark
        acknowledged): consumer lag. Queries of generated feeds are left out.

        Raises
        ------
        KafkaClientError
            The log's ends cannot be read (the broker is down).
        """
        return self._per_log("lag")

    def log_positions(self) -> dict[str, dict[str, int]]:
        """Per query reading a log: per partition (``topic/partition``), the offset the last
        batch Spark acknowledged ends at (every record before it decided: processed, or shed
        and counted in the offset log). Queries of generated feeds are left out."""
        return self._per_log("positions")

    def _per_log(self, method: str) -> dict[str, dict[str, int]]:
        """``feed.<method>(processed)`` of every query reading a log (``processed``: per lane,
        the end of the last batch Spark acknowledged)."""
        processed = np.zeros(len(self.lane_query), dtype=np.int64)
        for st in self._plans.values():
            if st.acked_end is not None and len(st.acked_end) == len(st.lanes):
                processed[st.lanes] = st.acked_end
        out: dict[str, dict[str, int]] = {}
        for q in self._queries:
            fn = getattr(q.feed, method, None)
            if getattr(q.feed, "log", False) and callable(fn):
                out[q.name] = fn(processed[self._query_lanes[q.query_id]])
        return out

    def cost_estimates(self) -> dict[str, Any]:
        """Current fitted cost (:class:`~spillway.control.CostEstimate`) of every plan."""
        with self._lock:
            return {n: estimate(st.cost) for n, st in self._plans.items()}

    def freeze_load_costs(self) -> None:
        """From now on the load managers (``load_control``, ``class_control``) measure the
        load at the plans' costs fitted so far, not refitted: Pham's load coefficients (Eqs.
        3.1-3.2), per-tuple CPU times, which a background job that takes the node's cores
        does not change. The cost model fits executor wall time, so without this a job that
        slows the batches raises the measured load and every manager sheds more on its own:
        only the headroom ``H`` should have to follow a capacity the load does not show.
        The budget of a node without a load manager, and every plan's cost model, are not
        affected."""
        with self._lock:
            self._load_costs = self.cost_estimates()

    def cost_states(self) -> dict[str, CostModelState]:
        """Every plan's cost model state (picklable; see :meth:`set_cost_state`)."""
        with self._lock:
            return {n: st.cost for n, st in self._plans.items()}

    def set_cost_state(self, plan: str, state: CostModelState) -> None:
        """Start ``plan``'s cost model from ``state`` (e.g. fitted during a calibration)."""
        if not isinstance(state, CostModelState):
            raise ConfigError(f"state must be a CostModelState, got {type(state).__name__}")
        with self._lock:
            self._plan(plan).cost = state

    def _capacity(self, count: np.ndarray) -> tuple[float | None, np.ndarray | None, float]:
        """(capacity in the policy's unit, per-lane cost or None, capacity in tuples)."""
        cfg = self.config
        self._probed = False
        if cfg.capacity_tuples is not None:
            return float(cfg.capacity_tuples), None, float(cfg.capacity_tuples)
        est = self.cost_estimates()
        per_plan = np.bincount(self.lane_plan, weights=count, minlength=len(self._plan_names))
        running = [self._plan_names[i] for i in np.flatnonzero(per_plan > 0)]
        # a log's shed records are never read unless a per-group policy reads its whole range
        # (as in observe_batch): only the arrivals that are read cost their per-arrived time,
        # so a log lane is charged for each record it keeps (below). Its kept runs are as few
        # as keep them a reader's gap apart (log_runs), so the shed records read through
        # between two runs are a small part, counted when its batches are (observe_batch)
        scanned = count if self.policy.needs_groups else np.where(self._lane_log, 0, count)

        def budget_for(scanned: np.ndarray) -> Any:
            read = np.bincount(self.lane_plan, weights=scanned, minlength=len(self._plan_names))
            return node_budget(
                est,
                interval_s=cfg.trigger_s * self._span,
                headroom=cfg.headroom,
                running=running or None,
                arrived={self._plan_names[i]: float(n) for i, n in enumerate(read)},
            )

        budget = budget_for(scanned)
        cost = budget.lane_costs(self._lane_plan_names)
        if not self.policy.needs_groups and self._lane_log.any():
            # a log lane read as its kept runs fetches each record it keeps: its per-arrived
            # time is part of a kept record's cost (observe_batch counts them as read)
            each_read = np.array([est[p].per_arrived_s for p in self._lane_plan_names])
            cost = cost + np.where(self._lane_log, each_read, 0.0)
        total = float(count.sum())
        if self.policy.needs_groups and cfg.group_read is not None and total > 0:
            # a bounded group read (_group_read) reads group_read x the capacity it is given,
            # not all the lanes hold: each kept tuple brings group_read read ones, so it is
            # charged their per-arrived time, and the capacity pays for its own read (charged
            # for a read sized before that, the decision read twice what it had paid for)
            each = cost + cfg.group_read * np.array(
                [est[p].per_arrived_s for p in self._lane_plan_names], dtype=np.float64
            )
            free = budget_for(np.zeros_like(count))
            own = free.available_s * total / float((count * each).sum())
            if self._group_read(count, own, False) is not None:
                budget, cost = free, each
        if total > 0:
            mean_cost = float((count * cost).sum()) / total
        else:
            mean_cost = float(np.mean([budget.per_tuple_s[p] for p in self._plan_names]))
        available, tuples = budget.available_s, budget.available_s / mean_cost
        if self._probe_due(running or self._plan_names):
            available, tuples = available * (1 + cfg.probe_gain), tuples * (1 + cfg.probe_gain)
            self.probes += 1
            self._probed = True
        shown = self._shown_rows(running or self._plan_names)
        if cfg.capacity_reach is not None and shown is not None:
            reach = cfg.capacity_reach * shown
            if tuples > reach:
                available, tuples = reach * mean_cost, reach
        return available, cost, tuples

    def _probe_due(self, plans: Sequence[str]) -> bool:
        """Whether this decision probes (module docstring, "Probes"): every ``probe_every``
        decisions, once every plan of ``plans`` has a measured batch and the last one of each
        finished within the budget."""
        cfg = self.config
        if cfg.probe_every == 0 or (self._decisions + 1) % cfg.probe_every:
            return False
        limit = cfg.headroom * cfg.trigger_s * self._span
        last = [self._plans[p].batches[-1] for p in plans if self._plans[p].batches]
        return len(last) == len(plans) and all(b["duration_s"] <= limit for b in last)

    def _shown_rows(self, plans: Sequence[str]) -> float | None:
        """Sum over ``plans`` of the largest of each one's last :data:`REACH_BATCHES` measured
        batches (rows), ``cold_start_rows`` for a plan with none; None when a plan has none and
        ``cold_start_rows`` is None. A batch of no rows shows nothing (a log read before its
        producers start): it is not counted, or the reach of a node whose first batches were
        empty would start at 2 tuples and take a doubling per interval to grow back."""
        total = 0.0
        for name in plans:
            batches = self._plans[name].batches
            recent = (batches[-i] for i in range(1, min(len(batches), REACH_BATCHES) + 1))
            rows = [b["rows"] for b in recent if b["rows"] > 0]
            if not rows:
                if self.config.cold_start_rows is None:
                    return None
                total += self.config.cold_start_rows
                continue
            total += max(rows)
        return total

    def _merge(self, st: _PlanState, s: PlanOffset) -> PlanOffset:
        segs = st.pending
        keep = np.sum([g.keep for g in segs], axis=0)
        weighted = np.sum([g.keep * g.sic for g in segs], axis=0)
        sic = np.where(keep > 0, weighted / np.maximum(keep, 1), segs[-1].sic)
        last = segs[-1]
        return PlanOffset(
            plan=st.spec.name,
            epoch_us=self.epoch_us,
            boundary=last.boundary,
            t_us=last.t_us,
            end=tuple(last.end.tolist()),
            keep=tuple(keep.tolist()),
            sic=tuple(sic.tolist()),
            groups=self._merge_groups(st, segs),
            cut=tuple(last.cut.tolist()) if last.cut is not None else (),
            read=self._merge_reads(segs),
        )

    @staticmethod
    def _merge_reads(segs: Sequence[_Segment]) -> dict[int, tuple[tuple[int, int, int], ...]]:
        """Per plan lane a bounded group read covered in part, one ``(lo, hi, m)`` per
        segment with tuples (``m`` = all of them where that segment read the whole range)."""
        out: dict[int, tuple[tuple[int, int, int], ...]] = {}
        n_lanes = len(segs[-1].end)
        for j in range(n_lanes):
            if not any(
                g.read is not None and int(g.read[j]) < int(g.end[j] - g.start[j]) for g in segs
            ):
                continue
            out[j] = tuple(
                (int(g.start[j]), int(g.end[j]),
                 int(g.read[j]) if g.read is not None else int(g.end[j] - g.start[j]))
                for g in segs
                if g.end[j] > g.start[j]
            )  # fmt: skip
        return out

    def _merge_groups(
        self, st: _PlanState, segs: Sequence[_Segment]
    ) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per-group keep counts over the merged range, only the groups not kept whole.

        Per group: the sum over segments of its keep (a segment's group arrays list every
        group of its range, so a group absent from them has no tuple there). A segment that
        kept a lane whole without a per-group decision (not overloaded) adds its range's group
        counts as kept, from a key scan made only in that (rare) case.
        """
        lanes = sorted(
            {j for g in segs for j, (_, c, kp) in g.groups.items() if bool((kp < c).any())}
        )
        out: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for j in lanes:
            parts = []
            for g in segs:
                if j in g.groups:
                    parts.append(g.groups[j])
                elif g.end[j] > g.start[j]:
                    lane, a, b = int(st.lanes[j]), int(g.start[j]), int(g.end[j])
                    idx = self._scan_index(lane, a, b)
                    u, c = np.unique(self._lane_keys(lane, idx), return_counts=True)
                    if idx.size < b - a:
                        c = scaled_counts(c, b - a)
                    parts.append((u, c, c))
            if len(parts) == 1:
                u, c, kp = parts[0]
            else:
                u, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
                c = np.bincount(inv, weights=np.concatenate([p[1] for p in parts]))
                kp = np.bincount(inv, weights=np.concatenate([p[2] for p in parts]))
            part = kp < c
            if part.any():
                out[j] = (
                    tuple(u[part].tolist()),
                    tuple(np.rint(kp[part]).astype(np.int64).tolist()),
                )
        return out

    def _lane_keys(self, lane: int, idx: np.ndarray) -> np.ndarray:
        feed = self._queries[int(self.lane_query[lane])].feed
        return np.asarray(feed.keys(int(self.lane_source[lane]), idx), dtype=np.int64)

    def _log_sample(self, lane: int, idx: np.ndarray) -> np.ndarray:
        """Of a bounded read ``idx`` of a log lane, the at most :data:`LOG_GROUP_SAMPLE`
        tuples the driver fetches to count its groups: :data:`LOG_SAMPLE_RUNS` runs spread over
        the read (each inside one of its runs or across two, so at most twice as many seeks;
        seeded by the lane as :meth:`_scan_index`); ``idx`` itself for any other lane, or a
        read that small. The executors read all of ``idx``."""
        if not self._lane_log[lane] or idx.size <= LOG_GROUP_SAMPLE:
            return idx
        pos = select_kept_runs(0, idx.size, LOG_GROUP_SAMPLE, _SAMPLE_KEY ^ lane, LOG_SAMPLE_RUNS)
        return idx[pos]

    def _scan_index(self, lane: int, lo: int, hi: int) -> np.ndarray:
        """The tuples of ``[lo, hi)`` whose keys a per-group decision scans: all of them, or
        at most :data:`LOG_GROUP_SAMPLE` for a log (records are fetched and parsed to be
        scanned) and :data:`GROUP_SAMPLE` for any other feed, read as a few runs spread over
        the range (:func:`~spillway.spark.source.select_kept_runs`, seeded by the lane: the
        same range gives the same sample, so a replay decides the same)."""
        feed = self._queries[int(self.lane_query[lane])].feed
        log = bool(getattr(feed, "log", False))
        limit = LOG_GROUP_SAMPLE if log else GROUP_SAMPLE
        if hi - lo > limit:
            runs = LOG_SAMPLE_RUNS if log else 64
            return select_kept_runs(lo, hi, limit, _SAMPLE_KEY ^ lane, runs=runs)
        return np.arange(lo, hi, dtype=np.int64)

    # ---------------------------------------------------------------------------- measuring

    def observe_batch(
        self,
        plan: str,
        *,
        rows: int,
        duration_s: float,
        end_offset: Mapping[str, Any] | str | None = None,
        batch_id: int | None = None,
        start_offset: Mapping[str, Any] | str | None = None,
    ) -> None:
        """A micro-batch of ``plan`` finished (from the listener): feed its cost model and
        attribute its rows and duration to the interval its end offset was decided at. With
        both offsets, the tuples its range covered (kept or shed) enter the cost model's
        per-arrived term, but for the shed records of a log read as its kept runs, which are
        never fetched (:func:`_covered`)."""
        with self._lock:
            st = self._plan(plan)
            lanes = st.lanes

            def read_through(j: int, lo: int, hi: int, keep: int) -> int:
                lane = int(lanes[j])
                return shed_read(lo, hi, keep, self._read_keys[lane], int(self._lane_gap[lane]))

            arrived = _covered(
                start_offset, end_offset, self._lane_log[lanes].tolist(), read_through
            )
            arrived = None if arrived is None or arrived < int(rows) else arrived
            st.cost = observe(
                self._cost_model, st.cost, int(rows), float(duration_s), arrived=arrived
            )
            boundary = None
            if end_offset is not None:
                try:
                    boundary = PlanOffset.from_json(end_offset).boundary
                except InputDataError:
                    boundary = None
            if boundary is not None:
                st.done_b = max(st.done_b, boundary)
            st.batches.append(
                {
                    "batch_id": batch_id,
                    "rows": int(rows),
                    "duration_s": float(duration_s),
                    "boundary": boundary,
                }
            )
            if self.observers:
                self.observer_errors += notify(
                    self.observers,
                    BatchEvent(
                        plan=plan, batch_id=batch_id, rows=int(rows), duration_s=float(duration_s)
                    ),
                )
            if self.load_control is not None and boundary is not None:
                ((held, arrived_at),) = self._done_rows(plan, boundary)
                self.load_control.observe(
                    rows=int(rows),
                    response_s=self.feed_time() - arrived_at if held > 0 else None,
                )
            if self.class_control is not None and boundary is not None:
                self._observe_classes(plan, boundary)
            rec = self._intervals.get(boundary) if boundary is not None else None
            if rec is not None:
                rec.processed += int(rows)
                rec.batch_s = max(rec.batch_s, float(duration_s))

    def batches(self, plan: str) -> list[dict[str, Any]]:
        """Measured micro-batches of ``plan`` (batch id, rows, duration, boundary)."""
        with self._lock:
            return list(self._plan(plan).batches)

    def _record(self, k: int, rec: _Interval) -> None:
        self._intervals[k] = rec
        self._order.append(k)
        while len(self._order) > self.config.history:
            self._intervals.pop(self._order.popleft(), None)

    def history(self) -> list[IntervalRecord]:
        """Every recorded interval: estimated capacity vs what Spark processed for it."""
        with self._lock:
            return [
                IntervalRecord(
                    t=r.t,
                    capacity_tuples=r.capacity_tuples,
                    arrived_tuples=r.arrived,
                    admitted_tuples=r.admitted,
                    processed_tuples=r.processed,
                    batch_s=r.batch_s,
                    query_sic=dict(r.query_sic),
                    query_sic_projected=dict(r.query_sic_projected),
                    query_arrived=dict(r.query_arrived),
                    query_admitted=dict(r.query_admitted),
                    query_kept=dict(r.query_kept),
                    query_groups=dict(r.query_groups),
                    query_groups_kept=dict(r.query_groups_kept),
                    query_groups_unseen=dict(r.query_groups_unseen),
                    span=r.span,
                    overhead_s=r.overhead_s,
                    per_tuple_s=r.per_tuple_s,
                    per_arrived_s=r.per_arrived_s,
                    probe=r.probe,
                )
                for k in self._order
                for r in (self._intervals[k],)
            ]

    def class_status(self, t: float, window_s: float) -> tuple[ClassStatus, ...]:
        """Every priority class at feed time ``t`` over the last ``window_s`` seconds
        (:meth:`ClassControl.status <spillway.spark.class_control.ClassControl.status>`);
        empty on a node without classes."""
        with self._lock:
            if self.class_control is None:
                return ()
            return self.class_control.status(t=t, window_s=window_s, queries=self.query_names)

    def stw_view(self) -> dict[str, np.ndarray]:
        """Per query over the last STW: tuples arrived (by arrival slide, over ``window_s``
        seconds), decided and admitted (by decision), admitted SIC; and every lane's tuple SIC."""
        with self._lock:
            now = (self._k_last + 1) * self.config.trigger_s  # window ends after the last one
            slides = min(self._stw.slides, self._stw.config.n_slots)
            arrived = np.bincount(
                self.lane_query, weights=self._stw.totals(), minlength=self.n_queries
            )
            return {
                "arrived": arrived,
                "window_s": np.array(slides * self.config.trigger_s),
                "decided": self._arrived_n.window_sum(now),
                "admitted": self._admitted_n.window_sum(now),
                "admitted_sic": self.account.fraction(
                    now - self.config.stw_s, now, numerator="admitted"
                ),
                "tuple_sic": self._tuple_sic.copy(),
            }

    # ---------------------------------------------------------------------------- modes

    def pause(self) -> None:
        """Hand out no new data: every later ``latest`` request gets its start back (so the
        streaming queries finish their batch in flight and then idle; used to stop cleanly)."""
        with self._lock:
            self._paused = True

    def set_calibration(self, hold: Callable[[int, int], bool] | None) -> None:
        """Calibration mode: admit everything; ``hold(k_last, k)`` True skips a due decision
        (so the next batch spans several intervals and batch sizes vary). None: normal mode."""
        with self._lock:
            self._hold = hold
            self._admit_all = hold is not None

    def processed(self) -> tuple[np.ndarray, np.ndarray]:
        """Per query, how far Spark has processed it: ``(done, decided)`` in Unix seconds.

        ``done`` is the feed time (as Unix time) its plan's last finished batch decided it up
        to (every window ending by then has been through the sink); ``decided`` is that
        batch's boundary (epoch + boundary · trigger), no later than when its input was cut.
        A batch counts as finished once Spark acknowledged it (its end offset came back as the
        start of the next request, or in ``commit``) or once the progress listener reported it
        (:meth:`observe_batch`), whichever came first: Spark acknowledges a batch only when it
        plans the next one, so a query stopped after its last batch never acknowledges it.
        NaN for a query whose plan finished no batch yet. A federation node reports both to
        the query coordinator (:meth:`spillway.quality.coordination.SicCoordinator.progress`);
        an experiment scores exact answers only up to ``done``
        (:func:`spillway.experiments._spark_runs.run_level`).
        """
        done = np.full(self.n_queries, np.nan)
        decided = np.full(self.n_queries, np.nan)
        with self._lock:
            for st in self._plans.values():
                b = max(st.acked_b, st.done_b)
                if b <= 0:
                    continue
                qids = np.array([q.query_id for q in st.spec.queries], dtype=np.int64)
                done[qids] = self.epoch_s + self._done_us(st, b) / 1e6
                decided[qids] = self.epoch_s + b * self.config.trigger_s
        return done, decided

    def plans_asked(self) -> set[str]:
        """Plans whose source has asked for an offset (their streaming query is running)."""
        with self._lock:
            return set(self._asked)

    @property
    def decisions(self) -> int:
        """Decisions made so far."""
        return self._decisions

    @property
    def last_boundary(self) -> int:
        """The last decided boundary."""
        return self._k_last
