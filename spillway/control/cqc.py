"""CQC's work-conserving split: capacity a class leaves idle goes to the classes still busy.

Pham §6.1.2 and §6.2.2: DILoS's scheduler, CQC, is a weighted round robin over the priority
classes (class ``k``'s time quota ``T_k = P_k / Σ_i P_i · T``) that is *work-conserving*: "if a
class finishes executing all tuples in its queues, the scheduler lets the next class in the
round run without waiting for the former class to use up its quota". So the capacity a lightly
loaded class does not use goes, within the same cycle, to the classes that have more work than
their quota, with or without DILoS's feedback (Pham Fig. 26: the separate managers' headroom of
classes 2 and 3 rose above 0.3 and 0.1).

Here the split is the fluid limit of that round robin: a round without the idle class is
shorter, so every busy class gets more in proportion to its quota, that is, the idle capacity
is shared over the busy classes by their priorities, and a class that needs less than its
part hands the rest on (weighted water-filling, :func:`water_fill`).

On a node whose classes share one plan (:mod:`spillway.spark.class_control`) the split is
applied to the managers' decisions (:func:`lend_idle`): a class that sheds nothing and whose
load ``L_k`` is below its capacity ``C_k`` leaves ``C_k − L_k`` idle; a class that sheds
``d_k · L_k`` may admit up to that much more, its part of the idle capacity. A class that sheds
while below its capacity (a manager draining its queue, ALoMa) lends nothing.

Examples
--------
Pham's Example 1 (§1.2): capacity 15 tuples/s split 2:1, 9 tuples/s each. Q1 uses 9 of its
10, so CQC runs Q2 in the idle 1: Q2 sheds 3 tuples/s instead of 4.

>>> r = lend_idle(priorities=(2, 1), capacities=(10.0, 5.0), loads=(9.0, 9.0),
...               drops=(0.0, 4 / 9))
>>> [round(d * 9, 6) for d in r.drops], r.idle, [round(x, 6) for x in r.lent]
([0.0, 3.0], 1.0, [0.0, 1.0])

References
----------
Pham (2016) §1.2 (Example 1), §6.1.2 (CQC), §6.2.2 (work conservation, Fig. 26).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.control.load_manager import check_count, check_number
from spillway.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Lending:
    """The managers' drops after the work-conserving split.

    Parameters
    ----------
    drops : each class's drop fraction after it got its part of the idle capacity.
    lent : the load each class admits beyond its manager's decision (its part of the idle).
    idle : the capacity the classes that shed nothing left unused.
    """

    drops: tuple[float, ...]
    lent: tuple[float, ...]
    idle: float


#: The bounds of every per-class column the functions here take: (low, high or None).
_BOUNDS = {"capacities": (0.0, None), "loads": (0.0, None), "drops": (0.0, 1.0),
           "max_drops": (0.0, 1.0), "credit": (0.0, None)}  # fmt: skip


def _check_classes(priorities: Sequence[int], **columns: Sequence[float]) -> None:
    """One entry per class in every column, priorities ints >= 1, every value finite and in
    its column's bounds (:data:`_BOUNDS`); ConfigError naming the first that is not."""
    n = len(priorities)
    if any(len(v) != n for v in columns.values()):
        *names, last = ["priorities", *columns]
        *counts, last_count = [str(len(v)) for v in (priorities, *columns.values())]
        raise ConfigError(
            f"{', '.join(names)} and {last} need one entry per class: got {', '.join(counts)} "
            f"and {last_count}"
        )
    for i, p in enumerate(priorities):
        check_count(f"priorities[{i}]", p, low=1)
    for i in range(n):
        for name, values in columns.items():
            low, high = _BOUNDS[name]
            check_number(f"{name}[{i}]", values[i], low=low, high=high)


