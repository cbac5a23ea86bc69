"""The contract every registered policy keeps (spillway.policies docstring), run over POLICIES."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.policies import POLICIES, make_policy
from spillway.policies.base import Backlog
from tests.policies.backlogs import nothing_else_fits, random_backlog, within_capacity

NAMES = sorted(POLICIES)


def tied_backlog(scale: int = 1) -> Backlog:
    """Identical queries at the same SIC: every decision needs the random generator."""
    return Backlog(
        lane_query=np.repeat(np.arange(6), 2),
        lane_source=np.tile(np.arange(2), 6),
        count=np.full(12, 7 * scale),
        tuple_sic=np.full(12, 0.01),
        query_sic=np.zeros(6),
    )


@pytest.mark.parametrize("name", NAMES)
def test_registry_name_matches_class(name):
    assert POLICIES[name].name == name


@pytest.mark.parametrize("name", NAMES)
def test_config_round_trips_through_asdict(name):
    policy = make_policy(name, seed=5)
    cfg = policy.config
    as_dict = dataclasses.asdict(cfg)
    assert as_dict["seed"] == 5
    assert type(cfg)(**as_dict) == cfg
    assert make_policy(name, **as_dict).config == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 6  # type: ignore[misc]


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_restore_gives_identical_next_decisions(name):
    policy = make_policy(name, seed=11)
    policy.decide(tied_backlog(), 20)
    snap = pickle.loads(pickle.dumps(policy.snapshot()))
    first = [policy.decide(tied_backlog(), c).keep for c in (13, 29, 41)]
    policy.restore(snap)
    again = [policy.decide(tied_backlog(), c).keep for c in (13, 29, 41)]
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_decisions_different_seed_differs(name):
    rng = np.random.default_rng(3)
    backlogs = [random_backlog(rng, 5, 3) for _ in range(4)] + [tied_backlog()] * 4
    caps = [b.total_cost / 3 for b in backlogs]
    a, b, other = make_policy(name, seed=1), make_policy(name, seed=1), make_policy(name, seed=2)
    runs = [[p.decide(x, c).keep for x, c in zip(backlogs, caps, strict=True)] for p in (a, b)]
    assert all(np.array_equal(x, y) for x, y in zip(*runs, strict=True))
    third = [other.decide(x, c).keep for x, c in zip(backlogs, caps, strict=True)]
    assert not all(np.array_equal(x, y) for x, y in zip(runs[0], third, strict=True))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("costs", [False, True])
def test_keep_within_counts_and_capacity_and_fills_it(name, costs):
    rng = np.random.default_rng(7)
    policy = make_policy(name, seed=0)
    for _ in range(60):
        b = random_backlog(
            rng, int(rng.integers(1, 6)), int(rng.integers(1, 4)), costs=costs, zero_sic=True
        )
        cap = float(rng.uniform(0, b.total_cost))
        adm = policy.decide(b, cap)
        assert adm.keep.shape == b.count.shape and adm.keep.dtype == np.int64
        assert (adm.keep >= 0).all() and (adm.keep <= b.count).all()
        assert within_capacity(adm, b, cap)
        assert nothing_else_fits(adm, b, cap)


@pytest.mark.parametrize("name", NAMES)
def test_admits_everything_when_capacity_suffices(name):
    rng = np.random.default_rng(8)
    policy = make_policy(name, seed=0)
    for costs in (False, True):
        b = random_backlog(rng, 4, 3, costs=costs)
        for cap in (b.total_cost, b.total_cost * 2, b.total_cost + 1):
            assert np.array_equal(policy.decide(b, cap).keep, b.count)


@pytest.mark.parametrize("name", NAMES)
def test_zero_capacity_and_empty_backlog(name):
    policy = make_policy(name, seed=0)
    b = tied_backlog()
    assert policy.decide(b, 0).keep.sum() == 0
    assert policy.decide(b, 0.5).keep.sum() == 0  # no whole tuple fits
    empty = Backlog(lane_query=[], lane_source=[], count=[], tuple_sic=[], query_sic=[0.0])
    assert policy.decide(empty, 10).keep.shape == (0,)


@pytest.mark.parametrize("name", NAMES)
def test_shedding_grows_with_load(name):
    policy = make_policy(name, seed=0)
    shed, kept_fraction = [], []
    for scale in (1, 2, 4, 8):
        b = tied_backlog(scale)
        keep = policy.decide(b, 60).keep
        shed.append(int((b.count - keep).sum()))
        kept_fraction.append(keep.sum() / b.total_count)
    assert shed == sorted(shed) and shed[-1] > shed[0]
    assert kept_fraction == sorted(kept_fraction, reverse=True)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("capacity", [-1, float("nan"), float("inf")])
def test_bad_capacity_is_refused(name, capacity):
    with pytest.raises(ConfigError, match="capacity must be a finite number >= 0"):
        make_policy(name).decide(tied_backlog(), capacity)


@pytest.mark.parametrize("name", NAMES)
def test_bad_seed_is_refused(name):
    with pytest.raises(ConfigError, match="seed must be a non-negative int"):
        make_policy(name, seed=-1)
