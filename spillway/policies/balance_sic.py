"""BALANCE-SIC: keep tuples of the query with the lowest SIC first (THEMIS §5, Algorithm 1).

Every iteration takes the hosted query with the lowest result SIC, ``q'``, and admits its
tuples, highest SIC first, until ``q'`` reaches the second-lowest query ``q''``; it repeats
until the node's capacity is spent and sheds the rest. Result SIC values converge, so Jain's
index over queries approaches 1 (THEMIS §5.1, §7.2).

How this module reads Algorithm 1 (errata and open points of the paper, THEMIS §5.1 Alg. 1 and Fig. 3):

1. Lines 14 and 17 say ``q'`` where ``q''`` is meant: ``q''`` is the query with the lowest SIC
   *distinct* from ``q'_SIC`` among the other queries.
2. ``|x| < c`` on line 18 would never fill the node; Fig. 3 fills it exactly, so tuples are
   admitted until no waiting tuple fits the remaining capacity. Capacity is a *cost* budget:
   a lane's tuple costs ``Backlog.cost`` (1 when None).
3. Overshoot-after: ``q'`` takes tuples until ``q'_SIC >= q''_SIC``; the tuple that crosses is
   admitted. When no distinct ``q''`` exists (every query tied, Fig. 3 iterations 1 and 5), ``q'``
   takes one tuple. This rule reproduces Fig. 3 and Fig. 4 for every tie-break. Every iteration
   admits at least one tuple: ``q'`` can be within ``epsilon`` of the minimum and of ``q''`` at
   once (closeness is not transitive), and then ``q''`` counts as not distinct from ``q'``.
4. Highest SIC first (line 17, ``max(x_SIC)``) is applied across the query's lanes, ordered by
   SIC per unit of cost (the paper's aim: most SIC per unit of capacity). When a query's lanes
   share one cost (always when ``cost`` is None) this is plain highest-SIC-first.
5. Ties for the minimum (values within ``epsilon``) are broken uniformly at random with the
   policy's seeded generator.
6. ``Backlog.query_sic`` is the node-local projection base of THEMIS §6: the coordinator's
   result SIC minus the SIC of every waiting tuple. Each iteration adds the admitted SIC back
   (updateSIC, line 21). With ``update_sic=False`` the node ignores the coordinator and balances
   only the SIC its own admissions give each query's local fragment (THEMIS Fig. 4, top).
7. Queries with nothing waiting, or with nothing that still fits the capacity, are skipped: they
   are neither ``q'`` nor ``q''``. Zero-SIC tuples carry no information; they are admitted last,
   in lane order, only to fill capacity that nothing else can use.
8. The Fig. 3 trace takes 1 tuple of source A (1/20) and 2 of source B (1/40) in iteration 4,
   which balances per-source contributions instead of taking highest-SIC-first (THEMIS §5.1).
   ``per_source_balanced=True`` reproduces it: ``q'`` takes its next tuple from the lane that has
   contributed the least SIC so far (ties: higher SIC first). The default is the algorithm text.
9. Highest SIC first keeps a query's lanes one after another: the lane whose tuples carry the
   most SIC whole, the next only with what is left. Lanes of one query at nearly the same rate
   (the partitions of topics fed alike) differ in tuple SIC by noise, so that order is arbitrary,
   and a query whose result needs every lane loses it all: a join of two topics whose lanes of
   one topic come first keeps none of the other and has no row (``kafka-overload`` kov2: SIC
   0.415, no join row). ``lanes="proportional"`` keeps every lane of a query in the same
   proportion instead (:func:`pool_lanes`): each of the query's tuples counts at the query's
   mean tuple SIC, so Algorithm 1 decides how many tuples each query keeps exactly as before
   on those means, and each lane keeps that fraction of its own (the per-source balance of the
   Fig. 3 trace, note 8, when a lane's batch is in proportion to its rate over the STW). The
   SIC a query gains is the same sum of its kept tuples' SIC either way.

Two implementations:

- ``mode="exact"`` (:func:`balance_sic_exact`) runs Algorithm 1 iteration by iteration with a
  heap over query SIC values (a 1,000-query backlog can take seconds).
- ``mode="fast"`` (:func:`balance_sic_fast`, the default) uses what the loop amounts to: every
  tuple Algorithm 1 admits goes to the query that is lowest at that moment, so tuples are
  admitted in increasing order of their *pre-level*, the query's SIC just before the tuple.
  A sweep over the breakpoints of the queries' piecewise-linear cost-to-reach-level curves
  (one sort) finds the level the capacity reaches; everything clearly below it is admitted at
  once, the boundary tuples (about one per query) are sorted by pre-level, and the heap loop
  finishes only if unequal costs leave capacity that a cheaper lane can still use.
  On backlogs without exact ties it makes the same decision as the exact mode (the property
  tests check one tuple per query; in practice the keeps are identical). They differ when
  several queries sit at exactly the same SIC below a distinct ``q''``: the algorithm text
  raises one tied query at a time all the way to ``q''``, which hands the whole remaining
  capacity to one of them, while fast mode breaks the tie tuple by tuple and raises the tied
  queries together. Exact ties are common when queries share a tuple SIC (same rates) and
  one lands exactly on another, so fast mode is also the fairer reading.

References
----------
THEMIS: Kalyvianaki, Fiscato, Salonidis, Pietzuch, "THEMIS: Fairness in Federated Stream
Processing under Overload", SIGMOD 2016 (seed 001), §5 Algorithm 1, Fig. 3, Fig. 4, §6.

Examples
--------
THEMIS Fig. 3: four queries (q4 has two sources), capacity 10 tuples.

>>> import numpy as np
>>> b = Backlog(
...     lane_query=[0, 1, 2, 3, 3],
...     lane_source=[0, 0, 0, 0, 1],
...     count=[20, 30, 10, 10, 20],
...     tuple_sic=[1 / 20, 1 / 30, 1 / 10, 1 / 20, 1 / 40],
...     query_sic=np.zeros(4),
... )
>>> policy = BalanceSIC(seed=3)
>>> keep = policy.decide(b, 10).keep
>>> int(keep.sum())
10
>>> bool((Admission(keep=keep).query_gain(b) >= 0.1 - 1e-9).all())
True
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from spillway.errors import ConfigError
from spillway.policies.base import (
    Admission,
    Backlog,
    Policy,
    PolicyConfig,
    admit_all,
    check_capacity,
)

#: Picks ``q'`` among the queries tied at the minimum (given sorted ascending).
Chooser = Callable[[list[int]], int]

MODES = ("auto", "fast", "exact")

#: How a query's admissions are spread over its lanes (module note 9).
LANE_RULES = ("highest-sic", "proportional")


@dataclass(frozen=True, kw_only=True)
class BalanceSICConfig(PolicyConfig):
    """Settings of :class:`BalanceSIC`.

    Parameters
    ----------
    seed : int
        Seed of the tie-break generator.
    update_sic : bool
        True: balance the projected query SIC (``Backlog.query_sic`` plus what this node admits,
        updated every iteration; THEMIS Alg. 1 line 21, Fig. 4 bottom). False: balance only the
        SIC of this node's own admissions (local fragments, Fig. 4 top).
    per_source_balanced : bool
        Reproduce the literal Fig. 3 trace: within ``q'`` take the next tuple from the lane that
        has contributed the least SIC. Needs ``mode`` "exact" or "auto".
    mode : {"auto", "fast", "exact"}
        "fast": water-filling plus an exact tail (default, for large backlogs). "exact":
        Algorithm 1 iteration by iteration. "auto": "exact" when ``per_source_balanced``, else
        "fast".
    epsilon : float
        SIC values closer than this are equal (ties, reaching ``q''``).
    lanes : {"highest-sic", "proportional"}
        Within a query: "highest-sic" (the algorithm text, default) keeps the lane whose tuples
        carry the most SIC first; "proportional" keeps every lane of the query in the same
        proportion (module note 9: what a query needs whose result joins its lanes).

    Examples
    --------
    >>> BalanceSICConfig(seed=1, mode="exact").mode
    'exact'
    >>> BalanceSICConfig(mode="slow")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: mode must be one of auto, fast, exact; got 'slow'
    """

    update_sic: bool = True
    per_source_balanced: bool = False
    mode: str = "auto"
    epsilon: float = 1e-9
    lanes: str = "highest-sic"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lanes not in LANE_RULES:
            raise ConfigError(f"lanes must be one of {', '.join(LANE_RULES)}; got {self.lanes!r}")
        if self.lanes == "proportional" and self.per_source_balanced:
            raise ConfigError(
                "per_source_balanced=True takes a query's tuples lane by lane: it needs "
                "lanes='highest-sic'"
            )
        for name in ("update_sic", "per_source_balanced"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.per_source_balanced and self.mode == "fast":
            raise ConfigError(
                "per_source_balanced=True needs mode 'exact' or 'auto', got mode 'fast': "
                "the per-source trace is only defined iteration by iteration"
            )
        eps = self.epsilon
        if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 <= eps < 1:
            raise ConfigError(f"epsilon must be a number in [0, 1), got {eps!r}")

    @property
    def exact(self) -> bool:
        """Whether decisions run Algorithm 1 iteration by iteration."""
        return self.mode == "exact" or (self.mode == "auto" and self.per_source_balanced)


def random_tie_break(rng: np.random.Generator) -> Chooser:
    """A chooser that picks uniformly among tied queries, drawing only when there is a choice.

    >>> choose = random_tie_break(np.random.default_rng(0))
    >>> choose([4])
    4
    >>> choose([1, 2, 3]) in (1, 2, 3)
    True
    """

    def choose(tied: list[int]) -> int:
        return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]

    return choose


def _base(backlog: Backlog, update_sic: bool) -> np.ndarray:
    """Each query's SIC before this node admits anything (read only: callers never write it)."""
    return backlog.query_sic if update_sic else np.zeros(backlog.n_queries)


