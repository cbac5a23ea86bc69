"""CoD: concept-driven shedding, which re-estimates every window's concept and sheds by it.

CoD (Katsipoulakis et al., §V, Alg. 2) estimates the concept ``C_w`` of the window being shed from
that same window and decides what to keep from it; it never uses history, so it is robust to
concept drift by construction. The concept per query kind is CoD Table II, chosen by
``CoDConfig.kind``:

``"grouped"`` (group aggregates, the paper's main case, §VI-C2)
    Concept = the group frequencies ``f_g`` of the window: the lane counts per
    ``(lane_query, lane_group)``, summed with ``np.bincount`` (the Spark runtime builds the lanes
    from one vectorised scan of the waiting tuples' keys, :mod:`spillway.spark.controller`, and
    its data path keeps per group what this policy decides). Keep counts ``n_g`` form a stratified sample.
    The paper asks for "proportional representation" that "ensures every group appears" but gives
    no rule (CoD §V), and proportional shares alone can drop a rare group; spillway decides:

    - every group gets a floor ``min(f_g, n_min)`` (default ``n_min = 1``): no group is dropped;
    - ``allocation="equal"`` (default): the rest is water-filled, ``n_g = min(f_g, K)`` with the
      largest ``K`` that fits the budget, the last tuples going to random groups above ``K``.
      Reason: the paper's error is the *mean over groups* of the per-group relative error, whose
      standard error ``CV_g·sqrt(1/n_g - 1/f_g)`` is, for similar per-group CV, minimised in sum
      by equal sample sizes capped at ``f_g``; this is the per-stratum cap of BlinkDB [40], and it
      makes CoD keep whole the infrequent groups, which the paper notes are "simply added to the
      window" without a coin flip (§VII-C2);
    - ``allocation="proportional"``: the rest is shared in proportion to ``f_g - floor``
      (largest-remainder rounding): the paper's wording, offered for comparison.

    More groups than the budget (``Σ floors > budget``) is common at b = 0.98: a 100K-tuple window
    allows 2,000 tuples but may hold more routes. The paper does not say what it did (CoD §VII-C).
    ``over_budget`` decides:

    - ``"smallest-first"`` (default): the budget is a hard limit (the
      :class:`~spillway.policies.base.Policy` contract). Floors go to the groups in ascending
      ``f_g`` (random among equals) while they fit; the other groups are shed whole and
      reported as missing, and what their floors would have cost is water-filled over the chosen
      groups. Under CoD's metric every kept group turns a 100 % error into a
      small one, and a small group's one-tuple estimate is the most accurate (a singleton is
      exact), so this keeps the most accuracy per tuple.
    - ``"keep-all"``: keep ``n_min`` of every group anyway, exceeding the budget by at most
      ``#groups·n_min`` tuples; the overrun is reported (:class:`CoDReport`). This is what the
      paper's "zero missing groups" at b = 0.98 needs; use it to reproduce the paper, not under
      a node's hard capacity.

``"scalar"`` (scalar aggregates, §VI-C1)
    Concept = (μ, σ²) of the value per query, from ``Backlog.stats["mean"]`` and ``["var"]``
    (per lane, combined per query by the law of total variance; without stats every query is
    treated alike). The paper defers the rate to Babcock et al. [26] (CoD §VI-C1). spillway uses
    the CLT form of that idea: a query whose window holds ``N`` tuples with ``CV² = σ²/μ²``,
    sampled ``n`` without replacement, has relative standard error ``CV·sqrt(1/n − 1/N)``.

    - The budget is split across queries so that their relative standard errors are equal (the
      smallest possible maximum, as in [26]): ``n_q(x) = N_q·CV_q² / (x·N_q + CV_q²)``, with
      ``x`` found by bisection. With one query this is ``(1 − b)·N``: CoD equals Uniform, which
      is what the paper measured on DEC (§VII-C3).
    - ``target_error=ε`` (optional): keep no more than the user's accuracy needs,
      ``n = n0 / (1 + n0/N)`` with ``n0 = (z·CV/ε)²`` at confidence ``confidence``.
    - Within a query, the count is split over its lanes in proportion to their sizes.

``"join"`` (two-way equi-joins, §VI-C3)
    Concept = per-stream key frequencies: the lanes of a query are its streams
    (``lane_source``), keys are ``lane_group``. Only keys present on every stream of the query
    (the key intersection) can join; every tuple outside it is shed. Each stream gets its own
    budget ``(1 − b)·N_stream`` and its keys are allocated as for groups. With
    ``over_budget="smallest-first"`` the keys kept are chosen jointly (ascending largest
    per-stream frequency) so that a key is kept on all streams or on none.

How much to shed: ``b`` set = the paper's user-given shed fraction (CoD §III (c)): the budget is
``(1 − b)`` of each query's waiting tuples, whatever the capacity. ``b = None`` (default) = the
runtime decides: ``b = 1 − capacity/total_cost``; the result is then fitted to the capacity
(:func:`~spillway.policies.uniform.fit_to_capacity`), never cutting a group's floor unless the
floors alone cost more than the capacity (lanes of unequal cost), in which case the floors of the
largest groups go first; with ``over_budget="keep-all"`` floors are never cut (an overrun).

What the runtime must provide is told by three properties of the policy
(:class:`~spillway.policies.base.Policy`): ``needs_groups`` (grouped and join: one lane per
(query, source, key)), ``needs_stats`` (scalar: per-lane mean and variance of the value) and
``sheds_always`` (``b`` set: asked at every interval, not only under overload).

Cost: a handful of vectorised passes over the lanes (bincount, lexsort, a binary search over K),
loops only over queries and streams; no Python loop over tuples or groups.

Examples
--------
>>> from spillway.policies.base import Backlog
>>> f = np.array([900, 60, 30, 5, 3, 1, 1])          # one window: 7 groups, 1,000 tuples
>>> bl = Backlog(lane_query=np.zeros(7, int), lane_source=np.zeros(7, int), count=f,
...              tuple_sic=np.full(7, 1e-3), query_sic=[0.0], lane_group=np.arange(7))
>>> cod = CoD(kind="grouped", b=0.95, seed=0)
>>> cod.decide(bl, capacity=50).keep.tolist()       # budget 50: every group, small ones whole
[13, 13, 14, 5, 3, 1, 1]
>>> cod.last_report.missing_groups, cod.last_report.overrun
(0, 0.0)
>>> CoD(kind="grouped", b=0.999, over_budget="keep-all").decide(bl, 1).keep.tolist()
[1, 1, 1, 1, 1, 1, 1]
>>> CoD(kind="grouped", b=0.999).decide(bl, 1).keep.tolist()   # budget 1: smallest first
[0, 0, 0, 0, 0, 0, 1]

References
----------
Katsipoulakis, Labrinidis, Chrysanthis, "Concept-Driven Load Shedding", §II-C (Table II), §V
(Alg. 2), §VI-C; Babcock, Datar, Motwani, ICDE 2004 [26]; Agarwal et al., BlinkDB, EuroSys 2013.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from spillway.errors import ConfigError, UnknownNameError
from spillway.policies.base import Admission, Backlog, Policy, PolicyConfig, admit_all
from spillway.policies.base import check_capacity as _check_capacity
from spillway.policies.uniform import check_shed_fraction, fit_to_capacity, shed_fraction
from spillway.quality.concept import group_stats

__all__ = [
    "ALLOCATIONS",
    "KINDS",
    "OVER_BUDGET",
    "CoD",
    "CoDConfig",
    "CoDReport",
    "allocate_groups",
    "scalar_allocation",
    "window_backlog",
]

KINDS: tuple[str, ...] = ("grouped", "scalar", "join")
ALLOCATIONS: tuple[str, ...] = ("equal", "proportional")
OVER_BUDGET: tuple[str, ...] = ("smallest-first", "keep-all")


def _budget(x: float) -> int:
    """Tuples a fractional budget allows (floor, tolerant of float noise such as 0.02·1e5)."""
    return int(np.floor(x + 1e-9)) if x > 0 else 0


def allocate_groups(
    freq: object,
    budget: int,
    *,
    rng: np.random.Generator,
    n_min: int = 1,
    allocation: str = "equal",
    over_budget: str = "smallest-first",
) -> np.ndarray:
    """Per-group keep counts of a stratified sample of ``budget`` tuples (CoD §VI-C2).

    See the module docstring for the rules. Guarantees: ``0 <= n_g <= f_g``; groups with
    ``f_g <= n_min`` or ``f_g <= K`` are kept whole; with ``Σ min(f_g, n_min) <= budget`` no group
    is dropped and ``Σ n_g = min(budget, Σ f_g)``; otherwise ``"keep-all"`` returns the floors
    (``Σ n_g <= budget + #groups·n_min``) and ``"smallest-first"`` keeps ``Σ n_g <= budget``.

    Parameters
    ----------
    freq : int array (G,)
        Tuples per group in the window (0 allowed: such groups get 0).
    budget : int
        Tuples the shed fraction allows, ``floor((1 - b)·Σ f_g)``.
    rng : numpy Generator
        Breaks ties (which groups get the last tuples; which equal-sized groups fit).
    n_min, allocation, over_budget :
        As in :class:`CoDConfig`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> allocate_groups([100, 10, 2, 1], 20, rng=rng).tolist()
    [8, 9, 2, 1]
    >>> allocate_groups([100, 10, 2, 1], 20, rng=rng, allocation="proportional").tolist()
    [16, 2, 1, 1]
    >>> allocate_groups([100, 10, 2, 1], 2, rng=rng).tolist()
    [0, 0, 1, 1]
    >>> allocate_groups([100, 10, 2, 1], 2, rng=rng, over_budget="keep-all").tolist()
    [1, 1, 1, 1]
    """
    f = np.asarray(freq, dtype=np.int64).reshape(-1)
    if f.size and f.min() < 0:
        raise ConfigError(f"group frequencies must be >= 0, got {int(f.min())}")
    budget = int(budget)
    if budget < 0:
        raise ConfigError(f"budget must be >= 0 tuples, got {budget}")
    total = int(f.sum())
    if budget >= total:
        return f.copy()
    floors = np.minimum(f, n_min)
    if int(floors.sum()) > budget:
        if over_budget == "keep-all":
            return floors
        live = np.flatnonzero(f > 0)
        order = live[np.lexsort((rng.random(live.size), f[live]))]
        fits = np.cumsum(floors[order]) <= budget
        chosen = np.zeros_like(f)
        chosen[order[fits]] = f[order[fits]]
        # The floors of the chosen groups fit; what the dropped floors leave goes to them too.
        return allocate_groups(
            chosen, budget, rng=rng, n_min=n_min, allocation=allocation, over_budget=over_budget
        )
    if allocation == "proportional":
        rest = budget - int(floors.sum())
        w = (f - floors).astype(np.float64)
        share = rest * w / w.sum()
        base = np.floor(share).astype(np.int64)
        left = rest - int(base.sum())
        if left > 0:
            frac = share - base
            order = np.lexsort((rng.random(f.size), -frac))
            base[order[:left]] += 1
        return floors + base
    # "equal": water-filling n_g = min(f_g, K), K maximal with Σ min(f_g, K) <= budget.
    lo, hi = n_min, int(f.max())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(f, mid).sum()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    out = np.minimum(f, lo)
    left = budget - int(out.sum())
    if left > 0:
        above = np.flatnonzero(f > lo)
        out[rng.choice(above, size=min(left, above.size), replace=False)] += 1
    return out


def scalar_allocation(
    n: object,
    cv2: object,
    budget: float,
    *,
    cost: object | None = None,
    n_min: int = 1,
) -> np.ndarray:
    """Split a budget over scalar queries so their relative standard errors are equal.

    Query ``q`` holds ``N_q`` tuples with squared coefficient of variation ``CV_q²``; keeping
    ``n_q`` of them gives relative standard error ``CV_q·sqrt(1/n_q − 1/N_q)`` (CLT, sampling
    without replacement). Equal errors ``sqrt(x)`` give ``n_q = N_q·CV_q² / (x·N_q + CV_q²)``;
    ``x`` is found by bisection so that ``Σ cost_q·n_q = budget`` (the Babcock et al. [26] idea,
    see the module docstring). Counts are then rounded (largest remainder) and floored at
    ``min(N_q, n_min)`` so every query still has a result.

    >>> scalar_allocation([1000], [0.5], 20).tolist()            # one query: (1 - b)·N
    [20]
    >>> scalar_allocation([1000, 1000], [1.0, 0.0], 20).tolist() # constant values need 1 tuple
    [19, 1]
    >>> scalar_allocation([1000, 1000], [4.0, 1.0], 30).tolist() # n ∝ CV² for equal errors
    [24, 6]
    """
    nq = np.asarray(n, dtype=np.float64).reshape(-1)
    c2 = np.asarray(cv2, dtype=np.float64).reshape(-1)
    w = np.ones_like(nq) if cost is None else np.asarray(cost, dtype=np.float64).reshape(-1)
    if not (nq.shape == c2.shape == w.shape):
        raise ConfigError("n, cv2 and cost need one entry per query")
    if float((w * nq).sum()) <= budget:
        return nq.astype(np.int64)
    c2 = np.where(np.isnan(c2), np.inf, c2)
    floor = np.minimum(nq, float(n_min))

    def need(x: float) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = nq * c2 / (x * nq + c2)
        v = np.where(np.isinf(c2), nq, np.where(c2 == 0, 0.0, v))
        return np.maximum(v, floor)

    if float((w * floor).sum()) >= budget:
        return floor.astype(np.int64)
    lo, hi = -80.0, 80.0  # bisection on log(x): Σ cost·need(x) decreases in x
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float((w * need(np.exp(mid))).sum()) > budget:
            lo = mid
        else:
            hi = mid
    cont = np.minimum(need(np.exp(hi)), nq)
    out = np.floor(cont + 1e-9).astype(np.int64)
    # Largest remainder: hand out what rounding left, cheapest-first in cost units.
    spare = budget - float((w * out).sum())
    frac = np.where(out < nq, cont - out, -1.0)
    for i in np.argsort(-frac, kind="stable"):
        if frac[i] < 0 or spare < w[i] - 1e-9:
            break
        out[i] += 1
        spare -= w[i]
    return out


def _strata(*cols: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids of the distinct rows of the given integer columns (no Python loop)."""
    n = cols[0].shape[0]
    if n == 0:
        return np.zeros(0, np.int64), 0
    order = np.lexsort(cols[::-1])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in cols:
        cs = c[order]
        change[1:] |= cs[1:] != cs[:-1]
    ids_sorted = np.cumsum(change) - 1
    ids = np.empty(n, np.int64)
    ids[order] = ids_sorted
    return ids, int(ids_sorted[-1]) + 1


def _split(
    total: np.ndarray, stratum: np.ndarray, count: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Spread each stratum's keep count over its lanes uniformly (hypergeometric, vectorised)."""
    n = count.shape[0]
    sizes = np.bincount(stratum, minlength=total.shape[0])
    if n == 0 or sizes.max() <= 1:
        return total[stratum].astype(np.int64) if n else np.zeros(0, np.int64)
    order = np.lexsort((np.arange(n), stratum))
    st = stratum[order]
    first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pos = np.arange(n) - first[st]
    left_n = total.astype(np.int64).copy()
    left_c = np.bincount(stratum, weights=count, minlength=total.shape[0]).astype(np.int64)
    keep = np.zeros(n, np.int64)
    for j in range(int(sizes.max())):
        at = order[pos == j]
        s = stratum[at]
        good = count[at]
        draw = rng.hypergeometric(good, left_c[s] - good, left_n[s])
        keep[at] = draw
        left_n[s] -= draw
        left_c[s] -= good
    return keep


@dataclass(frozen=True, kw_only=True)
class CoDReport:
    """What the last :meth:`CoD.decide` did, for logs and reports.

    Attributes
    ----------
    kind : the query kind.
    shed_fraction : the b used.
    budget : capacity units the shed fraction allows (tuples when costs are 1).
    kept : tuples admitted; ``kept_cost`` their cost.
    overrun : ``max(0, kept_cost − budget)``: what ``over_budget="keep-all"`` cost beyond b.
    n_groups : strata with waiting tuples ((query, group); for joins the keys of the intersection).
    missing_groups : of those, strata with nothing kept.
    outside_intersection : join: waiting tuples shed because their key cannot join.
    """

    kind: str
    shed_fraction: float
    budget: float
    kept: int
    kept_cost: float
    overrun: float
    n_groups: int
    missing_groups: int
    outside_intersection: int = 0


@dataclass(frozen=True, kw_only=True)
class CoDConfig(PolicyConfig):
    """Settings of :class:`CoD` (see the module docstring for what each choice means).

    Parameters
    ----------
    seed : int
        Seed of tie-breaks and of the split of a group's count over its lanes.
    kind : ``"grouped"``, ``"scalar"`` or ``"join"`` (CoD Table II).
    b : float or None
        Shed fraction in [0, 1]; None takes it from the capacity.
    n_min : int >= 1
        Tuples every group keeps at least (when it has that many).
    allocation : ``"equal"`` or ``"proportional"``.
    over_budget : ``"smallest-first"`` or ``"keep-all"``.
    target_error : float in (0, 1) or None
        Scalar kind: relative error the user accepts; keeps at most what it needs.
    confidence : float in (0, 1)
        Confidence of ``target_error`` (two-sided normal quantile).

    >>> CoDConfig(kind="join").kind
    'join'
    >>> CoDConfig(kind="median")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: kind must be one of grouped, scalar, join (CoD Table II), got 'median'
    """

    kind: str = "grouped"
    b: float | None = None
    n_min: int = 1
    allocation: str = "equal"
    over_budget: str = "smallest-first"
    target_error: float | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in KINDS:
            raise UnknownNameError(
                f"kind must be one of {', '.join(KINDS)} (CoD Table II), got {self.kind!r}"
            )
        check_shed_fraction(self.b)
        if not isinstance(self.n_min, int) or isinstance(self.n_min, bool) or self.n_min < 1:
            raise ConfigError(
                f"n_min must be an int >= 1 (tuples every group keeps), got {self.n_min!r}"
            )
        if self.allocation not in ALLOCATIONS:
            raise UnknownNameError(
                f"allocation must be one of {', '.join(ALLOCATIONS)}, got {self.allocation!r}"
            )
        if self.over_budget not in OVER_BUDGET:
            raise UnknownNameError(
                f"over_budget must be one of {', '.join(OVER_BUDGET)}, got {self.over_budget!r}"
            )
        if self.target_error is not None and not (
            isinstance(self.target_error, int | float) and 0 < self.target_error < 1
        ):
            raise ConfigError(
                f"target_error must be a relative error in (0, 1) or None, got {self.target_error!r}"
            )
        if not (isinstance(self.confidence, int | float) and 0 < self.confidence < 1):
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence!r}")


class CoD(Policy):
    """Concept-driven shedding (CoD Alg. 2) for scalar, grouped and equi-join queries.

    After every :meth:`decide`, :attr:`last_report` holds a :class:`CoDReport`.

    Examples
    --------
    Scalar: one query, so CoD keeps exactly the uniform volume (1 − b)·N.

    >>> from spillway.policies.base import Backlog
    >>> bl = Backlog(lane_query=[0], lane_source=[0], count=[46000], tuple_sic=[1 / 46000],
    ...              query_sic=[0.0], stats={"mean": [500.0], "var": [250000.0]})
    >>> CoD(kind="scalar", b=0.99).decide(bl, 0).keep.tolist()
    [460]

    What the runtime must give it (see :class:`~spillway.policies.base.Policy`):

    >>> c = CoD(kind="grouped", b=0.98)
    >>> c.needs_groups, c.needs_stats, c.sheds_always
    (True, False, True)

    Join: key 3 exists only on stream 0 and is shed whole.

    >>> j = Backlog(lane_query=[0, 0, 0, 0], lane_source=[0, 0, 1, 1], count=[50, 50, 40, 10],
    ...             tuple_sic=[0.01] * 4, query_sic=[0.0], lane_group=[1, 3, 1, 2])
    >>> CoD(kind="join", b=0.8).decide(j, 0).keep.tolist()
    [20, 0, 10, 0]
    """

    name = "cod"
    config_class = CoDConfig
    config: CoDConfig

    def __init__(self, config: CoDConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self.last_report: CoDReport | None = None

    # ------------------------------------------------------------------ public
    @property
    def needs_groups(self) -> bool:
        """Grouped and join concepts count tuples per group or join key (``lane_group``)."""
        return self.config.kind in ("grouped", "join")

    @property
    def needs_stats(self) -> bool:
        """The scalar concept is the value's mean and variance (``stats``)."""
        return self.config.kind == "scalar"

    @property
    def sheds_always(self) -> bool:
        """A shed fraction ``b`` set by the user is applied at every interval (CoD §III (c))."""
        return self.config.b is not None

    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Admit a concept-driven stratified sample of ``backlog`` (CoD §V-VI)."""
        cap = _check_capacity(capacity)
        b = self.config.b
        kind = self.config.kind
        if kind == "join" and backlog.lane_group is None:
            raise ConfigError(
                "kind='join' needs Backlog.lane_group (the join key of every lane); "
                "build the backlog with one lane per (query, stream, key)"
            )
        if b is None and backlog.total_cost <= cap:
            keep = admit_all(backlog).keep
            self._report(backlog, keep, 0.0, float(backlog.total_cost), 0)
            return Admission(keep=keep)
        frac = shed_fraction(b, backlog, cap)
        outside = 0
        floor: np.ndarray | None = None
        if kind == "scalar":
            keep = self._scalar(backlog, frac)
        elif kind == "join":
            keep, outside = self._join(backlog, frac)
            if b is None:
                groups = backlog.lane_group
                assert groups is not None  # checked above
                floor = self._floor_lanes(keep, _strata(backlog.lane_query, groups)[0])
        else:
            keep = self._grouped(backlog, frac)
            if b is None:
                floor = self._floor_lanes(keep, self._group_ids(backlog)[0])
        if b is None:
            if floor is not None and self.config.over_budget == "smallest-first":
                floor = self._affordable(floor, backlog, cap)
            ceiling = (
                np.where(self._joinable(backlog), backlog.count, 0) if kind == "join" else None
            )
            keep = fit_to_capacity(keep, backlog, cap, self.rng, floor=floor, ceiling=ceiling)
        budget = (1.0 - frac) * backlog.total_cost if b is not None else cap
        self._report(backlog, keep, frac, budget, outside)
        return Admission(keep=keep)

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot` (the report is cleared)."""
        super().restore(snapshot)
        self.last_report = None

    # ------------------------------------------------------------------ kinds
    def _group_ids(self, backlog: Backlog) -> tuple[np.ndarray, int]:
        """Dense (query, group) stratum id per lane; without lane_group each lane is one."""
        groups = (
            np.arange(backlog.n_lanes, dtype=np.int64)
            if backlog.lane_group is None
            else backlog.lane_group
        )
        return _strata(backlog.lane_query, groups)

    def _grouped(self, backlog: Backlog, frac: float) -> np.ndarray:
        cfg = self.config
        stratum, n_strata = self._group_ids(backlog)
        f = np.bincount(stratum, weights=backlog.count, minlength=n_strata).astype(np.int64)
        squery = np.zeros(n_strata, np.int64)
        squery[stratum] = backlog.lane_query
        n = np.zeros(n_strata, np.int64)
        for q in np.unique(squery):
            sel = np.flatnonzero(squery == q)
            n[sel] = allocate_groups(
                f[sel],
                _budget((1.0 - frac) * float(f[sel].sum())),
                rng=self.rng,
                n_min=cfg.n_min,
                allocation=cfg.allocation,
                over_budget=cfg.over_budget,
            )
        return _split(n, stratum, backlog.count, self.rng)

    def _affordable(self, floor: np.ndarray, backlog: Backlog, cap: float) -> np.ndarray:
        """Protect floors smallest lane first while their cost fits ``cap`` (unequal costs)."""
        cost = floor * backlog.unit_cost
        if float(cost.sum()) <= cap:
            return floor
        order = np.lexsort((self.rng.random(floor.size), backlog.count))
        fits = np.cumsum(cost[order]) <= cap
        out = np.zeros_like(floor)
        out[order[fits]] = floor[order[fits]]
        return out

    def _floor_lanes(self, keep: np.ndarray, stratum: np.ndarray) -> np.ndarray:
        """Per-lane protected counts: ``n_min`` kept tuples of every kept stratum, in one lane."""
        floor = np.zeros_like(keep)
        if keep.size == 0:
            return floor
        order = np.lexsort((-keep, stratum))
        first = np.ones(order.size, dtype=bool)
        first[1:] = stratum[order][1:] != stratum[order][:-1]
        lanes = order[first]
        floor[lanes] = np.minimum(keep[lanes], self.config.n_min)
        return floor

    def _scalar(self, backlog: Backlog, frac: float) -> np.ndarray:
        cfg = self.config
        nq = backlog.n_queries
        lq = backlog.lane_query
        cnt = backlog.count.astype(np.float64)
        n = np.bincount(lq, weights=cnt, minlength=nq)
        has = n > 0
        costw = np.bincount(lq, weights=cnt * backlog.unit_cost, minlength=nq)
        qcost = np.divide(costw, n, out=np.ones(nq), where=has)
        if "mean" in backlog.stats and "var" in backlog.stats:
            m, v = backlog.stats["mean"], backlog.stats["var"]
            mq = np.divide(np.bincount(lq, weights=cnt * m, minlength=nq), n,
                           out=np.zeros(nq), where=has)  # fmt: skip
            within = np.bincount(lq, weights=cnt * (v + (m - mq[lq]) ** 2), minlength=nq)
            vq = np.divide(within, n, out=np.zeros(nq), where=has)
            with np.errstate(divide="ignore", invalid="ignore"):
                cv2 = np.where(vq == 0, 0.0, np.where(mq == 0, np.inf, vq / mq**2))
        else:
            cv2 = np.ones(nq)
        kept_q = np.zeros(nq, np.int64)
        budget = (1.0 - frac) * float((n * qcost).sum())
        kept_q[has] = scalar_allocation(n[has], cv2[has], budget, cost=qcost[has], n_min=cfg.n_min)
        if cfg.target_error is not None:
            z = NormalDist().inv_cdf(0.5 + cfg.confidence / 2.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                n0 = (z / cfg.target_error) ** 2 * cv2
                need = np.where(np.isinf(n0), n, n0 / (1.0 + n0 / np.maximum(n, 1.0)))
            need = np.maximum(np.ceil(need), np.minimum(n, cfg.n_min)).astype(np.int64)
            kept_q = np.minimum(kept_q, need)
        # Spread each query's count over its lanes in proportion to their sizes (largest
        # remainder): a sample stratified by source; with one lane, a fixed-size uniform sample.
        share = kept_q[lq] * np.divide(cnt, n[lq], out=np.zeros_like(cnt), where=n[lq] > 0)
        keep = np.floor(share + 1e-9).astype(np.int64)
        short = kept_q - np.bincount(lq, weights=keep, minlength=nq).astype(np.int64)
        if short.sum() > 0:
            order = np.lexsort((-(share - keep), lq))
            qs = lq[order]
            rank = np.arange(order.size) - np.searchsorted(qs, qs)
            keep[order[rank < short[qs]]] += 1
        return np.minimum(keep, backlog.count)

    def _joinable(self, backlog: Backlog) -> np.ndarray:
        """Lanes whose key is waiting on every stream of their query (the key intersection)."""
        assert backlog.lane_group is not None
        q, s, k = backlog.lane_query, backlog.lane_source, backlog.lane_group
        qs_id, _ = _strata(q, s)
        q_id, nq = _strata(q)
        n_streams = np.bincount(q_id[np.unique(qs_id, return_index=True)[1]], minlength=nq)
        qk, nqk = _strata(q, k)
        live = backlog.count > 0
        pair, npair = _strata(qk[live], s[live])
        pair_key = np.zeros(npair, np.int64)
        pair_key[pair] = qk[live]
        on = np.bincount(pair_key, minlength=nqk)
        return on[qk] == n_streams[q_id]

    def _join(self, backlog: Backlog, frac: float) -> tuple[np.ndarray, int]:
        cfg = self.config
        assert backlog.lane_group is not None
        q, s, k, count = backlog.lane_query, backlog.lane_source, backlog.lane_group, backlog.count
        ok = self._joinable(backlog) & (count > 0)
        outside = int(count[~ok].sum())
        keep = np.zeros(backlog.n_lanes, np.int64)
        for qq in np.unique(q):
            inq = q == qq
            streams = np.unique(s[inq])
            budgets = np.array(
                [_budget((1.0 - frac) * float(count[inq & (s == st)].sum())) for st in streams]
            )
            lanes = np.flatnonzero(inq & ok)
            if lanes.size == 0:
                continue
            kid, n_keys = _strata(k[lanes])
            sid = np.searchsorted(streams, s[lanes])
            freq = np.zeros((streams.size, n_keys), np.int64)
            np.add.at(freq, (sid, kid), count[lanes])
            chosen = np.ones(n_keys, dtype=bool)
            floors = np.minimum(freq, cfg.n_min)
            if cfg.over_budget == "smallest-first" and np.any(floors.sum(axis=1) > budgets):
                # Keep a key on every stream or on none: ascending largest per-stream frequency.
                order = np.lexsort((self.rng.random(n_keys), freq.max(axis=0)))
                fits = np.all(np.cumsum(floors[:, order], axis=1) <= budgets[:, None], axis=0)
                chosen[:] = False
                chosen[order[fits]] = True
            alloc = np.zeros_like(freq)
            for i in range(streams.size):
                alloc[i] = allocate_groups(
                    np.where(chosen, freq[i], 0), int(budgets[i]), rng=self.rng,
                    n_min=cfg.n_min, allocation=cfg.allocation, over_budget=cfg.over_budget,
                )  # fmt: skip
            cell, n_cells = _strata(sid, kid)
            tot = np.zeros(n_cells, np.int64)
            tot[cell] = alloc[sid, kid]
            keep[lanes] = _split(tot, cell, count[lanes], self.rng)
        return keep, outside

    # ------------------------------------------------------------------ report
    def _report(
        self, backlog: Backlog, keep: np.ndarray, frac: float, budget: float, outside: int
    ) -> None:
        kind = self.config.kind
        if kind == "join":
            assert backlog.lane_group is not None
            joinable = self._joinable(backlog) & (backlog.count > 0)
            qk, nqk = _strata(backlog.lane_query, backlog.lane_group)
            groups = np.bincount(qk, weights=joinable, minlength=nqk) > 0
            # A key appears in the join result only if some tuple is kept on every stream.
            kept_lane = joinable & (keep > 0)
            pair, npair = _strata(qk[kept_lane], backlog.lane_source[kept_lane])
            pair_key = np.zeros(npair, np.int64)
            pair_key[pair] = qk[kept_lane]
            kept_streams = np.bincount(pair_key, minlength=nqk)
            pair_all, npair_all = _strata(qk[joinable], backlog.lane_source[joinable])
            key_all = np.zeros(npair_all, np.int64)
            key_all[pair_all] = qk[joinable]
            need_streams = np.bincount(key_all, minlength=nqk)
            got = kept_streams >= np.maximum(need_streams, 1)
        else:
            stratum, n_strata = (
                _strata(backlog.lane_query) if kind == "scalar" else self._group_ids(backlog)
            )
            groups = np.bincount(stratum, weights=backlog.count, minlength=n_strata) > 0
            got = np.bincount(stratum, weights=keep, minlength=n_strata) > 0
        kept_cost = float((keep * backlog.unit_cost).sum())
        self.last_report = CoDReport(
            kind=kind,
            shed_fraction=float(frac),
            budget=float(budget),
            kept=int(keep.sum()),
            kept_cost=kept_cost,
            overrun=float(max(0.0, kept_cost - budget)),
            n_groups=int(groups.sum()),
            missing_groups=int((groups & ~got).sum()),
            outside_intersection=int(outside),
        )


def window_backlog(
    keys: object,
    values: object | None = None,
    *,
    streams: object | None = None,
    query: int = 0,
) -> tuple[Backlog, np.ndarray]:
    """A one-query backlog of a window with one lane per (stream, key): the concept at arrival.

    Lane counts are the group (or per-stream key) frequencies, computed with ``np.bincount``;
    ``stats`` carry the per-lane mean and variance of ``values`` (the scalar concept). Every
    tuple's SIC is 1/N. Returns the backlog and, for every tuple, the index of its lane.

    >>> bl, lane = window_backlog(np.array([4, 4, 9]), np.array([1.0, 3.0, 5.0]))
    >>> bl.count.tolist(), bl.lane_group.tolist(), bl.stats["mean"].tolist(), lane.tolist()
    ([2, 1], [4, 9], [2.0, 5.0], [0, 0, 1])
    """
    k = np.asarray(keys, dtype=np.int64).reshape(-1)
    if streams is None:
        gs = group_stats(k, values)
        lane_key, lane_src, inverse = gs.keys, np.zeros(gs.n_groups, np.int64), gs.inverse
        count, mean, var = gs.count, gs.mean, gs.var
    else:
        s = np.asarray(streams, dtype=np.int64).reshape(-1)
        if s.shape != k.shape:
            raise ConfigError(f"streams must have one entry per key ({k.size}), got {s.size}")
        inverse, n_lanes = _strata(s, k)
        count = np.bincount(inverse, minlength=n_lanes).astype(np.int64)
        lane_key = np.zeros(n_lanes, np.int64)
        lane_src = np.zeros(n_lanes, np.int64)
        lane_key[inverse] = k
        lane_src[inverse] = s
        if values is None:
            mean = var = np.zeros(n_lanes)
        else:
            v = np.asarray(values, dtype=np.float64).reshape(-1)
            mean = np.bincount(inverse, weights=v, minlength=n_lanes) / count
            dev = v - mean[inverse]
            var = np.bincount(inverse, weights=dev * dev, minlength=n_lanes) / count
    total = max(int(count.sum()), 1)
    stats = {} if values is None else {"mean": mean, "var": var}
    bl = Backlog(
        lane_query=np.full(count.shape[0], query, np.int64),
        lane_source=lane_src,
        count=count,
        tuple_sic=np.full(count.shape[0], 1.0 / total),
        query_sic=np.zeros(query + 1),
        lane_group=lane_key,
        stats=stats,
    )
    return bl, inverse
