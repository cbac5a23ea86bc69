"""One node's priority classes: a load manager per class and, optionally, DILoS feedback.

This is the per-interval decision a runtime asks for (Pham §3.1, Fig. 3; §6.1): it hands over
one :class:`~spillway.control.load_manager.IntervalStats` per class (the class's pre-shedding
load, arrivals, results and their mean response time) and gets back, per class, the fraction
of its arriving tuples to drop in the next interval and the share of the node's capacity the
class is to get (the weight of its scheduler pool or lane):

    ``step(config, state, stats_per_class) -> (state, ClassesDecision)``

Each class's load manager treats the class as a virtual node (its capacity is what the
scheduler gives it); with ``dilos`` set, every manager's capacity usage ``u_k = L_k / L_Ck``
goes to the class scheduler, which redistributes capacity every CRC and pushes the factor onto
the managers' capacities (Pham Eq. 6.1). Without ``dilos`` the shares stay at the priorities'
original split (Pham's "separate load manager" configuration). With ``work_conserving`` the
capacity a class leaves idle in an interval goes to the classes that shed, by their priorities
(Pham's CQC, :mod:`spillway.control.cqc`), with or without ``dilos``: only the feedback differs
between the two. Set it on a runtime without a class scheduler, where the admissions are the
capacity split (the Spark node, :mod:`spillway.spark.class_control`); leave it off where the
runtime's own scheduler is work-conserving (the queue model of
:mod:`spillway.control.closed_loop`), which would otherwise hand out the idle capacity twice.
With ``priority_order`` a class's excess shedding (a drop above a lower class's) is handed down
to the lower classes (:func:`spillway.control.cqc.in_priority_order`): set it where the classes
share one batch and so one response time (the Spark node), where the strictest class's manager
would otherwise shed for everyone's load.

Examples
--------
Pham's Example 1 (9 tuples/s each at 1/15 s, priorities 2:1), only DILoS's feedback moving
capacity:

>>> from spillway.control.aurora import AuroraConfig
>>> from spillway.control.dilos import DilosConfig
>>> cfg = ClassesConfig(managers=(AuroraConfig(capacity=2 / 3), AuroraConfig(capacity=1 / 3)),
...                     priorities=(2, 1), dilos=DilosConfig(priorities=(2, 1), crc_cycles=1))
>>> state = initial_state(cfg)
>>> stats = [IntervalStats(interval_s=1.0, load=0.6), IntervalStats(interval_s=1.0, load=0.6)]
>>> state, d = step(cfg, state, stats)
>>> [round(x * 9, 2) for x in d.drops]            # Q2 sheds 4 of its 9 tuples/s, Q1 none
[0.0, 4.0]
>>> [round(s * 15, 2) for s in d.shares]          # then Q1 lends what it does not use
[9.5, 5.5]
>>> state, d = step(cfg, state, stats)
>>> [round(x * 9, 2) for x in d.drops]            # and Q2 sheds less
[0.0, 3.5]

Work-conserving (CQC), Q2 runs in Q1's idle time from the first interval, with or without
DILoS:

>>> wc = ClassesConfig(managers=cfg.managers, priorities=(2, 1), work_conserving=True)
>>> _, d = step(wc, initial_state(wc), stats)
>>> [round(x * 9, 2) for x in d.drops], [round(x * 15, 2) for x in d.lent]
([0.0, 3.0], [0.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spillway.control import cqc
from spillway.control import dilos as dilos_mod
from spillway.control.load_manager import (
    IntervalStats,
    LoadDecision,
    LoadManager,
    LoadManagerConfig,
)
from spillway.errors import ConfigError


def _manager(config: LoadManagerConfig) -> LoadManager[Any, Any]:
    from spillway.control import LOAD_MANAGERS

    name = type(config).name
    if name not in LOAD_MANAGERS or LOAD_MANAGERS[name].config_class is not type(config):
        raise ConfigError(
            f"managers must be configs of registered load managers, got {type(config).__name__}"
        )
    return LOAD_MANAGERS[name]


@dataclass(frozen=True, kw_only=True)
class ClassesConfig:
    """The classes of a node.

    Parameters
    ----------
    managers : one load-manager config per class (e.g. ``AlomaConfig(target_s=..,
        capacity=share)``), highest priority first by convention.
    priorities : each class's priority (an int >= 1).
    dilos : the class scheduler's settings, or None for fixed shares (no feedback). Its
        priorities must equal ``priorities``.
    work_conserving : whether the capacity a class leaves idle goes to the classes that shed
        in the same interval (Pham's CQC, :mod:`spillway.control.cqc`; module notes on when);
        False (default): each class admits what its manager decided.
    priority_order : whether the lower classes shed a higher class's excess before it does
        (:func:`spillway.control.cqc.in_priority_order`; module notes on when); False
        (default): each class sheds what its manager decided.
    """

    managers: tuple[LoadManagerConfig, ...]
    priorities: tuple[int, ...]
    dilos: dilos_mod.DilosConfig | None = None
    work_conserving: bool = False
    priority_order: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "managers", tuple(self.managers))
        object.__setattr__(self, "priorities", tuple(self.priorities))
        if not self.managers:
            raise ConfigError("managers must hold one load-manager config per class, got none")
        if len(self.priorities) != len(self.managers):
            raise ConfigError(
                f"priorities needs one priority per class ({len(self.managers)}), "
                f"got {len(self.priorities)}"
            )
        for i, p in enumerate(self.priorities):
            if not isinstance(p, int) or isinstance(p, bool) or p < 1:
                raise ConfigError(f"priorities[{i}] must be an int >= 1, got {p!r}")
        for m in self.managers:
            _manager(m)
        for name in ("work_conserving", "priority_order"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.dilos is not None and self.dilos.priorities != self.priorities:
            raise ConfigError(
                f"dilos.priorities {self.dilos.priorities} must equal priorities {self.priorities}"
            )


@dataclass(frozen=True, kw_only=True)
class ClassesState:
    """The managers' states, the scheduler's state and the current shares (picklable)."""

    managers: tuple[Any, ...]
    shares: tuple[float, ...]
    scheduler: dilos_mod.DilosState | None = None


@dataclass(frozen=True, kw_only=True)
class ClassesDecision:
    """What each class does in the next interval.

    Parameters
    ----------
    drops : each class's drop fraction, applied uniformly at its sources.
    shares : each class's share of the node's capacity (sums to 1).
    capacities : each manager's capacity estimate, after any push of Eq. 6.1.
    usage : each class's capacity usage ``u_k`` (pre-shedding load over capacity estimate).
    redistributed : whether the class scheduler moved capacity this interval.
    decisions : the managers' own decisions (delay estimates included; their drops are before
        the work-conserving split).
    lent : per class, the load it admits beyond its manager's decision, its part of the
        capacity other classes left idle (all 0 without ``work_conserving``; empty when no
        split applies).
    handed : per class, the shed load it took over from a higher class (> 0) or handed down
        (< 0) (``priority_order``; empty without it).
    """

    drops: tuple[float, ...]
    shares: tuple[float, ...]
    capacities: tuple[float, ...]
    usage: tuple[float, ...]
    redistributed: bool
    decisions: tuple[LoadDecision, ...]
    lent: tuple[float, ...] = ()
    handed: tuple[float, ...] = ()


def initial_state(config: ClassesConfig) -> ClassesState:
    """Every manager's initial state; every class at its original share."""
    managers = tuple(_manager(m).initial_state(m) for m in config.managers)
    scheduler = dilos_mod.initial_state(config.dilos) if config.dilos is not None else None
    return ClassesState(
        managers=managers,
        shares=dilos_mod.original_shares(config.priorities),
        scheduler=scheduler,
    )