def water_fill(amount: float, weights: Sequence[float], wants: Sequence[float]) -> list[float]:
    """Share ``amount`` over the classes by ``weights``, none getting more than it ``wants``.

    Every class with a positive want gets ``amount · w_k / Σ w`` over the classes still
    wanting; one that wants less keeps only its want and the rest is shared again. The parts
    sum to ``min(amount, Σ wants)``.

    Raises
    ------
    ConfigError
        A negative or non-finite ``amount``, weights and wants of different lengths, a weight
        <= 0 or a negative want.

    Examples
    --------
    >>> [round(x, 3) for x in water_fill(0.4, (6, 3, 1), (0.0, 0.05, 1.0))]  # class 2: 0.05
    [0.0, 0.05, 0.35]
    >>> [round(x, 3) for x in water_fill(0.4, (3, 1), (1.0, 1.0))]
    [0.3, 0.1]
    """
    check_number("amount", amount, low=0)
    if len(weights) != len(wants):
        raise ConfigError(
            f"weights and wants need one entry per class: got {len(weights)} and {len(wants)}"
        )
    for i, w in enumerate(weights):
        check_number(f"weights[{i}]", w, low=0, low_ok=False)
    for i, x in enumerate(wants):
        check_number(f"wants[{i}]", x, low=0)
    got = [0.0] * len(wants)
    left = float(amount)
    busy = [k for k, x in enumerate(wants) if x > 0]
    while busy and left > 0:
        total_w = math.fsum(weights[k] for k in busy)
        share = {k: left * weights[k] / total_w for k in busy}
        full = [k for k in busy if wants[k] - got[k] <= share[k]]
        if not full:  # every busy class takes its whole part
            for k in busy:
                got[k] += share[k]
            break
        for k in full:  # these are satisfied; share what they leave again
            left -= wants[k] - got[k]
            got[k] = float(wants[k])
        busy = [k for k in busy if k not in full]
    return got


def lend_idle(
    *,
    priorities: Sequence[int],
    capacities: Sequence[float],
    loads: Sequence[float],
    drops: Sequence[float],
) -> Lending:
    """The managers' ``drops`` after CQC hands the idle capacity to the shedding classes.

    Parameters
    ----------
    priorities : each class's priority ``P_k`` (an int >= 1), its weight in the round robin.
    capacities : each class manager's capacity ``C_k`` this interval (load units, >= 0).
    loads : each class's pre-shedding load ``L_k`` (load units, >= 0).
    drops : each manager's drop fraction, in [0, 1].

    Raises
    ------
    ConfigError
        Lengths that differ, a priority that is not an int >= 1, a negative or non-finite
        capacity or load, a drop outside [0, 1].

    Examples
    --------
    >>> r = lend_idle(priorities=(6, 3, 1), capacities=(0.48, 0.24, 0.08),
    ...               loads=(0.2, 0.3, 0.5), drops=(0.0, 0.2, 0.84))
    >>> round(r.idle, 3), [round(x, 3) for x in r.lent], [round(d, 3) for d in r.drops]
    (0.28, [0.0, 0.06, 0.22], [0.0, 0.0, 0.4])
    """
    _check_classes(priorities, capacities=capacities, loads=loads, drops=drops)
    idle = math.fsum(
        max(float(c) - float(x), 0.0)
        for c, x, d in zip(capacities, loads, drops, strict=True)
        if d == 0
    )
    wants = [float(d) * float(x) for d, x in zip(drops, loads, strict=True)]
    lent = water_fill(idle, [float(p) for p in priorities], wants)
    new = tuple(
        float(d) if x <= 0 else max(float(d) - g / float(x), 0.0)
        for d, x, g in zip(drops, loads, lent, strict=True)
    )
    return Lending(drops=new, lent=tuple(lent), idle=idle)


@dataclass(frozen=True, kw_only=True)
class Ordering:
    """The drops after the lower classes took over a higher class's excess shedding.

    Parameters
    ----------
    drops : each class's drop fraction, never above a lower class's (unless every lower class
        is at its highest drop).
    handed : per class, the load it sheds beyond (> 0) or short of (< 0) its own decision:
        what it took over from a higher class, or handed down to the lower ones.
    """

    drops: tuple[float, ...]
    handed: tuple[float, ...]


