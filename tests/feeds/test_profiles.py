from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds.profiles import PROFILES, BurstyProfile, Profile, make_profile

ALL = [
    ("constant", {}),
    ("step", {"times": [5.0, 20.0], "factors": [3.0, 0.5]}),
    ("step", {"times": [4.0, 9.0], "factors": [3.0, 0.5], "period_s": 13.0}),
    ("bursty", {}),
    ("bursty", {"slot_s": 0.25, "normalise": False}),
    ("pareto", {}),
    ("pareto", {"alpha": 0.5, "spread": 100.0, "slot_s": 0.5}),
    ("pareto_ranges", {}),
    ("pareto_ranges", {"ranges": [[0.1, 0.3], [0.6, 1.4]], "epoch_s": 7.0, "slot_s": 0.15}),
    ("trace", {}),
    ("trace", {"slot_s": 0.5, "cv": 0.0, "peak_fraction": 0.0}),
]


def build(name: str, opts: dict, n: int = 8, rate: float = 400.0, seed: int = 3) -> Profile:
    return make_profile(name, n_sources=n, rate=rate, seed=seed, **opts)


@pytest.mark.parametrize(("name", "opts"), ALL)
def test_count_is_int_non_decreasing_and_zero_before_start(name, opts):
    p = build(name, opts)
    assert p.count(0.0).tolist() == [0] * 8
    assert p.count(-3.0).tolist() == [0] * 8
    times = np.sort(np.concatenate([np.linspace(0, 200, 997), [64.0, 64.0 + 1e-12, 128.0]]))
    counts = np.array([p.count(float(t)) for t in times])
    assert counts.dtype == np.int64
    assert (np.diff(counts, axis=0) >= 0).all()


@pytest.mark.parametrize(("name", "opts"), ALL)
def test_count_and_arrival_time_agree(name, opts):
    p = build(name, opts)
    for s in (0, 5):
        n = int(p.count(300.0)[s])
        idx = np.unique(np.linspace(0, n - 1, 400).astype(np.int64))
        t = p.arrival_time(s, idx)
        assert (np.diff(t) > 0).all()
        for ti, i in zip(t, idx, strict=True):
            eps = 1e-9 * max(1.0, ti)
            assert p.count(float(ti) + eps)[s] == i + 1
            assert p.count(float(ti) - eps)[s] == i


@pytest.mark.parametrize(("name", "opts"), ALL)
def test_arrival_times_are_deterministic_and_subranges_are_slices(name, opts):
    a = build(name, opts).arrival_time(2, np.arange(20_000))
    fresh = build(name, opts)
    assert np.array_equal(fresh.arrival_time(2, np.arange(20_000)), a)
    idx = np.array([19_999, 7, 12_345, 7])
    assert np.array_equal(build(name, opts).arrival_time(2, idx), a[idx])


def test_constant_rate_is_exact():
    p = build("constant", {}, rate=250.0)
    for t in (1.0, 2.0, 10.0, 3600.0):
        assert p.count(t).tolist() == [round(250 * t)] * 8


def test_step_changes_the_rate_at_the_given_times():
    p = build("step", {"times": [10.0], "factors": [1.75]}, rate=200.0)
    assert p.count(10.0)[0] == 2000
    assert p.count(30.0)[0] - p.count(10.0)[0] == 7000
    assert p.mean_rate == 350.0


def test_a_step_pattern_with_a_period_repeats_and_means_over_one_period():
    p = build("step", {"times": [10.0, 20.0], "factors": [7 / 3, 8 / 3], "period_s": 30.0},
              rate=150.0)  # fmt: skip
    per_period = 150 * 10 + 350 * 10 + 400 * 10
    assert p.count(30.0)[0] == per_period
    assert p.count(615.0)[0] - p.count(600.0)[0] == 150 * 10 + 350 * 5  # 20 periods, then 15 s
    assert p.mean_rate == pytest.approx(per_period / 30.0) == pytest.approx(300.0)
    assert p.count(3000.0)[0] == pytest.approx(300.0 * 3000.0, abs=1)