def step(
    config: ClassesConfig, state: ClassesState, stats: Sequence[IntervalStats]
) -> tuple[ClassesState, ClassesDecision]:
    """One load-management interval for every class (see the module docstring).

    Raises
    ------
    ConfigError
        ``stats`` without one entry per class.
    """
    n = len(config.managers)
    if len(stats) != n:
        raise ConfigError(f"stats needs one IntervalStats per class ({n}), got {len(stats)}")
    states, decisions = [], []
    for cfg, st, s in zip(config.managers, state.managers, stats, strict=True):
        new, decision = _manager(cfg).step(cfg, st, s)
        states.append(new)
        decisions.append(decision)
    usage = tuple(d.usage for d in decisions)
    drops = tuple(d.drop for d in decisions)
    lent = (0.0,) * n
    if config.work_conserving:  # this interval, at the capacities the managers decided with
        split = cqc.lend_idle(
            priorities=config.priorities,
            capacities=[d.capacity for d in decisions],
            loads=[d.load for d in decisions],
            drops=drops,
        )
        drops, lent = split.drops, split.lent
    handed: tuple[float, ...] = ()
    if config.priority_order:  # after the split: the idle capacity lowers the drops first
        order = cqc.in_priority_order(
            priorities=config.priorities,
            loads=[d.load for d in decisions],
            drops=drops,
            max_drops=[m.max_drop for m in config.managers],
        )
        drops, handed = order.drops, order.handed
    shares, scheduler, redistributed = state.shares, state.scheduler, False
    if config.dilos is not None and scheduler is not None:
        scheduler, sched = dilos_mod.step(
            config.dilos, scheduler, usage, interval_s=stats[0].interval_s
        )
        shares, redistributed = sched.shares, sched.redistributed
        if redistributed:
            states = [
                _manager(cfg).rescale(cfg, st, f)
                for cfg, st, f in zip(config.managers, states, sched.factors, strict=True)
            ]
    capacities = tuple(
        _manager(cfg).capacity_of(st) for cfg, st in zip(config.managers, states, strict=True)
    )
    new_state = ClassesState(managers=tuple(states), shares=shares, scheduler=scheduler)
    return new_state, ClassesDecision(
        drops=drops,
        shares=shares,
        capacities=capacities,
        usage=usage,
        redistributed=redistributed,
        decisions=tuple(decisions),
        lent=lent,
        handed=handed,
    )
