"""The load-manager interface: one interval's statistics in, how much to shed out.

A *load manager* answers Pham's "when and how much to shed" (Pham §3.3.1) for one class of
queries (or a whole node). Once per load-management cycle (the trigger interval on Spark) the
runtime hands it the statistics of the interval that just ended, an :class:`IntervalStats`, and
gets back a :class:`LoadDecision`: the fraction of the arriving tuples to drop at the class's
sources during the next interval, and the manager's estimate of the class's capacity. Every
manager is a pure step function

    ``step(config, state, stats) -> StepResult(state, decision)``

with a frozen, keyword-only config (it round-trips through :func:`dataclasses.asdict`), a
separate frozen, picklable state and no clock, I/O or Spark inside (STYLE §4).

Units
-----
*Load* is Pham's Def. 6: the processing time the tuples arriving per second need, in CPU-seconds
per second (dimensionless; Eq. 3.1 ``L = Σ_i r_i · load_coef_i``). *Capacity* (Def. 7, the
headroom factor ``H``) is in the same unit: the CPU-seconds per second the class can spend on
its tuples. It may exceed 1 on a multi-core node (Pham §4.3.2.1, footnote 3).

Examples
--------
>>> s = IntervalStats(interval_s=0.5, load=1.2, arrived=150, processed=100, outputs=100,
...                   queued_load=0.3, response_time_s=0.8)
>>> round(s.cost_per_tuple_s, 6)      # L·T / arrived
0.004
>>> d = LoadDecision(drop=0.25, load=1.2, capacity=0.9)
>>> round(d.shed_load, 3), round(d.admitted_load, 3)
(0.3, 0.9)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from spillway.errors import ConfigError


def check_number(
    name: str,
    value: object,
    *,
    low: float,
    low_ok: bool = True,
    high: float | None = None,
    high_ok: bool = True,
) -> float:
    """``value`` as a float, checked finite and inside the given bounds.

    >>> check_number("target_s", 2, low=0, low_ok=False)
    2.0
    >>> check_number("max_drop", 1.5, low=0, low_ok=False, high=1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: max_drop must be a finite number > 0 and <= 1, got 1.5
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v >= low if low_ok else v > low) and (
            high is None or (v <= high if high_ok else v < high)
        )
    if not ok:
        lo = f"{'>=' if low_ok else '>'} {low:g}"
        hi = "" if high is None else f" and {'<=' if high_ok else '<'} {high:g}"
        raise ConfigError(f"{name} must be a finite number {lo}{hi}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_count(name: str, value: object, *, low: int = 0) -> int:
    """``value`` checked to be an int ``>= low``.

    >>> check_count("period", 0, low=1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: period must be an int >= 1, got 0
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class IntervalStats:
    """What the runtime measured over one load-management interval (one class).

    Parameters
    ----------
    interval_s : length ``T`` of the interval (s).
    load : incoming load ``L`` of the interval *before* shedding (Pham Eq. 3.1): CPU-seconds of
        work per second that the tuples which arrived need. Computed from the arrival count,
        which must not depend on processing progress (Pham §4.4).
    arrived : tuples that arrived in the interval (counted at arrival, not when read).
    dropped : tuples the shedder discarded in the interval.
    processed : input tuples whose processing completed in the interval.
    outputs : result tuples produced in the interval, all queries together (a shared operator
        or a join may give more than one per input tuple; CTRL's virtual queue counts them).
    undecided : tuples among ``arrived`` that no shedding decision has seen yet: a runtime that
        decides the arrivals of the interval that just ended (a Spark node decides each
        micro-batch's arrivals when it plans it) sheds them at this step's drop and reports
        them in the next interval's ``dropped``; 0 where the shedder sits at the arrival (the
        queue model). CTRL counts them at the shedding in effect, as ``queued_load`` does.
    queued_load : CPU-seconds of work waiting at the end of the interval (SEaMLeSS's queued
        load, Pham Eq. 4.1), tuples that arrived but were not yet read included, after the
        shedding in effect (a tuple the shedder will drop is not work waiting).
    response_time_s : mean response time (output time − arrival time, Pham Def. 3) of the
        results produced in the interval; None when there were none.
    """

    interval_s: float
    load: float
    arrived: int = 0
    dropped: int = 0
    processed: int = 0
    outputs: int = 0
    undecided: int = 0
    queued_load: float = 0.0
    response_time_s: float | None = None

    def __post_init__(self) -> None:
        check_number("IntervalStats.interval_s", self.interval_s, low=0, low_ok=False)
        check_number("IntervalStats.load", self.load, low=0)
        check_number("IntervalStats.queued_load", self.queued_load, low=0)
        for name in ("arrived", "dropped", "processed", "outputs", "undecided"):
            check_count(f"IntervalStats.{name}", getattr(self, name))
        if self.undecided > self.arrived:
            raise ConfigError(
                f"IntervalStats.undecided ({self.undecided}) counts tuples among arrived "
                f"({self.arrived}): it cannot be more"
            )
        if self.response_time_s is not None:
            check_number("IntervalStats.response_time_s", self.response_time_s, low=0)

    @property
    def cost_per_tuple_s(self) -> float | None:
        """Mean CPU-seconds per arriving tuple, ``L·T / arrived`` (None without arrivals)."""
        if self.arrived == 0:
            return None
        return self.load * self.interval_s / self.arrived

    def periods(self, control_period_s: float | None) -> float:
        """The control periods of ``control_period_s`` this interval stands for (1 when None).

        A Spark node decides once a micro-batch, every few trigger intervals; a manager whose
        steps are counted in Pham's control periods counts each such decision as the periods
        it covered.

        >>> IntervalStats(interval_s=1.5, load=1.0).periods(0.5), IntervalStats(
        ...     interval_s=1.5, load=1.0).periods(None)
        (3.0, 1.0)
        """
        return control_periods(self.interval_s, control_period_s)


def control_periods(interval_s: float, control_period_s: float | None) -> float:
    """The control periods of ``control_period_s`` an interval of ``interval_s`` stands for
    (1 when ``control_period_s`` is None: every step is one period).

    >>> control_periods(2.0, 0.5), control_periods(2.0, None)
    (4.0, 1.0)
    """
    return 1.0 if control_period_s is None else interval_s / control_period_s


def combine_stats(stats: Sequence[IntervalStats]) -> IntervalStats:
    """The statistics of several classes as one (Pham's "common load manager", Table 8).

    Loads, counts and queued loads add up; the response time is the mean over all results
    (weighted by each class's ``processed``, or unweighted when no class reports it).

    Raises
    ------
    ConfigError
        No statistics, or intervals of different lengths.

    >>> a = IntervalStats(interval_s=0.5, load=0.3, arrived=10, processed=10, response_time_s=1.0)
    >>> b = IntervalStats(interval_s=0.5, load=0.6, arrived=20, processed=30, response_time_s=3.0)
    >>> c = combine_stats([a, b])
    >>> round(c.load, 2), c.arrived, c.processed, c.response_time_s
    (0.9, 30, 40, 2.5)
    """
    if not stats:
        raise ConfigError("combine_stats needs at least one IntervalStats, got none")
    lengths = {s.interval_s for s in stats}
    if len(lengths) > 1:
        raise ConfigError(f"combine_stats needs one interval length, got {sorted(lengths)}")
    timed = [s for s in stats if s.response_time_s is not None]
    rt = None
    if timed:
        weights = [float(s.processed) for s in timed]
        if sum(weights) <= 0:
            weights = [1.0] * len(timed)
        rt = math.fsum(
            w * s.response_time_s
            for w, s in zip(weights, timed, strict=True)
            if s.response_time_s is not None
        ) / math.fsum(weights)
    return IntervalStats(
        interval_s=stats[0].interval_s,
        load=math.fsum(s.load for s in stats),
        arrived=sum(s.arrived for s in stats),
        dropped=sum(s.dropped for s in stats),
        processed=sum(s.processed for s in stats),
        outputs=sum(s.outputs for s in stats),
        undecided=sum(s.undecided for s in stats),
        queued_load=math.fsum(s.queued_load for s in stats),
        response_time_s=rt,
    )


@dataclass(frozen=True, kw_only=True)
class LoadDecision:
    """A load manager's decision for the next interval.

    Parameters
    ----------
    drop : fraction of the arriving tuples to drop at the class's sources, uniformly at random
        (Pham §6.1.1), in ``[0, max_drop]``.
    load : the load the decision was made for (the last interval's ``L``).
    capacity : the manager's current estimate of the class's capacity (its headroom factor
        ``H``, or ALoMa's ``L_C``), in load units.
    estimated_delay_s : the response time the manager's delay model predicts (CTRL Eq. 3.3,
        SEaMLeSS Eq. 4.2); None for managers without one.
    """

    drop: float
    load: float
    capacity: float
    estimated_delay_s: float | None = None

    def __post_init__(self) -> None:
        check_number("LoadDecision.drop", self.drop, low=0, high=1)
        check_number("LoadDecision.load", self.load, low=0)
        check_number("LoadDecision.capacity", self.capacity, low=0, low_ok=False)

    @property
    def shed_load(self) -> float:
        """Load removed by the drop: ``drop · load``, in ``[0, load]``."""
        return self.drop * self.load

    @property
    def admitted_load(self) -> float:
        """Load that passes the shedder: ``load − shed_load``."""
        return self.load - self.shed_load

    @property
    def usage(self) -> float:
        """Capacity usage ``u = L / L_C`` of the pre-shedding load (Pham §6.1.3)."""
        return self.load / self.capacity


S = TypeVar("S")
C = TypeVar("C")


class StepResult(NamedTuple, Generic[S]):
    """What ``step`` returns: the new state and the decision (unpacks as ``state, decision``)."""

    state: S
    decision: LoadDecision


@dataclass(frozen=True, kw_only=True)
class LoadManagerConfig:
    """Settings every load manager has. Subclass it (frozen, kw_only) for a manager's own.

    Parameters
    ----------
    capacity : the capacity (headroom factor) the manager starts from, in load units: fixed
        for Aurora and CTRL, the initial estimate for SEaMLeSS and ALoMa (Pham: 0.8).
    max_drop : the highest drop fraction, in (0, 1] (Pham §5.3.2.6 caps it at 0.99 so that some
        output remains).
    """

    name: ClassVar[str] = "load-manager"

    capacity: float = 0.8
    max_drop: float = 0.99

    def __post_init__(self) -> None:
        check_number("capacity", self.capacity, low=0, low_ok=False)
        check_number("max_drop", self.max_drop, low=0, low_ok=False, high=1)


def drop_for(shed: float, load: float, max_drop: float) -> float:
    """Drop fraction that removes ``shed`` of ``load``, clamped to ``[0, max_drop]``.

    >>> drop_for(0.3, 1.2, 0.99), drop_for(5.0, 1.0, 0.99), drop_for(0.1, 0.0, 0.99)
    (0.25, 0.99, 0.0)
    """
    if load <= 0:
        return 0.0
    return min(max(shed / load, 0.0), max_drop)


def never_ahead(config: Any, state: Any) -> float | None:
    """No drop decided ahead: a step's drop applies to the arrivals it reported on.

    >>> never_ahead(None, None) is None
    True
    """
    return None


@dataclass(frozen=True)
class LoadManager(Generic[C, S]):
    """A registered load manager: its config class and its three pure functions.

    Parameters
    ----------
    name : the name in :data:`spillway.control.LOAD_MANAGERS`.
    config_class : its frozen config dataclass.
    initial_state : ``config -> state``.
    step : ``(config, state, stats) -> StepResult``.
    rescale : ``(config, state, factor) -> state``: multiply the capacity estimate by
        ``factor`` (the class scheduler's push, Pham Eq. 6.1).
    capacity_of : ``state -> float``: the current capacity estimate.
    pending_drop : ``(config, state) -> float | None``: the drop already decided for the
        arrivals waiting now, for a manager that decides one interval ahead (SEaMLeSS's
        ``retroactive``); None: the next step decides them.
    """

    name: str
    config_class: type[C]
    initial_state: Callable[[C], S]
    step: Callable[[C, S, IntervalStats], StepResult[S]]
    rescale: Callable[[C, S, float], S]
    capacity_of: Callable[[S], float]
    pending_drop: Callable[[C, S], float | None] = never_ahead

    def config(self, **settings: Any) -> C:
        """Build this manager's config from keyword settings (unknown names are refused).

        Raises
        ------
        ConfigError
            A setting the config does not have, or a value that breaks its rules.
        """
        known = {f.name for f in fields(self.config_class)}  # type: ignore[arg-type]
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(
                f"load manager {self.name!r} has no setting {', '.join(unknown)}; "
                f"its settings are: {', '.join(sorted(known))}"
            )
        return self.config_class(**settings)


def check_factor(factor: float) -> float:
    """A capacity rescaling factor, checked finite and > 0.

    >>> check_factor(0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: rescale factor must be a finite number > 0, got 0
    """
    return check_number("rescale factor", factor, low=0, low_ok=False)
