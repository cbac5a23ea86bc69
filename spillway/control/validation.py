"""Single-node validation of the load managers on the queue model (Pham §4.3.3.1, §5.3.2.2).

Pham's environment-change experiment, as a pure simulation: QN-flat-like cost (280 tuples/s
fill one CPU), input S_c (200 tuples/s for 10 s, then 350 tuples/s: 1.25 CPU-s/s, overloaded),
delay target D = 2 s, control period T = 0.5 s, a true capacity of 0.99 that falls to
``after`` (0.66 by default) when the background load starts at 100 s and stays (``pattern=
"on"``) or comes and goes in Pham's 10/5/2/1 s on/off patterns (``pattern="on-off"``). Every
scheme sees the same arrivals and the same noisy load statistic (seed).

The schemes (:data:`SCHEMES`): Aurora with ``H`` right before the background load (0.99) and
Aurora with ``H`` hand-tuned below the reduced capacity (0.62); CTRL with ``H`` tuned before
the change (0.99) and CTRL tuned for after it (0.66); SEaMLeSS and ALoMa from ``H = 0.8``,
untuned.

Priority classes (:func:`run_dilos`, Pham §6.2.2 in miniature): three classes with priorities
6/3/1 and targets 300/400/500 ms at a 150 ms cycle, loads 0.3/0.2/0.6 of a node of capacity 1
(slightly overloaded, like SD_c: class 3 overloaded at its 10 % share), one load manager per
class starting from the class's share, with DILoS redistribution or without it ("separate").

``python scripts/load_manager_validation.py`` prints the table; ``tests/control/
test_validation.py`` checks it.

Examples
--------
>>> row = run_scheme("aurora-0.62", seed=0, duration_s=60.0)
>>> row.scheme, row.violation_s, round(row.loss, 2)
('aurora-0.62', 0.0, 0.46)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spillway.control.closed_loop import RunResult, run_classes
from spillway.control.dilos import DilosConfig
from spillway.control.load_manager import LoadManager
from spillway.control.queue_model import CapacitySchedule, ClassLoad, QueueModel, QueueModelConfig
from spillway.errors import UnknownNameError
from spillway.feeds.background import BackgroundSchedule
from spillway.feeds.profiles import ConstantProfile, Profile, StepProfile

TARGET_S = 2.0
INTERVAL_S = 0.5
COST_S = 1 / 280
BEFORE = 0.99
BACKGROUND_AT_S = 100.0
#: Violation is also reported over the results after this time: re-learning had 50 s.
RELEARNED_S = 150.0

#: scheme name -> (load manager, settings): what the validation compares.
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    "aurora-0.99": ("aurora", {"capacity": 0.99}),
    "aurora-0.62": ("aurora", {"capacity": 0.62}),
    "ctrl-0.99": ("ctrl", {"capacity": 0.99, "target_s": TARGET_S}),
    "ctrl-0.66": ("ctrl", {"capacity": 0.66, "target_s": TARGET_S}),
    "seamless": ("seamless", {"capacity": 0.8, "target_s": TARGET_S}),
    "aloma": ("aloma", {"capacity": 0.8, "target_s": TARGET_S}),
}


@dataclass(frozen=True, kw_only=True)
class SchemeRow:
    """One scheme's run.

    Parameters
    ----------
    scheme : the name in :data:`SCHEMES`.
    violation_s : mean delay violation over all results (s).
    violation_relearned_s : mean delay violation of the results after :data:`RELEARNED_S`.
    loss : fraction of the arrivals dropped.
    response_max_s : the largest response time.
    capacity_end : the scheme's capacity estimate at the end.
    """

    scheme: str
    violation_s: float
    violation_relearned_s: float
    loss: float
    response_max_s: float
    capacity_end: float


def model(
    *,
    after: float = 0.66,
    pattern: str = "on",
    seed: int = 0,
    duration_s: float = 400.0,
    load_noise: float = 0.02,
) -> QueueModel:
    """The node of the validation: S_c on QN-flat-like cost, background load from 100 s.

    Raises
    ------
    UnknownNameError
        ``pattern`` is neither ``"on"`` nor ``"on-off"``.
    """
    if pattern == "on":
        schedule = BackgroundSchedule(start_s=BACKGROUND_AT_S, phases=(), then_on=True)
    elif pattern == "on-off":
        schedule = BackgroundSchedule(start_s=BACKGROUND_AT_S)
    else:
        raise UnknownNameError(f"pattern must be 'on' or 'on-off', got {pattern!r}")
    capacity = CapacitySchedule.from_intervals(
        base=BEFORE, reduced=after, intervals=schedule.on_intervals(duration_s)
    )
    load = ClassLoad(
        profile=StepProfile(n_sources=1, rate=200.0, times=[10.0], factors=[1.75]),
        cost_s=COST_S,
        target_s=TARGET_S,
    )
    cfg = QueueModelConfig(
        classes=(load,),
        capacity=capacity,
        interval_s=INTERVAL_S,
        seed=seed,
        load_noise=load_noise,
    )
    return QueueModel(cfg)


def run_scheme(
    scheme: str,
    *,
    seed: int = 0,
    after: float = 0.66,
    pattern: str = "on",
    duration_s: float = 400.0,
    load_noise: float = 0.02,
) -> SchemeRow:
    """Run one scheme of :data:`SCHEMES` on :func:`model`.

    Raises
    ------
    UnknownNameError
        ``scheme`` is not in :data:`SCHEMES`.
    """
    from spillway.control import LOAD_MANAGERS

    if scheme not in SCHEMES:
        raise UnknownNameError(f"unknown scheme {scheme!r}; known: {', '.join(sorted(SCHEMES))}")
    name, settings = SCHEMES[scheme]
    lm: LoadManager[Any, Any] = LOAD_MANAGERS[name]
    node = model(
        after=after, pattern=pattern, seed=seed, duration_s=duration_s, load_noise=load_noise
    )
    run = run_classes(node, [lm.config(**settings)], duration_s=duration_s)
    c, tr = run.classes[0], run.traces[0]
    return SchemeRow(
        scheme=scheme,
        violation_s=c.delay_violation_mean_s,
        violation_relearned_s=tr.window_violation_s(RELEARNED_S),
        loss=c.loss,
        response_max_s=c.response_max_s,
        capacity_end=tr.capacity[-1],
    )


#: The priority-class scenario: priorities, targets (s), loads (CPU-s/s), cycle (s).
CLASS_PRIORITIES = (6, 3, 1)
CLASS_TARGETS_S = (0.3, 0.4, 0.5)
CLASS_LOADS = (0.3, 0.2, 0.6)
CYCLE_S = 0.15


def classes_model(class1: Profile | None = None) -> QueueModel:
    """Three classes on a node of capacity 1 (1 ms per tuple); ``class1`` replaces class 1's
    constant 300 tuples/s."""
    profiles: list[Profile] = [
        ConstantProfile(n_sources=1, rate=load / 0.001) for load in CLASS_LOADS
    ]
    if class1 is not None:
        profiles[0] = class1
    classes = tuple(
        ClassLoad(profile=p, cost_s=0.001, target_s=d, latency_s=0.01)
        for p, d in zip(profiles, CLASS_TARGETS_S, strict=True)
    )
    cfg = QueueModelConfig(classes=classes, capacity=CapacitySchedule(base=1.0), interval_s=CYCLE_S)
    return QueueModel(cfg)


def run_dilos(
    name: str,
    *,
    dilos: bool,
    node: QueueModel | None = None,
    duration_s: float = 150.0,
) -> RunResult:
    """One load manager ``name`` per class of :func:`classes_model`, with or without DILoS.

    Raises
    ------
    UnknownNameError
        ``name`` is not a registered load manager.
    """
    from spillway.control import load_manager

    lm = load_manager(name)
    shares = [p / sum(CLASS_PRIORITIES) for p in CLASS_PRIORITIES]
    managers = [
        lm.config(capacity=c, **({} if name == "aurora" else {"target_s": d}))
        for c, d in zip(shares, CLASS_TARGETS_S, strict=True)
    ]
    return run_classes(
        node or classes_model(),
        managers,
        duration_s=duration_s,
        priorities=CLASS_PRIORITIES,
        dilos=DilosConfig(priorities=CLASS_PRIORITIES) if dilos else None,
    )
