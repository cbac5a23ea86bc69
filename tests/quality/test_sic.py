"""Tests of THEMIS Eq. 1 and the sliding STW counter (spillway.quality.sic)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality.sic import StwConfig, StwCounter, source_tuple_sic


def _reference_window(history: list[list[int]], n_slots: int) -> np.ndarray:
    """Arrivals per lane over the last ``n_slots`` pushes, by brute force."""
    return np.array(history[-n_slots:], dtype=np.int64).sum(axis=0)


# --- source_tuple_sic -------------------------------------------------------------------------


def test_source_tuple_sic_reproduces_themis_fig2_sources() -> None:
    # THEMIS Fig. 2: 2 sources sending 4 and 2 tuples in the STW.
    assert source_tuple_sic([4, 2], 2).tolist() == [0.125, 0.25]


def test_source_tuple_sic_is_zero_for_empty_sources_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = source_tuple_sic(np.array([0, 10, 0]), np.array([1, 2, 3]))
    assert out.tolist() == [0.0, 0.05, 0.0]


def test_source_tuple_sic_broadcasts() -> None:
    out = source_tuple_sic(np.array([[1.0], [2.0]]), np.array([1, 4]))
    assert out.shape == (2, 2)
    assert out.tolist() == [[1.0, 0.25], [0.5, 0.125]]


def test_source_tuple_sic_sums_to_one_per_query() -> None:
    counts = np.array([7, 13, 400])
    sic = source_tuple_sic(counts, 3)
    assert float((counts * sic).sum()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("n_sources", [0, -1, 2.0, [1, 0]])
def test_source_tuple_sic_rejects_bad_source_counts(n_sources: object) -> None:
    with pytest.raises(ConfigError, match="n_sources must be whole numbers >= 1"):
        source_tuple_sic([4, 2], n_sources)


@pytest.mark.parametrize("count", [-1, float("nan"), float("inf")])
def test_source_tuple_sic_rejects_bad_counts(count: float) -> None:
    with pytest.raises(ConfigError, match="count_in_stw must be finite and >= 0"):
        source_tuple_sic([4, count], 2)


# --- StwConfig --------------------------------------------------------------------------------


def test_config_defaults_follow_themis_and_round_trip() -> None:
    cfg = StwConfig()
    assert (cfg.stw_s, cfg.slide_s, cfg.n_slots) == (10.0, 0.25, 40)
    assert StwConfig.from_dict(cfg.to_dict()) == cfg


def test_config_tolerates_float_rounding_of_the_ratio() -> None:
    assert StwConfig(stw_s=0.3, slide_s=0.1).n_slots == 3
    assert StwConfig(stw_s=1.0, slide_s=1.0).n_slots == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stw_s": 0.0}, "stw_s must be a finite number > 0"),
        ({"stw_s": float("inf")}, "stw_s must be a finite number > 0"),
        ({"slide_s": -0.25}, "slide_s must be a finite number > 0"),
        ({"slide_s": True}, "slide_s must be a finite number > 0"),
        ({"slide_s": "0.25"}, "slide_s must be a finite number > 0"),
        ({"stw_s": 1.0, "slide_s": 0.3}, "whole multiple of slide_s"),
        ({"stw_s": 1.0, "slide_s": 2.0}, "whole multiple of slide_s"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        StwConfig(**kwargs)  # type: ignore[arg-type]


def test_config_from_dict_rejects_unknown_settings() -> None:
    with pytest.raises(ConfigError, match=r"StwConfig has no setting\(s\) \['size'\]"):
        StwConfig.from_dict({"size": 3})


# --- StwCounter -------------------------------------------------------------------------------


def test_counter_rejects_bad_construction() -> None:
    with pytest.raises(ConfigError, match="config must be a StwConfig"):
        StwCounter({"stw_s": 1.0}, n_lanes=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="n_lanes must be an int >= 0"):
        StwCounter(StwConfig(), n_lanes=-1)
    with pytest.raises(ConfigError, match="n_lanes must be an int >= 0"):
        StwCounter(StwConfig(), n_lanes=True)


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ([1, 2, 3], r"counts must have shape \(2,\)"),
        ([1, -2], "counts must be >= 0"),
        ([1.5, 2], "counts must hold whole numbers"),
        ([float("nan"), 2], "counts must hold whole numbers"),
    ],
)
def test_push_rejects_bad_counts(counts: list[float], match: str) -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=2)
    with pytest.raises(ConfigError, match=match):
        c.push(counts)
    assert c.slides == 0  # a rejected push changes nothing


def test_push_accepts_integral_floats() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=2)
    c.push(np.array([3.0, 4.0]))
    assert c.totals().tolist() == [3, 4]


@settings(max_examples=60, deadline=None)
@given(
    n_slots=st.integers(1, 6),
    history=st.lists(st.lists(st.integers(0, 50), min_size=3, max_size=3), min_size=1, max_size=25),
)
def test_totals_match_brute_force_window(n_slots: int, history: list[list[int]]) -> None:
    c = StwCounter(StwConfig(stw_s=float(n_slots), slide_s=1.0), n_lanes=3)
    for k, counts in enumerate(history, start=1):
        c.push(counts)
        expected = _reference_window(history[:k], n_slots)
        assert c.totals().tolist() == expected.tolist()
        seen = min(k, n_slots)
        assert c.slides_seen().tolist() == [seen] * 3
        assert c.estimated_counts() == pytest.approx(expected * n_slots / seen)
    assert c.slides == len(history)


def test_constant_rate_is_stamped_at_full_window_value_from_the_first_slide() -> None:
    cfg = StwConfig(stw_s=10.0, slide_s=0.25)
    c = StwCounter(cfg, n_lanes=2)
    rate = np.array([100, 5])  # tuples per slide
    stamped = np.zeros(2)
    for k in range(1, cfg.n_slots + 1):
        c.push(rate)
        sic = c.tuple_sic(n_sources_per_lane=2)
        assert sic == pytest.approx(1.0 / (rate * cfg.n_slots * 2), rel=1e-12)
        stamped += rate * sic
        # The stamps of the elapsed part sum to elapsed/STW per source (1/|S| each).
        assert stamped == pytest.approx(np.full(2, k / cfg.n_slots / 2), rel=1e-12)


def test_lanes_without_arrivals_have_zero_sic_without_warnings() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.tuple_sic(1).tolist() == [0.0, 0.0, 0.0]  # before any push
        c.push([0, 4, 0])
        c.push([0, 0, 0])
        sic = c.tuple_sic(1)
    assert sic.tolist() == [0.0, 0.25, 0.0]


def _step_reference(r1: int, r2: int, n_slots: int, n_sources: int) -> list[float]:
    """Tuple SIC after each slide following a step r1 -> r2, by Eq. 1 over the last window."""
    history = [r1] * n_slots
    out = []
    for _ in range(2 * n_slots):
        history.append(r2)
        window = sum(history[-n_slots:])
        out.append(1.0 / (window * n_sources) if window else 0.0)
    return out


@pytest.mark.parametrize(("r1", "r2"), [(10, 20), (40, 5), (7, 0)])
def test_step_change_of_rate_is_tracked_every_slide(r1: int, r2: int) -> None:
    cfg = StwConfig(stw_s=2.0, slide_s=0.25)
    c = StwCounter(cfg, n_lanes=1)
    for _ in range(cfg.n_slots):
        c.push([r1])
    assert c.tuple_sic(3)[0] == pytest.approx(1.0 / (r1 * cfg.n_slots * 3))
    got = []
    for _ in range(2 * cfg.n_slots):
        c.push([r2])
        got.append(float(c.tuple_sic(3)[0]))
    assert got == pytest.approx(_step_reference(r1, r2, cfg.n_slots, 3))
    # One STW after the step the old rate is forgotten (a silent source stamps nothing: 0).
    settled = 1.0 / (r2 * cfg.n_slots * 3) if r2 else 0.0
    assert got[cfg.n_slots - 1 :] == pytest.approx([settled] * (cfg.n_slots + 1))


def test_step_up_overshoots_and_step_down_undershoots_then_both_settle() -> None:
    cfg = StwConfig(stw_s=2.5, slide_s=0.25)
    n = cfg.n_slots
    for r1, r2 in [(10, 20), (20, 10)]:
        c = StwCounter(cfg, n_lanes=1)
        for _ in range(n):
            c.push([r1])
        window_sums = []
        stamps: list[float] = [r1 / (r1 * n)] * n  # SIC each past slide carried in total
        for _ in range(2 * n):
            c.push([r2])
            stamps.append(r2 * float(c.tuple_sic(1)[0]))
            window_sums.append(sum(stamps[-n:]))
        # Independent closed form one STW after the step: sum_j r2 / (r1 (n - j) + r2 j).
        expected = sum(r2 / (r1 * (n - j) + r2 * j) for j in range(1, n + 1))
        assert window_sums[n - 1] == pytest.approx(expected)
        assert (window_sums[n - 1] > 1.0) == (r2 > r1)
        assert window_sums[-1] == pytest.approx(1.0)


def test_source_of_lane_pools_groups_of_one_source() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=1.0), n_lanes=4)
    c.push([3, 1, 6, 0])  # lanes 0, 1 = groups of source A; lane 2 = source B; lane 3 = C
    sic = c.tuple_sic(np.array([2, 2, 2, 1]), source_of_lane=[0, 0, 1, 2])
    assert sic.tolist() == [1 / 8, 1 / 8, 1 / 12, 0.0]
    with pytest.raises(ConfigError, match=r"source_of_lane must have shape \(4,\)"):
        c.tuple_sic(1, source_of_lane=[0, 1])
    with pytest.raises(ConfigError, match="source_of_lane must be >= 0"):
        c.tuple_sic(1, source_of_lane=[0, 0, -1, 2])


def test_tuple_sic_rejects_bad_source_counts() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=1.0), n_lanes=2)
    c.push([1, 1])
    with pytest.raises(ConfigError, match=r"one entry per lane \(2\), got shape \(3,\)"):
        c.tuple_sic([1, 1, 1])
    with pytest.raises(ConfigError, match="n_sources must be whole numbers >= 1"):
        c.tuple_sic([1, 0])


def test_added_lanes_fill_their_own_window() -> None:
    cfg = StwConfig(stw_s=1.0, slide_s=0.25)
    c = StwCounter(cfg, n_lanes=1)
    for _ in range(6):
        c.push([8])
    (new,) = c.add_lanes(1).tolist()
    assert new == 1
    c.push([8, 2])
    assert c.slides_seen().tolist() == [4, 1]
    assert c.estimated_counts().tolist() == [32.0, 8.0]
    with pytest.raises(ConfigError, match="add_lanes needs an int n >= 0"):
        c.add_lanes(-2)


def test_snapshot_restore_continues_identically() -> None:
    cfg = StwConfig(stw_s=1.0, slide_s=0.25)
    rng = np.random.default_rng(7)
    pushes = rng.integers(0, 30, size=(15, 3))
    a = StwCounter(cfg, n_lanes=3)
    for p in pushes[:6]:
        a.push(p)
    b = StwCounter(cfg, n_lanes=0)
    b.restore(pickle.loads(pickle.dumps(a.snapshot())))
    for p in pushes[6:]:
        a.push(p)
        b.push(p)
        assert a.totals().tolist() == b.totals().tolist()
        assert a.tuple_sic(2).tolist() == b.tuple_sic(2).tolist()
    assert a.slides == b.slides == 15
    assert "slides=15" in repr(b)


def test_snapshot_is_a_copy() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1)
    c.push([2])
    snap = c.snapshot()
    c.push([5])
    assert snap["totals"].tolist() == [2]


def test_restore_rejects_another_window() -> None:
    c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1)
    other = StwCounter(StwConfig(stw_s=2.0, slide_s=0.5), n_lanes=1)
    with pytest.raises(ConfigError, match="restore into a counter built with the same StwConfig"):
        other.restore(c.snapshot())
