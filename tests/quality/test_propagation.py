"""Tests of the per-operator SIC propagation rules (THEMIS Eq. 3, DISSP §3.5)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality.propagation import (
    filter_or_map,
    group_by,
    grouped_window_sic,
    join,
    partition,
    partition_totals,
    replicate,
    sliding_window_share,
    spread,
    top_k,
    top_k_rows,
    tumbling_aggregate,
    union,
    window_totals,
    windows_entered,
)

F = Fraction


# --- Per-operator rules -----------------------------------------------------------------------


def test_spread_scalars_fractions_and_arrays() -> None:
    assert spread(F(1), 3) == F(1, 3)
    assert spread(1.0, 4) == 0.25
    assert spread(F(2, 5), 0) == F(2, 5)
    out = spread(np.array([1.0, 1.0, 0.6]), np.array([4, 1, 0]))
    assert out.tolist() == [0.25, 1.0, 0.6]
    assert spread(0.5, np.array([1, 2])).tolist() == [0.5, 0.25]


@pytest.mark.parametrize("n_out", [-1, 1.5, True, "2", np.array([1, -1]), np.array([1.0])])
def test_spread_rejects_bad_output_counts(n_out: object) -> None:
    with pytest.raises(ConfigError, match="n_out must (be a whole number|hold whole numbers) >= 0"):
        spread(1.0, n_out)


def test_filter_doubles_sic_of_survivors() -> None:
    # Fiscato Assumption 6: a filter passing 5 of 10 tuples doubles their value.
    assert filter_or_map(10 * F(1, 10), 5) == 2 * F(1, 10)
    assert filter_or_map(F(1), 0) == F(1)


def test_tumbling_aggregate_sums_inputs() -> None:
    assert tumbling_aggregate([F(1, 4)] * 4) == 1
    assert tumbling_aggregate(np.array([0.1, 0.2])) == pytest.approx(0.3)
    assert tumbling_aggregate([]) == 0.0


def test_window_totals_vectorised() -> None:
    sic = np.array([0.1, 0.2, 0.3, 0.4])
    assert window_totals(sic, np.array([2, 0, 2, 0]), 4) == pytest.approx([0.6, 0.0, 0.4, 0.0])
    with pytest.raises(ConfigError, match="sic and firing must have one shape"):
        window_totals(sic, np.array([0, 1]))
    with pytest.raises(ConfigError, match="firing must hold whole numbers >= 0"):
        window_totals(sic, np.array([0, 1, -1, 0]))


def _windows_by_enumeration(t: float, size: float, slide: float, offset: float) -> int:
    lo = math.floor((t - offset - size) / slide) - 2
    hi = math.ceil((t - offset) / slide) + 2
    return sum(offset + k * slide <= t < offset + k * slide + size for k in range(lo, hi + 1))


@settings(max_examples=100, deadline=None)
@given(
    t=st.integers(-1000, 1000).map(lambda x: F(x, 7)),
    size=st.integers(1, 12).map(lambda x: F(x, 2)),
    slide=st.integers(1, 6).map(lambda x: F(x, 3)),
    offset=st.integers(-3, 3).map(lambda x: F(x, 5)),
)
def test_windows_entered_matches_enumeration(
    t: Fraction, size: Fraction, slide: Fraction, offset: Fraction
) -> None:
    expected = _windows_by_enumeration(t, size, slide, offset)  # type: ignore[arg-type]
    assert windows_entered(t, size, slide, offset) == expected


def test_windows_entered_vectorised_and_multiple() -> None:
    t = np.array([0.0, 0.5, 7.25, -3.0])
    assert windows_entered(t, 3.0, 1.0).tolist() == [3, 3, 3, 3]
    with pytest.raises(ConfigError, match="size and slide must be > 0"):
        windows_entered(t, 0.0, 1.0)


def test_sliding_windows_conserve_sic_exactly() -> None:
    # Tuples at rational times; every window [k*s, k*s + W) fires once and sums its shares.
    size, slide = F(3), F(1, 2)
    times = [F(i, 3) for i in range(30)]
    sic = [F(1, 30)] * 30
    firings: dict[int, Fraction] = {}
    for t, x in zip(times, sic, strict=True):
        share = sliding_window_share(x, size=size, slide=slide)
        for k in range(math.floor((t - size) / slide) + 1, math.floor(t / slide) + 1):
            assert k * slide <= t < k * slide + size
            firings[k] = firings.get(k, F(0)) + share
    assert sum(firings.values()) == 1
    # Without the split every tuple would be counted size/slide = 6 times.
    assert sliding_window_share(F(1, 30), size=size, slide=slide) == F(1, 180)


def test_sliding_share_with_uneven_windows_needs_event_times() -> None:
    with pytest.raises(ConfigError, match="pass event_time to count them per tuple"):
        sliding_window_share(0.1, size=1.0, slide=0.4)
    with pytest.raises(ConfigError, match="size and slide must be > 0"):
        sliding_window_share(0.1, size=1.0, slide=0.0)
    t = np.array([0.7, 0.9])
    shares = sliding_window_share(np.array([0.6, 0.6]), size=1.0, slide=0.4, event_time=t)
    assert shares.tolist() == pytest.approx([0.3, 0.2])


def test_group_by_is_uniform_over_group_rows() -> None:
    assert group_by(F(1), 4) == F(1, 4)
    assert group_by(F(1, 2), 0) == F(1, 2)


def test_grouped_window_sic_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    sic = rng.random(200) / 200
    window = rng.integers(0, 5, 200)
    group = rng.integers(0, 7, 200)
    out = grouped_window_sic(sic, window, group)
    for w in range(5):
        rows = np.flatnonzero(out.window == w)
        groups = set(group[window == w].tolist())
        assert set(out.group[rows].tolist()) == groups
        assert out.sic[rows] == pytest.approx(sic[window == w].sum() / len(groups))
    assert out.sic.sum() == pytest.approx(sic.sum())
    with pytest.raises(ConfigError, match="sic, window and group must be 1-D of one length"):
        grouped_window_sic(sic, window[:3], group)


def test_join_spreads_both_sides() -> None:
    assert join(F(1, 4), F(1, 2), 3) == F(1, 4)
    assert join(F(1, 4), F(1, 2), 0) == F(3, 4)  # no match: empty result carries both
    left, right = np.array([0.2, 0.1]), np.array([0.3, 0.0])
    assert join(left, right, np.array([5, 0])).tolist() == pytest.approx([0.1, 0.1])


def test_top_k_splits_over_emitted_rows() -> None:
    assert top_k(F(1), 5, 20) == F(1, 5)
    assert top_k(F(1), 5, 2) == F(1, 2)
    assert top_k(F(1), 5, 0) == F(1)
    assert top_k_rows(np.array([5, 5]), np.array([3, 9])).tolist() == [3, 5]
    with pytest.raises(ConfigError, match="k must be a whole number >= 0"):
        top_k(1.0, -5, 3)


def test_union_and_partition_pass_through() -> None:
    assert union(F(1, 7)) == F(1, 7)
    assert partition(F(1, 300)) == F(1, 300)


def test_replicate_divides_by_consumers() -> None:
    assert replicate(F(1, 2), 2) == F(1, 4)
    assert replicate(np.array([0.5, 0.3]), np.array([2, 3])).tolist() == pytest.approx([0.25, 0.1])
    with pytest.raises(ConfigError, match="replicate needs k >= 1 consumers"):
        replicate(0.5, 0)


def test_partition_totals() -> None:
    assert partition_totals(F(1), 5, [2, 3]) == [F(2, 5), F(3, 5)]
    assert partition_totals(F(1), 0, [0, 0, 0]) == [F(1, 3)] * 3
    with pytest.raises(ConfigError, match=r"split \[2, 2\] must add up to the 5 rows"):
        partition_totals(F(1), 5, [2, 2])
    with pytest.raises(ConfigError, match="split must name at least one consumer"):
        partition_totals(F(1), 0, [])
