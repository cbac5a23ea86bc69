"""Groups a bounded sample never saw: the estimate against counts drawn from known groups."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.quality.unseen import sample_coverage, unseen_groups


def _sample(rng: np.random.Generator, weights: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """Sample counts of the groups seen in ``n`` draws, and how many groups were not seen."""
    draws = rng.choice(weights.size, size=n, p=weights / weights.sum())
    counts = np.bincount(draws, minlength=weights.size)
    return counts[counts > 0], int((counts == 0).sum())


@pytest.mark.parametrize(
    "weights",
    [np.ones(20_000), np.random.default_rng(1).lognormal(0.0, 0.5, 20_000)],
    ids=["equal", "lognormal"],
)
def test_the_estimate_is_within_a_tenth_of_the_groups_really_unseen(weights):
    counts, truth = _sample(np.random.default_rng(2), weights, 40_000)
    assert truth > 1_000
    assert unseen_groups(counts) == pytest.approx(truth, rel=0.1)


def test_coverage_is_the_share_of_draws_whose_group_was_seen():
    weights = np.ones(20_000)
    rng = np.random.default_rng(3)
    counts, truth = _sample(rng, weights, 40_000)
    seen_share = 1 - truth / weights.size  # equal weights: the unseen groups' share
    assert sample_coverage(counts) == pytest.approx(seen_share, abs=0.02)


def test_a_complete_sample_and_a_sample_without_singletons_leave_nothing_unseen():
    assert unseen_groups([1, 1, 5], complete=True) == 0.0
    assert unseen_groups([2, 2, 3]) == 0.0


@pytest.mark.parametrize(
    ("counts", "match"),
    [([[1, 2]], "1-d sequence of integers"), ([1.5, 2.0], "1-d sequence of integers"),
     ([3, 0], "must be >= 1")],
)  # fmt: skip
def test_bad_counts_are_refused(counts, match):
    with pytest.raises(ConfigError, match=match):
        unseen_groups(counts)
