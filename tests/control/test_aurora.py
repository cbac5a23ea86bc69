from __future__ import annotations

import pytest

from spillway.control.aurora import AuroraConfig, initial_state, rescale, step
from spillway.control.load_manager import IntervalStats
from tests.control.plants import run_one, sc_node


def stats(load: float) -> IntervalStats:
    return IntervalStats(interval_s=0.5, load=load, response_time_s=9.0, queued_load=5.0)


def test_sheds_the_excess_over_a_fixed_headroom():
    cfg = AuroraConfig(capacity=0.9)
    state = initial_state(cfg)
    for load, drop in [(0.5, 0.0), (0.9, 0.0), (1.2, 0.25), (1.8, 0.5)]:
        state, d = step(cfg, state, stats(load))
        assert d.drop == pytest.approx(drop)
        assert d.admitted_load == pytest.approx(min(load, 0.9))
        assert d.capacity == 0.9 and d.estimated_delay_s is None


def test_ignores_the_response_time_and_caps_the_drop():
    cfg = AuroraConfig(capacity=0.1, max_drop=0.5)
    _, d = step(cfg, initial_state(cfg), stats(10.0))
    assert d.drop == 0.5


def test_rescale_moves_the_headroom_in_use():
    cfg = AuroraConfig(capacity=0.6)
    state = rescale(cfg, initial_state(cfg), 0.5)
    _, d = step(cfg, state, stats(0.6))
    assert d.drop == pytest.approx(0.5)


def test_a_headroom_a_little_too_high_never_recovers():
    """Pham Table 1: H above the true capacity lets the response time grow without bound."""
    run = run_one(sc_node(before=0.99, after=0.99), "aurora", 200.0, capacity=1.04)
    tr = run.traces[0]
    assert tr.response_s[-1] > tr.response_s[len(tr.response_s) // 2] > 2.0
    low = run_one(sc_node(before=0.99, after=0.99), "aurora", 200.0, capacity=0.89)
    assert low.classes[0].delay_violation_mean_s == 0.0
    assert low.classes[0].loss > run.classes[0].loss
