from __future__ import annotations

import math
from dataclasses import replace

import pytest

from spillway.control.aloma import (
    AlomaConfig,
    AlomaState,
    capacity_step,
    capacity_steps,
    initial_state,
    probe_percent,
    step,
)
from spillway.control.load_manager import IntervalStats
from spillway.control.queue_model import QueueModel
from spillway.errors import ConfigError
from tests.control.plants import run_one, sc_node

CFG = AlomaConfig(target_s=2.0)


def stats(load: float, rt: float | None) -> IntervalStats:
    return IntervalStats(interval_s=0.5, load=load, response_time_s=rt)


@pytest.mark.parametrize(
    ("gap_percent", "fraction"),
    [
        (0.5, 1.0),  # z = 1: jump to L
        (1.0, 1.0),
        (2.0, math.log2(3) / 2),
        (10.0, 0.3459),
        (25.0, 0.1880),
        (50.0, 0.1134),
        (100.0, 0.0666),
        (200.0, 0.0382),
    ],
)
def test_eq_5_1_table(gap_percent, fraction):
    """Eq. 5.1: the fraction of the gap L_C moves, log2(z + 1) / z, z the gap in percent."""
    for cap in (0.5, 1.0, 2.0):
        up = capacity_step(cap, cap * (1 + gap_percent / 100))
        assert (up - cap) / (cap * gap_percent / 100) == pytest.approx(fraction, abs=1e-4)
        if gap_percent < 100:
            down = capacity_step(cap, cap * (1 - gap_percent / 100))
            assert (cap - down) / (cap * gap_percent / 100) == pytest.approx(fraction, abs=1e-4)


def test_eq_5_2_probe():
    assert [probe_percent(k) for k in (1, 2, 3, 4, 16)] == pytest.approx(
        [1.0, 2.0, 1 + math.log2(3), 3.0, 5.0]
    )


def after(state: AlomaState, load: float, rt: float | None) -> AlomaState:
    return step(CFG, state, stats(load, rt)).state


# A state whose smallest response time is 0.1 s: UT from 0.2 s, OT above D = 2 s.
BASE = AlomaState(capacity=1.0, min_response_s=0.1, previous_response_s=1.0)


def test_line_5_normal_with_load_above_capacity_raises_capacity():
    s = after(BASE, 1.1, 0.15)
    assert s.regime == "normal"
    assert s.capacity == pytest.approx(capacity_step(1.0, 1.1)) and s.drop == 0.0


def test_line_7_ot_with_load_above_capacity_sheds_the_excess():
    s = after(replace(BASE, drop=0.2), 1.5, 2.5)  # effective 1.2 over 1.0
    assert s.regime == "OT" and s.capacity == 1.0
    assert s.drop == pytest.approx(0.2 + 0.2 / 1.5)
    assert 1.5 * (1 - s.drop) == pytest.approx(1.0)  # the effective load lands on L_C


def test_line_10_ut_shedding_and_not_rising_raises_capacity_and_probes_down():
    s0 = replace(BASE, drop=0.3)
    s1 = after(s0, 1.6, 0.9)  # effective 1.12 > 1.0, UT, rt 0.9 <= 1.0
    assert s1.regime == "UT" and s1.probe == "line10" and s1.probe_run == 1
    assert s1.capacity == pytest.approx(capacity_step(1.0, 1.6 * 0.7))
    assert s1.drop == pytest.approx(0.29)  # x = 1 point
    s2 = after(s1, 1.6, 0.8)
    assert s2.probe_run == 2 and s2.drop == pytest.approx(0.27)  # x = 2 points


def test_line_10_needs_shedding_and_a_response_time_not_rising():
    assert after(BASE, 1.6, 0.9) == replace(BASE, previous_response_s=0.9, cycles=1, regime="UT")
    rising = after(replace(BASE, drop=0.3), 1.6, 1.5)
    assert rising.capacity == 1.0 and rising.drop == 0.3


def test_line_17_ot_under_capacity_and_not_falling_lowers_capacity_and_probes_up():
    s0 = replace(BASE, drop=0.2, previous_response_s=2.2)
    s1 = after(s0, 1.0, 2.3)  # effective 0.8 <= 1.0, OT, rising
    assert s1.regime == "OT" and s1.probe == "line17"
    assert s1.capacity == pytest.approx(capacity_step(1.0, 0.8))
    assert s1.drop == pytest.approx(0.21)
    falling = after(s0, 1.0, 2.1)
    assert falling.capacity == 1.0 and falling.drop == 0.2 and falling.probe_run == 0


def test_line_23_not_ot_under_capacity_gives_back_the_spare():
    s = after(replace(BASE, drop=0.5), 1.6, 1.5)  # effective 0.8, capacity 1.0, UT
    assert s.drop == pytest.approx(0.5 - 0.2 / 1.6)
    assert 1.6 * (1 - s.drop) == pytest.approx(1.0)


def test_probe_run_resets_when_the_situation_breaks():
    s = replace(BASE, drop=0.3, probe="line10", probe_run=3)
    s = after(s, 1.6, 1.5)  # rising: line 10 not taken
    assert (s.probe, s.probe_run) == ("", 0)