def _lane_order(backlog: Backlog, capacity: float) -> np.ndarray:
    """Lanes Algorithm 1 balances, grouped by query, SIC per unit cost descending.

    Only lanes with SIC > 0, tuples waiting and a tuple cost within ``capacity`` take part.
    Ties keep lane order.
    """
    sic, count, cost = backlog.tuple_sic, backlog.count, backlog.cost
    if sic.size == 0 or (cost is None and capacity < 1):
        return np.zeros(0, dtype=np.int64)
    # Two reductions decide the common case (every lane takes part) without a mask.
    if sic.min() > 0 and count.min() > 0 and (cost is None or cost.max() <= capacity):
        idx, lane_query = None, backlog.lane_query
        density = sic if cost is None else sic / cost
    else:
        take = (sic > 0) & (count > 0)
        if cost is not None:
            take &= cost <= capacity
        idx = np.flatnonzero(take)
        lane_query = backlog.lane_query[idx]
        density = sic[idx] if cost is None else sic[idx] / cost[idx]
        if density.size == 0:
            return idx
    key = np.log(density)
    top = float(key.max())
    span = top - float(key.min())
    if span > 0:  # key = lane_query + (top - log density) * (0.5 / span), in place
        np.subtract(top, key, out=key)
        key *= 0.5 / span
        np.add(lane_query, key, out=key)
    else:
        key = lane_query
    by = key.argsort(kind="stable")
    return by if idx is None else idx[by]


