"""Uniform shedding (CoD §IV-B, Alg. 1): kept fraction, capacity contract, determinism, errors."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.policies.base import Backlog
from spillway.policies.uniform import (
    Uniform,
    UniformConfig,
    check_shed_fraction,
    fit_to_capacity,
    shed_fraction,
)


def backlog(counts, cost=None, queries=None):
    counts = np.asarray(counts)
    n = counts.size
    q = np.zeros(n, int) if queries is None else np.asarray(queries)
    return Backlog(
        lane_query=q,
        lane_source=np.arange(n),
        count=counts,
        tuple_sic=np.full(n, 1e-3),
        query_sic=np.zeros(int(q.max()) + 1),
        cost=cost,
    )


@pytest.mark.parametrize("b", [0.98, 0.9, 0.75, 0.5])
def test_kept_fraction_is_one_minus_b(b):
    bl = backlog(np.full(50, 20_000))
    n = bl.total_count
    kept = Uniform(b=b, seed=3).decide(bl, capacity=1.0).keep
    sd = np.sqrt(n * b * (1 - b))
    assert abs(kept.sum() - (1 - b) * n) < 5 * sd
    # Per lane too: every lane is sampled at the same rate.
    lane_sd = np.sqrt(20_000 * b * (1 - b))
    assert np.all(np.abs(kept - (1 - b) * 20_000) < 6 * lane_sd)


def test_explicit_b_ignores_capacity_and_edges():
    bl = backlog([100, 300])
    assert Uniform(b=0.0).decide(bl, 0.0).keep.tolist() == [100, 300]
    assert Uniform(b=1.0).decide(bl, 1e9).keep.tolist() == [0, 0]


def test_capacity_mode_admits_all_when_it_fits():
    bl = backlog([10, 20, 30])
    assert Uniform().decide(bl, 60.0).keep.tolist() == [10, 20, 30]


@pytest.mark.parametrize("cap", [0.0, 1.0, 37.5, 499.0, 1000.0])
def test_capacity_mode_fills_capacity_with_unit_costs(cap):
    bl = backlog([200, 300, 500, 0])
    keep = Uniform(seed=1).decide(bl, cap).keep
    assert keep.sum() == min(int(np.floor(cap)), bl.total_count)
    assert np.all((keep >= 0) & (keep <= bl.count))


@pytest.mark.parametrize("seed", range(5))
def test_capacity_mode_with_costs_never_exceeds_and_leaves_no_room(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 200, 40)
    cost = rng.choice([0.5, 1.0, 3.0, 7.25], 40)
    bl = backlog(counts, cost=cost)
    cap = 0.3 * bl.total_cost
    keep = Uniform(seed=seed).decide(bl, cap).keep
    kept_cost = float((keep * cost).sum())
    assert kept_cost <= cap + 1e-9
    left = bl.count - keep > 0
    assert cap - kept_cost < cost[left].min()  # not even one more tuple of any lane fits


def test_capacity_mode_is_uniform_across_lanes():
    bl = backlog([90_000, 10_000])
    keep = Uniform(seed=2).decide(bl, 10_000).keep
    assert keep.sum() == 10_000
    assert abs(keep[0] / keep.sum() - 0.9) < 0.02


def test_same_seed_same_decisions_and_snapshot_restore():
    bl = backlog([1000, 2000, 3000])
    a, b = Uniform(b=0.7, seed=11), Uniform(b=0.7, seed=11)
    seq_a = [a.decide(bl, 0).keep.tolist() for _ in range(3)]
    seq_b = [b.decide(bl, 0).keep.tolist() for _ in range(3)]
    assert seq_a == seq_b
    snap = a.snapshot()
    nxt = a.decide(bl, 0).keep.tolist()
    a.restore(snap)
    assert a.decide(bl, 0).keep.tolist() == nxt
    assert Uniform(b=0.7, seed=12).decide(bl, 0).keep.tolist() != seq_a[0]


def test_shed_fraction_from_capacity():
    bl = backlog([100], cost=[2.0])
    assert shed_fraction(None, bl, 50.0) == 0.75
    assert shed_fraction(None, bl, 500.0) == 0.0
    assert shed_fraction(0.3, bl, 50.0) == 0.3
    assert shed_fraction(None, backlog([0]), 5.0) == 0.0


def test_fit_to_capacity_respects_floor_and_ceiling():
    bl = backlog([50, 50, 50])
    rng = np.random.default_rng(0)
    keep = fit_to_capacity(np.array([30, 30, 30]), bl, 20.0, rng, floor=np.array([10, 0, 0]))
    assert keep.sum() == 20 and keep[0] >= 10
    keep = fit_to_capacity(np.array([0, 0, 0]), bl, 100.0, rng, ceiling=np.array([50, 5, 0]))
    assert keep.tolist() == [50, 5, 0]
    # A floor costlier than the capacity is returned as is (the caller reports the overrun).
    keep = fit_to_capacity(np.array([30, 0, 0]), bl, 10.0, rng, floor=np.array([30, 0, 0]))
    assert keep.tolist() == [30, 0, 0]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_bad_b_is_rejected(bad):
    with pytest.raises(ConfigError, match="b is the fraction of tuples shed"):
        UniformConfig(b=bad)
    with pytest.raises(ConfigError, match="must be in \\[0, 1\\]"):
        check_shed_fraction(bad)


def test_bad_capacity_and_mixed_config_are_rejected():
    with pytest.raises(ConfigError, match="capacity must be a finite number >= 0"):
        Uniform().decide(backlog([5]), -1.0)
    with pytest.raises(ConfigError, match="pass either a config or keyword settings"):
        Uniform(UniformConfig(b=0.5), seed=2)
    with pytest.raises(ConfigError, match="seed must be a non-negative int"):
        Uniform(seed=-1)
