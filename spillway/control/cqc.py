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
    n = len(priorities)
    if len(capacities) != n or len(loads) != n or len(drops) != n:
        raise ConfigError(
            f"priorities, capacities, loads and drops need one entry per class: got {n}, "
            f"{len(capacities)}, {len(loads)} and {len(drops)}"
        )
    for i, p in enumerate(priorities):
        check_count(f"priorities[{i}]", p, low=1)
    for i, (c, x, d) in enumerate(zip(capacities, loads, drops, strict=True)):
        check_number(f"capacities[{i}]", c, low=0)
        check_number(f"loads[{i}]", x, low=0)
        check_number(f"drops[{i}]", d, low=0, high=1)
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
