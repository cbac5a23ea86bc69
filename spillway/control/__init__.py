"""HOW MUCH to shed: cost model, node budget, overload detector, load managers (pure steps).

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
  THEMIS §6 overload test with optional hysteresis;
- the *load managers* of Pham's thesis, registered in :data:`LOAD_MANAGERS`: per class and per
  load-management interval, ``step(config, state, IntervalStats) -> StepResult(state,
  LoadDecision)`` (:mod:`~spillway.control.load_manager`): ``aurora`` (fixed headroom, shed
  ``L − H``), ``ctrl`` (virtual queue and controller, fixed ``H``), ``seamless`` (queued load,
  controller, ``H ← H·D/D'``), ``aloma`` (Pham Alg. 1);
- :mod:`~spillway.control.dilos`: the class scheduler's capacity redistribution between priority
  classes (Pham §6.1.3, Eq. 6.1);
- :mod:`~spillway.control.cqc`: CQC's work-conserving split, the capacity a class leaves idle
  shared over the classes that shed by their priorities (Pham §6.2.2);
- :mod:`~spillway.control.classes`: a node's classes in one step, ``step(ClassesConfig, state,
  stats per class) -> (state, ClassesDecision)``: a load manager per class and, optionally, the
  DILoS scheduler; out come each class's drop fraction and capacity share;
- :mod:`~spillway.control.queue_model` and :mod:`~spillway.control.closed_loop`: a fluid
  queueing model of a node with a true capacity you set, and the loop that drives it with load
  managers (and DILoS): the plant for tests and simulators.

Every load manager in :data:`LOAD_MANAGERS` must:

- take a frozen, keyword-only config (a ``LoadManagerConfig`` subclass) that round-trips
  through :func:`dataclasses.asdict`, and keep its state in a separate frozen, picklable value;
- decide identically for the same config, state and statistics (no clock, no randomness);
- return a drop fraction in ``[0, max_drop]``, so the shed load is within ``[0, load]``;
- shed nothing while the load stays well under its capacity, and shed more as the load grows;
- accept the class scheduler's push ``rescale(config, state, factor)`` (Pham Eq. 6.1).

The shared suite ``tests/control/test_load_manager_contract.py`` runs these checks over every
name registered here. To add a load manager, write its module (config, state,
``initial_state``, ``step``, ``rescale``, ``capacity_of``) and add one entry below.

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

from spillway.control import aloma, aurora, ctrl, seamless
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
from spillway.control.dilos import DilosConfig, Redistribution, redistribute
from spillway.control.load_manager import (
    IntervalStats,
    LoadDecision,
    LoadManager,
    LoadManagerConfig,
    StepResult,
)
from spillway.control.overload import OverloadConfig, OverloadDecision, detect
from spillway.errors import UnknownNameError

#: Every load manager by the name used in configs, the CLI and reports (Pham Table 7).
LOAD_MANAGERS: dict[str, LoadManager] = {
    "aurora": LoadManager(
        name="aurora",
        config_class=aurora.AuroraConfig,
        initial_state=aurora.initial_state,
        step=aurora.step,
        rescale=aurora.rescale,
        capacity_of=aurora.capacity_of,
    ),
    "ctrl": LoadManager(
        name="ctrl",
        config_class=ctrl.CtrlConfig,
        initial_state=ctrl.initial_state,
        step=ctrl.step,
        rescale=ctrl.rescale,
        capacity_of=ctrl.capacity_of,
    ),
    "seamless": LoadManager(
        name="seamless",
        config_class=seamless.SeamlessConfig,
        initial_state=seamless.initial_state,
        step=seamless.step,
        rescale=seamless.rescale,
        capacity_of=seamless.capacity_of,
        pending_drop=seamless.pending_drop,
    ),
    "aloma": LoadManager(
        name="aloma",
        config_class=aloma.AlomaConfig,
        initial_state=aloma.initial_state,
        step=aloma.step,
        rescale=aloma.rescale,
        capacity_of=aloma.capacity_of,
    ),
}


def load_manager(name: str) -> LoadManager:
    """The load manager registered as ``name``.

    Raises
    ------
    UnknownNameError
        ``name`` is not in :data:`LOAD_MANAGERS`.

    Examples
    --------
    >>> lm = load_manager("aloma")
    >>> cfg = lm.config(target_s=0.3, capacity=0.6)
    >>> state, d = lm.step(cfg, lm.initial_state(cfg), IntervalStats(interval_s=0.15, load=0.3))
    >>> d.drop, d.capacity
    (0.0, 0.6)
    >>> load_manager("borealis")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: unknown load manager 'borealis'; known: aloma, aurora, ctrl, seamless
    """
    try:
        return LOAD_MANAGERS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown load manager {name!r}; known: {', '.join(sorted(LOAD_MANAGERS))}"
        ) from None


__all__ = [
    "LOAD_MANAGERS",
    "ClassesConfig",
    "ClassesDecision",
    "ClassesState",
    "CostEstimate",
    "CostModelConfig",
    "CostModelState",
    "DilosConfig",
    "IntervalStats",
    "LoadDecision",
    "LoadManager",
    "LoadManagerConfig",
    "NodeBudget",
    "batch_span",
    "OverloadConfig",
    "OverloadDecision",
    "Redistribution",
    "StepResult",
    "capacity_tuples",
    "combine_stats",
    "detect",
    "estimate",
    "initial_state",
    "load_manager",
    "node_budget",
    "observe",
    "per_tuple_only_capacity",
    "redistribute",
]
