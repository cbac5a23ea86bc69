"""Node events: shed counts, results from stored rows, observers that fail."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spillway.events import DecisionEvent, ResultsEvent, bind_phase, notify


def test_shed_is_arrived_minus_kept() -> None:
    ev = DecisionEvent(
        t=1.0,
        queries=("q",),
        lane_query=np.array([0, 0]),
        lane_source=np.array([0, 1]),
        arrived=np.array([7, 3]),
        kept=np.array([2, 3]),
    )
    assert ev.shed.tolist() == [5, 0]


def test_results_event_without_latency_or_window_reads_nan() -> None:
    ev = ResultsEvent.from_frame("p", 1, pd.DataFrame({"query_id": [0, 2]}))
    assert ev.query_id.tolist() == [0, 2]
    assert np.isnan(ev.latency_s).all() and np.isnan(ev.window_start_s).all()


def test_a_failing_observer_does_not_stop_the_others() -> None:
    seen: list[tuple[str, object]] = []
    observers = [lambda phase, ev: 1 / 0, lambda phase, ev: seen.append((phase, ev))]
    forward = bind_phase(observers, "calibrate-2")
    errors = notify([forward], "event")
    assert errors == [
        "SpillwayError: node observers failed in phase 'calibrate-2': "
        "ZeroDivisionError: division by zero"
    ]
    assert seen == [("calibrate-2", "event")]


def test_observers_added_after_binding_are_called() -> None:
    observers: list = []
    forward = bind_phase(observers, "run")
    seen: list[str] = []
    observers.append(lambda phase, ev: seen.append(phase))
    forward("event")
    assert seen == ["run"]
