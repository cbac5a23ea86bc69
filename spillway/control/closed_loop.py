"""Drive the queue model with load managers, one per class, and optionally the DILoS scheduler.

Every interval: the model runs with each class's current drop fraction and capacity share and
reports the interval's statistics; :func:`spillway.control.classes.step` steps each class's
load manager on its class's statistics (and, with DILoS, the class scheduler) and sets the next
drop fractions and shares. Without DILoS the shares stay at the priorities' original split
(CQC's weighted round robin; the model's split is work-conserving).

This is the loop a simulator or the Spark node runs; here it is what proves the step functions
(``tests/control/test_validation.py``).

Examples
--------
>>> from spillway.control.aurora import AuroraConfig
>>> from spillway.control.queue_model import (CapacitySchedule, ClassLoad, QueueModel,
...                                          QueueModelConfig)
>>> from spillway.feeds.profiles import ConstantProfile
>>> load = ClassLoad(profile=ConstantProfile(n_sources=1, rate=350.0), cost_s=1 / 280,
...                  target_s=2.0)
>>> model = QueueModel(QueueModelConfig(classes=(load,), capacity=CapacitySchedule(base=1.0)))
>>> run = run_classes(model, [AuroraConfig(capacity=1.0)], duration_s=60.0)
>>> c = run.classes[0]
>>> round(c.loss, 2), c.delay_violation_mean_s    # shed 350 → 280 tuples/s: no violation
(0.2, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.control import classes as classes_mod
from spillway.control.classes import ClassesConfig
from spillway.control.dilos import DilosConfig
from spillway.control.load_manager import LoadManagerConfig, check_number
from spillway.control.queue_model import QueueModel
from spillway.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class ClassRun:
    """One class over a run (or a window of it).

    Parameters
    ----------
    arrived : tuples that arrived.
    dropped : tuples the shedder dropped.
    results : kept tuples completed.
    loss : ``dropped / arrived`` (Pham Def. 5's data loss for select/project queries).
    delay_violation_mean_s : mean over results of ``max(0, response − D)``.
    response_mean_s : mean response time of the results.
    response_max_s : the largest response time.
    backlog_s : CPU-seconds of work still queued at the end.
    """

    arrived: int
    dropped: int
    results: float
    loss: float
    delay_violation_mean_s: float
    response_mean_s: float
    response_max_s: float
    backlog_s: float


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Per-interval series of one class (all tuples of equal length).

    Parameters
    ----------
    time_s : end of each interval.
    drop : the drop fraction decided at the end of the interval.
    capacity : the manager's capacity estimate after the interval.
    share : the class's capacity share during the interval.
    response_s : the interval's mean response time (nan without results).
    true_capacity : the node's true capacity at the end of the interval.
    violation_sum_s, results : the interval's violation sum and result count (for windows).
    """

    time_s: tuple[float, ...]
    drop: tuple[float, ...]
    capacity: tuple[float, ...]
    share: tuple[float, ...]
    response_s: tuple[float, ...]
    true_capacity: tuple[float, ...]
    violation_sum_s: tuple[float, ...]
    results: tuple[float, ...]

    def window_violation_s(self, start_s: float, end_s: float = math.inf) -> float:
        """Mean delay violation of the results of the intervals ending in ``(start, end]``."""
        v = n = 0.0
        for t, vs, r in zip(self.time_s, self.violation_sum_s, self.results, strict=True):
            if start_s < t <= end_s:
                v += vs
                n += r
        return v / n if n > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """A closed-loop run: per class, the summary and the trace."""

    classes: tuple[ClassRun, ...]
    traces: tuple[Trace, ...]


def run_classes(
    model: QueueModel,
    managers: Sequence[LoadManagerConfig],
    *,
    duration_s: float,
    priorities: Sequence[int] | None = None,
    dilos: DilosConfig | None = None,
) -> RunResult:
    """Run ``model`` for ``duration_s`` with one load-manager config per class.

    Parameters
    ----------
    model : the node.
    managers : one registered load manager's config per class of the model.
    duration_s : how long to run (whole intervals).
    priorities : the classes' priorities for the original capacity split (default: equal);
        with ``dilos`` they default to its priorities.
    dilos : the class scheduler's config to redistribute capacity (None: fixed shares).

    Raises
    ------
    ConfigError
        A count of managers or priorities that differs from the model's classes, or a
        duration that is not > 0.
    """
    n = len(model.config.classes)
    if len(managers) != n:
        raise ConfigError(f"managers needs one config per class ({n}), got {len(managers)}")
    check_number("duration_s", duration_s, low=0, low_ok=False)
    if priorities is None:
        priorities = dilos.priorities if dilos is not None else (1,) * n
    if len(priorities) != n:
        raise ConfigError(f"priorities needs one priority per class ({n}), got {len(priorities)}")
    cfg = ClassesConfig(managers=tuple(managers), priorities=tuple(priorities), dilos=dilos)
    cstate = classes_mod.initial_state(cfg)
    drops = [0.0] * n
    qstate = model.initial_state()
    series: list[dict[str, list[float]]] = [
        {k: [] for k in Trace.__dataclass_fields__} for _ in range(n)
    ]
    totals = [[0, 0, 0.0, 0.0, 0.0, 0.0] for _ in range(n)]  # arrived dropped results rt viol max
    steps = max(1, round(duration_s / model.config.interval_s))
    for _ in range(steps):
        used_shares = cstate.shares
        qstate, out = model.advance(qstate, drops, used_shares)
        cstate, decision = classes_mod.step(cfg, cstate, out.stats)
        drops = list(decision.drops)
        for k in range(n):
            st, m = out.stats[k], out.metrics[k]
            tot = totals[k]
            tot[0] += st.arrived
            tot[1] += st.dropped
            tot[2] += m.results
            tot[3] += m.response_sum_s
            tot[4] += m.violation_sum_s
            tot[5] = max(tot[5], m.response_max_s)
            s = series[k]
            s["time_s"].append(out.time_s)
            s["drop"].append(drops[k])
            s["capacity"].append(decision.capacities[k])
            s["share"].append(used_shares[k])
            rt = st.response_time_s
            s["response_s"].append(math.nan if rt is None else rt)
            s["true_capacity"].append(m.capacity)
            s["violation_sum_s"].append(m.violation_sum_s)
            s["results"].append(m.results)
    runs = []
    for k in range(n):
        arrived, dropped, results, rt_sum, viol, rt_max = totals[k]
        runs.append(
            ClassRun(
                arrived=int(arrived),
                dropped=int(dropped),
                results=results,
                loss=dropped / arrived if arrived else 0.0,
                delay_violation_mean_s=viol / results if results else 0.0,
                response_mean_s=rt_sum / results if results else 0.0,
                response_max_s=rt_max,
                backlog_s=qstate.work[k],
            )
        )
    traces = tuple(Trace(**{f: tuple(v) for f, v in s.items()}) for s in series)
    return RunResult(classes=tuple(runs), traces=traces)
