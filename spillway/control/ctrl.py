"""CTRL: a virtual queue, a delay model and a feedback controller, with a hand-tuned ``H``.

Tu et al. (VLDB 2006) as Pham describes and reproduces it (§3.3.1, §4.3.2.2):

- the *virtual queue* ``q`` counts tuples: +1 for every arriving tuple, −1 for every tuple
  output or discarded. The counting is naïve on purpose: with a shared operator or a join one
  input tuple gives several outputs, ``q`` is underestimated and CTRL never sees the overload
  (Pham Fig. 11: it sheds 0 % and falls 41 s behind on QN-complex). Do not "fix" it;
- the *delay model* ``y = (c / H) · q`` (Pham Eq. 3.3), ``c`` the mean CPU-seconds per tuple
  (``L·T / arrived`` of the last interval) and ``H`` the headroom factor, fixed and tuned by hand;
- arrivals no decision has seen yet (``IntervalStats.undecided``: a Spark node decides the
  arrivals of the interval that just ended) count in ``y`` at the shedding in effect, the share
  the last decision kept, as they would have passed Tu's shedder at the source. The queue keeps
  them at full count until their drops are reported. Counted in full they held one interval's
  arrivals at the overload's size: on Spark ``y`` never fell under ``D`` and CTRL shed its
  ``max_drop`` (99 %) with the response time half the target (docs/design.md, decisions);
- the controller (:mod:`~spillway.control.delay_control`, Eq. 4.3 in tuple units) gives ``u``,
  the tuples that may be added to the queue next period; ``v = u + H·T / c`` tuples may be
  admitted, the rest of the expected arrivals (the last interval's count) is dropped.

With the right ``H`` the delay settles at the target ``D``; with ``H`` too high by a factor
``r`` it settles near ``r · D``, because the model's delays are ``r`` times too short.

Examples
--------
>>> cfg = CtrlConfig(capacity=1.0, target_s=2.0)
>>> state = initial_state(cfg)
>>> # 500 tuples of 2 ms arrived in 0.5 s (load 2.0), 100 left: the virtual queue holds 400
>>> s = IntervalStats(interval_s=0.5, load=2.0, arrived=500, outputs=100, processed=100)
>>> state, d = step(cfg, state, s)
>>> state.queue, round(d.estimated_delay_s, 3)     # y = c·q/H = 0.002 · 400
(400.0, 0.8)
>>> # the runtime decides the 500 arrivals after they came: with half shed in effect, 250 count
>>> s = IntervalStats(interval_s=0.5, load=2.0, arrived=500, undecided=500, outputs=100)
>>> state, d = step(cfg, replace(state, queue=0.0, drop=0.5), s)
>>> state.queue, round(d.estimated_delay_s, 3)     # y = 0.002 · (400 − 0.5 · 500)
(400.0, 0.3)

References
----------
Pham (2016) §3.3.1 (Eq. 3.3), §4.3.2.2 (Table 2), §4.3.3.2; Tu et al., "Load shedding in stream
databases: a control-based approach", VLDB 2006.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from spillway.control.delay_control import controller_output, gains_for_pole
from spillway.control.load_manager import (
    IntervalStats,
    LoadDecision,
    LoadManagerConfig,
    StepResult,
    check_factor,
    check_number,
)


@dataclass(frozen=True, kw_only=True)
class CtrlConfig(LoadManagerConfig):
    """CTRL's settings.

    Parameters
    ----------
    capacity : the headroom factor ``H`` of the delay model, fixed (Pham tuned 0.99 by hand).
    target_s : the delay target ``D`` (s).
    pole : closed-loop pole of the controller, in [0, 1)
        (:func:`~spillway.control.delay_control.gains_for_pole`).
    max_drop : the highest drop fraction.
    """

    name: ClassVar[str] = "ctrl"

    target_s: float = 2.0
    pole: float = 0.7

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("target_s", self.target_s, low=0, low_ok=False)
        gains_for_pole(self.pole)


@dataclass(frozen=True, kw_only=True)
class CtrlState:
    """CTRL's state.

    Parameters
    ----------
    capacity : the headroom factor in use (the config's, unless the class scheduler rescaled it).
    queue : the virtual queue (tuples), undecided arrivals at full count.
    drop : the drop fraction in effect (the last decision's).
    cost_s : the last known CPU-seconds per tuple (None before any arrival).
    error : the previous ``e = y − D`` (s).
    output : the previous realised controller output ``u`` (tuples).
    """

    capacity: float
    queue: float = 0.0
    drop: float = 0.0
    cost_s: float | None = None
    error: float = 0.0
    output: float = 0.0


def initial_state(config: CtrlConfig) -> CtrlState:
    """The state before the first interval."""
    return CtrlState(capacity=config.capacity)


def step(config: CtrlConfig, state: CtrlState, stats: IntervalStats) -> StepResult[CtrlState]:
    """Update the virtual queue and decide the next interval's drop fraction."""
    queue = max(0.0, state.queue + stats.arrived - stats.outputs - stats.dropped)
    cost = stats.cost_per_tuple_s or state.cost_s
    h = state.capacity
    if cost is None:  # nothing has arrived yet: nothing to control
        new = replace(state, queue=queue)
        return StepResult(new, LoadDecision(drop=0.0, load=stats.load, capacity=h))
    seen = max(0.0, queue - state.drop * stats.undecided)  # undecided: at the drop in effect
    delay = cost * seen / h  # Eq. 3.3
    error = delay - config.target_s
    a, b0, b1 = gains_for_pole(config.pole)
    # Eq. 4.3 in tuples: the headroom term H/c turns seconds of delay into tuples
    u = controller_output(h / cost, error, state.error, state.output, a, b0, b1)
    expected = float(stats.arrived)
    admit = u + h * stats.interval_s / cost
    drop = 0.0 if expected <= 0 else min(max(1.0 - admit / expected, 0.0), config.max_drop)
    realised = expected * (1.0 - drop) - h * stats.interval_s / cost
    new = CtrlState(capacity=h, queue=queue, drop=drop, cost_s=cost, error=error, output=realised)
    decision = LoadDecision(drop=drop, load=stats.load, capacity=h, estimated_delay_s=delay)
    return StepResult(new, decision)


def rescale(config: CtrlConfig, state: CtrlState, factor: float) -> CtrlState:
    """Multiply the headroom factor by ``factor`` (the class scheduler's push, Pham Eq. 6.1)."""
    return replace(state, capacity=state.capacity * check_factor(factor))


def capacity_of(state: CtrlState) -> float:
    """The headroom factor in use."""
    return state.capacity
