"""SEaMLeSS: CTRL's delay control over the *queued load*, and a headroom factor it learns.

Pham §4.2 (SMDB 2013). Two loops:

- inner, every period: the *queued load* ``qL`` (Pham Eq. 4.1, CPU-seconds waiting in every
  operator queue, weighted by the load coefficient of the branch behind it, unread arrivals
  included) gives the delay estimate ``y = qL / H`` (Eq. 4.2, assuming a fair scheduler); the
  controller (Eq. 4.3, :mod:`~spillway.control.delay_control`) gives ``u``, the load that may be
  added to the queue next period; ``v = u + H·T`` may be admitted and ``L^(k−1)·T − v`` is shed,
  the last period's load standing in for the next one's;
- outer, every ``period`` control periods: ``H ← H · D / D'`` (§4.2.2), ``D'`` the mean measured
  response time of the results of the periods of that window in which shedding was in effect.
  A window with shedding in fewer than half of its periods is skipped: outside sustained
  shedding the response time does not converge to anything ``H`` explains (transitions,
  normal load).

Interpretations (docs/design.md, decisions):

- ``D'`` is "the average real response time over a number of periods when shedding is
  applied" (§4.2.2): a response time is a result's (Def. 3), so the average is over the
  results of those periods, each period's mean weighted by its ``outputs`` (``processed``
  when it reports no outputs, 1 when it reports neither). Before, every period's mean weighed
  the same: a period of 10 results counted as much as one of 10,000, while the delay
  violation the target is judged by is per result;
- ``P`` is Pham's count of control periods (30; best 20-40, §4.3.3.3) of his control period
  ``T`` (0.5 s). A runtime whose decisions cover varying stretches (a Spark node decides once
  per micro-batch, every 2-6 trigger intervals) sets ``control_period_s``, the length one
  control period stands for (on Spark the trigger interval, the unit ``D`` is given in), and
  the window then counts the feed time its decisions covered: ``P`` periods are ``P · T``
  seconds, however many decisions that is; the half-shedding rule counts time too. Before,
  every decision counted as one period: 30 decisions of 1-3 s made a window of 30-90 s
  (Pham's 60-180 periods, past the slow end of his sweep) and a 40 s run never adjusted
  ``H``. Without ``control_period_s`` every step is one period (the queue model's fixed
  intervals);
- ``qL`` is the work that will be done: tuples waiting unread count after the shedding in
  effect. AQSIOS embeds the shedder in the source operators (§6.1.1 Fig. 22, §6.1.4; Ch. 4
  does not say where SEaMLeSS sheds), so Eq. 4.1's load coefficient behind a source, from
  measured selectivities (Eq. 3.2), carries its kept share; and Eqs. 4.2-4.3 keep the queue
  apart from the load ``L`` shed from. The runtime measures it so
  (:class:`~spillway.control.load_manager.IntervalStats`; on Spark
  ``NodeController._work_and_queued``).

- when a drop takes effect (``retroactive``, set by the Spark node): Pham's ``v`` is the
  *next* period's admission and ``qL`` counts waiting tuples at the shedding in effect, since
  AQSIOS sheds as a source reads. A Spark node decides each micro-batch's arrivals after they
  came, all of them waiting; applying the new drop to them, while ``qL`` counted them at the
  last one, couples a batch's length to the next decision (a batch that kept much runs long,
  brings many arrivals, and the next decision sheds hard), and at a high rate the drop swings
  between its bounds at every decision. So the step returns the drop in effect, which the
  node's ``qL`` counted the waiting arrivals at, and the new one applies from the next
  interval (``tests/spark/test_load_control.py``, EXPERIMENTS.md "SEaMLeSS decides one
  interval ahead").

Unlike CTRL it works on any query network (the queued load replaces the tuple count) and needs
no hand-tuned ``H``; like CTRL it assumes a fair scheduler and the count of arrived but unread
tuples (Pham §4.4).

Examples
--------
>>> cfg = SeamlessConfig(capacity=0.8, target_s=2.0, period=2)
>>> state = initial_state(cfg)
>>> s = IntervalStats(interval_s=0.5, load=1.5, queued_load=1.2, response_time_s=1.5)
>>> state, d = step(cfg, state, s)
>>> round(d.estimated_delay_s, 2)                 # y = qL / H = 1.2 / 0.8
1.5
>>> # two periods of shedding with a measured 3 s against D = 2 s: H was too high
>>> state = SeamlessState(capacity=0.8, drop=0.3)
>>> for _ in range(2):
...     state, d = step(cfg, state, replace(s, response_time_s=3.0))
>>> round(d.capacity, 3)                          # 0.8 · 2 / 3
0.533

References
----------
Pham (2016) §4.2 (Eqs. 4.1-4.3, headroom auto-adjustment), §4.3.3.3 (P in [20, 40], 30 used),
§4.4 (limitations).
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
    check_count,
    check_factor,
    check_number,
)


@dataclass(frozen=True, kw_only=True)
class SeamlessConfig(LoadManagerConfig):
    """SEaMLeSS's settings.

    Parameters
    ----------
    capacity : the initial headroom factor ``H`` (learned from then on).
    target_s : the delay target ``D`` (s).
    period : the headroom adjustment period ``P`` in control periods (Pham: 30; best 20-40).
    control_period_s : the length (s) of one control period; a step then counts as
        ``interval_s / control_period_s`` periods. None: every step is one period.
    pole : closed-loop pole of the controller, in [0, 1).
    retroactive : the runtime sheds, at the drop a step returns, the arrivals of the interval
        that step reported (a Spark node decides a micro-batch's arrivals after they came).
        The step then returns the drop in effect, at which ``queued_load`` counted those
        arrivals, and the new drop takes effect from the next step: Pham's timing, where ``v``
        is the next period's admission (the Spark node sets it); the first step, with no drop
        in effect yet, returns its own. False: the drop returned is the new one (the shedder
        sits at the arrival, as in the queue model).
    min_capacity, max_capacity : bounds of the learned ``H`` (a guard against a degenerate
        ``D'``; not in the thesis).
    max_drop : the highest drop fraction.
    """

    name: ClassVar[str] = "seamless"

    target_s: float = 2.0
    period: int = 30
    control_period_s: float | None = None
    pole: float = 0.7
    retroactive: bool = False
    min_capacity: float = 1e-3
    max_capacity: float = 64.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("target_s", self.target_s, low=0, low_ok=False)
        check_count("period", self.period, low=1)
        if self.control_period_s is not None:
            check_number("control_period_s", self.control_period_s, low=0, low_ok=False)
        gains_for_pole(self.pole)
        check_number("min_capacity", self.min_capacity, low=0, low_ok=False)
        check_number("max_capacity", self.max_capacity, low=self.min_capacity)
        check_number("capacity", self.capacity, low=self.min_capacity, high=self.max_capacity)


@dataclass(frozen=True, kw_only=True)
class SeamlessState:
    """SEaMLeSS's state.

    Parameters
    ----------
    capacity : the current headroom factor ``H``.
    drop : the drop fraction in effect during the interval being reported.
    error : the previous ``e = y − D`` (s).
    output : the previous realised controller output ``u`` (CPU-seconds).
    window : control periods seen in the current adjustment window.
    shedding_periods : control periods of the window with shedding in effect and a response
        time.
    response_sum_s : sum of those periods' mean response times, each times its results.
    response_rows : the results those means are over (their weights).
    decided : a step has decided a drop (a ``retroactive`` step applies the drop in effect
        only once there is one: the first applies its own).
    """

    capacity: float
    drop: float = 0.0
    error: float = 0.0
    output: float = 0.0
    window: float = 0.0
    shedding_periods: float = 0.0
    response_sum_s: float = 0.0
    response_rows: float = 0.0
    decided: bool = False


def initial_state(config: SeamlessConfig) -> SeamlessState:
    """The state before the first interval."""
    return SeamlessState(capacity=config.capacity)


def _adjust_headroom(
    config: SeamlessConfig, state: SeamlessState, stats: IntervalStats
) -> SeamlessState:
    """The outer loop: collect ``D'`` while shedding, every ``P`` periods ``H ← H·D/D'``."""
    step_periods = stats.periods(config.control_period_s)
    window = state.window + step_periods
    periods, total, rows = state.shedding_periods, state.response_sum_s, state.response_rows
    if state.drop > 0 and stats.response_time_s is not None:
        n = float(stats.outputs or stats.processed or 1)
        periods, total, rows = periods + step_periods, total + n * stats.response_time_s, rows + n
    if window < config.period - 1e-9:
        return replace(
            state, window=window, shedding_periods=periods, response_sum_s=total, response_rows=rows
        )
    h = state.capacity
    if 2 * periods >= window and total > 0:
        measured = total / rows  # D': the mean over the results of the shedding periods
        h = min(max(h * config.target_s / measured, config.min_capacity), config.max_capacity)
    return replace(
        state, capacity=h, window=0.0, shedding_periods=0.0, response_sum_s=0.0, response_rows=0.0
    )


def step(
    config: SeamlessConfig, state: SeamlessState, stats: IntervalStats
) -> StepResult[SeamlessState]:
    """Adjust ``H`` when a window ends, then decide the next interval's drop fraction."""
    state = _adjust_headroom(config, state, stats)
    h = state.capacity
    delay = stats.queued_load / h  # Eq. 4.2
    error = delay - config.target_s
    a, b0, b1 = gains_for_pole(config.pole)
    u = controller_output(h, error, state.error, state.output, a, b0, b1)  # Eq. 4.3
    period_load = stats.load * stats.interval_s  # L^(k-1) as CPU-seconds per period
    processed = h * stats.interval_s
    admit = u + processed  # v^k
    drop = 0.0
    if period_load > 0:
        drop = min(max(1.0 - admit / period_load, 0.0), config.max_drop)
    realised = period_load * (1.0 - drop) - processed
    new = replace(state, drop=drop, error=error, output=realised, decided=True)
    ahead = pending_drop(config, state)
    applied = drop if ahead is None else ahead
    decision = LoadDecision(drop=applied, load=stats.load, capacity=h, estimated_delay_s=delay)
    return StepResult(new, decision)


def pending_drop(config: SeamlessConfig, state: SeamlessState) -> float | None:
    """The drop already decided for the arrivals waiting now: with ``retroactive``, the last
    step's, once a step has decided one; else None (the next step decides them).

    >>> cfg = SeamlessConfig(retroactive=True)
    >>> pending_drop(cfg, initial_state(cfg)), pending_drop(cfg, SeamlessState(
    ...     capacity=0.8, drop=0.3, decided=True))
    (None, 0.3)
    """
    return state.drop if config.retroactive and state.decided else None


def rescale(config: SeamlessConfig, state: SeamlessState, factor: float) -> SeamlessState:
    """Multiply ``H`` by ``factor`` (the class scheduler's push, Pham Eq. 6.1), within bounds."""
    h = state.capacity * check_factor(factor)
    return replace(state, capacity=min(max(h, config.min_capacity), config.max_capacity))


def capacity_of(state: SeamlessState) -> float:
    """The current headroom factor."""
    return state.capacity
