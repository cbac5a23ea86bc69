"""Random shedding (THEMIS baseline): uniform subsets, first-fit with unequal costs, blindness."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from spillway.policies.base import Backlog
from spillway.policies.random_shed import RandomShedding, random_fill


def first_fit_distribution(counts, costs, capacity):
    """Exact law of random-order first fit, by enumerating every order of the tuples."""
    tuples = [lane for lane, n in enumerate(counts) for _ in range(n)]
    orders = set(itertools.permutations(tuples))
    law: Counter = Counter()
    for order in orders:
        left, keep = capacity, [0] * len(counts)
        for lane in order:
            if costs[lane] <= left:
                keep[lane] += 1
                left -= costs[lane]
        law[tuple(keep)] += 1
    return {k: v / len(orders) for k, v in law.items()}


def assert_matches(law, draws):
    """Every outcome's frequency within 4.5 binomial standard deviations of its probability."""
    n = sum(draws.values())
    assert set(draws) <= set(law)
    for outcome, p in law.items():
        sd = math.sqrt(p * (1 - p) / n)
        assert abs(draws.get(outcome, 0) / n - p) <= 4.5 * sd + 1e-9, outcome


@pytest.mark.parametrize(
    ("counts", "costs", "capacity"),
    [
        ([2, 2], [1.0, 1.0], 2.0),  # hypergeometric: (1, 1) with probability 2/3
        ([3, 3], [1.0, 3.0], 5.0),  # all cheap tuples first (1/20) leaves no room for a big one
        ([2, 2, 2], [1.0, 2.0, 3.5], 6.0),
    ],
)
def test_random_fill_follows_random_order_first_fit(counts, costs, capacity):
    rng = np.random.default_rng(0)
    draws = Counter(
        tuple(int(x) for x in random_fill(np.array(counts), np.array(costs), capacity, rng))
        for _ in range(6000)
    )
    assert_matches(first_fit_distribution(counts, costs, capacity), draws)


def test_equal_costs_keep_lanes_in_proportion_to_their_counts():
    counts = np.array([100, 300, 600])
    rng = np.random.default_rng(1)
    keeps = np.array([random_fill(counts, np.ones(3), 500, rng) for _ in range(400)])
    assert (keeps.sum(axis=1) == 500).all()
    assert keeps.mean(axis=0) == pytest.approx([50, 150, 300], rel=0.03)


def test_unequal_costs_fill_capacity_at_scale():
    rng = np.random.default_rng(2)
    counts = rng.integers(1, 200, 5000)
    costs = np.repeat(rng.uniform(0.5, 2.0, 250), 20)
    cap = float((counts * costs).sum() / 3)
    keep = random_fill(counts, costs, cap, rng)
    left = cap - float((keep * costs).sum())
    assert left >= 0 and not ((counts > keep) & (costs <= left)).any()


def test_random_shedding_is_blind_to_sic():
    kw = dict(lane_query=[0, 0, 1], lane_source=[0, 1, 0], count=[10, 20, 30])
    low = Backlog(tuple_sic=[0.01, 0.01, 0.01], query_sic=[0.0, 0.0], **kw)
    high = Backlog(tuple_sic=[0.3, 0.001, 0.05], query_sic=[0.9, 0.0], **kw)
    for seed in range(5):
        a = RandomShedding(seed=seed).decide(low, 25).keep
        b = RandomShedding(seed=seed).decide(high, 25).keep
        assert np.array_equal(a, b) and a.sum() == 25
