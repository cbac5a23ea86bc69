"""Window concepts, drift measures and CoD's error metrics (spillway.quality.concept)."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.quality.concept import (
    concept_distance,
    concept_overlap,
    drift_series,
    group_stats,
    grouped_error,
    join_frequencies,
    relative_error,
    scalar_concept,
    top_k_by_mean,
)


def test_group_stats_dense_and_sparse_paths_agree():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50, 5000)
    vals = rng.normal(10, 2, 5000)
    dense = group_stats(keys, vals)
    sparse = group_stats(keys * 10**12 + 5, vals)  # far beyond the dense limit: np.unique path
    assert np.array_equal(dense.count, sparse.count)
    assert np.allclose(dense.mean, sparse.mean) and np.allclose(dense.var, sparse.var)
    for j, k in enumerate(dense.keys):
        sel = vals[keys == k]
        assert dense.mean[j] == pytest.approx(sel.mean())
        assert dense.var[j] == pytest.approx(sel.var())
    assert np.array_equal(dense.keys[dense.inverse], keys)
    neg = group_stats(np.array([-3, 2, -3]))
    assert neg.keys.tolist() == [-3, 2] and neg.count.tolist() == [2, 1]


def test_group_stats_empty_and_errors():
    empty = group_stats(np.zeros(0, int), np.zeros(0))
    assert empty.n_groups == 0
    with pytest.raises(ConfigError, match="keys must be integers"):
        group_stats(np.array([1.5, 2.0]))
    with pytest.raises(ConfigError, match="keys must be one-dimensional"):
        group_stats(np.zeros((2, 2), int))
    with pytest.raises(ConfigError, match="values must have one entry per key"):
        group_stats(np.array([1, 2, 3]), np.array([1.0]))


def test_scalar_concept_and_cv2():
    c = scalar_concept(np.array([1.0, 3.0, 5.0]))
    assert (c.n, c.mean) == (3, 3.0) and c.var == pytest.approx(8 / 3)
    assert scalar_concept([]).n == 0
    assert scalar_concept([0.0, 0.0]).cv2 == 0.0
    assert scalar_concept([-1.0, 1.0]).cv2 == float("inf")


def test_join_frequencies():
    j = join_frequencies(np.array([1, 1, 2, 3, 3, 3]), np.array([3, 4, 1, 1]))
    assert j.keys.tolist() == [1, 3]
    assert j.count_a.tolist() == [2, 3] and j.count_b.tolist() == [2, 1]
    assert (j.outside_a, j.outside_b) == (1, 1) and j.join_size == 7


def test_top_k_by_mean_ties_and_short_windows():
    keys = np.array([5, 4, 3, 2, 1])
    vals = np.array([1.0, 1.0, 2.0, 2.0, 0.5])
    assert top_k_by_mean(keys, vals, 3).tolist() == [2, 3, 4]
    assert top_k_by_mean(keys, vals, 10).tolist() == [2, 3, 4, 5, 1]
    with pytest.raises(ConfigError, match="k must be an int >= 1"):
        top_k_by_mean(keys, vals, 0)


def test_distance_and_overlap():
    a, b = np.arange(10), np.r_[np.arange(7), [20, 21, 22]]
    assert concept_distance(a, b) == pytest.approx(0.3)
    assert concept_overlap(a, b) == pytest.approx(0.7)
    assert concept_distance(a, a) == 0.0 and concept_overlap(a, [99]) == 0.0
    with pytest.raises(ConfigError, match="prev concept is empty"):
        concept_overlap([], [1])


def test_drift_series():
    d = drift_series([[1, 2, 3, 4], [1, 2, 3, 5], [6, 7, 8, 9]])
    assert d.distance.tolist() == [0.25, 1.0] and d.overlap.tolist() == [0.75, 0.0]
    assert d.distance_max == 1.0 and d.distance_mean == 0.625 and d.overlap_mean == 0.375
    one = drift_series([[1]])
    assert one.distance.size == 0 and np.isnan(one.distance_mean)


def test_relative_error_cases():
    assert relative_error(10.0, 11.0) == pytest.approx(0.1)
    assert relative_error(-10.0, -9.0) == pytest.approx(0.1)
    assert relative_error(10.0, 100.0) == 1.0  # clipped to CoD's codomain [0, 1]
    assert relative_error(10.0, None) == 1.0 and relative_error(10.0, float("nan")) == 1.0
    assert relative_error(0.0, 0.0) == 0.0 and relative_error(0.0, 1e-9) == 1.0


def test_grouped_error_missing_groups_count_fully():
    exact = group_stats(np.array([1, 1, 2, 3, 4]), np.array([10.0, 10.0, 5.0, 0.0, 8.0]))
    e = grouped_error(exact, np.array([1, 3, 4, 77]), np.array([11.0, 0.0, 40.0, 1.0]))
    # group 1: 0.1; group 2 missing: 1; group 3 (exact 0, est 0): 0; group 4: clipped 1.
    assert e.per_group.tolist() == pytest.approx([0.1, 1.0, 0.0, 1.0])
    assert e.missing == 1 and e.n_groups == 4 and e.mean == pytest.approx(2.1 / 4)
    nothing = grouped_error(exact, np.zeros(0, int), np.zeros(0))
    assert nothing.mean == 1.0 and nothing.missing == 4
    empty = grouped_error(group_stats(np.zeros(0, int)), np.array([1]), np.array([1.0]))
    assert empty.mean == 0.0 and empty.n_groups == 0
    with pytest.raises(ConfigError, match="est_keys and est_means must have the same length"):
        grouped_error(exact, np.array([1, 2]), np.array([1.0]))
