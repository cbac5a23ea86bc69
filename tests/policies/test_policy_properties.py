"""Hypothesis property tests of every registered policy, and of BALANCE-SIC's fast mode."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.policies import POLICIES, make_policy
from spillway.policies.balance_sic import balance_sic_exact, balance_sic_fast, random_tie_break
from spillway.policies.base import Backlog
from tests.policies.backlogs import nothing_else_fits, query_sic, random_backlog, within_capacity

FAST = settings(max_examples=120, deadline=None)


@st.composite
def backlogs(draw, costs: bool | None = None) -> Backlog:
    """Small backlogs with awkward values: zero SIC, empty lanes, equal and unequal costs."""
    n_queries = draw(st.integers(1, 5))
    n_lanes = draw(st.integers(0, 10))
    q = draw(st.lists(st.integers(0, n_queries - 1), min_size=n_lanes, max_size=n_lanes))
    count = draw(st.lists(st.integers(0, 40), min_size=n_lanes, max_size=n_lanes))
    sic_values = st.one_of(st.just(0.0), st.floats(1e-4, 0.3), st.sampled_from([0.05, 0.1]))
    sic = draw(st.lists(sic_values, min_size=n_lanes, max_size=n_lanes))
    base = draw(st.lists(st.floats(0.0, 1.0), min_size=n_queries, max_size=n_queries))
    with_cost = draw(st.booleans()) if costs is None else costs
    cost = None
    if with_cost:
        cost = draw(st.lists(st.floats(0.1, 5.0), min_size=n_lanes, max_size=n_lanes))
    return Backlog(
        lane_query=q,
        lane_source=list(range(n_lanes)),
        count=count,
        tuple_sic=sic,
        query_sic=base,
        cost=cost,
    )


@FAST
@given(
    b=backlogs(),
    share=st.floats(0.0, 1.5),
    name=st.sampled_from(sorted(POLICIES)),
    seed=st.integers(0, 2**31),
)
def test_never_admits_more_than_capacity_or_backlog(b, share, name, seed):
    cap = b.total_cost * share
    adm = make_policy(name, seed=seed).decide(b, cap)
    assert (adm.keep >= 0).all() and (adm.keep <= b.count).all()
    assert within_capacity(adm, b, cap)
    assert nothing_else_fits(adm, b, cap)
    if cap >= b.total_cost:
        assert np.array_equal(adm.keep, b.count)


@FAST
@given(b=backlogs(), extra=st.floats(0.0, 3.0), name=st.sampled_from(sorted(POLICIES)))
def test_admits_everything_when_capacity_suffices(b, extra, name):
    assert np.array_equal(make_policy(name).decide(b, b.total_cost + extra).keep, b.count)


@FAST
@given(
    b=backlogs(costs=False),
    small=st.floats(0.0, 1.0),
    more=st.floats(0.0, 1.0),
    mode=st.sampled_from(["fast", "exact"]),
    seed=st.integers(0, 1000),
)
def test_more_capacity_never_lowers_the_minimum_query_sic(b, small, more, mode, seed):
    if b.n_lanes == 0:
        return
    low = b.total_cost * small
    high = low + (b.total_cost - low) * more
    lo = query_sic(b, make_policy("balance-sic", seed=seed, mode=mode).decide(b, low).keep)
    hi = query_sic(b, make_policy("balance-sic", seed=seed, mode=mode).decide(b, high).keep)
    assert hi.min() >= lo.min() - 1e-12


@FAST
@given(
    n_queries=st.integers(1, 8),
    n_sources=st.integers(1, 4),
    costs=st.booleans(),
    share=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_fast_mode_matches_exact_mode(n_queries, n_sources, costs, share, seed):
    # Generic values (no exact ties): same total, each query within one of its own tuples.
    rng = np.random.default_rng(seed)
    b = random_backlog(rng, n_queries, n_sources, costs=costs)
    cap = b.total_cost * share
    exact = balance_sic_exact(b, cap, choose=random_tie_break(np.random.default_rng(seed)))
    fast = balance_sic_fast(b, cap, rng=np.random.default_rng(seed))
    grain = np.zeros(b.n_queries)
    np.maximum.at(grain, b.lane_query, np.where(b.count > 0, b.tuple_sic, 0.0))
    assert (np.abs(query_sic(b, exact) - query_sic(b, fast)) <= grain + 1e-12).all()
    if not costs:
        assert exact.sum() == fast.sum() == min(int(cap), b.total_count)