def _fit(left: float, cost: float) -> int:
    """Tuples of ``cost`` that fit in ``left`` (never over, despite rounding)."""
    n = int(left // cost)
    while n > 0 and n * cost > left:
        n -= 1
    return n


class _Node:
    """Algorithm 1's mutable state on one node: lanes in keep order, admissions, capacity left."""

    def __init__(
        self,
        backlog: Backlog,
        order: np.ndarray,
        taken: np.ndarray,
        left: float,
        *,
        per_source_balanced: bool,
        epsilon: float,
    ) -> None:
        lq = backlog.lane_query[order]
        bounds = np.searchsorted(lq, np.arange(backlog.n_queries + 1))
        self.order = order
        self.sic: list[float] = backlog.tuple_sic[order].tolist()
        self.cost: list[float] = backlog.unit_cost[order].tolist()
        self.taken: list[int] = taken.tolist()
        self.rem: list[int] = (backlog.count[order] - taken).tolist()
        self.start: list[int] = bounds[:-1].tolist()
        self.end: list[int] = bounds[1:].tolist()
        self.ptr = list(self.start)
        self.queries = [q for q in range(backlog.n_queries) if self.start[q] < self.end[q]]
        self.left = left
        self.per_source = per_source_balanced
        self.eps = epsilon
        self._marks = sorted(set(self.cost), reverse=True)
        self._mark = 0

    def head(self, q: int) -> int:
        """Position of q's next tuple (highest SIC per cost that fits), or -1 when q is closed.

        Lanes whose tuple no longer fits stay closed: the capacity left only decreases.
        """
        p, end = self.ptr[q], self.end[q]
        rem, cost, left = self.rem, self.cost, self.left
        while p < end and (rem[p] == 0 or cost[p] > left):
            p += 1
        self.ptr[q] = p
        return p if p < end else -1

    def closed_some(self) -> bool:
        """Whether the capacity left fell below some lane cost since the last call."""
        moved = False
        while self._mark < len(self._marks) and self._marks[self._mark] > self.left:
            self._mark += 1
            moved = True
        return moved

    def _admit(self, p: int, n: int) -> float:
        self.rem[p] -= n
        self.taken[p] += n
        self.left -= n * self.cost[p]
        return n * self.sic[p]

    def take(self, q: int, level: float, target: float | None) -> float:
        """Admit tuples of ``q`` until its SIC crosses ``target`` (Alg. 1 lines 15-20).

        One tuple when ``target`` is None, and at least one otherwise: with ``epsilon`` > 0,
        ``q'`` can sit within ``epsilon`` of the minimum and of ``q''`` at once (closeness is
        not transitive), so ``q''`` is not distinct from it and, as when no distinct ``q''``
        exists, ``q'`` takes one tuple (an iteration that admits nothing would repeat forever).
        Stops early when nothing of ``q`` fits. Returns the SIC gained.
        """
        if self.per_source:
            return self._take_balanced(q, level, target)
        gain = 0.0
        while True:
            p = self.head(q)
            if p < 0:
                return gain
            n = 1
            if target is not None:
                need = target - self.eps - (level + gain)
                if need > 0:
                    n = max(1, math.ceil(need / self.sic[p]))
                    if n > 1 and (n - 1) * self.sic[p] >= need:
                        n -= 1  # the division rounded up
                elif gain > 0:
                    return gain
            n = min(n, self.rem[p], _fit(self.left, self.cost[p]))
            gain += self._admit(p, n)
            if target is None:
                return gain

    def _take_balanced(self, q: int, level: float, target: float | None) -> float:
        gain = 0.0
        while target is None or gain == 0 or level + gain < target - self.eps:
            best, best_sic = -1, 0.0
            for p in range(self.start[q], self.end[q]):
                if self.rem[p] and self.cost[p] <= self.left:
                    contributed = self.taken[p] * self.sic[p]
                    if best < 0 or contributed < best_sic - self.eps:
                        best, best_sic = p, contributed
            if best < 0:
                break
            gain += self._admit(best, 1)
            if target is None:
                break
        return gain

    def step(self, level: Sequence[float], choose: Chooser) -> tuple[int, float]:
        """One iteration of Algorithm 1 (lines 12-21) seen through ``level``; (-1, 0) when done.

        ``level`` is this node's view of every query's SIC. Returns ``(q', SIC gained)``.
        """
        live = [q for q in self.queries if self.head(q) >= 0]
        if not live:
            return -1, 0.0
        low = min(level[q] for q in live)
        tied = [q for q in live if level[q] <= low + self.eps]
        higher = [level[q] for q in live if level[q] > low + self.eps]
        q = choose(tied)
        return q, self.take(q, level[q], min(higher) if higher else None)

    def keep(self, n_lanes: int) -> np.ndarray:
        out = np.zeros(n_lanes, dtype=np.int64)
        out[self.order] = self.taken
        return out


def _run(node: _Node, level: list[float], choose: Chooser) -> None:
    """Algorithm 1's loop (lines 11-21) with a heap of query SIC values, from ``level`` on.

    The queries tied at the minimum are held apart (``floor``, sorted) so a big tie costs one
    pass, not one per iteration; draws match :meth:`_Node.step` iteration by iteration.
    """
    eps = node.eps
    heap = [(level[q], q) for q in node.queries if node.head(q) >= 0]
    heapq.heapify(heap)
    node.closed_some()
    floor: list[int] = []
    floor_level = 0.0

    def clean() -> None:
        while heap and node.head(heap[0][1]) < 0:
            heapq.heappop(heap)

    while True:
        if node.closed_some():
            floor = [q for q in floor if node.head(q) >= 0]
        if not floor:
            clean()
            if not heap:
                return
            floor_level = heap[0][0]
            while heap and heap[0][0] <= floor_level + eps:
                q = heapq.heappop(heap)[1]
                if node.head(q) >= 0:
                    floor.append(q)
            floor.sort()
            if not floor:
                continue
        q = choose(floor)
        floor.remove(q)
        clean()
        level[q] += node.take(q, level[q], heap[0][0] if heap else None)
        if node.head(q) >= 0:
            if level[q] <= floor_level + eps:
                insort(floor, q)
            else:
                heapq.heappush(heap, (level[q], q))


def _fill_zero_sic(
    backlog: Backlog, keep: np.ndarray, capacity: float, left: float | None = None
) -> None:
    """Spend capacity nothing informative can use on zero-SIC tuples, in lane order."""
    if backlog.cost is None and left is not None and left < 1:
        return
    lanes = np.flatnonzero((backlog.tuple_sic == 0) & (backlog.count > keep))
    if lanes.size == 0:
        return
    cost = backlog.unit_cost
    left = capacity - float((keep * cost).sum())
    for lane in lanes.tolist():
        n = min(int(backlog.count[lane] - keep[lane]), _fit(left, float(cost[lane])))
        keep[lane] += n
        left -= n * float(cost[lane])


def balance_sic_exact(
    backlog: Backlog,
    capacity: float,
    *,
    choose: Chooser,
    update_sic: bool = True,
    per_source_balanced: bool = False,
    epsilon: float = 1e-9,
) -> np.ndarray:
    """Algorithm 1 iteration by iteration (THEMIS §5.1); returns the tuples kept per lane.

    Parameters
    ----------
    backlog : Backlog
        The node's waiting tuples.
    capacity : float
        Cost budget (tuples when ``backlog.cost`` is None).
    choose : callable
        Picks ``q'`` among tied query ids (sorted); see :func:`random_tie_break`. Tests pass a
        scripted chooser to replay the paper's tie-breaks.
    update_sic, per_source_balanced, epsilon
        As in :class:`BalanceSICConfig`.

    Returns
    -------
    int array (L,)

    Examples
    --------
    >>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[5, 5],
    ...             tuple_sic=[0.1, 0.05], query_sic=[0.0, 0.0])
    >>> balance_sic_exact(b, 6, choose=min).tolist()
    [2, 4]
    """
    cap = check_capacity(capacity)
    keep = np.zeros(backlog.n_lanes, dtype=np.int64)
    order = _lane_order(backlog, cap)
    if order.size:
        node = _Node(
            backlog,
            order,
            np.zeros(order.size, dtype=np.int64),
            cap,
            per_source_balanced=per_source_balanced,
            epsilon=epsilon,
        )
        _run(node, _base(backlog, update_sic).tolist(), choose)
        keep = node.keep(backlog.n_lanes)
    _fill_zero_sic(backlog, keep, cap)
    return keep


def balance_sic_fast(
    backlog: Backlog,
    capacity: float,
    *,
    rng: np.random.Generator,
    update_sic: bool = True,
    epsilon: float = 1e-9,
) -> np.ndarray:
    """Algorithm 1 without iterating, lowest pre-level first (see the module notes); keeps.

    Parameters
    ----------
    backlog : Backlog
        The node's waiting tuples.
    capacity : float
        Cost budget (tuples when ``backlog.cost`` is None).
    rng : numpy Generator
        Tie-breaks.
    update_sic, epsilon
        As in :class:`BalanceSICConfig`.

    Returns
    -------
    int array (L,)

    Examples
    --------
    >>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[5, 5],
    ...             tuple_sic=[0.1, 0.05], query_sic=[0.0, 0.0])
    >>> balance_sic_fast(b, 6, rng=np.random.default_rng(0)).tolist()
    [2, 4]
    """
    cap = check_capacity(capacity)
    return _fast(backlog, cap, rng, update_sic, epsilon)


def _fast(
    backlog: Backlog, cap: float, rng: np.random.Generator, update_sic: bool, epsilon: float
) -> np.ndarray:
    """:func:`balance_sic_fast` on a validated capacity."""
    order = _lane_order(backlog, cap)
    if not order.size:
        keep = np.zeros(backlog.n_lanes, dtype=np.int64)
        _fill_zero_sic(backlog, keep, cap, cap)
        return keep
    base = _base(backlog, update_sic)
    taken, left, room = _greedy_fill(backlog, order, base, cap, rng, epsilon)
    if room:  # unequal costs left room a cheaper lane can use: finish with the exact loop
        node = _Node(backlog, order, taken, left, per_source_balanced=False, epsilon=epsilon)
        gained = taken * backlog.tuple_sic[order]
        level = base + np.bincount(backlog.lane_query[order], gained, minlength=base.size)
        _run(node, level.tolist(), random_tie_break(rng))
        keep = node.keep(backlog.n_lanes)
        left = node.left
    else:
        keep = np.zeros(backlog.n_lanes, dtype=np.int64)
        keep[order] = taken
    _fill_zero_sic(backlog, keep, cap, left)
    return keep


#: Boundary tuples up to which :func:`_greedy_fill` ranks them in plain Python: below this a
#: handful of list operations is cheaper than a dozen small-array numpy calls.
SMALL_BOUNDARY = 24


def _greedy_fill(
    backlog: Backlog,
    order: np.ndarray,
    base: np.ndarray,
    cap: float,
    rng: np.random.Generator,
    eps: float,
) -> tuple[np.ndarray, float, bool]:
    """Admit tuples lowest pre-admission SIC first, as Algorithm 1 does, without iterating.

    Without ties Algorithm 1 gives every tuple to the query that is lowest at that moment, so
    it admits tuples in increasing order of their *pre-level*: the query's SIC just before the
    tuple. Query q's lanes, in keep order, cover SIC levels ``[lo, hi)``; raising q through a
    lane costs ``cost / sic`` per unit of SIC, so the cost ``C(L)`` of raising every query to
    level ``L`` is piecewise linear and increasing. One sort of its breakpoints gives the level
    ``L*`` with ``C(L*) = cap`` and a level ``L_lo`` with ``C(L_lo) = cap - sum of one tuple per
    query``. Every tuple with pre-level below ``L_lo`` is admitted; the few between ``L_lo`` and
    ``L*`` (about one per query) are sorted by pre-level (random among ties) and admitted while
    they fit. Returns (taken per ordered lane, capacity left, whether a lane still has a tuple
    that fits the capacity left).
    """
    q = backlog.lane_query[order]
    g = backlog.tuple_sic[order]
    n = backlog.count[order]
    c = None if backlog.cost is None else backlog.cost[order]
    size = q.size
    full_gain = n * g
    first = np.empty(size, dtype=bool)  # first lane of each query (lanes are grouped)
    first[0] = True
    np.not_equal(q[1:], q[:-1], out=first[1:])
    starts = first.nonzero()[0]
    # lo = base + SIC of the query's better lanes, as one running sum that restarts per query.
    base_at = base[q[starts]]
    top = base_at + np.add.reduceat(full_gain, starts)
    step_in = np.empty(size)
    step_in[0] = 0.0
    step_in[1:] = full_gain[:-1]
    base_at[1:] -= top[:-1]
    step_in[starts] += base_at
    lo = np.add.accumulate(step_in)
    per_sic = 1.0 / g if c is None else c / g
    # Slope change where each lane ends: the query's next lane takes over, or after its last
    # lane the query stops rising.
    bend = np.empty(size)
    np.subtract(per_sic[1:], per_sic[:-1], out=bend[:-1])
    np.negative(per_sic[:-1], out=bend[:-1], where=first[1:])
    bend[-1] = -per_sic[-1]
    events = np.concatenate((lo[starts], lo + full_gain))
    slopes = np.concatenate((per_sic[starts], bend))
    by_level = events.argsort()  # the order among equal levels does not change C(L)
    events = events[by_level]
    slope = np.add.accumulate(slopes[by_level])
    np.maximum(slope, 0.0, out=slope)
    cost_at = np.empty(events.size)
    cost_at[0] = 0.0
    rise = events[1:] - events[:-1]
    rise *= slope[:-1]
    np.add.accumulate(rise, out=cost_at[1:])

    one_each = float(starts.size) if c is None else float(np.maximum.reduceat(c, starts).sum())
    budgets = (cap - one_each, cap)
    at = cost_at.searchsorted(budgets, side="right").tolist()
    levels = [0.0, 0.0]
    for i, budget in enumerate(budgets):  # C(L) = budget
        k = at[i] - 1
        if budget < 0:
            levels[i] = -math.inf
        elif k >= events.size - 1:
            levels[i] = math.inf
        else:  # C rises past the budget after event k, so slope[k] > 0
            run = slope.item(k)
            levels[i] = events.item(k) + (budget - cost_at.item(k)) / run if run > 0 else math.inf
    taken = _below(levels[0], lo, g, n)
    left = cap - (float(taken.sum()) if c is None else float((taken * c).sum()))
    if left < 0:
        taken[:] = 0
        left = cap
    extra = _below(levels[1], lo, g, n, 1) - taken  # one spare tuple against rounding in L*
    np.maximum(extra, 0, out=extra)
    total = int(extra.sum())
    if total:
        admit = _rank_few if total <= SMALL_BOUNDARY else _rank_many
        left -= admit(taken, extra, total, lo, g, c, left, rng, eps)
    if c is None:
        room = left >= 1 and bool((n > taken).any())
    else:
        room = bool(((n > taken) & (c <= left)).any())
    return taken, left, room


def _below(level: float, lo: np.ndarray, g: np.ndarray, n: np.ndarray, more: int = 0) -> np.ndarray:
    """Tuples of each lane with pre-level < ``level``, plus ``more``, within the lane."""
    x = np.subtract(level, lo)  # infinite levels come out as 0 or n after clipping
    x /= g
    np.ceil(x, out=x)
    if more:
        x += more
    np.maximum(x, 0, out=x)
    np.minimum(x, n, out=x)
    return x.astype(np.int64)


def _rank_many(
    taken: np.ndarray,
    extra: np.ndarray,
    total: int,
    lo: np.ndarray,
    g: np.ndarray,
    c: np.ndarray | None,
    left: float,
    rng: np.random.Generator,
    eps: float,
) -> float:
    """Admit the ``extra`` boundary tuples of each lane by pre-level (random among ties) while
    they fit ``left``; adds them to ``taken`` and returns the capacity spent."""
    lane = np.repeat(np.arange(taken.size), extra)
    j = taken[lane] + np.arange(total) - np.repeat(np.cumsum(extra) - extra, extra)
    pre = lo[lane] + j * g[lane]
    key = np.rint(pre / eps) if eps > 0 else pre
    lane = lane[np.lexsort((rng.random(total), key))]
    if c is None:
        fits = min(total, int(left))
        spent = float(fits)
    else:
        cum = np.cumsum(c[lane])
        fits = int(np.searchsorted(cum, left, side="right"))
        spent = float(cum[fits - 1]) if fits else 0.0
    if fits:
        np.add.at(taken, lane[:fits], 1)
    return spent


def _rank_few(
    taken: np.ndarray,
    extra: np.ndarray,
    total: int,
    lo: np.ndarray,
    g: np.ndarray,
    c: np.ndarray | None,
    left: float,
    rng: np.random.Generator,
    eps: float,
) -> float:
    """:func:`_rank_many` in plain Python, for few tuples: the same float operations in the
    same order and the same draws, so the same admission."""
    idx = extra.nonzero()[0]
    tie = rng.random(total).tolist()
    ranked: list[tuple[float, float, int]] = []  # (key, tie, position of the lane in idx)
    lanes = zip(
        taken[idx].tolist(), extra[idx].tolist(), lo[idx].tolist(), g[idx].tolist(), strict=True
    )
    for at, (start, more, low, sic) in enumerate(lanes):
        for j in range(start, start + more):
            pre = low + j * sic
            if eps > 0:
                pre /= eps
                if math.isfinite(pre):  # np.rint keeps an overflowed quotient infinite
                    pre = round(pre)
            ranked.append((pre, tie[len(ranked)], at))
    # Positions grow with the tuple index, so sorting the triples orders them exactly as
    # lexsort's stable (key, tie) sort does.
    ranked.sort()
    got = [0] * len(idx)
    if c is None:
        fits = min(total, int(left))
        spent = float(fits)
        for t in ranked[:fits]:
            got[t[2]] += 1
    else:
        cost = c[idx].tolist()
        spent = cum = 0.0
        for t in ranked:
            cum += cost[t[2]]
            if cum > left:
                break
            got[t[2]] += 1
            spent = cum
    taken[idx] += got
    return spent


class BalanceSIC(Policy):
    """BALANCE-SIC fair shedding (THEMIS §5, Algorithm 1), one decision per shedding interval.

    Admits everything when the backlog fits; otherwise keeps tuples of the query with the
    lowest (projected) SIC first, highest SIC first within it, until capacity is spent. See the
    module notes for how the algorithm's errata are read.

    Parameters
    ----------
    config : BalanceSICConfig, optional
        Or its fields as keywords.

    Examples
    --------
    >>> import numpy as np
    >>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[10, 30],
    ...             tuple_sic=[0.1, 1 / 30], query_sic=[0.5, 0.0])
    >>> BalanceSIC(seed=0).decide(b, 20).keep.tolist()
    [1, 19]
    """

    name: ClassVar[str] = "balance-sic"
    config_class: ClassVar[type[PolicyConfig]] = BalanceSICConfig
    config: BalanceSICConfig

    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Admit tuples of ``backlog`` within ``capacity`` (THEMIS Alg. 1 ``selectTuplesToKeep``)."""
        cap = check_capacity(capacity)
        if (backlog.total_count if backlog.cost is None else backlog.total_cost) <= cap:
            return admit_all(backlog)
        if self.config.lanes == "proportional":
            pooled, lane_of = pool_lanes(backlog)
            return Admission(keep=split_pooled(backlog, lane_of, self._keep(pooled, cap), cap))
        return Admission(keep=self._keep(backlog, cap))

    def _keep(self, backlog: Backlog, cap: float) -> np.ndarray:
        """Algorithm 1 on ``backlog`` within the validated capacity ``cap``: keeps per lane."""
        cfg = self.config
        if cfg.exact:
            keep = balance_sic_exact(
                backlog,
                cap,
                choose=random_tie_break(self.rng),
                update_sic=cfg.update_sic,
                per_source_balanced=cfg.per_source_balanced,
                epsilon=cfg.epsilon,
            )
        else:
            keep = _fast(backlog, cap, self.rng, cfg.update_sic, cfg.epsilon)
        return keep


def pool_lanes(backlog: Backlog) -> tuple[Backlog, np.ndarray]:
    """One lane per query for its lanes with SIC and tuples waiting (module note 9): their
    tuples, at their mean tuple SIC and mean cost; other lanes (nothing waiting, zero SIC)
    stay apart. Returns the pooled backlog and each lane's pooled lane.

    >>> b = Backlog(lane_query=[0, 0, 1], lane_source=[0, 1, 0], count=[30, 10, 5],
    ...             tuple_sic=[0.01, 0.03, 0.1], query_sic=[0.0, 0.0])
    >>> pooled, lane_of = pool_lanes(b)
    >>> pooled.count.tolist(), pooled.tuple_sic.round(3).tolist(), lane_of.tolist()
    ([40, 5], [0.015, 0.1], [0, 0, 1])
    """
    live = (backlog.tuple_sic > 0) & (backlog.count > 0)
    # a live lane's key is its query; every other lane its own key past the queries
    key = np.where(live, backlog.lane_query, backlog.n_queries + np.arange(backlog.n_lanes))
    _, first, lane_of = np.unique(key, return_index=True, return_inverse=True)
    n = backlog.count.astype(np.float64)
    total = np.bincount(lane_of, weights=n)
    per = np.where(total > 0, total, 1.0)

    def mean(x: np.ndarray) -> np.ndarray:
        return np.where(total > 0, np.bincount(lane_of, weights=n * x) / per, x[first])

    pooled = Backlog(
        lane_query=backlog.lane_query[first],
        lane_source=backlog.lane_source[first],
        count=total.astype(np.int64),
        tuple_sic=mean(backlog.tuple_sic),
        query_sic=backlog.query_sic,
        cost=None if backlog.cost is None else mean(backlog.cost),
    )
    return pooled, lane_of.astype(np.int64)


def split_pooled(
    backlog: Backlog, lane_of: np.ndarray, keep: np.ndarray, capacity: float
) -> np.ndarray:
    """A pooled lane's ``keep`` spread over its lanes in proportion to their tuples (largest
    remainders, ties in lane order), then held within ``capacity`` when the lanes' costs
    differ (a tuple of the dearest lane given back at a time) and topped up in lane order
    (zero-SIC lanes last).

    >>> b = Backlog(lane_query=[0, 0, 0], lane_source=[0, 1, 2], count=[30, 10, 20],
    ...             tuple_sic=[0.01, 0.01, 0.01], query_sic=[0.0])
    >>> split_pooled(b, np.zeros(3, dtype=np.int64), np.array([31]), 31).tolist()
    [16, 5, 10]
    """
    n = backlog.count
    total = np.bincount(lane_of, weights=n.astype(np.float64))
    share = keep[lane_of] * n / np.where(total > 0, total, 1.0)[lane_of]
    out = np.minimum(np.floor(share + 1e-9).astype(np.int64), n)
    short = keep - np.bincount(lane_of, weights=out, minlength=keep.size).astype(np.int64)
    frac = np.where(out < n, share - out, -np.inf)  # a full lane takes no more
    order = np.lexsort((-frac, lane_of))  # by pooled lane, largest remainder first (stable)
    pooled = lane_of[order]
    rank = np.empty(n.size, dtype=np.int64)
    rank[order] = np.arange(n.size) - np.searchsorted(pooled, pooled)
    out += rank < short[lane_of]
    if backlog.cost is not None:
        cost = backlog.cost
        over = float((out * cost).sum()) - capacity
        while over > 1e-9 * max(capacity, 1.0) and out.any():
            j = int(np.flatnonzero(out > 0)[np.argmax(cost[out > 0])])
            out[j] -= 1
            over -= float(cost[j])
        left = capacity - float((out * cost).sum())
        last = backlog.tuple_sic == 0  # zero-SIC tuples only fill what nothing else can use
        for j in np.argsort(last, kind="stable").tolist():
            m = min(int(n[j] - out[j]), _fit(left, float(cost[j])))
            out[j] += m
            left -= m * float(cost[j])
    return out


@dataclass(frozen=True, kw_only=True, eq=False)
class NodesOutcome:
    """Result of :func:`alternate_nodes`.

    Parameters
    ----------
    keep : tuple of int arrays
        Tuples kept per lane, one array per node.
    query_sic : float array (Q,)
        Every query's SIC after all nodes admitted: base plus the SIC kept on every node.
    """

    keep: tuple[np.ndarray, ...]
    query_sic: np.ndarray


def alternate_nodes(
    backlogs: Sequence[Backlog],
    capacities: Sequence[float],
    *,
    update_sic: bool = True,
    seed: int = 0,
    epsilon: float = 1e-9,
) -> NodesOutcome:
    """Several nodes running Algorithm 1 in turn, one iteration each (THEMIS §5.2, Fig. 4).

    Every backlog indexes the same queries and carries the same ``query_sic`` base. With
    ``update_sic`` every node sees each query's global SIC after every iteration (the query
    coordinator's updateSIC); without it a node sees only the SIC of its own fragments.

    Parameters
    ----------
    backlogs : sequence of Backlog
        One per node.
    capacities : sequence of float
        One cost budget per node.
    update_sic : bool
        Share query SIC between nodes after every iteration.
    seed : int
        Seed of the tie-breaks.
    epsilon : float
        As in :class:`BalanceSICConfig`.

    Returns
    -------
    NodesOutcome

    Examples
    --------
    THEMIS Fig. 4: q2 (index 1) runs on both nodes.

    >>> a = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[10, 10],
    ...             tuple_sic=[0.1, 0.075], query_sic=np.zeros(3))
    >>> b = Backlog(lane_query=[2, 1], lane_source=[0, 1], count=[10, 10],
    ...             tuple_sic=[0.1, 0.075], query_sic=np.zeros(3))
    >>> alternate_nodes([a, b], [5, 5], update_sic=True).query_sic.round(3).tolist()
    [0.3, 0.3, 0.3]
    >>> alternate_nodes([a, b], [5, 5], update_sic=False).query_sic.round(3).tolist()
    [0.2, 0.45, 0.2]
    """
    if len(backlogs) != len(capacities) or not backlogs:
        raise ConfigError(
            f"alternate_nodes needs one capacity per backlog, got {len(backlogs)} backlogs "
            f"and {len(capacities)} capacities"
        )
    base = backlogs[0].query_sic
    for i, b in enumerate(backlogs):
        if b.n_queries != base.size or not np.array_equal(b.query_sic, base):
            raise ConfigError(
                f"backlog {i} must index the same queries with the same query_sic as backlog 0"
            )
    caps = [check_capacity(c) for c in capacities]
    choose = random_tie_break(np.random.default_rng(seed))
    nodes = []
    for b, cap in zip(backlogs, caps, strict=True):
        order = _lane_order(b, cap)
        nodes.append(
            _Node(
                b,
                order,
                np.zeros(order.size, dtype=np.int64),
                cap,
                per_source_balanced=False,
                epsilon=epsilon,
            )
        )
    shared = base.tolist()
    local = [[0.0] * base.size for _ in nodes]
    busy = [True] * len(nodes)
    while any(busy):
        for i, node in enumerate(nodes):
            if busy[i]:
                q, gain = node.step(shared if update_sic else local[i], choose)
                busy[i] = q >= 0
                if busy[i]:
                    local[i][q] += gain
                    shared[q] += gain
    keeps = []
    for b, node, cap in zip(backlogs, nodes, caps, strict=True):
        keep = node.keep(b.n_lanes)
        _fill_zero_sic(b, keep, cap)
        keeps.append(keep)
    return NodesOutcome(keep=tuple(keeps), query_sic=np.asarray(shared))