def in_priority_order(
    *,
    priorities: Sequence[int],
    loads: Sequence[float],
    drops: Sequence[float],
    max_drops: Sequence[float],
) -> Ordering:
    """The same shed load, the lower classes shedding it before the higher ones.

    Where the classes share one batch (:mod:`spillway.spark.class_control`) a class's response
    time is the node's: the class with the strictest target ``D`` (class 1) sees it over its
    target first and its manager sheds, while a lower class with a looser target sheds nothing,
    so class 1 loses more than class 3. In Pham's CQC class 1 would not wait for class 3's work
    at all; here every tuple admitted delays everyone's batch, so the load the node must shed is
    the node's and the lower classes absorb it (Pham §6.3, "relative priority": a higher class
    gets zero loss or a loss no larger than a lower class's). A class whose drop fraction is
    above that of a class of lower priority hands the excess load
    ``(d_k − min_lower d_j) · L_k`` down, lowest priority first, each lower class taking it up to
    its own highest drop (and to the drop of the classes below it); what no lower class can take
    stays. The shed load ``Σ d_k · L_k`` is unchanged (up to what no class can take), the drops
    already in order are untouched, and afterwards ``d_k <= d_j`` whenever ``P_k > P_j``
    (unless every lower class is at its highest drop).

    Parameters
    ----------
    priorities : each class's priority ``P_k`` (an int >= 1; higher is more important).
    loads : each class's pre-shedding load ``L_k`` (>= 0); a class without load constrains
        nothing and takes nothing.
    drops : each class manager's drop fraction, in [0, 1].
    max_drops : each class's highest drop fraction, in [0, 1].

    Raises
    ------
    ConfigError
        Lengths that differ, a priority that is not an int >= 1, a negative or non-finite load,
        a drop or highest drop outside [0, 1].

    Examples
    --------
    Class 1's manager sheds 8 % on the shared latency, classes 2 and 3 nothing: class 3 sheds
    it instead.

    >>> r = in_priority_order(priorities=(6, 3, 1), loads=(0.4, 0.4, 0.4),
    ...                       drops=(0.08, 0.0, 0.0), max_drops=(0.99,) * 3)
    >>> [round(d, 3) for d in r.drops], [round(h, 3) for h in r.handed]
    ([0.0, 0.0, 0.08], [-0.032, 0.0, 0.032])

    Drops already in order (Pham's weighted shares, 28 / 64 / 88 %) stay as they are:

    >>> in_priority_order(priorities=(6, 3, 1), loads=(0.6, 0.6, 0.6),
    ...                   drops=(0.28, 0.64, 0.88), max_drops=(0.99,) * 3).drops
    (0.28, 0.64, 0.88)
    """
    _check_classes(priorities, loads=loads, drops=drops, max_drops=max_drops)
    load = [float(x) for x in loads]
    d = [float(x) for x in drops]
    busy = [k for k in range(len(load)) if load[k] > 0]
    # lowest priority first (ties by index): a class's lower classes are already in order
    # when it hands its excess down, and taking more only loosens their own constraints
    up = sorted(busy, key=lambda k: (priorities[k], -k))

    def lower(k: int) -> list[int]:  # the busy classes of lower priority, lowest first
        return [j for j in up if priorities[j] < priorities[k]]

    for k in up:
        below = lower(k)
        if not below:
            continue
        floor = min(d[j] for j in below)
        excess = (d[k] - floor) * load[k]
        if excess <= 0:
            continue
        for j in below:
            top = min([float(max_drops[j])] + [d[i] for i in lower(j)])
            take = min(max(top - d[j], 0.0) * load[j], excess)
            d[j] += take / load[j]
            excess -= take
        d[k] = floor + excess / load[k]
    handed = tuple((a - float(b)) * x for a, b, x in zip(d, drops, load, strict=True))
    return Ordering(drops=tuple(d), handed=handed)


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """What CQC's round robin runs of the classes' queued windows this interval.

    Parameters
    ----------
    windows : per class, how many of its queued windows (oldest first) run now.
    used : per class, the time those windows take.
    credit : per class, the time it carries to the next interval: what it had (its quota and
        its part of the idle) and did not use because its next window did not fit (a deficit
        round robin: less than that window's time); 0 once its queue is empty, since a class
        that waits for nothing saves nothing up.
    """

    windows: tuple[int, ...]
    used: tuple[float, ...]
    credit: tuple[float, ...]


