"""Drive the queue model with load managers, one per class, and optionally the DILoS scheduler.

Every interval: the model runs with each class's current drop fraction and capacity share and
reports the interval's statistics; each class's load manager steps on its class's statistics
and sets the next drop fraction; with DILoS the class scheduler records each manager's capacity
usage ``u_k`` and, at the end of every capacity redistribution cycle, moves capacity between the
classes and pushes the factor onto each manager's capacity (Pham Eq. 6.1). Without DILoS the
shares stay at the priorities' original split (CQC's weighted round robin, work-conserving).

This is the loop a simulator or the Spark node runs; here it is what proves the step functions
(``tests/control/test_validation.py``).

Examples
--------
>>> from spillway.control import LOAD_MANAGERS
>>> from spillway.control.queue_model import (CapacitySchedule, ClassLoad, QueueModel,
...                                          QueueModelConfig)
>>> from spillway.feeds.profiles import ConstantProfile
>>> load = ClassLoad(profile=ConstantProfile(n_sources=1, rate=350.0), cost_s=1 / 280,
...                  target_s=2.0)
>>> model = QueueModel(QueueModelConfig(classes=(load,), capacity=CapacitySchedule(base=1.0)))
>>> aurora = LOAD_MANAGERS["aurora"]
>>> run = run_classes(model, [(aurora, aurora.config(capacity=1.0))], duration_s=60.0)
>>> c = run.classes[0]
>>> round(c.loss, 2), c.delay_violation_mean_s    # shed 350 → 280 tuples/s: no violation
(0.2, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spillway.control import dilos as dilos_mod
from spillway.control.load_manager import LoadManager, check_number
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
    managers: Sequence[tuple[LoadManager[Any, Any], Any]],
    *,
    duration_s: float,
    priorities: Sequence[int] | None = None,
    dilos: dilos_mod.DilosConfig | None = None,
) -> RunResult:
    """Run ``model`` for ``duration_s`` with one ``(manager, config)`` per class.

    Parameters
    ----------
    model : the node.
    managers : one registered load manager and its config per class of the model.
    duration_s : how long to run (whole intervals).
    priorities : the classes' priorities for the original capacity split (default: equal);
        ignored when ``dilos`` is given (its priorities are used).
    dilos : the class scheduler's config to redistribute capacity (None: fixed shares).

    Raises
    ------
    ConfigError
        A count of managers or priorities that differs from the model's classes, or a
        duration that is not > 0.
    """
    n = len(model.config.classes)
    if len(managers) != n:
        raise ConfigError(
            f"managers needs one (manager, config) per class ({n}), got {len(managers)}"
        )
    check_number("duration_s", duration_s, low=0, low_ok=False)
    prios = tuple(dilos.priorities) if dilos is not None else tuple(priorities or (1,) * n)
    if len(prios) != n:
        raise ConfigError(f"priorities needs one priority per class ({n}), got {len(prios)}")
    shares = list(dilos_mod.original_shares(prios))
    dstate = dilos_mod.initial_state(dilos) if dilos is not None else None
    lm_states = [m.initial_state(c) for m, c in managers]
    drops = [0.0] * n
    qstate = model.initial_state()
    series: list[dict[str, list[float]]] = [
        {k: [] for k in Trace.__dataclass_fields__} for _ in range(n)
    ]
    totals = [[0, 0, 0.0, 0.0, 0.0, 0.0] for _ in range(n)]  # arrived dropped results rt viol max
    steps = max(1, round(duration_s / model.config.interval_s))
    for _ in range(steps):
        used_shares = list(shares)
        qstate, out = model.advance(qstate, drops, used_shares)
        usage = []
        for k, (manager, config) in enumerate(managers):
            lm_states[k], decision = manager.step(config, lm_states[k], out.stats[k])
            drops[k] = decision.drop
            usage.append(decision.usage)
        if dilos is not None and dstate is not None:
            dstate, sched = dilos_mod.step(dilos, dstate, usage)
            shares = list(sched.shares)
            if sched.redistributed:
                for k, (manager, config) in enumerate(managers):
                    lm_states[k] = manager.rescale(config, lm_states[k], sched.factors[k])
        for k, (manager, _) in enumerate(managers):
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
            s["capacity"].append(manager.capacity_of(lm_states[k]))
            s["share"].append(used_shares[k])
            rt = st.response_time_s
            s["response_s"].append(math.nan if rt is None else rt)
            s["true_capacity"].append(m.capacity)
            s["violation_sum_s"].append(m.violation_sum_s)
            s["results"].append(m.results)
    classes = []
    for k in range(n):
        arrived, dropped, results, rt_sum, viol, rt_max = totals[k]
        classes.append(
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
    return RunResult(classes=tuple(classes), traces=traces)
