"""HOW MUCH to shed: cost model, node budget and overload detector (pure step functions).

Every member is pure Python/numpy, reads no clock and imports no Spark, so the Spark node
controller, the simulator and the tests share one implementation. Configs are frozen values,
states are separate picklable values, and a step returns a new state or a frozen decision:

- :mod:`~spillway.control.cost_model`: per Spark plan, ``observe(config, state, rows,
  duration_s) -> state`` fits ``duration = overhead + per_tuple · rows`` online (regularised
  recursive least squares with forgetting); ``estimate(state) -> CostEstimate``;
- :mod:`~spillway.control.capacity`: the node-level budget of executor time per shedding
  interval (``headroom · interval − overheads of the plans that run``), per-tuple costs of lanes
  and capacity in tuples for a plan mix;
- :mod:`~spillway.control.overload`: ``detect(config, backlog_cost=, budget=, previous=)``, the
  THEMIS §6 overload test with optional hysteresis.

Examples
--------
>>> cfg = CostModelConfig(warmup_batches=0)
>>> states = {"avg": initial_state(cfg), "top5": initial_state(cfg)}
>>> for rows in (20_000, 60_000, 40_000, 0, 80_000) * 4:
...     states["avg"] = observe(cfg, states["avg"], rows, 0.30 + 1e-6 * rows)
...     states["top5"] = observe(cfg, states["top5"], rows, 0.25 + 4e-6 * rows)
>>> est = {plan: estimate(s) for plan, s in states.items()}
>>> budget = node_budget(est, interval_s=1.0, headroom=0.8)
>>> round(budget.available_s, 2)
0.25
>>> d = detect(OverloadConfig(), backlog_cost=budget.work_s({"avg": 60_000, "top5": 60_000}),
...            budget=budget.available_s)
>>> d.overloaded, round(d.load, 1)
(True, 1.2)
"""

from __future__ import annotations

from spillway.control.capacity import (
    NodeBudget,
    batch_span,
    capacity_tuples,
    node_budget,
    per_tuple_only_capacity,
)
from spillway.control.cost_model import (
    CostEstimate,
    CostModelConfig,
    CostModelState,
    estimate,
    initial_state,
    observe,
)
from spillway.control.overload import OverloadConfig, OverloadDecision, detect

__all__ = [
    "CostEstimate",
    "CostModelConfig",
    "CostModelState",
    "NodeBudget",
    "batch_span",
    "OverloadConfig",
    "OverloadDecision",
    "capacity_tuples",
    "detect",
    "estimate",
    "initial_state",
    "node_budget",
    "observe",
    "per_tuple_only_capacity",
]
