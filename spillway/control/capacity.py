"""The node's budget per shedding interval, from the fitted costs of its Spark plans.

A node runs one Spark plan per query shape; the plans share the node's executors, so capacity is
one node-level budget of executor time per shedding interval (= trigger interval, docs/design.md):

    budget = headroom · interval − Σ_{plans that will run} overhead_p,

and admitting one tuple of plan ``p`` spends ``per_tuple_p`` seconds of it. The policy divides
this budget across all lanes of all plans (``Backlog.cost`` = per-tuple cost of the lane's plan).

Why the overhead is subtracted
------------------------------
THEMIS (§6) estimates the capacity as ``c = interval / (busy time / tuples processed)``: a
per-tuple-only model. On Spark a micro-batch of ``n`` rows takes ``o + k·n`` seconds, so the
measured time per tuple is ``o/n + k``. It equals the truth only at the one batch size where
``o + k·n = interval``; under overload the batches are larger (the backlog is drained), ``o/n``
shrinks, the per-tuple average looks cheaper, and the capacity ``interval / (o/n + k)`` exceeds
the real ``(interval − o) / k``. The node then admits more than it can process in an interval,
micro-batches overrun the trigger and latency grows: exactly the failure shedding must prevent.
With several plans the error adds up, because every plan that runs pays its own overhead.
Subtracting the fitted overheads first and dividing only the rest by per-tuple costs is exact
for the linear model at every batch size.

Examples
--------
>>> est = {"avg": CostEstimate(overhead_s=0.4, per_tuple_s=1e-5)}
>>> round(capacity_tuples(est, {"avg": 1.0}, 1.0, 1.0))          # (1 - 0.4) / 1e-5
60000
>>> # per-tuple-only model calibrated on an overloaded batch of 100,000 rows (1.4 s):
>>> round(per_tuple_only_capacity(rows=100_000, duration_s=1.4, interval_s=1.0))
71429
>>> round(est["avg"].duration_s(71_429), 2)                       # overruns the 1 s trigger
1.11

References
----------
THEMIS §6 "Cost model" and "Overload detection"; docs/design.md, "Decisions where the papers
are silent or wrong" (cost model).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from spillway.control.cost_model import CostEstimate
from spillway.errors import ConfigError, UnknownNameError


def _check_interval(interval_s: float, headroom: float) -> None:
    for name, v in (("interval_s", interval_s), ("headroom", headroom)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ConfigError(f"{name} must be a finite number, got {v!r}")
    if interval_s <= 0:
        raise ConfigError(f"interval_s must be > 0 (the shedding interval), got {interval_s!r}")
    if not 0 < headroom <= 1:
        raise ConfigError(
            f"headroom must be in (0, 1] (fraction of the interval to fill), got {headroom!r}"
        )


def _plan(estimates: Mapping[str, CostEstimate], plan: str) -> CostEstimate:
    try:
        return estimates[plan]
    except KeyError:
        known = ", ".join(sorted(estimates)) or "none"
        raise UnknownNameError(
            f"no cost estimate for plan {plan!r}; plans with estimates: {known}"
        ) from None


@dataclass(frozen=True, kw_only=True)
class NodeBudget:
    """Executor time a node may spend on admitted tuples in one shedding interval.

    Parameters
    ----------
    interval_s : the shedding interval (s).
    headroom : fraction of the interval the controller may fill.
    total_s : ``headroom · interval_s``.
    overhead_s : sum of the fixed costs of the plans that will run.
    arrived_s : what the interval's arrivals cost whether kept or not (their per-arrived cost).
    available_s : ``max(0, total_s − overhead_s − arrived_s)``: seconds left for kept tuples.
    per_tuple_s : per-tuple cost (s) of every plan with an estimate.
    running : the plans whose overhead was subtracted.

    Examples
    --------
    >>> est = {"avg": CostEstimate(overhead_s=0.3, per_tuple_s=1e-6),
    ...        "top5": CostEstimate(overhead_s=0.2, per_tuple_s=4e-6)}
    >>> b = node_budget(est, interval_s=1.0, headroom=0.8)
    >>> round(b.available_s, 3), b.running
    (0.3, ('avg', 'top5'))
    >>> round(b.work_s({"avg": 100_000, "top5": 50_000}), 3)
    0.3
    >>> b.lane_costs(["avg", "top5", "avg"]).tolist()
    [1e-06, 4e-06, 1e-06]
    """

    interval_s: float
    headroom: float
    total_s: float
    overhead_s: float
    available_s: float
    arrived_s: float = 0.0
    per_tuple_s: Mapping[str, float] = field(default_factory=dict)
    running: tuple[str, ...] = ()

    def tuples(self, plan: str) -> float:
        """Tuples of ``plan`` alone that fit the available budget."""
        if plan not in self.per_tuple_s:
            raise UnknownNameError(f"no cost estimate for plan {plan!r}")
        return self.available_s / self.per_tuple_s[plan]

    def work_s(self, rows: Mapping[str, float]) -> float:
        """Per-tuple work (s) of admitting ``rows[p]`` tuples of each plan ``p``.

        Raises
        ------
        ConfigError
            Rows of a plan whose overhead was not subtracted (not in :attr:`running`).
        """
        total = 0.0
        for plan, n in rows.items():
            if n and plan not in self.running:
                raise ConfigError(
                    f"plan {plan!r} has {n} rows but is not among the running plans "
                    f"{list(self.running)}: pass it in node_budget(..., running=...)"
                )
            if n:
                total += float(n) * self.per_tuple_s[plan]
        return total

    def lane_costs(self, lane_plans: Sequence[str]) -> np.ndarray:
        """Per-tuple cost (s) of each lane, given the plan of each lane (for ``Backlog.cost``)."""
        try:
            return np.array([self.per_tuple_s[p] for p in lane_plans], dtype=np.float64)
        except KeyError as e:
            raise UnknownNameError(f"no cost estimate for plan {e.args[0]!r}") from None


def node_budget(
    estimates: Mapping[str, CostEstimate],
    *,
    interval_s: float,
    headroom: float = 0.8,
    running: Iterable[str] | None = None,
    arrived: Mapping[str, float] | None = None,
) -> NodeBudget:
    """The node's budget for the next shedding interval.

    Parameters
    ----------
    estimates : fitted cost of each plan (:func:`spillway.control.cost_model.estimate`).
    interval_s : the shedding interval (= trigger interval) in seconds.
    headroom : fraction of the interval to fill; the rest absorbs estimation noise.
    running : plans that will run a micro-batch this interval (default: all of them). A plan
        with nothing to process does not start a batch, so its overhead is not spent.
    arrived : tuples each plan's batch covers, kept or not; their per-arrived cost
        (:attr:`CostEstimate.per_arrived_s`) is spent whatever is kept.

    Raises
    ------
    ConfigError
        ``interval_s`` not > 0, ``headroom`` not in (0, 1].
    UnknownNameError
        A running plan has no estimate.
    """
    _check_interval(interval_s, headroom)
    plans = tuple(sorted(estimates)) if running is None else tuple(dict.fromkeys(running))
    overhead = sum(_plan(estimates, p).overhead_s for p in plans)
    seen = sum(_plan(estimates, p).per_arrived_s * float(n) for p, n in (arrived or {}).items())
    total = headroom * interval_s
    return NodeBudget(
        interval_s=float(interval_s),
        headroom=float(headroom),
        total_s=total,
        overhead_s=overhead,
        arrived_s=seen,
        available_s=max(0.0, total - overhead - seen),
        per_tuple_s={p: e.per_tuple_s for p, e in estimates.items()},
        running=plans,
    )


def capacity_tuples(
    estimates: Mapping[str, CostEstimate],
    mix_weights: Mapping[str, float],
    interval_s: float,
    headroom: float = 0.8,
) -> float:
    """Tuples per interval the node can process when they arrive in the given plan mix.

    ``mix_weights[p]`` is plan ``p``'s share of the tuples (normalised here); plans with weight 0
    do not run and pay no overhead. The result is ``available_s / Σ_p share_p · per_tuple_p``.

    Raises
    ------
    ConfigError
        A negative or non-finite weight, or all weights 0.
    UnknownNameError
        A weighted plan has no estimate.

    Examples
    --------
    >>> est = {"avg": CostEstimate(overhead_s=0.3, per_tuple_s=1e-6),
    ...        "top5": CostEstimate(overhead_s=0.2, per_tuple_s=4e-6)}
    >>> round(capacity_tuples(est, {"avg": 1, "top5": 1}, 1.0, 0.8))  # 0.3 s / 2.5e-6 s
    120000
    >>> round(capacity_tuples(est, {"avg": 1, "top5": 0}, 1.0, 0.8))  # 0.5 s / 1e-6 s
    500000
    """
    weights = {}
    for p, w in mix_weights.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"mix weight of plan {p!r} must be a finite number >= 0, got {w!r}")
        if w > 0:
            weights[p] = float(w)
    total_w = sum(weights.values())
    if total_w <= 0:
        raise ConfigError(
            f"mix_weights must give some plan a weight > 0, got {dict(mix_weights)!r}"
        )
    budget = node_budget(estimates, interval_s=interval_s, headroom=headroom, running=weights)
    per_tuple = sum(w / total_w * budget.per_tuple_s[p] for p, w in weights.items())
    return budget.available_s / per_tuple


def per_tuple_only_capacity(
    *, rows: int, duration_s: float, interval_s: float, headroom: float = 1.0
) -> float:
    """THEMIS's capacity ``headroom · interval / (duration / rows)`` (THEMIS §6), for comparison.

    It ignores the fixed cost of a micro-batch and over-admits on Spark when calibrated on large
    batches (see the module docstring). Returns ``inf`` for ``rows == 0`` or ``duration_s == 0``.

    >>> per_tuple_only_capacity(rows=1000, duration_s=0.5, interval_s=1.0)
    2000.0
    """
    _check_interval(interval_s, headroom)
    if rows < 0 or duration_s < 0:
        raise ConfigError(
            f"rows and duration_s must be >= 0, got rows={rows!r}, duration_s={duration_s!r}"
        )
    if rows == 0 or duration_s == 0:
        return math.inf
    return headroom * interval_s / (duration_s / rows)


def batch_span(
    overhead_s: float,
    interval_s: float,
    headroom: float = 0.8,
    *,
    current: int = 1,
    share: float = 0.75,
    limit: int = 4,
    slack: float = 0.8,
) -> int:
    """How many shedding intervals one micro-batch should span so its fixed cost fits.

    A micro-batch costs ``overhead_s`` whatever it holds; when that is most of the budget
    ``headroom · interval`` there is almost nothing left for tuples, and shedding everything
    would not even bring the batch under the interval. So the node lets a batch span ``m``
    intervals: the smallest ``m`` (at most ``limit``) with ``overhead_s <= share · headroom ·
    m · interval`` (a quarter of the budget stays for tuples). Coming down is damped: from ``current`` the span only falls by one, once
    the overhead fits a span of ``current - 1`` with ``slack`` to spare (noisy overhead
    estimates do not make batches alternate between spans).

    Examples
    --------
    >>> batch_span(0.5, 1.0), batch_span(0.7, 1.0), batch_span(5.0, 1.0)
    (1, 2, 4)
    >>> batch_span(0.55, 1.0, current=2), batch_span(0.4, 1.0, current=3)
    (2, 2)
    """
    _check_interval(interval_s, headroom)
    if not (isinstance(limit, int) and limit >= 1):
        raise ConfigError(f"limit must be an int >= 1, got {limit!r}")
    per = share * headroom * interval_s
    need = min(limit, max(1, math.ceil(overhead_s / per - 1e-9)))
    if need >= current:
        return need
    if overhead_s <= slack * per * (current - 1):
        return current - 1
    return current
