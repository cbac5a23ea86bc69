"""A small queueing model of one node whose true capacity you set: the plant the managers control.

The node is Pham's single processing thread (§4.1): every class has one FIFO queue of work;
tuples arrive by a rate profile (the count of arrivals is a pure function of time, never of
processing progress, Pham §4.4), the class's shedder drops a fraction of them on arrival, and
the node spends its *true* capacity ``H*(t)`` (CPU-seconds per second; it falls while a
background job runs) on the queues. The model is a fluid approximation advanced in ``substeps``
steps per interval:

- arrivals of a step form one cohort; ``drop`` of them are dropped, and a dropped tuple still
  costs ``drop_cost_s`` (reading it and deciding to drop it is not free, Pham §5.3.2.6);
- the step's capacity is split between the classes with work in proportion to their shares,
  work-conserving (a class that runs out of work passes its remainder on, as Pham's CQC does,
  §6.2.2);
- a class serves its queue first-in first-out; a kept tuple's response time is its completion
  time (the middle of the stretch of work that completes it) minus its arrival, plus a fixed
  ``latency_s`` every result pays (the time a lightly loaded node takes; it makes the smallest
  response time ALoMa's monitor sees positive);
- each completed kept tuple yields ``fanout`` results (several queries sharing a source, Pham
  QN-complex: CTRL's naïve virtual queue counts those).

The load statistic a real load monitor reports is noisy (per-tuple costs fluctuate with batching,
Pham Fig. 14): the reported ``load`` is the true one times ``1 + load_noise · z``, ``z`` a
standard normal hashed from (seed, class, interval), so runs are reproducible bit for bit.

The same model serves the single-node validation of the load managers here and a simulator
(:mod:`spillway.control.closed_loop` drives it with load managers and the DILoS scheduler).

Examples
--------
>>> from spillway.feeds.profiles import ConstantProfile
>>> load = ClassLoad(profile=ConstantProfile(n_sources=1, rate=300.0), cost_s=0.005,
...                  target_s=2.0)
>>> model = QueueModel(QueueModelConfig(classes=(load,), capacity=CapacitySchedule(base=1.0),
...                                     load_noise=0.0))
>>> state = model.initial_state()
>>> for _ in range(4):                              # 1.5 CPU-s of work per second on 1.0
...     state, out = model.advance(state, drops=(0.0,))
>>> s = out.stats[0]
>>> s.arrived, round(s.load, 2), round(s.queued_load, 2), round(s.response_time_s, 2)
(150, 1.5, 1.0, 0.63)
>>> state, out = model.advance(state, drops=(0.5,))  # shed half: 0.75 of 1.0, the queue drains
>>> out.stats[0].dropped, round(out.stats[0].queued_load, 3)
(75, 0.875)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from spillway.control.load_manager import IntervalStats, check_count, check_number
from spillway.errors import ConfigError
from spillway.feeds import hashing


class Arrivals(Protocol):
    """Anything with ``count(t)``: tuples of every source that arrived in ``[0, t)``."""

    def count(self, t: float) -> np.ndarray: ...


@dataclass(frozen=True, kw_only=True)
class CapacitySchedule:
    """The node's true capacity ``H*(t)``: piecewise constant.

    Parameters
    ----------
    base : the capacity (CPU-seconds per second) before the first change.
    changes : ``(time_s, capacity)`` pairs, times strictly increasing: from ``time_s`` on the
        capacity is ``capacity``.

    Examples
    --------
    >>> c = CapacitySchedule(base=1.0, changes=((10.0, 0.5),))
    >>> c.at(9.0), c.at(10.0), c.work(9.0, 11.0)
    (1.0, 0.5, 1.5)
    >>> on = CapacitySchedule.from_intervals(base=1.0, reduced=0.5, intervals=[(2.0, 3.0)])
    >>> on.changes
    ((2.0, 0.5), (3.0, 1.0))
    """

    base: float
    changes: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        check_number("capacity base", self.base, low=0, low_ok=False)
        changes = tuple((float(t), float(c)) for t, c in self.changes)
        for i, (t, c) in enumerate(changes):
            check_number(f"capacity change time [{i}]", t, low=0)
            check_number(f"capacity change value [{i}]", c, low=0, low_ok=False)
        if any(b[0] <= a[0] for a, b in zip(changes, changes[1:], strict=False)):
            raise ConfigError(
                f"capacity change times must be strictly increasing, got {[t for t, _ in changes]}"
            )
        object.__setattr__(self, "changes", changes)

    @classmethod
    def from_intervals(
        cls, *, base: float, reduced: float, intervals: Sequence[tuple[float, float]]
    ) -> CapacitySchedule:
        """Capacity ``reduced`` inside each ``(start, end)`` interval, ``base`` elsewhere.

        The intervals are, e.g., the on-phases of a background CPU burner
        (:meth:`spillway.feeds.background.BackgroundSchedule.on_intervals`); an ``end`` of
        ``inf`` keeps the capacity reduced for ever.
        """
        changes: list[tuple[float, float]] = []
        for start, end in intervals:
            changes.append((start, reduced))
            if math.isfinite(end):
                changes.append((end, base))
        at: dict[float, float] = {}
        for t, c in changes:  # back-to-back intervals: the later change at one time wins
            at[t] = c
        merged: list[tuple[float, float]] = []
        value = base
        for t in sorted(at):
            if at[t] != value:  # drop changes that change nothing
                merged.append((t, at[t]))
                value = at[t]
        return cls(base=base, changes=tuple(merged))

    def at(self, t: float) -> float:
        """The capacity at time ``t``."""
        value = self.base
        for start, c in self.changes:
            if start > t:
                break
            value = c
        return value

    def work(self, t0: float, t1: float) -> float:
        """CPU-seconds available in ``[t0, t1)``: the integral of the capacity."""
        edges = [t0] + [t for t, _ in self.changes if t0 < t < t1] + [t1]
        return math.fsum(self.at(a) * (b - a) for a, b in zip(edges, edges[1:], strict=False))


@dataclass(frozen=True, kw_only=True)
class ClassLoad:
    """One class of queries on the node: its arrivals, cost and delay target.

    Parameters
    ----------
    profile : arrivals (a :class:`spillway.feeds.profiles.Profile`; all its sources count).
    cost_s : CPU-seconds one kept tuple needs (its load coefficient, Pham Eq. 3.2).
    target_s : the class's delay target ``D`` (for the violation metrics only).
    drop_cost_s : CPU-seconds a dropped tuple still needs.
    fanout : results per completed kept tuple (> 1 for shared operators; CTRL counts them).
    latency_s : time every result takes on a lightly loaded node.
    """

    profile: Arrivals
    cost_s: float
    target_s: float
    drop_cost_s: float = 0.0
    fanout: float = 1.0
    latency_s: float = 0.02

    def __post_init__(self) -> None:
        check_number("cost_s", self.cost_s, low=0, low_ok=False)
        check_number("target_s", self.target_s, low=0, low_ok=False)
        check_number("drop_cost_s", self.drop_cost_s, low=0)
        check_number("fanout", self.fanout, low=0, low_ok=False)
        check_number("latency_s", self.latency_s, low=0)


@dataclass(frozen=True, kw_only=True)
class QueueModelConfig:
    """The node: its classes, its true capacity and the model's resolution.

    Parameters
    ----------
    classes : the classes, in the order of the drops and shares passed to ``advance``.
    capacity : the true capacity over time.
    interval_s : the load-management interval ``T`` (s).
    substeps : fluid steps per interval.
    load_noise : relative standard deviation of the reported load statistic.
    seed : seed of that noise.
    """

    classes: tuple[ClassLoad, ...]
    capacity: CapacitySchedule
    interval_s: float = 0.5
    substeps: int = 10
    load_noise: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(self.classes))
        if not self.classes:
            raise ConfigError("classes must hold at least one ClassLoad, got none")
        check_number("interval_s", self.interval_s, low=0, low_ok=False)
        check_count("substeps", self.substeps, low=1)
        check_number("load_noise", self.load_noise, low=0, high=0.5)
        check_count("seed", self.seed, low=0)


@dataclass(frozen=True, kw_only=True)
class ClassMetrics:
    """What a class's results looked like in one interval (for reports, not for the managers).

    Parameters
    ----------
    results : kept tuples completed (each counted once, whatever the fanout).
    response_sum_s : sum of their response times.
    violation_sum_s : sum of ``max(0, response − D)`` over them.
    response_max_s : the largest response time (0 without results).
    capacity : the true capacity at the end of the interval (the whole node's).
    """

    results: float
    response_sum_s: float
    violation_sum_s: float
    response_max_s: float
    capacity: float


@dataclass(frozen=True, kw_only=True)
class ModelInterval:
    """One interval's output: per class, the statistics a load manager gets and the metrics."""

    time_s: float
    stats: tuple[IntervalStats, ...]
    metrics: tuple[ClassMetrics, ...]


@dataclass(frozen=True, kw_only=True)
class QueueState:
    """The model's state: time, queues and integer-rounding remainders (picklable).

    ``queues[k]`` is a tuple of cohorts ``(arrival_s, kept, dropped)`` (fluid tuple counts),
    oldest first; ``arrived[k]`` the tuples of class ``k`` that arrived so far; ``work[k]`` the
    CPU-seconds waiting in its queue.
    """

    interval: int = 0
    queues: tuple[tuple[tuple[float, float, float], ...], ...] = ()
    arrived: tuple[int, ...] = ()
    drop_carry: tuple[float, ...] = ()
    output_carry: tuple[float, ...] = ()
    work: tuple[float, ...] = ()


class QueueModel:
    """The queueing model of :class:`QueueModelConfig` (see the module docstring).

    ``advance(state, drops, shares) -> (state, ModelInterval)`` is pure: the model object holds
    only the config.
    """

    def __init__(self, config: QueueModelConfig) -> None:
        self.config = config

    def time_of(self, state: QueueState) -> float:
        """The model time (s) at the end of the last advanced interval."""
        return state.interval * self.config.interval_s

    def initial_state(self) -> QueueState:
        """Empty queues at time 0."""
        n = len(self.config.classes)
        return QueueState(
            queues=((),) * n,
            arrived=(0,) * n,
            drop_carry=(0.0,) * n,
            output_carry=(0.0,) * n,
            work=(0.0,) * n,
        )

    def advance(
        self,
        state: QueueState,
        drops: Sequence[float],
        shares: Sequence[float] | None = None,
    ) -> tuple[QueueState, ModelInterval]:
        """Run one interval with each class dropping ``drops[k]`` of its arrivals.

        Parameters
        ----------
        state : the state after the previous interval.
        drops : each class's drop fraction for this interval, in [0, 1].
        shares : each class's capacity share (> 0; default equal); work-conserving.

        Raises
        ------
        ConfigError
            ``drops`` or ``shares`` without one valid value per class.
        """
        cfg = self.config
        n = len(cfg.classes)
        if len(drops) != n:
            raise ConfigError(f"drops needs one fraction per class ({n}), got {len(drops)}")
        for k, p in enumerate(drops):
            check_number(f"drops[{k}]", p, low=0, high=1)
        weights = [1.0] * n if shares is None else [float(s) for s in shares]
        if len(weights) != n:
            raise ConfigError(f"shares needs one share per class ({n}), got {len(weights)}")
        for k, w in enumerate(weights):
            check_number(f"shares[{k}]", w, low=0, low_ok=False)

        t_start = state.interval * cfg.interval_s
        dt = cfg.interval_s / cfg.substeps
        queues = [deque(q) for q in state.queues]
        work = list(state.work)
        arrived_total = list(state.arrived)
        drop_carry = list(state.drop_carry)
        arrived = [0] * n
        dropped = [0] * n
        completed = [0.0] * n
        rt_sum = [0.0] * n
        viol_sum = [0.0] * n
        rt_max = [0.0] * n
        for i in range(cfg.substeps):
            t0 = t_start + i * dt
            t1 = t0 + dt
            for k, cl in enumerate(cfg.classes):
                total = int(np.asarray(cl.profile.count(t1)).sum())
                new = total - arrived_total[k]
                arrived_total[k] = total
                if new <= 0:
                    continue
                drop_carry[k] += new * float(drops[k])
                d = min(new, int(math.floor(drop_carry[k] + 1e-9)))
                drop_carry[k] -= d
                arrived[k] += new
                dropped[k] += d
                queues[k].append((t0, float(new - d), float(d)))
                work[k] += (new - d) * cl.cost_s + d * cl.drop_cost_s
            allot = _split(cfg.capacity.work(t0, t1), work, weights)
            for k, cl in enumerate(cfg.classes):
                if allot[k] <= 0:
                    continue
                rate = allot[k] / dt
                done = 0.0
                q = queues[k]
                while q and allot[k] - done > 1e-15:
                    arr, kept, drp = q[0]
                    cw = kept * cl.cost_s + drp * cl.drop_cost_s
                    part = min(1.0, (allot[k] - done) / cw) if cw > 0 else 1.0
                    finish = t0 + (done + part * cw / 2.0) / rate
                    n_kept = part * kept
                    if n_kept > 0:
                        rt = max(finish - arr, 0.0) + cl.latency_s
                        completed[k] += n_kept
                        rt_sum[k] += n_kept * rt
                        viol_sum[k] += n_kept * max(0.0, rt - cl.target_s)
                        rt_max[k] = max(rt_max[k], rt)
                    done += part * cw
                    if part >= 1.0:
                        q.popleft()
                    else:
                        q[0] = (arr, kept - n_kept, drp - part * drp)
                        break
                work[k] = max(0.0, work[k] - done) if q else 0.0
        t_end = t_start + cfg.interval_s
        stats, metrics, out_carry = [], [], list(state.output_carry)
        for k, cl in enumerate(cfg.classes):
            out_carry[k] += completed[k] * cl.fanout
            outputs = int(math.floor(out_carry[k] + 1e-9))
            out_carry[k] -= outputs
            noise = 1.0
            if cfg.load_noise > 0:
                z = float(hashing.normal(cfg.seed, "queue_model.load", k, state.interval)[0])
                noise = max(0.0, 1.0 + cfg.load_noise * z)
            load = arrived[k] * cl.cost_s / cfg.interval_s * noise
            queued = work[k]
            stats.append(
                IntervalStats(
                    interval_s=cfg.interval_s,
                    load=load,
                    arrived=arrived[k],
                    dropped=dropped[k],
                    processed=int(round(completed[k])),
                    outputs=outputs,
                    queued_load=queued,
                    response_time_s=rt_sum[k] / completed[k] if completed[k] > 1e-9 else None,
                )
            )
            metrics.append(
                ClassMetrics(
                    results=completed[k],
                    response_sum_s=rt_sum[k],
                    violation_sum_s=viol_sum[k],
                    response_max_s=rt_max[k],
                    capacity=cfg.capacity.at(t_end),
                )
            )
        new_state = QueueState(
            interval=state.interval + 1,
            queues=tuple(tuple(q) for q in queues),
            arrived=tuple(arrived_total),
            drop_carry=tuple(drop_carry),
            output_carry=tuple(out_carry),
            work=tuple(work),
        )
        return new_state, ModelInterval(time_s=t_end, stats=tuple(stats), metrics=tuple(metrics))


def _split(budget: float, need: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Work-conserving weighted split of ``budget`` CPU-seconds over classes needing ``need``.

    >>> [round(x, 3) for x in _split(1.0, [0.1, 5.0, 5.0], [6, 3, 1])]   # 0.5 of 0.6 passed on
    [0.1, 0.675, 0.225]
    """
    allot = [0.0] * len(need)
    active = [k for k, w in enumerate(need) if w > 0]
    left = budget
    while active and left > 1e-15:
        wsum = math.fsum(weights[k] for k in active)
        give = {k: left * weights[k] / wsum for k in active}
        left = 0.0
        still = []
        for k in active:
            take = min(give[k], need[k] - allot[k])
            allot[k] += take
            left += give[k] - take
            if need[k] - allot[k] > 1e-15:
                still.append(k)
        active = still
    return allot
