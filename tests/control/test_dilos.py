from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.control.aurora import AuroraConfig
from spillway.control.aurora import initial_state as aurora_state
from spillway.control.aurora import step as aurora_step
from spillway.control.dilos import (
    DilosConfig,
    initial_state,
    original_shares,
    redistribute,
    step,
)
from spillway.control.load_manager import IntervalStats
from spillway.control.validation import CLASS_TARGETS_S, classes_model, run_dilos
from spillway.errors import ConfigError
from spillway.feeds.profiles import StepProfile

# ---------------------------------------------------------------- Example 1 (Pham §1.2)
# Q1 and Q2 cost 1/15 s per tuple; the scheduler runs 10 t/s of Q1 and 5 of Q2; 9 t/s arrive each.
COST = 1 / 15
LOAD = 9 * COST  # 0.6 of the node each


def per_class_drop(capacity: float) -> float:
    cfg = AuroraConfig(capacity=capacity)
    return aurora_step(
        cfg, aurora_state(cfg), IntervalStats(interval_s=1.0, load=LOAD)
    ).decision.drop


def test_example_1_per_class_managers_shed_only_the_overloaded_class():
    q1, q2 = per_class_drop(10 * COST), per_class_drop(5 * COST)
    assert q1 == 0.0
    assert q2 * 9 == pytest.approx(4.0)  # drop 4 of Q2's 9 tuples/s


@pytest.mark.parametrize(("reserve", "q2_rate", "q2_shed"), [(1e-9, 6.0, 3.0), (0.05, 5.5, 3.5)])
def test_example_1_redistribution_lends_q1_spare_to_q2(reserve, q2_rate, q2_shed):
    shares = (10 / 15, 5 / 15)
    usage = (LOAD / shares[0], LOAD / shares[1])  # u = L / L_C: 0.9 and 1.8
    r = redistribute(priorities=(2, 1), shares=shares, usage=usage, reserve=reserve)
    assert r.shares[1] * 15 == pytest.approx(q2_rate)
    assert sum(r.shares) == pytest.approx(1.0)
    # the per-class manager of Q2, pushed by Eq. 6.1, now sheds less
    assert per_class_drop(shares[1] * r.factors[1]) * 9 == pytest.approx(q2_shed)


# ---------------------------------------------------------------- demand, supply, rules


def test_demand_only_above_full_usage_the_printed_condition_is_a_typo():
    r = redistribute(priorities=(1, 1), shares=(0.5, 0.5), usage=(0.5, 1.5), reserve=1e-9)
    assert r.demand == (0.0, pytest.approx(0.25))  # printed "u_k < 1" would give -0.25 to the first
    assert r.supply == (pytest.approx(0.25), 0.0)


def test_a_zero_reserve_is_refused():
    with pytest.raises(ConfigError, match=r"reserve must be a finite number > 0 and < 1, got 0"):
        redistribute(priorities=(1,), shares=(1.0,), usage=(0.0,), reserve=0)


def test_supply_keeps_a_reserve_of_the_original_share():
    r = redistribute(priorities=(6, 3, 1), shares=(0.6, 0.3, 0.1), usage=(0.0, 0.95, 2.0))
    assert r.supply[0] == pytest.approx(0.6 - 0.05 * 0.6)
    assert r.supply[1] == 0.0  # 0.95 is not below 1 - 0.05·0.3/0.3
    # class 3 gets its demand 0.1; rule 3 returns the rest of the budget to class 1
    assert r.shares == pytest.approx((0.5, 0.3, 0.2))


def test_rule_2_highest_priority_first_when_the_budget_is_short():
    r = redistribute(
        priorities=(1, 3, 2), shares=(0.4, 0.3, 0.3), usage=(0.5, 1.5, 1.5), reserve=1e-9
    )
    assert r.budget == pytest.approx(0.2)
    assert r.shares == pytest.approx((0.2, 0.45, 0.35))  # priority 3 served fully, then 2


def test_rule_1_a_lender_gets_its_original_share_back():
    # class 1 (priority 6) lent most of its share; now it is overloaded and nobody supplies
    r = redistribute(priorities=(6, 1), shares=(0.3, 0.7), usage=(2.0, 1.2), reserve=1e-95)
    assert r.budget == 0.0
    assert r.shares == pytest.approx((0.6, 0.4))  # reclaimed from the borrower, not further


def test_rule_3_left_over_budget_returns_below_original_classes_first():
    # nobody demands; class 1 sits below its original share and is idle-ish
    r = redistribute(
        priorities=(6, 3, 1), shares=(0.3, 0.3, 0.4), usage=(0.8, 0.5, 0.1), reserve=1e-9
    )
    assert r.shares[0] == pytest.approx(0.6)  # topped up to the original first
    assert sum(r.shares) == pytest.approx(1.0)
    assert min(r.shares) > 0