def test_monitor_threshold_and_refresh():
    cfg = AlomaConfig(target_s=2.0, refresh_cycles=3)
    s = initial_state(cfg)
    s = step(cfg, s, stats(0.1, 0.1)).state
    assert (s.regime, s.min_response_s) == ("normal", 0.1)
    s = step(cfg, s, stats(0.1, 0.25)).state
    assert s.regime == "UT"
    s = step(cfg, s, stats(0.1, 0.25)).state  # refresh: minimum doubled to 0.2, then min(0.25)
    assert s.min_response_s == 0.2 and s.regime == "normal"


def test_no_response_time_changes_nothing():
    s = replace(BASE, drop=0.4)
    new, d = step(CFG, s, stats(2.0, None))
    assert new == s and d.drop == 0.4
    assert step(CFG, s, stats(0.0, None)).decision.drop == 0.0


def test_relearns_after_the_background_load_and_meets_the_target():
    """Pham Fig. 16: H0 = 0.8 (true 0.99), the true capacity falls to 0.66 at 100 s."""
    run = run_one(sc_node(), "aloma", 300.0, target_s=2.0)
    tr = run.traces[0]
    late = [c for t, c in zip(tr.time_s, tr.capacity, strict=True) if t > 200.0]
    assert sum(late) / len(late) == pytest.approx(0.66, rel=0.1)
    assert tr.window_violation_s(150.0) <= 0.1 * 2.0


PERIODS = replace(CFG, control_period_s=0.5)


def test_a_step_over_three_control_periods_moves_and_probes_as_three_cycles():
    """One Spark decision every 1.5 s at a 0.5 s control period: line 17 taken for 3 cycles."""
    s0 = replace(BASE, drop=0.2, previous_response_s=2.2)
    s1 = step(PERIODS, s0, IntervalStats(interval_s=1.5, load=1.0, response_time_s=2.3)).state
    assert s1.capacity == pytest.approx(capacity_steps(1.0, 0.8, 3))
    assert s1.capacity < capacity_step(1.0, 0.8)
    assert s1.drop == pytest.approx(0.2 + (1 + 2 + (1 + math.log2(3))) / 100)
    assert (s1.probe, s1.probe_run, s1.cycles) == ("line17", 3, 3)
    s2 = step(PERIODS, s1, stats(1.0, 2.4)).state  # one more period: k = 4, x = 3 points
    assert s2.probe_run == 4 and s2.drop == pytest.approx(s1.drop + 0.03)


def test_a_long_interval_is_one_cycle_without_a_control_period():
    s0 = replace(BASE, drop=0.2, previous_response_s=2.2)
    s1 = step(CFG, s0, IntervalStats(interval_s=1.5, load=1.0, response_time_s=2.3)).state
    assert s1.capacity == pytest.approx(capacity_step(1.0, 0.8))
    assert (s1.drop, s1.probe_run, s1.cycles) == (pytest.approx(0.21), 1, 1)


@pytest.mark.parametrize("interval_s", [0.5, 1.0, 2.0])
def test_shedding_the_excess_is_taken_once_however_long_the_interval(interval_s):
    s = step(
        PERIODS,
        replace(BASE, drop=0.2),
        IntervalStats(interval_s=interval_s, load=1.5, response_time_s=2.5),
    ).state
    assert 1.5 * (1 - s.drop) == pytest.approx(1.0)


def test_the_minimum_refreshes_after_control_periods_not_decisions():
    cfg = replace(PERIODS, refresh_cycles=4)
    s = step(cfg, initial_state(cfg), IntervalStats(interval_s=1.0, load=0.1, response_time_s=0.1))
    s = step(cfg, s.state, IntervalStats(interval_s=1.0, load=0.1, response_time_s=0.3)).state
    assert s.min_response_s == 0.2 and s.cycles == 0  # 4 periods: doubled, then min(0.3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decisions_every_four_periods_relearn_faster_counted_in_periods(seed):
    """Fig. 16's plant decided every 2 s, as a loaded Spark node does at a 0.5 s trigger: a
    decision counted as one cycle probes a quarter as fast, and violates D far more after the
    background load appears (seed 0: 1.56 s against 0.56 s)."""
    model = sc_node(seed=seed)
    model = QueueModel(replace(model.config, interval_s=2.0))
    after_job = [
        run_one(model, "aloma", 300.0, target_s=2.0, control_period_s=cp)
        .traces[0]
        .window_violation_s(100.0)
        for cp in (None, 0.5)
    ]
    assert after_job[1] < 0.5 * after_job[0]


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"target_s": 0}, "target_s must be a finite number > 0, got 0"),
        ({"ut_factor": 1.0}, "ut_factor must be a finite number > 1, got 1.0"),
        ({"refresh_cycles": 0}, "refresh_cycles must be an int >= 1, got 0"),
        ({"min_capacity": -1.0}, "min_capacity must be a finite number > 0, got -1.0"),
        ({"capacity": 1e-4}, r"capacity must be a finite number >= 0.001, got 0.0001"),
        ({"control_period_s": 0}, "control_period_s must be a finite number > 0, got 0"),
    ],
)
def test_config_errors(settings, match):
    with pytest.raises(ConfigError, match=match):
        AlomaConfig(**settings)
