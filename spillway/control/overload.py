"""Overload detector: is the backlog's cost above the budget of the coming interval?

THEMIS §6: the detector checks the input buffer periodically; when it holds more than ``c`` (what
the node can process in one shedding interval) the shedder discards tuples until ``c`` remain.
Here the backlog and the budget are costs in one unit (seconds of executor time from
:class:`spillway.control.capacity.NodeBudget`, or tuples when every tuple costs 1).

Hysteresis (optional, off by default): a node that is not overloaded enters overload only when
the cost exceeds ``(1 + hysteresis) · budget``, so small blips within the margin are admitted
whole (the headroom absorbs them) instead of toggling shedding on and off; once overloaded it
sheds down to the budget and stays overloaded until the cost falls to the budget or below.

Examples
--------
>>> cfg = OverloadConfig(hysteresis=0.1)
>>> d = detect(cfg, backlog_cost=1.05, budget=1.0)
>>> d.overloaded, d.admit, d.shed
(False, 1.05, 0.0)
>>> d = detect(cfg, backlog_cost=1.5, budget=1.0, previous=d)
>>> d.overloaded, d.admit, d.shed
(True, 1.0, 0.5)
>>> d = detect(cfg, backlog_cost=1.05, budget=1.0, previous=d)   # stays overloaded
>>> d.overloaded, round(d.shed, 2)
(True, 0.05)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spillway.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class OverloadConfig:
    """Settings of the overload detector.

    Parameters
    ----------
    hysteresis : relative margin above the budget needed to *enter* overload, in [0, 1).
        0 reproduces THEMIS (overloaded exactly when the cost exceeds the budget).
    """

    hysteresis: float = 0.0

    def __post_init__(self) -> None:
        h = self.hysteresis
        if isinstance(h, bool) or not isinstance(h, int | float) or not (0 <= h < 1):
            raise ConfigError(f"hysteresis must be a number in [0, 1), got {h!r}")


@dataclass(frozen=True, kw_only=True)
class OverloadDecision:
    """What the detector concluded for one shedding interval.

    Parameters
    ----------
    overloaded : whether the node sheds this interval.
    backlog_cost : cost of admitting the whole backlog.
    budget : cost the node can afford this interval.
    admit : cost to admit: the budget when overloaded, else the whole backlog.
    shed : ``backlog_cost − admit`` (>= 0): cost the policy must shed.
    load : ``backlog_cost / budget`` (``inf`` when the budget is 0 and there is a backlog,
        0 when both are 0).
    """

    overloaded: bool
    backlog_cost: float
    budget: float
    admit: float
    shed: float
    load: float


def detect(
    config: OverloadConfig,
    *,
    backlog_cost: float,
    budget: float,
    previous: OverloadDecision | None = None,
) -> OverloadDecision:
    """Decide whether the node is overloaded for the coming interval.

    Parameters
    ----------
    config : detector settings.
    backlog_cost : cost of everything waiting (``NodeBudget.work_s`` of the backlog's rows).
    budget : what the node can spend (``NodeBudget.available_s``).
    previous : the previous interval's decision (for hysteresis); None at start.

    Raises
    ------
    ConfigError
        A cost or budget that is negative or not finite.

    Examples
    --------
    >>> detect(OverloadConfig(), backlog_cost=3.0, budget=2.0).shed
    1.0
    """
    for name, v in (("backlog_cost", backlog_cost), ("budget", budget)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
    cost, cap = float(backlog_cost), float(budget)
    was = previous is not None and previous.overloaded
    threshold = cap if was else cap * (1.0 + config.hysteresis)
    overloaded = cost > threshold
    admit = min(cost, cap) if overloaded else cost
    load = cost / cap if cap > 0 else (math.inf if cost > 0 else 0.0)
    return OverloadDecision(
        overloaded=overloaded,
        backlog_cost=cost,
        budget=cap,
        admit=admit,
        shed=cost - admit,
        load=load,
    )
