"""CoD (concept-driven shedding): grouped allocation (CD-U3), joins (CD-U4), scalar, contract."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.policies.base import Backlog
from spillway.policies.cod import (
    CoD,
    CoDConfig,
    allocate_groups,
    scalar_allocation,
    window_backlog,
)


def zipf_window(n_groups: int, n: int, s: float = 1.1, seed: int = 0) -> np.ndarray:
    """Group frequencies of a Zipf window (multinomial over ranks)."""
    w = np.arange(1, n_groups + 1, dtype=float) ** -s
    return np.random.default_rng(seed).multinomial(n, w / w.sum())


def grouped_backlog(freq, n_sources: int = 1, cost=None) -> Backlog:
    """One query; each group split over ``n_sources`` lanes."""
    freq = np.asarray(freq)
    g = freq.size
    parts = np.stack([freq // n_sources + (freq % n_sources > i) for i in range(n_sources)], 1)
    return Backlog(
        lane_query=np.zeros(g * n_sources, int),
        lane_source=np.tile(np.arange(n_sources), g),
        count=parts.reshape(-1),
        tuple_sic=np.full(g * n_sources, 1e-4),
        query_sic=[0.0],
        lane_group=np.repeat(np.arange(g), n_sources),
        cost=cost,
    )


def per_group(keep: np.ndarray, bl: Backlog) -> np.ndarray:
    return np.bincount(bl.lane_group, weights=keep).astype(int)


# ------------------------------------------------------------------ CD-U3 grouped allocation
def test_cd_u3_zipf_5000_groups_b098_keep_all():
    f = zipf_window(5000, 100_000)
    live = f > 0
    bl = grouped_backlog(f)
    cod = CoD(kind="grouped", b=0.98, over_budget="keep-all", seed=1)
    n = per_group(cod.decide(bl, 0.0).keep, bl)
    groups = int(live.sum())
    assert groups > 2000  # more groups than the 2 % budget: the hard case
    assert np.all(n[live] >= 1)  # zero missing groups
    assert n.sum() <= int(np.ceil(0.02 * f.sum())) + groups * 1  # documented bound
    assert np.all(n[f <= n] == f[f <= n])  # groups with f_g <= n_g kept whole
    rep = cod.last_report
    assert rep.missing_groups == 0 and rep.n_groups == groups
    assert rep.overrun == pytest.approx(n.sum() - 0.02 * f.sum())


def test_cd_u3_zipf_5000_groups_b098_budget_fits():
    f = zipf_window(5000, 1_000_000)
    live = f > 0
    bl = grouped_backlog(f)
    cod = CoD(kind="grouped", b=0.98, seed=2)
    n = per_group(cod.decide(bl, 0.0).keep, bl)
    assert n.sum() == 20_000  # exactly the budget, no overrun
    assert np.all(n[live] >= 1) and cod.last_report.missing_groups == 0
    assert np.all(n <= f)
    # Water-filling: every group holds at least min(f_g, level), level = least partial group.
    partial = n < f
    level = n[partial].min()
    assert np.all(n >= np.minimum(f, level))
    assert np.all(n[f <= level] == f[f <= level])  # infrequent groups kept whole
    assert n[partial].max() - level <= 1


def test_smallest_first_keeps_budget_and_smallest_groups():
    f = zipf_window(5000, 100_000)
    bl = grouped_backlog(f)
    cod = CoD(kind="grouped", b=0.98, seed=3)  # default over_budget="smallest-first"
    n = per_group(cod.decide(bl, 0.0).keep, bl)
    assert n.sum() <= 2000
    kept, dropped = (n > 0), (n == 0) & (f > 0)
    assert dropped.any()
    assert f[kept].max() <= f[dropped].min()  # the smallest groups got the floors
    assert cod.last_report.missing_groups == int(dropped.sum())


def test_proportional_allocation():
    f = np.array([10_000, 1000, 100, 10, 1])
    n = allocate_groups(f, 1111, rng=np.random.default_rng(0), allocation="proportional")
    assert n.sum() == 1111 and np.all(n >= 1)
    assert n[0] > n[1] > n[2]
    assert abs(n[0] / n.sum() - f[0] / f.sum()) < 0.01


def test_equal_allocation_beats_proportional_on_per_group_spread():
    f = np.array([10_000, 1000, 100, 50, 10])
    rng = np.random.default_rng(0)
    eq = allocate_groups(f, 300, rng=rng)
    pr = allocate_groups(f, 300, rng=rng, allocation="proportional")
    # Σ 1/sqrt(n_g) (per-group standard error at equal CV) is smaller for the equal rule.
    assert (1 / np.sqrt(eq)).sum() < (1 / np.sqrt(pr)).sum()
    assert eq.tolist()[-1] == 10  # the small group is kept whole


def test_allocation_edge_cases():
    rng = np.random.default_rng(0)
    assert allocate_groups([5, 0, 3], 100, rng=rng).tolist() == [5, 0, 3]
    assert allocate_groups([5, 0, 3], 0, rng=rng).tolist() == [0, 0, 0]
    assert allocate_groups([], 10, rng=rng).tolist() == []
    n = allocate_groups([50, 50, 50], 90, rng=rng, n_min=40)  # floors 120 > 90: drop one group
    assert sorted(n.tolist()) == [0, 45, 45]
    assert allocate_groups(
        [50, 50, 50], 90, rng=rng, n_min=40, over_budget="keep-all"
    ).tolist() == [
        40,
        40,
        40,
    ]


def test_allocation_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="group frequencies must be >= 0"):
        allocate_groups([3, -1], 2, rng=rng)
    with pytest.raises(ConfigError, match="budget must be >= 0 tuples"):
        allocate_groups([3, 1], -2, rng=rng)


def test_groups_spread_over_several_lanes():
    f = zipf_window(300, 20_000, seed=4)
    bl = grouped_backlog(f, n_sources=3)
    keep = CoD(kind="grouped", b=0.9, seed=5).decide(bl, 0.0).keep
    assert np.all((keep >= 0) & (keep <= bl.count))
    n = per_group(keep, bl)
    assert n.sum() == 2000 and np.all(n[f > 0] >= 1)


def test_several_queries_each_get_their_share():
    f1, f2 = zipf_window(100, 10_000, seed=1), zipf_window(50, 2000, seed=2)
    bl = Backlog(
        lane_query=np.r_[np.zeros(100, int), np.ones(50, int)],
        lane_source=np.zeros(150, int),
        count=np.r_[f1, f2],
        tuple_sic=np.full(150, 1e-4),
        query_sic=[0.0, 0.0],
        lane_group=np.r_[np.arange(100), np.arange(50)],  # same group ids, different queries
    )
    keep = CoD(kind="grouped", b=0.9).decide(bl, 0.0).keep
    assert keep[:100].sum() == 1000 and keep[100:].sum() == 200


def test_without_lane_group_every_lane_is_a_stratum():
    bl = Backlog(
        lane_query=[0, 0, 0], lane_source=[0, 1, 2], count=[1000, 10, 1],
        tuple_sic=[1e-3] * 3, query_sic=[0.0],
    )  # fmt: skip
    assert CoD(b=0.9).decide(bl, 0.0).keep.tolist() == [90, 10, 1]


# ------------------------------------------------------------------ capacity (runtime) mode
@pytest.mark.parametrize("kind", ["grouped", "scalar", "join"])
@pytest.mark.parametrize("frac", [0.001, 0.05, 0.4, 0.9])
def test_capacity_mode_never_exceeds_capacity(kind, frac):
    rng = np.random.default_rng(int(frac * 1000))
    lanes = 600
    bl = Backlog(
        lane_query=rng.integers(0, 2, lanes),
        lane_source=rng.integers(0, 2, lanes),
        count=rng.integers(0, 40, lanes),
        tuple_sic=np.full(lanes, 1e-3),
        query_sic=np.zeros(2),
        lane_group=rng.integers(0, 120, lanes),
        cost=rng.choice([1.0, 2.5], lanes),
        stats={"mean": rng.uniform(1, 5, lanes), "var": rng.uniform(0, 2, lanes)},
    )
    cap = frac * bl.total_cost
    cod = CoD(kind=kind, seed=7)
    adm = cod.decide(bl, cap)
    assert adm.kept_cost(bl) <= cap + 1e-9
    assert np.all((adm.keep >= 0) & (adm.keep <= bl.count))
    assert cod.last_report.shed_fraction == pytest.approx(1 - frac)


@pytest.mark.parametrize("kind", ["grouped", "scalar", "join"])
def test_capacity_mode_admits_all_when_it_fits(kind):
    bl = Backlog(
        lane_query=[0, 0], lane_source=[0, 1], count=[5, 7], tuple_sic=[0.1, 0.1],
        query_sic=[0.0], lane_group=[3, 3],
    )  # fmt: skip
    assert CoD(kind=kind).decide(bl, 12.0).keep.tolist() == [5, 7]


def test_capacity_mode_fills_and_keeps_groups_when_possible():
    f = zipf_window(200, 50_000, seed=6)
    bl = grouped_backlog(f)
    cod = CoD(kind="grouped", seed=0)
    keep = cod.decide(bl, 5000.0).keep
    assert keep.sum() == 5000 and cod.last_report.missing_groups == 0


# ------------------------------------------------------------------ CD-U4 joins
def join_backlog(keys_a, keys_b):
    ka, ca = np.unique(keys_a, return_counts=True)
    kb, cb = np.unique(keys_b, return_counts=True)
    return Backlog(
        lane_query=np.zeros(ka.size + kb.size, int),
        lane_source=np.r_[np.zeros(ka.size, int), np.ones(kb.size, int)],
        count=np.r_[ca, cb],
        tuple_sic=np.full(ka.size + kb.size, 1e-4),
        query_sic=[0.0],
        lane_group=np.r_[ka, kb],
    )


def test_cd_u4_join_keeps_only_the_key_intersection_within_budgets():
    rng = np.random.default_rng(8)
    a = rng.integers(0, 600, 20_000)  # keys 0..599
    b = rng.integers(400, 1000, 8_000)  # keys 400..999: intersection 400..599
    bl = join_backlog(a, b)
    cod = CoD(kind="join", b=0.9, seed=1)
    keep = cod.decide(bl, 0.0).keep
    inter = (bl.lane_group >= 400) & (bl.lane_group < 600)
    assert keep[~inter].sum() == 0  # nothing outside the intersection
    src = bl.lane_source
    assert keep[src == 0].sum() <= int(0.1 * 20_000)  # per-stream budgets
    assert keep[src == 1].sum() <= int(0.1 * 8_000)
    assert np.all(keep[inter] >= 1)  # every joinable key on both streams
    rep = cod.last_report
    assert rep.n_groups == 200 and rep.missing_groups == 0
    assert rep.outside_intersection == int(bl.count[~inter].sum())


def test_join_over_budget_modes():
    a = np.arange(500).repeat(2)  # 500 keys, 2 tuples each
    b = np.arange(500)
    bl = join_backlog(a, b)
    smallest = CoD(kind="join", b=0.9, seed=0)
    keep = smallest.decide(bl, 0.0).keep
    src = bl.lane_source
    assert keep[src == 0].sum() <= 100 and keep[src == 1].sum() <= 50
    kept_a = set(bl.lane_group[(src == 0) & (keep > 0)].tolist())
    kept_b = set(bl.lane_group[(src == 1) & (keep > 0)].tolist())
    assert kept_a == kept_b  # a key is kept on both streams or on none
    assert smallest.last_report.missing_groups == 500 - len(kept_a)
    keep_all = CoD(kind="join", b=0.9, over_budget="keep-all").decide(bl, 0.0).keep
    assert np.all(keep_all >= 1)
    assert keep_all[src == 0].sum() <= 100 + 500 and keep_all[src == 1].sum() <= 50 + 500


def test_join_capacity_mode_fills_only_joinable_lanes():
    bl = join_backlog(np.r_[np.zeros(100, int), np.ones(100, int)], np.ones(50, int))
    keep = CoD(kind="join").decide(bl, 140.0).keep
    assert keep[bl.lane_group == 0].sum() == 0
    assert keep.sum() == 140


def test_join_needs_lane_group():
    bl = Backlog(lane_query=[0], lane_source=[0], count=[5], tuple_sic=[0.1], query_sic=[0.0])
    with pytest.raises(ConfigError, match="kind='join' needs Backlog.lane_group"):
        CoD(kind="join", b=0.5).decide(bl, 1.0)


# ------------------------------------------------------------------ scalar
def test_scalar_single_query_equals_uniform_volume():
    bl = Backlog(
        lane_query=[0], lane_source=[0], count=[46_000], tuple_sic=[1 / 46_000],
        query_sic=[0.0], stats={"mean": [600.0], "var": [300_000.0]},
    )  # fmt: skip
    for b in (0.99, 0.98, 0.9, 0.5):
        assert CoD(kind="scalar", b=b).decide(bl, 0.0).keep.sum() == int(round((1 - b) * 46_000))


def test_scalar_allocation_equalises_relative_standard_error():
    n, cv2 = np.array([50_000.0, 20_000.0, 80_000.0]), np.array([0.5, 2.0, 0.1])
    k = scalar_allocation(n, cv2, 3000)
    assert k.sum() == 3000
    rse = np.sqrt(cv2 * (1 / k - 1 / n))
    assert rse.max() / rse.min() < 1.05


def test_scalar_lanes_and_target_error():
    bl = Backlog(
        lane_query=[0, 0, 1], lane_source=[0, 1, 0], count=[30_000, 10_000, 40_000],
        tuple_sic=[1e-5] * 3, query_sic=[0.0, 0.0],
        stats={"mean": [10.0, 10.0, 5.0], "var": [1.0, 1.0, 0.0]},
    )  # fmt: skip
    keep = CoD(kind="scalar", b=0.9).decide(bl, 0.0).keep
    assert keep[2] == 1  # constant values: one tuple gives the exact mean
    assert keep[:2].sum() == 8000 - 1 and keep[0] == pytest.approx(3 * keep[1], abs=1)
    # A loose accuracy target keeps far less than the budget: n0 = (1.96·0.1/0.05)² ≈ 15.4.
    few = CoD(kind="scalar", b=0.9, target_error=0.05).decide(bl, 0.0).keep
    assert few[:2].sum() == 16


def test_scalar_without_stats_or_with_zero_mean():
    bl = Backlog(
        lane_query=[0, 1], lane_source=[0, 0], count=[1000, 1000], tuple_sic=[1e-3] * 2,
        query_sic=[0.0, 0.0],
    )  # fmt: skip
    assert CoD(kind="scalar", b=0.9).decide(bl, 0.0).keep.tolist() == [100, 100]
    zero = Backlog(
        lane_query=[0, 1], lane_source=[0, 0], count=[1000, 1000], tuple_sic=[1e-3] * 2,
        query_sic=[0.0, 0.0], stats={"mean": [0.0, 3.0], "var": [1.0, 1.0]},
    )  # fmt: skip
    keep = CoD(kind="scalar", b=0.9).decide(zero, 0.0).keep
    assert keep[0] > keep[1]  # a zero mean has unbounded relative error: it gets the most


# ------------------------------------------------------------------ determinism, config
def test_same_seed_same_decisions_and_restore():
    f = zipf_window(800, 40_000, seed=9)
    bl = grouped_backlog(f, n_sources=2)
    a, b = CoD(b=0.95, seed=4), CoD(b=0.95, seed=4)
    assert [a.decide(bl, 0).keep.tolist() for _ in range(2)] == [
        b.decide(bl, 0).keep.tolist() for _ in range(2)
    ]
    snap = a.snapshot()
    nxt = a.decide(bl, 0).keep.tolist()
    a.restore(snap)
    assert a.last_report is None
    assert a.decide(bl, 0).keep.tolist() == nxt


def test_window_backlog_builds_the_concept():
    keys = np.array([7, 7, 3, 7, 3, 9])
    vals = np.array([1.0, 2.0, 3.0, 3.0, 5.0, 9.0])
    bl, lane = window_backlog(keys, vals)
    assert bl.lane_group.tolist() == [3, 7, 9] and bl.count.tolist() == [2, 3, 1]
    assert bl.stats["mean"].tolist() == [4.0, 2.0, 9.0]
    assert np.array_equal(bl.lane_group[lane], keys)
    two, lane2 = window_backlog(keys, vals, streams=np.array([0, 1, 0, 0, 1, 1]))
    assert two.count.sum() == 6 and np.array_equal(two.lane_group[lane2], keys)
    with pytest.raises(ConfigError, match="streams must have one entry per key"):
        window_backlog(keys, vals, streams=np.array([0, 1]))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"kind": "median"}, UnknownNameError, "kind must be one of grouped, scalar, join"),
        ({"allocation": "neyman"}, UnknownNameError, "allocation must be one of equal"),
        ({"over_budget": "drop"}, UnknownNameError, "over_budget must be one of smallest-first"),
        ({"n_min": 0}, ConfigError, "n_min must be an int >= 1"),
        ({"target_error": 1.5}, ConfigError, "target_error must be a relative error in"),
        ({"confidence": 1.0}, ConfigError, "confidence must be in \\(0, 1\\)"),
        ({"b": 2.0}, ConfigError, "b is the fraction of tuples shed"),
    ],
)
def test_config_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        CoDConfig(**kwargs)
