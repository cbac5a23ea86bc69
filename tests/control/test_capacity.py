from __future__ import annotations

import math

import pytest

from spillway.control.capacity import (
    capacity_tuples,
    node_budget,
    per_tuple_only_capacity,
)
from spillway.control.cost_model import CostEstimate
from spillway.errors import ConfigError, UnknownNameError

EST = {
    "avg": CostEstimate(overhead_s=0.3, per_tuple_s=1e-6),
    "top5": CostEstimate(overhead_s=0.2, per_tuple_s=4e-6),
}


def test_budget_subtracts_overheads_of_all_plans_by_default():
    b = node_budget(EST, interval_s=2.0, headroom=0.5)
    assert b.total_s == pytest.approx(1.0)
    assert b.overhead_s == pytest.approx(0.5)
    assert b.available_s == pytest.approx(0.5)
    assert b.running == ("avg", "top5")
    assert b.tuples("top5") == pytest.approx(0.5 / 4e-6)


def test_budget_only_counts_running_plans():
    b = node_budget(EST, interval_s=1.0, headroom=0.8, running=["top5"])
    assert b.available_s == pytest.approx(0.6)
    assert b.work_s({"top5": 100_000, "avg": 0}) == pytest.approx(0.4)
    with pytest.raises(ConfigError, match=r"plan 'avg' has 10 rows but is not among the running"):
        b.work_s({"avg": 10})


def test_budget_never_negative():
    b = node_budget(EST, interval_s=0.5, headroom=0.8)
    assert b.available_s == 0.0
    assert b.overhead_s > b.total_s


def test_lane_costs_follow_plans():
    b = node_budget(EST, interval_s=1.0)
    assert b.lane_costs(["top5", "avg"]).tolist() == [4e-6, 1e-6]
    with pytest.raises(UnknownNameError, match=r"no cost estimate for plan 'cov'"):
        b.lane_costs(["cov"])
    with pytest.raises(UnknownNameError, match=r"no cost estimate for plan 'cov'"):
        b.tuples("cov")


def test_capacity_for_a_mix():
    # Budget 0.8 - 0.5 = 0.3 s; mean per-tuple cost 0.25·1e-6 + 0.75·4e-6 = 3.25e-6 s.
    cap = capacity_tuples(EST, {"avg": 1, "top5": 3}, 1.0, 0.8)
    assert cap == pytest.approx(0.3 / 3.25e-6)
    # Filling that capacity in the mix spends exactly the available budget.
    b = node_budget(EST, interval_s=1.0, headroom=0.8)
    assert b.work_s({"avg": cap / 4, "top5": 3 * cap / 4}) == pytest.approx(b.available_s)


def test_capacity_ignores_plans_with_zero_weight():
    assert capacity_tuples(EST, {"avg": 2.0, "top5": 0.0}, 1.0, 0.8) == pytest.approx(0.5 / 1e-6)


def test_per_tuple_only_model_over_admits_when_calibrated_on_large_batches():
    est = CostEstimate(overhead_s=0.4, per_tuple_s=1e-5)
    true_cap = capacity_tuples({"p": est}, {"p": 1}, 1.0, 1.0)
    assert est.duration_s(true_cap) == pytest.approx(1.0)
    # Exact at the batch size that fills the interval...
    exact = per_tuple_only_capacity(
        rows=round(true_cap), duration_s=est.duration_s(round(true_cap)), interval_s=1.0
    )
    assert exact == pytest.approx(true_cap, rel=1e-9)
    # ...too high after calibration on the larger batches of an overloaded node.
    for rows in (80_000, 200_000, 1_000_000):
        naive = per_tuple_only_capacity(rows=rows, duration_s=est.duration_s(rows), interval_s=1.0)
        assert naive > true_cap
        assert est.duration_s(naive) > 1.0


def test_per_tuple_only_capacity_edges():
    assert per_tuple_only_capacity(rows=0, duration_s=1.0, interval_s=1.0) == math.inf
    with pytest.raises(ConfigError, match=r"rows and duration_s must be >= 0, got rows=-1"):
        per_tuple_only_capacity(rows=-1, duration_s=1.0, interval_s=1.0)


@pytest.mark.parametrize(
    ("interval", "headroom", "match"),
    [
        (0.0, 0.8, r"interval_s must be > 0 \(the shedding interval\), got 0.0"),
        (1.0, 0.0, r"headroom must be in \(0, 1\] .* got 0.0"),
        (1.0, 1.2, r"headroom must be in \(0, 1\] .* got 1.2"),
        (math.nan, 0.8, r"interval_s must be a finite number, got nan"),
    ],
)
def test_interval_and_headroom_errors(interval, headroom, match):
    with pytest.raises(ConfigError, match=match):
        node_budget(EST, interval_s=interval, headroom=headroom)


def test_mix_errors():
    with pytest.raises(ConfigError, match=r"mix weight of plan 'avg' must be a finite number >= 0"):
        capacity_tuples(EST, {"avg": -1}, 1.0)
    with pytest.raises(ConfigError, match=r"mix_weights must give some plan a weight > 0"):
        capacity_tuples(EST, {"avg": 0}, 1.0)
    with pytest.raises(UnknownNameError, match=r"no cost estimate for plan 'cov'; plans with"):
        capacity_tuples(EST, {"cov": 1}, 1.0)