def dispatch(
    *,
    priorities: Sequence[int],
    capacity: float,
    queues: Sequence[Sequence[float]],
    credit: Sequence[float] | None = None,
) -> Dispatch:
    """CQC's weighted round robin over whole queued windows: the classes' quotas of one
    interval's ``capacity``, work-conserving.

    Class ``k``'s quota is ``T_k = P_k / Σ_i P_i · capacity`` plus the ``credit`` it carried;
    it runs its queued windows, oldest first, while they fit in its quota. Work-conserving
    (Pham §6.1.2: a class that has run all its queue lets the next class run): what the
    classes that ran their whole queue left of their quotas is shared by priority
    (:func:`water_fill`) over the classes still waiting, and each of these runs the windows
    that then fit. A window is run whole or not at all (a window's result needs all its rows
    in one batch), so a window larger than a quota waits until the class's credit covers it
    (a deficit round robin: no class starves, and a batch overruns the capacity by less
    than one window).

    On a node whose classes are lanes of one Spark plan (:mod:`spillway.spark.class_control`)
    this is what makes the split a schedule rather than a sum: the windows a class cannot
    run within its quota wait for later batches, so the class's own response time grows and
    its own manager sees it, instead of every class's batch growing.

    Parameters
    ----------
    priorities : each class's priority ``P_k`` (an int >= 1), its weight in the round robin.
    capacity : the time the interval's batch has for the classes' windows (>= 0).
    queues : per class, the time each of its queued windows needs, oldest first (>= 0).
    credit : per class, the quota carried from the interval before (>= 0; default none).

    Raises
    ------
    ConfigError
        Lengths that differ, a priority that is not an int >= 1, a negative or non-finite
        capacity, window time or credit.

    Examples
    --------
    Quotas 0.6 / 0.3 / 0.1 s of a 1 s batch; class 1 needs 0.2 s, class 2 0.1 s, class 3 has
    four windows of 0.2 s: classes 1 and 2 leave 0.6 s, with which class 3 runs three windows
    and carries the 0.1 s its fourth did not fit in.

    >>> d = dispatch(priorities=(6, 3, 1), capacity=1.0,
    ...              queues=((0.2,), (0.1,), (0.2, 0.2, 0.2, 0.2)))
    >>> d.windows, [round(c, 3) for c in d.credit]
    ((1, 1, 3), [0.0, 0.0, 0.1])

    A window larger than the quota waits until the credit covers it:

    >>> d = dispatch(priorities=(1,), capacity=0.3, queues=((0.5, 0.1),))
    >>> d.windows, [round(c, 3) for c in d.credit]
    ((0,), [0.3])
    >>> dispatch(priorities=(1,), capacity=0.3, queues=((0.5, 0.1),), credit=d.credit).windows
    (2,)
    """
    n = len(priorities)
    carried = [0.0] * n if credit is None else [float(c) for c in credit]
    _check_classes(priorities, credit=carried)
    check_number("capacity", capacity, low=0)
    if len(queues) != n:
        raise ConfigError(f"queues needs one queue per class ({n}), got {len(queues)}")
    for k, q in enumerate(queues):
        for j, x in enumerate(q):
            check_number(f"queues[{k}][{j}]", x, low=0)
    total = math.fsum(priorities)
    quota = [float(capacity) * p / total + c for p, c in zip(priorities, carried, strict=True)]
    ran = [0] * n
    used = [0.0] * n

    def run(k: int, allowed: float) -> None:
        while ran[k] < len(queues[k]) and used[k] + float(queues[k][ran[k]]) <= allowed + 1e-12:
            used[k] += float(queues[k][ran[k]])
            ran[k] += 1

    for k in range(n):
        run(k, quota[k])
    waiting = [ran[k] < len(queues[k]) for k in range(n)]
    idle = math.fsum(quota[k] - used[k] for k in range(n) if not waiting[k])
    if idle > 0 and any(waiting):
        wants = [math.fsum(float(x) for x in queues[k][ran[k] :]) if waiting[k] else 0.0
                 for k in range(n)]  # fmt: skip
        extra = water_fill(idle, [float(p) for p in priorities], wants)
        for k in range(n):
            if waiting[k]:
                quota[k] += extra[k]
                run(k, quota[k])
    left = tuple(max(quota[k] - used[k], 0.0) if ran[k] < len(queues[k]) else 0.0 for k in range(n))
    return Dispatch(windows=tuple(ran), used=tuple(used), credit=left)
