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