def test_bursty_is_ten_percent_of_the_time_at_ten_times_the_rate():
    p = BurstyProfile(n_sources=200, rate=190.0, seed=5)
    assert p.base_rate == pytest.approx(100.0)
    burst = p.is_burst(np.arange(200)[:, None], np.arange(500)[None, :])
    assert burst.mean() == pytest.approx(0.1, abs=0.01)
    # The counts follow: a burst slot brings 10x the tuples of a quiet one.
    per_slot = np.diff(np.array([p.count(float(t)) for t in range(0, 51)]), axis=0).T
    b = burst[:, :50]
    assert per_slot[b].mean() == pytest.approx(1000, rel=0.01)
    assert per_slot[~b].mean() == pytest.approx(100, rel=0.01)
    # Long-run mean: the configured rate (normalised).
    assert p.count(2000.0).mean() / 2000.0 == pytest.approx(190.0, rel=0.02)


def test_bursty_without_normalising_keeps_the_base_rate():
    p = BurstyProfile(n_sources=200, rate=100.0, seed=5, normalise=False)
    assert p.mean_rate == pytest.approx(190.0)
    assert p.count(2000.0).mean() / 2000.0 == pytest.approx(190.0, rel=0.02)


def test_bursts_differ_between_sources():
    p = BurstyProfile(n_sources=2, rate=100.0, seed=1)
    a, b = p.is_burst(np.array(0), np.arange(1000)), p.is_burst(np.array(1), np.arange(1000))
    assert (a != b).mean() > 0.1


def test_pareto_rates_are_heavy_tailed_with_the_configured_mean():
    p = make_profile("pareto", n_sources=100, rate=400.0, seed=2, alpha=1.0, spread=10.0)
    r = p.slot_rates(np.arange(100)[:, None], np.arange(400)[None, :])
    assert r.min() >= p.low * (1 - 1e-12) and r.max() <= p.high * (1 + 1e-12)
    assert r.mean() == pytest.approx(400.0, rel=0.02)
    assert np.median(r) < 0.8 * r.mean()  # right-skewed
    assert p.count(1000.0).mean() / 1000.0 == pytest.approx(400.0, rel=0.02)


