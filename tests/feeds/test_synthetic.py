from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds import make_feed
from spillway.feeds.synthetic import MixedFeed

N = 200_000


@pytest.mark.parametrize(
    ("name", "std"),
    [("gaussian", 10.0), ("uniform", 100 / np.sqrt(12)), ("exponential", 50.0), ("mixed", None)],
)
def test_mean_fifty_and_documented_spread(name, std):
    f = make_feed(name, n_sources=3, rate=400.0, seed=9)
    v = f.payload(1, np.arange(N))["value"]
    assert v.dtype == np.float64
    assert v.mean() == pytest.approx(50.0, abs=0.5)
    if std is not None:
        assert v.std() == pytest.approx(std, rel=0.02)


def test_ranges():
    u = make_feed("uniform", n_sources=1, rate=1.0).payload(0, np.arange(N))["value"]
    assert u.min() > 0 and u.max() < 100
    e = make_feed("exponential", n_sources=1, rate=1.0).payload(0, np.arange(N))["value"]
    assert e.min() > 0


def test_mixed_draws_each_value_from_one_of_the_three():
    f = MixedFeed(n_sources=2, rate=1.0, seed=4)
    idx = np.arange(60_000)
    which = f.choice(1, idx)
    assert np.bincount(which, minlength=3) / idx.size == pytest.approx([1 / 3] * 3, abs=0.01)
    v = f.payload(1, idx)["value"]
    for k, name in enumerate(["gaussian", "uniform", "exponential"]):
        part = make_feed(name, n_sources=2, rate=1.0, seed=4).payload(1, idx[which == k])
        assert np.array_equal(v[which == k], part["value"])
    # The mixture is wider than the gaussian and has the exponential's right tail.
    assert v.std() > 20 and (v > 150).any()


@pytest.mark.parametrize("name", ["gaussian", "uniform", "exponential", "mixed"])
def test_deterministic_and_subranges_are_slices(name):
    f = make_feed(name, n_sources=4, rate=100.0, seed=21)
    full = f.payload(3, np.arange(50_000))
    again = make_feed(name, n_sources=4, rate=100.0, seed=21).payload(3, np.arange(50_000))
    assert np.array_equal(full["value"], again["value"])
    for lo, hi in [(0, 1), (17, 4_000), (49_000, 50_000)]:
        part = f.payload(3, np.arange(lo, hi))
        assert np.array_equal(part["value"], full["value"][lo:hi])
    assert full["key"].dtype == np.int64 and not full["key"].any()
    other_source = f.payload(2, np.arange(50_000))["value"]
    other_seed = make_feed(name, n_sources=4, rate=100.0, seed=22).payload(3, np.arange(50_000))
    assert np.mean(other_source == full["value"]) < 0.4  # mixed shares 1/3 choice at most
    assert np.mean(other_seed["value"] == full["value"]) < 0.4


def test_values_do_not_depend_on_the_profile():
    a = make_feed("gaussian", n_sources=1, rate=10.0, seed=1).payload(0, np.arange(100))
    b = make_feed("gaussian", n_sources=1, rate=99.0, profile="bursty", seed=1).payload(
        0, np.arange(100)
    )
    assert np.array_equal(a["value"], b["value"])


@pytest.mark.parametrize(
    ("name", "opts", "match"),
    [
        ("gaussian", {"std": 0}, r"gaussian std must be a finite number > 0, got 0"),
        ("gaussian", {"mean": float("nan")}, r"gaussian mean must be a finite number >= 0"),
        ("uniform", {"width": -1}, r"uniform width must be a finite number > 0, got -1"),
        ("exponential", {"mean": 0}, r"exponential mean must be a finite number > 0, got 0"),
        ("mixed", {"std": -2}, r"gaussian std must be a finite number > 0, got -2"),
    ],
)
def test_option_errors(name, opts, match):
    with pytest.raises(ConfigError, match=match):
        make_feed(name, n_sources=1, rate=1.0, **opts)


def test_payload_errors():
    f = make_feed("gaussian", n_sources=2, rate=1.0)
    with pytest.raises(ConfigError, match=r"source must be an int in 0..1, got 5"):
        f.payload(5, np.arange(3))
    with pytest.raises(ConfigError, match=r"tuple indices must be >= 0, got -4"):
        f.payload(0, np.array([-4]))
