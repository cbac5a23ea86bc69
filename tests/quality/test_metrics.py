"""Tests of fairness, spread and error metrics (spillway.quality.metrics)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality.metrics import (
    covariance_error,
    jain_index,
    mean_absolute_relative_error,
    sic_spread,
    spearman_rho,
    topk_distance,
)

sic_lists = st.lists(st.floats(0.0, 1.5, allow_nan=False), min_size=1, max_size=40)

# --- Jain's index (THEMIS §5, §7.2) ----------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_jain_equal_values_is_one_and_single_nonzero_is_one_over_n(n: int) -> None:
    assert jain_index(np.full(n, 0.37)) == pytest.approx(1.0)
    one_hot = np.zeros(n)
    one_hot[n // 2] = 0.8
    assert jain_index(one_hot) == pytest.approx(1.0 / n)


def test_jain_themis_fig3_final_state() -> None:
    # THEMIS Fig. 3 as printed: {0.1, 0.1, 0.1, 0.1333}; digest: Jain = 0.98256.
    assert jain_index([0.1, 0.1, 0.1, 0.4 / 3]) == pytest.approx(0.98256, abs=5e-6)


@settings(max_examples=200, deadline=None)
@given(sic_lists)
def test_jain_is_between_one_over_n_and_one(values: list[float]) -> None:
    j = jain_index(values)
    assert 1.0 / len(values) - 1e-12 <= j <= 1.0 + 1e-12


@settings(max_examples=200, deadline=None)
@given(sic_lists, st.floats(1e-3, 1e3))
def test_jain_is_scale_invariant(values: list[float], factor: float) -> None:
    x = np.array(values)
    assume(x.max() > 1e-6)
    assert jain_index(x * factor) == pytest.approx(jain_index(x), rel=1e-9)


def test_jain_conventions_for_all_zero_and_empty() -> None:
    assert jain_index([0.0, 0.0, 0.0]) == 1.0
    assert np.isnan(jain_index([]))
    assert jain_index(0.4) == 1.0


def test_jain_along_an_axis() -> None:
    x = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert jain_index(x).tolist() == pytest.approx([1.0, 1 / 3, 1.0])
    assert jain_index(x, axis=0).tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3])
    no_queries = jain_index(np.zeros((4, 0)))
    assert no_queries.shape == (4,) and np.isnan(no_queries).all()


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([0.5, -0.1], "Jain's index needs values >= 0"),
        ([0.5, float("nan")], "values must be finite numbers"),
        ([float("inf")], "values must be finite numbers"),
    ],
)
def test_jain_rejects_bad_values(values: list[float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        jain_index(values)


# --- SIC spread -------------------------------------------------------------------------------


def test_sic_spread_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    x = rng.random(101)
    s = sic_spread(x)
    q05, q25, q75, q95 = np.quantile(x, [0.05, 0.25, 0.75, 0.95])
    assert s.n == 101
    assert s.mean == pytest.approx(x.mean())
    assert s.std == pytest.approx(x.std(ddof=0))
    assert s.iqr == pytest.approx(q75 - q25)
    assert s.range_90 == pytest.approx(q95 - q05)
    assert s.jain == pytest.approx(x.sum() ** 2 / (x.size * (x**2).sum()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.mean = 0.0  # type: ignore[misc]


def test_sic_spread_of_equal_and_empty_values() -> None:
    s = sic_spread([0.3] * 5)
    assert (s.std, s.iqr, s.range_90, s.jain) == (0.0, 0.0, 0.0, 1.0)
    empty = sic_spread([])
    assert empty.n == 0 and all(np.isnan([empty.mean, empty.std, empty.iqr, empty.jain]))


def test_sic_spread_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match=r"sic_spread needs a 1-D array of query SIC"):
        sic_spread([[0.1, 0.2]])
    with pytest.raises(ConfigError, match="values must be finite numbers"):
        sic_spread([0.1, float("nan")])
    with pytest.raises(ConfigError, match="Jain's index needs values >= 0"):
        sic_spread([0.1, -0.2])


# --- Mean absolute relative error -------------------------------------------------------------


def test_mare_basic_and_guards() -> None:
    assert mean_absolute_relative_error([9.0, 22.0], [10.0, 20.0]) == pytest.approx(0.1)
    assert mean_absolute_relative_error([-5.0], [-10.0]) == pytest.approx(0.5)
    # exact == 0: 0 if the degraded result is 0 too, else zero_error.
    assert mean_absolute_relative_error([0.0, 3.0], [0.0, 0.0]) == pytest.approx(0.5)
    assert mean_absolute_relative_error([3.0], [0.0], zero_error=0.25) == 0.25
    # A missing degraded result (NaN) costs missing_error.
    assert mean_absolute_relative_error([np.nan, 10.0], [4.0, 10.0]) == pytest.approx(0.5)
    assert mean_absolute_relative_error([np.nan], [4.0], missing_error=2.0) == 2.0
    assert np.isnan(mean_absolute_relative_error([], []))


def test_mare_count_error_is_one_minus_kept_fraction() -> None:
    # A degraded COUNT that kept a fraction f of its tuples errs by 1 - f (THEMIS Fig. 6 shape).
    exact = np.array([400.0, 380.0, 410.0])
    for f in (0.1, 0.5, 0.9):
        assert mean_absolute_relative_error(exact * f, exact) == pytest.approx(1 - f)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([1.0, 2.0], [1.0]), {}, "approx and exact must have one shape"),
        (([1.0], [np.nan]), {}, "exact must be finite numbers"),
        (([np.inf], [1.0]), {}, "approx must be finite numbers"),
        (([1.0], [1.0]), {"zero_error": -1.0}, "zero_error must be a finite number >= 0"),
        (([1.0], [1.0]), {"missing_error": np.nan}, "missing_error must be a finite number >= 0"),
    ],
)
def test_mare_errors(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        mean_absolute_relative_error(*args, **kwargs)


# --- Top-k distance ---------------------------------------------------------------------------


def _fagin_k_p(a: list[int], b: list[int], p: float) -> float:
    """K^(p) written case by case from Fagin, Kumar and Sivakumar (SODA 2003), §3.1."""
    total = 0.0
    for i, j in itertools.combinations(sorted(set(a) | set(b)), 2):
        ia, ja, ib, jb = i in a, j in a, i in b, j in b
        if ia and ja and ib and jb:  # case 1
            total += (a.index(i) < a.index(j)) != (b.index(i) < b.index(j))
        elif ia and ja and (ib != jb):  # case 2, both in a
            present = i if ib else j
            other = j if present == i else i
            total += a.index(other) < a.index(present)
        elif ib and jb and (ia != ja):  # case 2, both in b
            present = i if ia else j
            other = j if present == i else i
            total += b.index(other) < b.index(present)
        elif (ia and jb and not ib and not ja) or (ib and ja and not ia and not jb):  # case 3
            total += 1
        else:  # case 4: both in one list, neither in the other
            total += p
    return total


topk_lists = st.lists(st.integers(0, 9), min_size=0, max_size=6, unique=True)


@settings(max_examples=300, deadline=None)
@given(topk_lists, topk_lists, st.sampled_from([0.0, 0.5, 1.0]))
def test_topk_distance_matches_fagin_definition_for_equal_lengths(
    a: list[int], b: list[int], p: float
) -> None:
    k = min(len(a), len(b))
    a, b = a[:k], b[:k]
    d = topk_distance(a, b, p=p)
    if k == 0:
        assert d == 0.0
    else:
        assert d == pytest.approx(_fagin_k_p(a, b, p) / (k * k + p * k * (k - 1)))


@settings(max_examples=300, deadline=None)
@given(topk_lists, topk_lists, st.floats(0.0, 1.0))
def test_topk_distance_properties(a: list[int], b: list[int], p: float) -> None:
    d = topk_distance(a, b, p=p)
    assert d == topk_distance(b, a, p=p)  # symmetric
    assert 0.0 <= d <= 1.0 + 1e-12
    assert (d == 0.0) == (a == b)  # zero iff equal lists
    if a and b and not set(a) & set(b) and len(a) == len(b):
        assert d == pytest.approx(1.0)  # disjoint lists are maximally far apart


def test_topk_distance_examples() -> None:
    assert topk_distance([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == 1.0
    assert topk_distance(["a", "b"], ["b", "a"]) == pytest.approx(1 / (4 + 0.5 * 2))
    # A degraded result with fewer rows: the missing row counts as a wrong one.
    assert topk_distance([1, 2, 3], [1, 2]) > 0
    assert topk_distance([1], []) == 1.0
    assert topk_distance([], []) == 0.0


def test_topk_distance_errors() -> None:
    for p in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ConfigError, match=r"p must be a number in \[0, 1\]"):
            topk_distance([1], [2], p=p)
    with pytest.raises(ConfigError, match="top-k list a repeats an element"):
        topk_distance([1, 1], [2, 3])
    with pytest.raises(ConfigError, match="top-k list b repeats an element"):
        topk_distance([1, 2], [3, 3])


# --- Covariance error -------------------------------------------------------------------------


def test_covariance_error_is_rms_around_the_exact_value() -> None:
    degraded = np.array([1.0, 2.0, 4.0])
    exact = np.array([2.0, 2.0, 2.0])
    assert covariance_error(degraded, exact) == pytest.approx(np.sqrt((1 + 0 + 4) / 3))
    # A constant bias counts, unlike np.std of the degraded values.
    assert covariance_error([3.0, 3.0], 2.0) == pytest.approx(1.0)
    assert covariance_error([3.0, 3.0], 2.0, relative=True) == pytest.approx(0.5)
    assert covariance_error([2.0, np.nan], [2.0, 5.0]) == 0.0
    assert np.isnan(covariance_error([np.nan], [1.0]))


def test_covariance_error_errors() -> None:
    with pytest.raises(ConfigError, match="degraded and exact must have one shape"):
        covariance_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match="exact must be finite numbers"):
        covariance_error([1.0], [np.nan])
    with pytest.raises(ConfigError, match="degraded must be finite numbers"):
        covariance_error([np.inf], [1.0])
    with pytest.raises(ConfigError, match="relative covariance error is undefined"):
        covariance_error([1.0], 0.0, relative=True)


# --- Spearman's rho ---------------------------------------------------------------------------


def _reference_rho(x: list[float], y: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for m in range(i, j + 1):
                r[order[m]] = (i + j) / 2 + 1
            i = j + 1
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5).map(float), st.integers(0, 5).map(float)),
        min_size=2,
        max_size=30,
    )
)
def test_spearman_matches_reference_with_ties(pairs: list[tuple[float, float]]) -> None:
    x = [p[0] for p in pairs]
    y = [p[1] for p in pairs]
    assume(len(set(x)) > 1 and len(set(y)) > 1)
    assert spearman_rho(x, y) == pytest.approx(_reference_rho(x, y))


def test_spearman_monotone_and_undefined_cases() -> None:
    x = np.linspace(0.1, 1.0, 10)
    assert spearman_rho(x, x**3) == pytest.approx(1.0)
    assert spearman_rho(x, 1 - x) == pytest.approx(-1.0)
    assert np.isnan(spearman_rho([1.0, 2.0], [3.0, 3.0]))
    assert np.isnan(spearman_rho([1.0], [2.0]))


def test_spearman_errors() -> None:
    with pytest.raises(ConfigError, match="x and y must be 1-D of one length"):
        spearman_rho([1.0, 2.0], [1.0])
    with pytest.raises(ConfigError, match="x and y must be 1-D of one length"):
        spearman_rho([[1.0, 2.0]], [[1.0, 2.0]])
    with pytest.raises(ConfigError, match="y must be finite numbers"):
        spearman_rho([1.0, 2.0], [1.0, np.nan])


def test_jain_of_tiny_equal_values_is_exactly_one() -> None:
    # squares of 1e-157 are subnormal floats: the index must not drift above 1
    assert jain_index([4.530621870859278e-157] * 2) == 1.0
    assert jain_index([1e-200, 0.0]) == pytest.approx(0.5)