def test_many_sources_over_hours_stay_small_and_pickle_without_cache():
    p = make_profile("bursty", n_sources=300, rate=400.0, seed=1)
    c = p.count(4 * 3600.0)
    assert c.mean() / (4 * 3600.0) == pytest.approx(400.0, rel=0.01)
    assert p._bcum.nbytes < 8 * 300 * (4 * 3600 // 64 + 2) * 2  # one value per 64 slots
    q = pickle.loads(pickle.dumps(p))
    assert q._bcum.shape[1] == 1
    assert np.array_equal(q.count(4 * 3600.0), c)


def test_registry_lists_the_profiles():
    assert sorted(PROFILES) == ["bursty", "constant", "pareto", "pareto_ranges", "step", "trace"]


def test_pareto_ranges_follow_their_range_per_epoch():
    """Pham SD_p: rates per 150 ms cycle in the epoch's range, skewness (shape) 1."""
    p = make_profile(
        "pareto_ranges",
        n_sources=3,
        rate=100.0,
        seed=4,
        ranges=[[3.0, 8.0], [8.0, 13.0]],
        epoch_s=50.0,
        slot_s=0.15,
    )
    slots = np.arange(0, 666)  # 0 .. 99.9 s
    r = p.slot_rates(np.arange(3)[:, None], slots[None, :])
    first = slots * 0.15 < 50.0 - 1e-9
    assert r[:, first].min() >= 300.0 - 1e-9 and r[:, first].max() <= 800.0 + 1e-9
    assert r[:, ~first].min() >= 800.0 - 1e-9 and r[:, ~first].max() <= 1300.0 + 1e-9
    assert np.median(r[:, first]) < r[:, first].mean()  # right-skewed
    # over many cycles the counts follow the mean of the ranges
    assert p.count(1000.0).mean() / 1000.0 == pytest.approx(p.mean_rate, rel=0.02)


def test_trace_has_slow_swings_bursts_and_peaks_around_its_rate():
    p = make_profile("trace", n_sources=2, rate=400.0, seed=9)
    r = p.slot_rates(np.array(0), np.arange(20_000))
    assert r.mean() == pytest.approx(400.0, rel=0.03)
    per_minute = r[: 20_000 // 60 * 60].reshape(-1, 60).mean(axis=1)
    assert per_minute.max() / per_minute.min() > 1.8  # slow swings, not just noise
    assert (r > 3 * 400.0).mean() > 0.005  # rare sudden peaks
    other = p.slot_rates(np.array(1), np.arange(20_000))
    assert not np.array_equal(r, other)  # bursts differ between sources
    assert p.count(20_000.0).mean() / 20_000.0 == pytest.approx(400.0, rel=0.03)


@pytest.mark.parametrize(
    ("name", "opts", "exc", "match"),
    [
        ("poisson", {}, UnknownNameError, r"profile must be one of bursty, constant, pareto, "),
        ("bursty", {"burst": 1}, ConfigError, r"profile 'bursty': unknown option\(s\) burst"),
        ("step", {"times": [1.0]}, ConfigError, r"one factor per time, got 1 times and 0"),
        ("step", {"times": [2.0, 1.0], "factors": [1, 2]}, ConfigError, r"strictly increasing"),
        ("step", {"times": [-1.0], "factors": [1]}, ConfigError, r"step times\[0\] must be"),
        (
            "step",
            {"times": [5.0], "factors": [2], "period_s": 5.0},
            ConfigError,
            r"period_s \(5\) must be above the last time \(5\)",
        ),
        ("bursty", {"fraction": 1.0}, ConfigError, r"bursty fraction must be in \(0, 1\)"),
        ("bursty", {"factor": 0.5}, ConfigError, r"bursty factor must be >= 1, got 0.5"),
        ("bursty", {"normalise": "yes"}, ConfigError, r"bursty normalise must be true or false"),
        ("bursty", {"slot_s": 0}, ConfigError, r"slot_s must be a finite number > 0, got 0"),
        ("pareto", {"spread": 1.0}, ConfigError, r"pareto spread .* must be > 1, got 1.0"),
        ("pareto", {"alpha": -1}, ConfigError, r"pareto alpha must be a finite number > 0"),
        ("pareto_ranges", {"ranges": []}, ConfigError, r"at least one \(low, high\) range"),
        ("pareto_ranges", {"ranges": [[1.0]]}, ConfigError, r"ranges\[0\] must be \(low, high\)"),
        ("pareto_ranges", {"ranges": [[2.0, 1.0]]}, ConfigError, r"needs low < high, got \(2, 1\)"),
        ("pareto_ranges", {"ranges": [[0.0, 1.0]]}, ConfigError, r"ranges\[0\] low must be"),
        ("pareto_ranges", {"epoch_s": 0}, ConfigError, r"pareto_ranges epoch_s must be a finite"),
        (
            "trace",
            {"amplitude": 0.9},
            ConfigError,
            r"trace amplitude must be a number in \[0, 0.6\]",
        ),
        ("trace", {"peak_factor": 0.5}, ConfigError, r"trace peak_factor must be >= 1, got 0.5"),
        ("trace", {"peak_fraction": 0.6}, ConfigError, r"trace peak_fraction must be a number in"),
        ("trace", {"cv": -0.1}, ConfigError, r"trace cv must be a finite number >= 0, got -0.1"),
    ],
)
def test_option_errors(name, opts, exc, match):
    with pytest.raises(exc, match=match):
        make_profile(name, n_sources=2, rate=10.0, **opts)


def test_argument_errors():
    with pytest.raises(ConfigError, match=r"rate must be a finite number > 0, got 0"):
        make_profile("constant", n_sources=1, rate=0)
    with pytest.raises(ConfigError, match=r"n_sources must be an int >= 1, got 0"):
        make_profile("constant", n_sources=0, rate=1.0)
    with pytest.raises(ConfigError, match=r"seed must be an int >= 0, got -1"):
        make_profile("constant", n_sources=1, rate=1.0, seed=-1)
    p = make_profile("bursty", n_sources=2, rate=10.0)
    with pytest.raises(ConfigError, match=r"source must be an int in 0..1, got 2"):
        p.arrival_time(2, np.arange(3))
    with pytest.raises(ConfigError, match=r"tuple indices must be >= 0, got -1"):
        p.arrival_time(0, np.array([-1, 2]))
    with pytest.raises(ConfigError, match=r"tuple indices must be integers, got dtype float64"):
        p.arrival_time(0, np.array([0.5]))
    with pytest.raises(ConfigError, match=r"time must be finite, got nan"):
        p.count(math.nan)
