from __future__ import annotations

import pytest

from spillway.control.ctrl import CtrlConfig, CtrlState, initial_state, step
from spillway.control.load_manager import IntervalStats
from spillway.errors import ConfigError
from tests.control.plants import run_one, sc_node


def test_virtual_queue_counts_arrivals_against_outputs_and_drops():
    cfg = CtrlConfig(capacity=1.0)
    state = initial_state(cfg)
    s = IntervalStats(interval_s=0.5, load=1.0, arrived=100, outputs=60, dropped=10)
    state, _ = step(cfg, state, s)
    assert state.queue == 30
    state, _ = step(cfg, state, IntervalStats(interval_s=0.5, load=0.0, outputs=80))
    assert state.queue == 0  # never negative
    assert state.cost_s == pytest.approx(0.005)  # kept from the last interval with arrivals


def test_delay_model_is_eq_3_3():
    cfg = CtrlConfig(capacity=0.5)
    state = CtrlState(capacity=0.5, queue=200.0)
    s = IntervalStats(interval_s=0.5, load=1.0, arrived=100, outputs=100)
    _, d = step(cfg, state, s)
    # c = L·T/arrived = 0.005 s; y = c·q/H = 0.005 · 200 / 0.5
    assert d.estimated_delay_s == pytest.approx(2.0)


def test_no_arrival_yet_means_no_decision():
    cfg = CtrlConfig()
    state, d = step(cfg, initial_state(cfg), IntervalStats(interval_s=0.5, load=0.0))
    assert d.drop == 0.0 and state.cost_s is None


def _decided_after_arrival(*, report_undecided: bool, intervals: int = 120) -> tuple[float, float]:
    """A node that decides each interval's arrivals after they came, as a Spark node plans a
    micro-batch: T = 1 s, one CPU, 1/280 s a tuple, load 2, D = 1.5 s, the right H. Returns
    the mean drop and the mean backlog (s) over the second half."""
    cost, arrived, capacity = 1 / 280, 560, 280
    cfg = CtrlConfig(capacity=1.0, target_s=1.5)
    state = initial_state(cfg)
    backlog = dropped = processed = 0
    drops, backlogs = [], []
    for _ in range(intervals):
        s = IntervalStats(
            interval_s=1.0,
            load=arrived * cost,
            arrived=arrived,
            undecided=arrived if report_undecided else 0,
            dropped=dropped,
            processed=processed,
            outputs=processed,
        )
        state, d = step(cfg, state, s)
        dropped = round(d.drop * arrived)
        backlog += arrived - dropped
        processed = min(backlog, capacity)
        backlog -= processed
        drops.append(d.drop)
        backlogs.append(backlog * cost)
    half = intervals // 2
    return sum(drops[half:]) / half, sum(backlogs[half:]) / half


def test_arrivals_decided_after_they_came_count_at_the_shedding_in_effect():
    """Counted in full, one interval's arrivals (2 s of work at load 2) keep the delay model
    over D = 1.5 s whatever is shed: CTRL sheds its maximum. At the drop in effect it sheds
    the overload, half, and holds the backlog under D."""
    drop, backlog_s = _decided_after_arrival(report_undecided=True)
    assert drop == pytest.approx(0.5, abs=0.03)
    assert 0.0 < backlog_s < 1.5
    drop, _ = _decided_after_arrival(report_undecided=False)
    assert drop == pytest.approx(CtrlConfig().max_drop)


def test_undecided_tuples_are_among_the_arrived():
    with pytest.raises(ConfigError, match=r"undecided \(5\) counts tuples among arrived \(4\)"):
        IntervalStats(interval_s=1.0, load=1.0, arrived=4, undecided=5)


def test_right_headroom_holds_the_target():
    """Pham Table 2: with the hand-tuned H (here the true 0.99) CTRL meets D."""
    run = run_one(sc_node(after=0.99), "ctrl", 200.0, capacity=0.99)
    assert run.traces[0].window_violation_s(50.0) < 0.05


@pytest.mark.parametrize("factor", [1.2, 1.5])
def test_headroom_too_high_settles_at_a_multiple_of_the_target(factor):
    """The delay model is ``factor`` times too optimistic: the delay settles near factor·D."""
    run = run_one(sc_node(after=0.99), "ctrl", 200.0, capacity=0.99 * factor)
    tr = run.traces[0]
    late = [r for t, r in zip(tr.time_s, tr.response_s, strict=True) if t > 120.0]
    assert sum(late) / len(late) == pytest.approx(factor * 2.0, rel=0.1)


def test_shared_operators_hide_the_overload_from_the_virtual_queue():
    """Pham Fig. 11: with fan-out the naïve virtual queue underestimates; CTRL sheds nothing."""
    run = run_one(sc_node(after=0.99, fanout=4.0), "ctrl", 150.0, capacity=0.99)
    c = run.classes[0]
    assert c.loss < 0.001  # almost nothing, against 20 % needed
    assert c.delay_violation_mean_s > 5.0
    assert c.backlog_s > 30.0  # it falls further behind every second


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"target_s": 0.0}, "target_s must be a finite number > 0, got 0.0"),
        ({"pole": 1.0}, r"pole must be a finite number >= 0 and < 1, got 1.0"),
    ],
)
def test_config_errors(settings, match):
    with pytest.raises(ConfigError, match=match):
        CtrlConfig(**settings)
