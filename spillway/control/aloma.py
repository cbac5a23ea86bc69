"""ALoMa: reconcile a statistics-based load monitor with a response-time monitor (Pham Alg. 1).

Pham §5.2 (VLDB Journal 2016), the load manager DILoS runs for every class. Two monitors:

- the *load monitor* gives the incoming load ``L`` (Eq. 3.1) and compares it with the capacity
  estimate ``L_C`` (the headroom factor, initially 0.8);
- the *response-time monitor* classifies the measured response time ``rt`` (§5.2.1): **OT**
  (over-threshold overloaded) when ``rt > D``; **UT** (under-threshold overloaded) when
  ``rt ≥ 2 ×`` the smallest response time seen so far (the overload point O, estimated);
  **normal** otherwise. The minimum is refreshed every ``refresh_cycles`` cycles by doubling it
  and letting new observations lower it again.

When the two agree, ``L − L_C`` is the load to remove (or to give back); when they disagree,
``L_C`` moves toward ``L`` by Eq. 5.1's log-damped step, and the shed amount is probed by
``x = 1 + log2(k)`` percentage points (Eq. 5.2), ``k`` the number of consecutive cycles the same
situation (Alg. 1 line 10 or line 17) was seen. Algorithm 1, exactly:

====  ============================  ==============================================================
line  condition                     action
====  ============================  ==============================================================
5-6   ``L > L_C``, normal           increase ``L_C`` (Eq. 5.1)
7-8   ``L > L_C``, OT               shed ``L − L_C`` more
10-12 ``L > L_C``, UT, shedding,    increase ``L_C`` (Eq. 5.1); shed ``x`` % less (Eq. 5.2)
      ``rt ≤ previous rt``
16-19 ``L ≤ L_C``, OT,              decrease ``L_C`` (Eq. 5.1); shed ``x`` % more (Eq. 5.2)
      ``rt ≥ previous rt``
21-23 ``L ≤ L_C``, not OT,          shed ``L_C − L`` less
      shedding
====  ============================  ==============================================================

Readings where the thesis is silent (docs/design.md, "Decisions where the papers are silent or
wrong"): ``L`` is the *effective* load, what passes the shedder (``L_raw·(1 − drop)``, the only
reading under which "shed ``L − L_C`` more" and "shed ``L_C − L`` less" both land on ``L_C``);
the shed amount is kept as a drop fraction and a change of ``ΔL`` load moves it by
``ΔL / L_raw``; ``x`` % is ``x`` percentage points of the drop fraction; an interval without
results (no response time) changes nothing; the first cycle, without a previous response
time, takes neither probe.

A cycle is one of Pham's control periods (0.5 s, the trigger interval on Spark). A Spark node
decides once a micro-batch, every 1-4 trigger intervals when it is loaded, so with
``control_period_s`` set a step counts as the ``n`` periods its interval covered (rounded, at
least 1), as if the situation it observed had held in each: Eq. 5.1 moves ``L_C`` ``n`` times,
a probe sheds the ``n`` increments Eq. 5.2 gives for ``k``, ``k + 1``, ... ``k + n − 1``, and
the minimum's refresh counts periods; lines 7-8 and 21-23 land on ``L_C`` and are taken once.
Counted per decision instead, ALoMa learned a capacity change up to 4 times slower in feed
time than the thesis's manager (docs/design.md, "Decisions (SEaMLeSS, ALoMa and CTRL on
Spark)").

Examples
--------
>>> cfg = AlomaConfig(target_s=2.0)             # L_C starts at 0.8
>>> state = initial_state(cfg)
>>> s = IntervalStats(interval_s=0.5, load=0.9, response_time_s=0.05)
>>> state, d = step(cfg, state, s)              # L > L_C but the response time is normal
>>> state.regime, round(d.capacity, 4)          # Eq. 5.1: gap 12.5 % moves L_C by 0.30 of it
('normal', 0.83)
>>> state, d = step(cfg, state, replace(s, load=1.2, response_time_s=2.5))
>>> state.regime, round(d.drop, 4)              # OT: shed L − L_C = 1.2 − 0.83 of 1.2
('OT', 0.3083)

A decision covering three control periods probes as three cycles would (1 + 2 + 2.58 points):

>>> cfg3 = replace(cfg, control_period_s=0.5)
>>> s3 = replace(s, interval_s=1.5, load=1.0, response_time_s=2.6)
>>> state3, d3 = step(cfg3, replace(state, drop=0.2, capacity=0.85), s3)
>>> state3.probe_run, round(d3.drop - 0.2, 4)
(3, 0.0558)

References
----------
Pham (2016) §5.2 (Eqs. 5.1-5.2, Algorithm 1), §5.3.1 (initial H = 0.8), §6.1.1 (one instance per
class in DILoS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from spillway.control.load_manager import (
    IntervalStats,
    LoadDecision,
    LoadManagerConfig,
    StepResult,
    check_count,
    check_factor,
    check_number,
)

NORMAL, UT, OT = "normal", "UT", "OT"


def capacity_step(capacity: float, load: float) -> float:
    """Move the capacity estimate toward ``load`` by Pham Eq. 5.1.

    ``L_C ± log2(z + 1) / z · |L − L_C|`` with ``z`` the gap in percent of ``L_C`` (``z = 1``
    when the gap is under 1 %, which jumps to ``L``).

    >>> capacity_step(1.0, 1.005)                   # gap 0.5 %: z = 1, jump to L
    1.005
    >>> round(capacity_step(1.0, 1.1), 4)           # gap 10 %: 0.3459 of it
    1.0346
    >>> round(capacity_step(1.0, 0.5), 4)           # down, gap 50 %: 0.1134 of it
    0.9433
    """
    gap = abs(load - capacity)
    z = gap / capacity * 100.0
    if z < 1.0:
        z = 1.0
    move = math.log2(z + 1.0) / z * gap
    return capacity + move if load > capacity else capacity - move


def probe_total(after: int, n: int) -> float:
    """The probes of ``n`` consecutive cycles following ``after`` such cycles, in percent.

    >>> probe_total(0, 1), probe_total(0, 2), probe_total(1, 1), round(probe_total(0, 4), 4)
    (1.0, 3.0, 2.0, 8.585)
    """
    return math.fsum(probe_percent(k) for k in range(after + 1, after + n + 1))


def capacity_steps(capacity: float, load: float, n: int) -> float:
    """``n`` Eq. 5.1 steps of the capacity estimate toward ``load``.

    >>> round(capacity_steps(1.0, 1.1, 1), 4), round(capacity_steps(1.0, 1.1, 3), 4)
    (1.0346, 1.0869)
    """
    for _ in range(n):
        capacity = capacity_step(capacity, load)
    return capacity


def probe_percent(k: int) -> float:
    """Pham Eq. 5.2: the probe ``x = 1 + log2(k)`` in percent, ``k`` consecutive observations.

    >>> [probe_percent(k) for k in (1, 2, 4, 8)]
    [1.0, 2.0, 3.0, 4.0]
    """
    return 1.0 + math.log2(k)


@dataclass(frozen=True, kw_only=True)
class AlomaConfig(LoadManagerConfig):
    """ALoMa's settings.

    Parameters
    ----------
    capacity : the initial capacity estimate ``L_C`` (Pham: 0.8; DILoS: the class's share).
    target_s : the delay target ``D`` (s).
    ut_factor : the response time is UT from this multiple of the smallest one seen (Pham: 2).
    refresh_cycles : every this many cycles the smallest response time is doubled and then
        lowered again by new observations (the thesis refreshes "periodically"; 200 cycles is
        100 s at a 0.5 s cycle).
    min_capacity : floor of ``L_C`` (a guard; not in the thesis).
    max_drop : the highest drop fraction.
    control_period_s : the length (s) of one control period (a cycle); a step then counts as
        the ``round(interval_s / control_period_s)`` cycles (at least 1) its interval covered.
        None: every step is one cycle.
    """

    name: ClassVar[str] = "aloma"

    target_s: float = 2.0
    ut_factor: float = 2.0
    refresh_cycles: int = 200
    min_capacity: float = 1e-3
    control_period_s: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("target_s", self.target_s, low=0, low_ok=False)
        if self.control_period_s is not None:
            check_number("control_period_s", self.control_period_s, low=0, low_ok=False)
        check_number("ut_factor", self.ut_factor, low=1, low_ok=False)
        check_count("refresh_cycles", self.refresh_cycles, low=1)
        check_number("min_capacity", self.min_capacity, low=0, low_ok=False)
        check_number("capacity", self.capacity, low=self.min_capacity)


@dataclass(frozen=True, kw_only=True)
class AlomaState:
    """ALoMa's state.

    Parameters
    ----------
    capacity : the capacity estimate ``L_C``.
    drop : the drop fraction in effect (Pham's "shed amount" over the raw load).
    min_response_s : the smallest response time seen since the last refresh (None at start).
    previous_response_s : the previous cycle's response time (None at start).
    cycles : cycles (control periods) since the last refresh of the minimum.
    regime : the response-time monitor's last verdict: ``normal``, ``UT`` or ``OT``.
    probe : the situation probed last cycle (``"line10"``, ``"line17"``) or "".
    probe_run : consecutive cycles of that situation (``k`` of Eq. 5.2, in control periods).
    """

    capacity: float
    drop: float = 0.0
    min_response_s: float | None = None
    previous_response_s: float | None = None
    cycles: int = 0
    regime: str = NORMAL
    probe: str = ""
    probe_run: int = 0


def initial_state(config: AlomaConfig) -> AlomaState:
    """The state before the first interval."""
    return AlomaState(capacity=config.capacity)


def _monitor(config: AlomaConfig, state: AlomaState, rt: float, n: int) -> tuple[str, float, int]:
    """The response-time monitor after ``n`` cycles: (regime, new minimum, cycles since
    refresh)."""
    low, cycles = state.min_response_s, state.cycles + n
    if low is not None and cycles >= config.refresh_cycles:
        low, cycles = 2.0 * low, 0
    low = rt if low is None else min(low, rt)
    if rt > config.target_s:
        return OT, low, cycles
    if rt >= config.ut_factor * low:
        return UT, low, cycles
    return NORMAL, low, cycles


def step(config: AlomaConfig, state: AlomaState, stats: IntervalStats) -> StepResult[AlomaState]:
    """One ALoMa cycle (Pham Alg. 1) on the statistics of the interval that just ended."""
    raw = stats.load
    rt = stats.response_time_s
    if rt is None:  # no result in the interval: no evidence, no change
        decision = LoadDecision(
            drop=state.drop if raw > 0 else 0.0, load=raw, capacity=state.capacity
        )
        return StepResult(state, decision)
    n = max(1, round(stats.periods(config.control_period_s)))
    regime, low, cycles = _monitor(config, state, rt, n)
    prev = state.previous_response_s
    load = raw * (1.0 - state.drop)  # effective load: what passed the shedder
    cap, drop = state.capacity, state.drop
    shedding = drop > 0
    situation = ""
    if load > cap:
        if regime == NORMAL:  # lines 5-6
            cap = capacity_steps(cap, load, n)
        elif regime == OT:  # lines 7-8
            drop += (load - cap) / raw
        elif shedding and prev is not None and rt <= prev:  # lines 10-12
            situation = "line10"
            cap = capacity_steps(cap, load, n)
            drop -= probe_total(_before(state, situation), n) / 100.0
    elif regime == OT:
        if prev is not None and rt >= prev:  # lines 16-19
            situation = "line17"
            cap = capacity_steps(cap, load, n)
            drop += probe_total(_before(state, situation), n) / 100.0
    elif shedding and raw > 0:  # lines 21-23
        drop -= (cap - load) / raw
    drop = 0.0 if raw <= 0 else min(max(drop, 0.0), config.max_drop)
    cap = max(cap, config.min_capacity)
    new = AlomaState(
        capacity=cap,
        drop=drop,
        min_response_s=low,
        previous_response_s=rt,
        cycles=cycles,
        regime=regime,
        probe=situation,
        probe_run=_before(state, situation) + n if situation else 0,
    )
    return StepResult(new, LoadDecision(drop=drop, load=raw, capacity=cap))


def _before(state: AlomaState, situation: str) -> int:
    """Consecutive cycles of ``situation`` before this step (``k − 1`` of Eq. 5.2 for its
    first cycle)."""
    return state.probe_run if state.probe == situation else 0


def rescale(config: AlomaConfig, state: AlomaState, factor: float) -> AlomaState:
    """Multiply ``L_C`` by ``factor`` (the class scheduler's push, Pham Eq. 6.1)."""
    cap = max(state.capacity * check_factor(factor), config.min_capacity)
    return replace(state, capacity=cap)


def capacity_of(state: AlomaState) -> float:
    """The current capacity estimate ``L_C``."""
    return state.capacity