def test_budget_left_after_rule_3_goes_back_to_the_suppliers():
    r = redistribute(priorities=(1, 1), shares=(0.5, 0.5), usage=(0.5, 0.5), reserve=1e-9)
    assert r.shares == pytest.approx((0.5, 0.5)) and r.factors == pytest.approx((1.0, 1.0))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 10), st.floats(0.01, 1.0), st.floats(0.0, 4.0)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([1e-9, 0.05, 0.2]),
)
def test_redistribution_conserves_quotas_and_keeps_rule_1(classes, reserve):
    prios = tuple(p for p, _, _ in classes)
    raw = [s for _, s, _ in classes]
    shares = tuple(s / sum(raw) for s in raw)
    usage = tuple(u for _, _, u in classes)
    r = redistribute(priorities=prios, shares=shares, usage=usage, reserve=reserve)
    assert math.fsum(r.shares) == pytest.approx(1.0, abs=1e-12)
    assert all(s > 0 for s in r.shares)
    original = original_shares(prios)
    for k in range(len(prios)):
        satisfied = r.demand[k] == 0 or r.shares[k] >= shares[k] + r.demand[k] - 1e-9
        assert satisfied or r.shares[k] >= original[k] - 1e-9  # rule 1
        assert r.factors[k] == pytest.approx(r.shares[k] / shares[k])  # Eq. 6.1


# ---------------------------------------------------------------- the scheduler's step


def test_step_redistributes_on_the_mean_usage_of_a_crc():
    cfg = DilosConfig(priorities=(1, 1), crc_cycles=3, reserve=1e-9)
    state = initial_state(cfg)
    for usage in [(0.2, 1.0), (0.8, 1.6)]:
        state, d = step(cfg, state, usage)
        assert not d.redistributed and d.factors == (1.0, 1.0)
    state, d = step(cfg, state, (0.5, 1.3))  # means 0.5 and 1.3
    assert d.redistributed
    assert d.shares == pytest.approx((0.35, 0.65))
    assert state.cycles == 0 and state.usage_sum == (0.0, 0.0)


def test_a_step_over_several_control_periods_counts_them_in_the_crc():
    """A Spark decision every 2 s at a 1 s trigger: a CRC of 3 intervals ends at the second
    decision (4 intervals), on the usage weighted by the intervals each report covered."""
    cfg = DilosConfig(priorities=(1, 1), crc_cycles=3, reserve=1e-9, control_period_s=1.0)
    state, d = step(cfg, initial_state(cfg), (0.2, 1.0), interval_s=2.0)
    assert not d.redistributed and state.cycles == 2.0
    state, d = step(cfg, state, (0.5, 1.3), interval_s=1.0)  # means (0.3, 1.1)
    assert d.redistributed and d.shares == pytest.approx((0.45, 0.55))
    counted_per_step = replace(cfg, control_period_s=None)
    state, d = step(counted_per_step, initial_state(cfg), (0.2, 1.0), interval_s=2.0)
    assert state.cycles == 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"priorities": ()}, "priorities must name at least one class, got none"),
        ({"priorities": (6, 0)}, r"priorities\[1\] must be an int >= 1, got 0"),
        ({"reserve": 1.0}, r"reserve must be a finite number > 0 and < 1, got 1.0"),
        ({"crc_cycles": 0}, "crc_cycles must be an int >= 1, got 0"),
        ({"control_period_s": -1.0}, "control_period_s must be a finite number > 0, got -1.0"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DilosConfig(**kwargs)


@pytest.mark.parametrize(
    ("shares", "usage", "match"),
    [
        ((0.5,), (1.0, 1.0), "need one entry per class: got 2, 1 and 2"),
        ((0.5, 0.0), (1.0, 1.0), r"shares\[1\] must be a finite number > 0, got 0.0"),
        ((0.5, 0.5), (1.0, float("inf")), r"usage\[1\] must be a finite number >= 0, got inf"),
    ],
)
def test_redistribute_errors(shares, usage, match):
    with pytest.raises(ConfigError, match=match):
        redistribute(priorities=(1, 1), shares=shares, usage=usage)


# ---------------------------------------------------------------- closed loop, QN-A-like


@pytest.mark.parametrize("name", ["aloma", "aurora"])
def test_dilos_lowers_the_low_class_loss_and_keeps_priorities(name):
    separate, full = run_dilos(name, dilos=False), run_dilos(name, dilos=True)
    loss_sep = [c.loss for c in separate.classes]
    loss_dil = [c.loss for c in full.classes]
    assert loss_dil[2] < loss_sep[2] - 0.03
    for losses in (loss_sep, loss_dil):
        assert losses[0] <= losses[1] <= losses[2]
        assert losses[0] < 0.01
    shares = [t.share[-1] for t in full.traces]
    assert math.fsum(shares) == pytest.approx(1.0)
    assert shares[2] > 0.4  # class 3 borrowed most of classes 1 and 2's spare
    for c, d in zip(full.classes, CLASS_TARGETS_S, strict=True):
        assert c.delay_violation_mean_s <= 0.1 * d


def test_dilos_gives_class_1_its_capacity_back_when_its_load_rises():
    """Pham §6.2.3.1: as soon as class 1's load rises, it gets its original capacity back."""
    rising = StepProfile(n_sources=1, rate=300.0, times=[60.0], factors=[1.9])  # 0.3 → 0.57
    run = run_dilos("aloma", dilos=True, node=classes_model(rising), duration_s=120.0)
    tr = run.traces[0]
    share = dict(zip((round(t, 2) for t in tr.time_s), tr.share, strict=True))
    assert share[59.85] < 0.35
    assert share[66.0] > 0.55
    assert run.classes[0].loss < 0.01
