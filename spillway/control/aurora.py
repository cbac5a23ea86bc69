"""Aurora's load shedder: a fixed headroom ``H``, shed the excess ``L − H`` (baseline).

Tatbul et al. (VLDB 2003) as Pham characterises it (§3.3.1): every period the statistics give the
incoming load ``L`` (Eq. 3.1); the capacity is a fixed, hand-chosen headroom factor ``H``; when
``L > H`` the shedder removes ``L − H``, i.e. drops the fraction ``(L − H) / L`` of the arriving
tuples. There is no feedback: a wrong ``H`` is never corrected, and the delay target is not
looked at. An ``H`` slightly above the true capacity lets the queue, and the response time, grow
without bound at a constant input rate (Pham Table 1).

The only state is the capacity, which the class scheduler may rescale (Pham Eq. 6.1) so that
baselines and DILoS share one capacity split.

Examples
--------
>>> cfg = AuroraConfig(capacity=0.9)
>>> state = initial_state(cfg)
>>> state, d = step(cfg, state, IntervalStats(interval_s=0.5, load=1.2))
>>> round(d.drop, 4), round(d.shed_load, 4)     # shed L − H = 0.3 of 1.2
(0.25, 0.3)
>>> step(cfg, state, IntervalStats(interval_s=0.5, load=0.5)).decision.drop
0.0

References
----------
Pham (2016) §3.3.1 and Table 1; Tatbul et al., "Load shedding in a data stream manager", VLDB 2003.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from spillway.control.load_manager import (
    IntervalStats,
    LoadDecision,
    LoadManagerConfig,
    StepResult,
    check_factor,
    drop_for,
)


@dataclass(frozen=True, kw_only=True)
class AuroraConfig(LoadManagerConfig):
    """Aurora's settings: ``capacity`` is the fixed headroom factor ``H``; see
    :class:`~spillway.control.load_manager.LoadManagerConfig`."""

    name: ClassVar[str] = "aurora"


@dataclass(frozen=True, kw_only=True)
class AuroraState:
    """Aurora's state: the capacity in use (the config's ``H`` unless rescaled)."""

    capacity: float


def initial_state(config: AuroraConfig) -> AuroraState:
    """The state before the first interval."""
    return AuroraState(capacity=config.capacity)


def step(config: AuroraConfig, state: AuroraState, stats: IntervalStats) -> StepResult[AuroraState]:
    """Shed ``max(0, L − H)`` of the next interval's load (Pham §3.3.1)."""
    shed = max(0.0, stats.load - state.capacity)
    drop = drop_for(shed, stats.load, config.max_drop)
    return StepResult(state, LoadDecision(drop=drop, load=stats.load, capacity=state.capacity))


def rescale(config: AuroraConfig, state: AuroraState, factor: float) -> AuroraState:
    """Multiply the capacity by ``factor`` (the class scheduler's push, Pham Eq. 6.1)."""
    return replace(state, capacity=state.capacity * check_factor(factor))


def capacity_of(state: AuroraState) -> float:
    """The capacity in use."""
    return state.capacity
