from __future__ import annotations

from dataclasses import replace

import pytest

from spillway.control.load_manager import IntervalStats
from spillway.control.seamless import SeamlessConfig, SeamlessState, initial_state, rescale, step
from spillway.errors import ConfigError
from tests.control.plants import run_one, sc_node

S = IntervalStats(interval_s=0.5, load=1.5, queued_load=1.0, response_time_s=3.0)


def test_delay_estimate_is_queued_load_over_headroom():
    cfg = SeamlessConfig(capacity=0.5)
    _, d = step(cfg, initial_state(cfg), S)
    assert d.estimated_delay_s == pytest.approx(2.0)  # Eq. 4.2


def test_retroactive_returns_the_drop_in_effect_and_keeps_the_new_one_for_next():
    now = SeamlessConfig(capacity=0.5)
    ahead = replace(now, retroactive=True)
    state = SeamlessState(capacity=0.5, drop=0.25, decided=True)
    new_now, d_now = step(now, state, S)
    new_ahead, d_ahead = step(ahead, state, S)
    assert d_ahead.drop == 0.25  # the waiting arrivals get the drop queued_load assumed
    assert new_ahead.drop == new_now.drop == d_now.drop != 0.25  # the new one, for the next
    assert new_ahead == new_now and d_ahead.estimated_delay_s == d_now.estimated_delay_s
    # the first step has no drop in effect: it applies its own (at a start of 7x the
    # capacity, keeping the first interval whole made the first batches 4.5-10.5 s on Spark)
    first, d_first = step(ahead, initial_state(ahead), S)
    assert d_first.drop == first.drop > 0


def test_headroom_follows_d_over_d_prime_after_a_window_of_shedding():
    cfg = SeamlessConfig(capacity=0.9, target_s=2.0, period=4)
    state = SeamlessState(capacity=0.9, drop=0.2)
    caps = []
    for rt in (3.0, 3.0, 2.0, 4.0):
        state, d = step(cfg, state, replace(S, queued_load=3.0, response_time_s=rt))
        assert d.drop > 0  # the queue is over the target: shedding stays in effect
        caps.append(d.capacity)
    assert caps[:3] == [0.9, 0.9, 0.9]
    assert caps[3] == pytest.approx(0.9 * 2.0 / 3.0)  # D' = mean(3, 3, 2, 4) = 3
    assert state.window == 0 and state.shedding_periods == 0


def test_d_prime_is_the_mean_over_the_results_not_over_the_periods():
    # Four shedding periods: 900 results at 1 s and 100 at 3 s, twice. D' is the mean response
    # time of those 2,000 results (Pham §4.2.2, a response time is a result's): 1.2 s, so
    # H = 0.9 · 2 / 1.2 = 1.5. Before, each period's mean weighed the same: D' = 2 s, H stayed
    # at 0.9 while nine results in ten were at 1 s.
    cfg = SeamlessConfig(capacity=0.9, target_s=2.0, period=4)
    state = SeamlessState(capacity=0.9, drop=0.2)
    for rt, n in ((1.0, 900), (3.0, 100), (1.0, 900), (3.0, 100)):
        stats = replace(S, queued_load=3.0, response_time_s=rt, processed=n, outputs=n)
        state, d = step(cfg, state, stats)
    assert d.capacity == pytest.approx(1.5)
    # without outputs the processed rows weigh a period's mean; with neither, it weighs 1
    state = SeamlessState(capacity=0.9, drop=0.2)
    for rt, n in ((1.0, 3), (4.0, 0)):
        stats = replace(S, queued_load=3.0, response_time_s=rt, processed=n)
        state, d = step(replace(cfg, period=2), state, stats)
    assert d.capacity == pytest.approx(0.9 * 2.0 / ((3 * 1.0 + 4.0) / 4))


def test_the_window_counts_control_periods_of_feed_time_not_decisions():
    # P = 4 control periods of 0.5 s = 2 s of feed time. Decisions covering 1 s each (a
    # micro-batch spanning two trigger intervals) close it after 2 decisions: D' = 3 s, so
    # H = 0.9 · 2 / 3. Before, every decision counted as one period: after 2 decisions H was
    # still 0.9 and the window closed only after 4 (4 s, 8 periods).
    cfg = SeamlessConfig(capacity=0.9, target_s=2.0, period=4, control_period_s=0.5)
    state = SeamlessState(capacity=0.9, drop=0.2)
    caps = []
    for _ in range(2):
        stats = replace(S, interval_s=1.0, queued_load=3.0, response_time_s=3.0)
        state, d = step(cfg, state, stats)
        caps.append(d.capacity)
    assert caps == [0.9, pytest.approx(0.6)]
    assert state.window == 0
    # a window with shedding in under half of its time is skipped (1 s of 2.5 s shed)
    state = SeamlessState(capacity=0.9, drop=0.2)
    state, _ = step(cfg, state, replace(S, interval_s=1.0, queued_load=0.0))
    assert state.drop == 0.0 and state.shedding_periods == pytest.approx(2.0)
    state, d = step(cfg, state, replace(S, interval_s=1.5, queued_load=0.0))
    assert d.capacity == 0.9 and state.window == 0


def test_periods_without_shedding_do_not_count():
    cfg = SeamlessConfig(capacity=0.9, period=4)
    state = SeamlessState(capacity=0.9, drop=0.0, window=3, shedding_periods=1, response_sum_s=5.0)
    state, d = step(cfg, state, S)  # only 1 of 4 periods shed: the window is skipped
    assert d.capacity == 0.9 and state.window == 0


def test_learned_headroom_stays_within_bounds():
    cfg = SeamlessConfig(capacity=0.5, period=1, min_capacity=0.4)
    state = SeamlessState(capacity=0.5, drop=0.5)
    _, d = step(cfg, state, replace(S, response_time_s=100.0))
    assert d.capacity == 0.4
    assert rescale(cfg, state, 1e-6).capacity == 0.4


def test_learns_the_true_headroom_from_a_wrong_start_and_after_a_change():
    """Pham Fig. 10: H starts at 0.8 (true 0.99), falls to 0.66 at 100 s; SEaMLeSS follows."""
    run = run_one(sc_node(), "seamless", 300.0, target_s=2.0)
    tr = run.traces[0]
    at = {round(t, 1): c for t, c in zip(tr.time_s, tr.capacity, strict=True)}
    assert at[95.0] == pytest.approx(0.99, rel=0.05)
    assert at[300.0] == pytest.approx(0.66, rel=0.05)
    assert tr.window_violation_s(150.0) <= 0.05


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"target_s": -1.0}, "target_s must be a finite number > 0, got -1.0"),
        ({"period": 0}, "period must be an int >= 1, got 0"),
        ({"min_capacity": 0.0}, "min_capacity must be a finite number > 0, got 0.0"),
        ({"max_capacity": 1e-4}, r"max_capacity must be a finite number >= 0.001, got 0.0001"),
        ({"capacity": 100.0}, r"capacity must be a finite number >= 0.001 and <= 64, got 100.0"),
    ],
)
def test_config_errors(settings, match):
    with pytest.raises(ConfigError, match=match):
        SeamlessConfig(**settings)
