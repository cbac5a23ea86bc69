from __future__ import annotations

import pickle

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds import FEEDS, PROFILES, Feed, GeneratedFeed, make_feed

GENERATED = [n for n, cls in FEEDS.items() if issubclass(cls, GeneratedFeed)]


def test_registry_names():
    # Other feeds (drift workloads) may be registered too; these must be.
    assert {"cluster", "exponential", "gaussian", "mixed", "replay", "uniform"} <= set(FEEDS)
    assert {"bursty", "constant", "pareto", "step"} <= set(PROFILES)
    assert all(FEEDS[n].name == n for n in FEEDS)


@pytest.mark.parametrize("name", GENERATED)
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_generated_feed_keeps_the_feed_contract(name, profile):
    opts = {"times": [2.0], "factors": [2.0]} if profile == "step" else {}
    f = make_feed(name, n_sources=4, rate=200.0, profile=profile, profile_options=opts, seed=3)
    assert isinstance(f, Feed) and f.n_sources == 4
    counts = np.array([f.count(t) for t in np.linspace(0, 10, 41)])
    assert (np.diff(counts, axis=0) >= 0).all() and counts.dtype == np.int64
    n = int(counts[-1, 1])
    t = f.arrival_time(1, np.arange(n))
    assert (np.diff(t) >= 0).all() and t[-1] < 10.0
    p = f.payload(1, np.arange(n))
    assert set(p) == {"key", "value"}
    assert p["key"].dtype == np.int64 and p["value"].dtype == np.float64
    assert p["value"].shape == (n,) and np.isfinite(p["value"]).all()
    assert f.rejected() == 0
    # Survives pickling (executors) and regenerates the same tuples.
    g = pickle.loads(pickle.dumps(f))
    assert np.array_equal(g.payload(1, np.arange(n))["value"], p["value"])
    assert np.array_equal(g.arrival_time(1, np.arange(n)), t)


def test_profile_options_reach_the_profile():
    f = make_feed(
        "gaussian",
        n_sources=1,
        rate=190.0,
        profile="bursty",
        profile_options={"factor": 4.0, "fraction": 0.5},
    )
    assert f.profile.factor == 4.0 and f.profile.base_rate == pytest.approx(76.0)


def test_errors():
    with pytest.raises(UnknownNameError, match=r"feed must be one of cluster, .*; got 'nyc'"):
        make_feed("nyc", n_sources=1, rate=1.0)
    with pytest.raises(UnknownNameError, match=r"profile must be one of .*; got 'spiky'"):
        make_feed("gaussian", n_sources=1, rate=1.0, profile="spiky")
    with pytest.raises(ConfigError, match=r"feed 'uniform': unknown option\(s\) std; known: mean"):
        make_feed("uniform", n_sources=1, rate=1.0, std=3.0)
    with pytest.raises(ConfigError, match=r"profile 'constant': unknown option\(s\) factor"):
        make_feed("gaussian", n_sources=1, rate=1.0, profile_options={"factor": 2})
    with pytest.raises(ConfigError, match=r"rate must be a finite number > 0, got -5"):
        make_feed("gaussian", n_sources=1, rate=-5)
