"""Queue-model plants shared by the load-manager tests."""

from __future__ import annotations

from typing import Any

from spillway.control import LOAD_MANAGERS
from spillway.control.closed_loop import RunResult, run_classes
from spillway.control.queue_model import (
    CapacitySchedule,
    ClassLoad,
    QueueModel,
    QueueModelConfig,
)
from spillway.feeds.profiles import ConstantProfile, StepProfile

COST_S = 1 / 280  # 280 tuples/s fill one CPU


def constant_node(
    load: float, *, capacity: float = 1.0, target_s: float = 2.0, seed: int = 0, **cls: Any
) -> QueueModel:
    """One class at ``load`` CPU-s/s on a node of true ``capacity`` (T = 0.5 s)."""
    rate = load / COST_S
    c = ClassLoad(
        profile=ConstantProfile(n_sources=1, rate=rate), cost_s=COST_S, target_s=target_s, **cls
    )
    return QueueModel(
        QueueModelConfig(classes=(c,), capacity=CapacitySchedule(base=capacity), seed=seed)
    )


def sc_node(
    *, before: float = 0.99, after: float = 0.66, at_s: float = 100.0, seed: int = 0, **cls: Any
) -> QueueModel:
    """Pham's S_c (200 t/s, 350 t/s from 10 s) on QN-flat-like cost, background load at ``at_s``.

    350 t/s need 1.25 CPU-s/s: overloaded from 10 s on; the true capacity falls from
    ``before`` to ``after`` at ``at_s`` (Pham §4.3.3.1, §5.3.2.2).
    """
    c = ClassLoad(
        profile=StepProfile(n_sources=1, rate=200.0, times=[10.0], factors=[1.75]),
        cost_s=COST_S,
        target_s=2.0,
        **cls,
    )
    cap = CapacitySchedule(base=before, changes=((at_s, after),))
    return QueueModel(QueueModelConfig(classes=(c,), capacity=cap, seed=seed))


def run_one(model: QueueModel, name: str, duration_s: float, **settings: Any) -> RunResult:
    """Run ``model`` with the load manager ``name`` configured by ``settings``."""
    return run_classes(model, [LOAD_MANAGERS[name].config(**settings)], duration_s=duration_s)


def settings_for(name: str, capacity: float, target_s: float = 2.0) -> dict[str, Any]:
    """Settings that give ``name`` the right capacity where it needs one set by hand."""
    out: dict[str, Any] = {"capacity": capacity} if name in ("aurora", "ctrl") else {}
    if name != "aurora":
        out["target_s"] = target_s
    return out
