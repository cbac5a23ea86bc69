"""DILoS capacity redistribution: lend what a class does not use to the classes that need it.

Pham §6.1.3. Every priority class ``k`` has a capacity *share* ``s_k`` of the node (the class
scheduler's time quota ``T_k / T``), starting at its original share ``s⁰_k = P_k / Σ_i P_i``
(priorities 6/3/1 give 60/30/10 %). Each class's load manager reports its *capacity usage*
``u_k = L_k / L_Ck`` (raw, pre-shedding load over its capacity estimate). Every capacity
redistribution cycle (CRC, Pham: 10 load-management cycles) the scheduler computes

    ``demand_k = (u_k − 1) · s_k``                    if ``u_k > 1``, else 0
    ``supply_k = (1 − u_k) · s_k − r · s⁰_k``          if ``u_k < 1 − r · s⁰_k / s_k``, else 0

(``r`` = 5 %: a class keeps a reserve of 5 % of its *original* share), takes every supply into a
budget and hands it out by the thesis's three rules:

1. afterwards each class either has its demand satisfied or holds at least its original share;
2. a higher-priority class's demand is served from the budget before a lower one's;
3. budget left after all demands goes back to the classes below their original share, from the
   highest priority down.

Rule 1 can need capacity the budget does not hold (a class lent its share earlier and now needs
it back): it is reclaimed from the classes holding more than their original share, lowest
priority first, never pushing them below their original share. Budget still left after rule 3
is returned to the suppliers in proportion to what they gave (the thesis leaves it open). The
shares always sum to what they summed to before (the time quotas are conserved), and every
class's new time quota is ``T_k^new = s_k^new / s_k · T_k``; the scheduler pushes the same factor
onto the class's load manager, ``H_k^new = T_k^new / T_k · H_k`` (Eq. 6.1).

The printed demand condition ``u_k < 1`` is a typo: below 1 the formula is negative and the
text defines demand as the *additional* capacity a class needs; ``u_k > 1`` is implemented.

Examples
--------
Pham's Example 1: two equal-cost queries, priorities 2:1, capacity 15 tuples/s, 9 tuples/s each.

>>> r = redistribute(priorities=(2, 1), shares=(2 / 3, 1 / 3), usage=(0.9, 1.8), reserve=1e-9)
>>> [round(s * 15, 3) for s in r.shares]          # Q1 lends 1 tuple/s: Q2 may process 6
[9.0, 6.0]
>>> r = redistribute(priorities=(2, 1), shares=(2 / 3, 1 / 3), usage=(0.9, 1.8))
>>> [round(s * 15, 3) for s in r.shares]          # with the 5 % reserve Q1 keeps 0.5 more
[9.5, 5.5]
>>> [round(f, 3) for f in r.factors]              # T_new / T (and H_new / H, Eq. 6.1)
[0.95, 1.1]

References
----------
Pham (2016) §1.2 (Example 1), §3.1 (Fig. 3), §6.1.2-6.1.3 (Eq. 6.1), §6.2.4 (CRC sensitivity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from spillway.control.load_manager import check_count, check_number, control_periods
from spillway.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Redistribution:
    """The outcome of one capacity redistribution.

    Parameters
    ----------
    shares : each class's new capacity share ``s_k^new`` (same order as the input).
    factors : ``s_k^new / s_k``: the time-quota factor ``T_k^new / T_k`` and the headroom push
        of Eq. 6.1.
    demand : each class's demand before redistribution.
    supply : each class's supply before redistribution.
    budget : the total supply.
    """

    shares: tuple[float, ...]
    factors: tuple[float, ...]
    demand: tuple[float, ...]
    supply: tuple[float, ...]
    budget: float


def _check_classes(
    priorities: Sequence[int], shares: Sequence[float], usage: Sequence[float]
) -> None:
    n = len(priorities)
    if n == 0:
        raise ConfigError("priorities must name at least one class, got none")
    if len(shares) != n or len(usage) != n:
        raise ConfigError(
            f"priorities, shares and usage need one entry per class: got {n}, {len(shares)} "
            f"and {len(usage)}"
        )
    for i, p in enumerate(priorities):
        check_count(f"priorities[{i}]", p, low=1)
    for i, s in enumerate(shares):
        check_number(f"shares[{i}]", s, low=0, low_ok=False)
    for i, u in enumerate(usage):
        check_number(f"usage[{i}]", u, low=0)


def original_shares(priorities: Sequence[int], total: float = 1.0) -> tuple[float, ...]:
    """``s⁰_k = P_k / Σ_i P_i`` (times ``total``): CQC's weighted round robin (Pham §6.1.2).

    >>> original_shares((6, 3, 1))
    (0.6, 0.3, 0.1)
    """
    psum = sum(priorities)
    return tuple(total * p / psum for p in priorities)


def redistribute(
    *,
    priorities: Sequence[int],
    shares: Sequence[float],
    usage: Sequence[float],
    reserve: float = 0.05,
) -> Redistribution:
    """One capacity redistribution (Pham §6.1.3): demand, supply, rules 1-3, Eq. 6.1.

    Parameters
    ----------
    priorities : each class's priority ``P_k`` (an int >= 1; higher is more important).
    shares : each class's current capacity share ``s_k`` (> 0).
    usage : each class's capacity usage ``u_k`` (>= 0), from its pre-shedding load.
    reserve : the fraction of its original share a class always keeps (Pham: 5 %); > 0, so
        no class is left with a zero quota (and Eq. 6.1 with a zero headroom).

    Raises
    ------
    ConfigError
        Lengths that differ, a priority that is not an int >= 1, a share <= 0, a negative or
        non-finite usage, a reserve outside (0, 1).
    """
    _check_classes(priorities, shares, usage)
    check_number("reserve", reserve, low=0, low_ok=False, high=1, high_ok=False)
    n = len(priorities)
    old = [float(s) for s in shares]
    original = original_shares(priorities, math.fsum(old))
    demand = [(u - 1.0) * s if u > 1.0 else 0.0 for u, s in zip(usage, old, strict=True)]
    supply = [
        (1.0 - u) * s - reserve * o if u < 1.0 - reserve * o / s else 0.0
        for u, s, o in zip(usage, old, original, strict=True)
    ]
    new = [s - g for s, g in zip(old, supply, strict=True)]
    budget = math.fsum(supply)
    order = sorted(range(n), key=lambda k: (-priorities[k], k))  # highest priority first
    need = list(demand)
    for k in order:  # rule 2
        give = min(need[k], budget)
        new[k] += give
        budget -= give
        need[k] -= give
        if need[k] > 0 and new[k] < original[k]:  # rule 1: back to at least the original
            want = min(need[k], original[k] - new[k])
            for j in reversed(order):  # reclaim from classes above their original share,
                # lowest priority first, never below their original share
                if j == k or new[j] <= original[j] or want <= 0:
                    continue
                take = min(want, new[j] - original[j])
                new[j] -= take
                new[k] += take
                want -= take
                need[k] -= take
    for k in order:  # rule 3
        if budget <= 0:
            break
        give = min(max(original[k] - new[k], 0.0), budget)
        new[k] += give
        budget -= give
    if budget > 0:  # left over: back to the suppliers, in proportion to their supply
        total_supply = math.fsum(supply)
        for k in range(n):
            new[k] += budget * supply[k] / total_supply
    scale = math.fsum(old) / math.fsum(new)  # conserve the quotas exactly (rounding only)
    new = [s * scale for s in new]
    return Redistribution(
        shares=tuple(new),
        factors=tuple(s / o for s, o in zip(new, old, strict=True)),
        demand=tuple(demand),
        supply=tuple(supply),
        budget=math.fsum(supply),
    )


@dataclass(frozen=True, kw_only=True)
class DilosConfig:
    """The class scheduler's settings.

    Parameters
    ----------
    priorities : each class's priority, highest first by convention (Pham QN-A: 6, 3, 1).
    reserve : the fraction of its original share a class keeps when lending, in (0, 1) (Pham: 0.05).
    crc_cycles : load-management cycles per capacity redistribution cycle (Pham: 10).
    control_period_s : the length (s) of one load-management cycle; a step then counts as the
        ``interval_s / control_period_s`` cycles its interval covered (a Spark node decides
        once a micro-batch, every few trigger intervals), and its usage report weighs as
        many. None: every step is one cycle.
    """

    priorities: tuple[int, ...] = (6, 3, 1)
    reserve: float = 0.05
    crc_cycles: int = 10
    control_period_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "priorities", tuple(self.priorities))
        if not self.priorities:
            raise ConfigError("priorities must name at least one class, got none")
        for i, p in enumerate(self.priorities):
            check_count(f"priorities[{i}]", p, low=1)
        check_number("reserve", self.reserve, low=0, low_ok=False, high=1, high_ok=False)
        check_count("crc_cycles", self.crc_cycles, low=1)
        if self.control_period_s is not None:
            check_number("control_period_s", self.control_period_s, low=0, low_ok=False)


@dataclass(frozen=True, kw_only=True)
class DilosState:
    """The class scheduler's state.

    Parameters
    ----------
    shares : each class's current capacity share.
    usage_sum : the sum of each class's reported usage over the current CRC, each report
        times the cycles it covered.
    cycles : load-management cycles seen in the current CRC.
    """

    shares: tuple[float, ...]
    usage_sum: tuple[float, ...]
    cycles: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ScheduleDecision:
    """What the class scheduler decided this cycle.

    Parameters
    ----------
    shares : each class's capacity share from now on.
    factors : the headroom push ``H_k^new / H_k`` for each class's load manager (Eq. 6.1);
        all 1 when no redistribution happened this cycle.
    redistributed : whether a CRC ended this cycle.
    """

    shares: tuple[float, ...]
    factors: tuple[float, ...]
    redistributed: bool


def initial_state(config: DilosConfig) -> DilosState:
    """Every class at its original share, an empty CRC."""
    n = len(config.priorities)
    return DilosState(shares=original_shares(config.priorities), usage_sum=(0.0,) * n)


def step(
    config: DilosConfig, state: DilosState, usage: Sequence[float], interval_s: float | None = None
) -> tuple[DilosState, ScheduleDecision]:
    """Record one cycle's usage reports; at the end of a CRC redistribute on their mean.

    The mean over the CRC (rather than the last report) keeps one noisy cycle from moving
    capacity (the thesis does not say which it used). With ``config.control_period_s`` and the
    step's ``interval_s`` given, the step counts as the cycles its interval covered, and the
    CRC ends once the cycles it covered reach ``crc_cycles``.

    Raises
    ------
    ConfigError
        ``usage`` without one finite value >= 0 per class.

    Examples
    --------
    >>> cfg = DilosConfig(priorities=(2, 1), crc_cycles=2, reserve=1e-9)
    >>> st = initial_state(cfg)
    >>> st, d = step(cfg, st, (0.9, 1.8))
    >>> d.redistributed, [round(s, 3) for s in d.shares]
    (False, [0.667, 0.333])
    >>> st, d = step(cfg, st, (0.9, 1.8))
    >>> d.redistributed, [round(s, 3) for s in d.shares], [round(f, 2) for f in d.factors]
    (True, [0.6, 0.4], [0.9, 1.2])
    >>> per_second = replace(cfg, control_period_s=0.5)
    >>> step(per_second, initial_state(per_second), (0.9, 1.8), interval_s=1.0)[1].redistributed
    True
    """
    _check_classes(config.priorities, state.shares, usage)
    w = 1.0
    if interval_s is not None:
        check_number("interval_s", interval_s, low=0, low_ok=False)
        w = control_periods(interval_s, config.control_period_s)
    sums = tuple(a + w * float(u) for a, u in zip(state.usage_sum, usage, strict=True))
    cycles = state.cycles + w
    n = len(config.priorities)
    if cycles < config.crc_cycles - 1e-9:
        new = replace(state, usage_sum=sums, cycles=cycles)
        return new, ScheduleDecision(shares=state.shares, factors=(1.0,) * n, redistributed=False)
    r = redistribute(
        priorities=config.priorities,
        shares=state.shares,
        usage=[s / cycles for s in sums],
        reserve=config.reserve,
    )
    new = DilosState(shares=r.shares, usage_sum=(0.0,) * n, cycles=0)
    return new, ScheduleDecision(shares=r.shares, factors=r.factors, redistributed=True)
