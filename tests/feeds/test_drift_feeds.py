"""The drift feeds (taxi, tasks, packets): determinism, the Feed contract, measured drift."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds.options import construct
from spillway.feeds.packets import PacketFeed
from spillway.feeds.tasks import TaskFeed
from spillway.feeds.taxi import TaxiFeed
from spillway.quality.concept import drift_series, group_stats, top_k_by_mean

FEEDS = [
    lambda seed: TaxiFeed(n_sources=2, rate=2000.0, seed=seed, epoch_s=2.0),
    lambda seed: TaskFeed(n_sources=2, rate=2000.0, seed=seed, epoch_s=2.0),
    lambda seed: PacketFeed(n_sources=2, rate=2000.0, seed=seed, epoch_s=2.0),
]


@pytest.mark.parametrize("make", FEEDS)
def test_deterministic_sliceable_and_seeded(make):
    f, g = make(5), make(5)
    idx = np.arange(10_000)
    p, q = f.payload(1, idx), g.payload(1, idx)
    assert np.array_equal(p["key"], q["key"]) and np.array_equal(p["value"], q["value"])
    sub = f.payload(1, np.array([9_999, 17, 4_000]))
    assert np.array_equal(sub["value"], p["value"][[9_999, 17, 4_000]])
    assert p["key"].dtype == np.int64 and p["value"].dtype == np.float64
    other = make(6).payload(1, idx)
    assert not np.array_equal(other["value"], p["value"])
    assert not np.array_equal(f.payload(0, idx)["value"], p["value"])  # sources differ
    assert f.payload(0, np.zeros(0, np.int64))["value"].size == 0


@pytest.mark.parametrize("make", FEEDS)
def test_feed_contract_counts_and_times(make):
    f = make(1)
    counts = [f.count(t).tolist() for t in (0.0, 0.5, 1.0, 3.0)]
    assert counts[0] == [0, 0]
    assert np.all(np.diff(np.array(counts), axis=0) >= 0)
    t = f.arrival_time(0, np.arange(5000))
    assert np.all(np.diff(t) > 0)
    assert f.count(float(t[100]) + 1e-9)[0] > 100


def taxi_top10(feed: TaxiFeed, windows: int, window_epochs: int = 3) -> list[np.ndarray]:
    n = int(feed.count((windows - 1 + window_epochs) * feed.epoch_s)[0])
    idx = np.arange(n)
    t, p = feed.arrival_time(0, idx), feed.payload(0, idx)
    out = []
    for w in range(windows):
        lo, hi = np.searchsorted(t, [w * feed.epoch_s, (w + window_epochs) * feed.epoch_s])
        out.append(top_k_by_mean(p["key"][lo:hi], p["value"][lo:hi], 10))
    return out


@pytest.mark.parametrize("drift", [0.0, 0.2, 0.4])
def test_taxi_measured_drift_matches_configured(drift):
    # 10,000 rides per epoch, 30 % on the 100 pool routes: 30 rides per premium route and epoch.
    f = TaxiFeed(n_sources=1, rate=10_000.0, seed=2, epoch_s=1.0, drift=drift, pool_share=0.3)
    concepts = taxi_top10(f, 40)
    d = drift_series(concepts)
    assert abs(d.distance_mean - drift) <= 0.05
    assert d.distance_max <= 0.5
    # The top-10 of a 3-epoch window is the premium set of its middle epoch.
    same = [
        set(c.tolist()) == set(f.premium_routes(w + 1).tolist()) for w, c in enumerate(concepts)
    ]
    assert sum(same) >= 38


def test_taxi_tumbling_windows_track_the_premium_set():
    f = TaxiFeed(n_sources=1, rate=10_000.0, seed=3, epoch_s=1.0, drift=0.3, pool_share=0.3)
    concepts = taxi_top10(f, 20, window_epochs=1)
    assert (
        sum(set(c.tolist()) == set(f.premium_routes(w).tolist()) for w, c in enumerate(concepts))
        >= 19
    )


def test_taxi_popularity_drift_and_fare_spread():
    f = TaxiFeed(n_sources=1, rate=1.0, seed=4, popularity_drift=0.25)
    a, b = f.popularity_order(10), f.popularity_order(11)
    rank_a, rank_b = np.argsort(a), np.argsort(b)
    moved = np.mean(rank_a != rank_b)
    assert 0.15 < moved <= 1.0  # a quarter of scores redrawn moves most ranks a little
    changed_scores = np.mean(
        np.floor(10 * 0.25 + f.popularity.phase).astype(int)
        != np.floor(11 * 0.25 + f.popularity.phase)
    )
    assert abs(changed_scores - 0.25) < 0.05
    g = TaxiFeed(n_sources=1, rate=20_000.0, seed=4, epoch_s=100.0, fare_cv=0.12)
    p = g.payload(0, np.arange(200_000))
    st = group_stats(p["key"], p["value"])
    big = (st.count > 2000) & (st.keys >= g.pool_routes)
    cv = np.sqrt(st.var[big]) / st.mean[big]
    assert abs(np.median(cv) - 0.12) < 0.02


def test_taxi_routes_are_long_tailed():
    f = TaxiFeed(n_sources=1, rate=100_000.0, seed=5, epoch_s=10.0)
    p = f.payload(0, np.arange(100_000))
    st = group_stats(p["key"])
    assert st.n_groups > 2000  # thousands of routes in a DEBS-sized window
    assert (st.count <= 3).sum() > 300  # a long tail of rare routes
    assert st.count.max() > 50 * np.median(st.count)


def test_tasks_class_mix_and_drift():
    f = TaskFeed(n_sources=1, rate=10_000.0, seed=6, epoch_s=10.0, drift=1.0)
    p = f.payload(0, np.arange(100_000))  # epoch 0 only
    share = np.bincount(p["key"], minlength=f.n_classes) / 100_000
    assert np.allclose(share, f.class_share(0), atol=0.01)
    assert not np.array_equal(f.popularity_order(0), f.popularity_order(1))
    still = TaskFeed(n_sources=1, rate=1.0, seed=6, drift=0.0)
    assert np.array_equal(still.popularity_order(0), still.popularity_order(50))
    assert np.all((p["value"] > 0) & (p["value"] <= 1.0))


def test_packets_mean_follows_its_drift():
    f = PacketFeed(n_sources=1, rate=20_000.0, seed=7, epoch_s=1.0, amplitude=0.3, period_s=8.0)
    idx = np.arange(int(f.count(8.0)[0]))
    t, v = f.arrival_time(0, idx), f.payload(0, idx)["value"]
    ep = np.floor(t).astype(int)
    means = np.array([v[ep == e].mean() for e in range(8)])
    expected = np.array([f.expected_size(e) for e in range(8)])
    assert np.all(np.abs(means - expected) / expected < 0.03)
    assert means.max() - means.min() > 200  # the mean drifts by hundreds of bytes
    assert v.min() >= 40 and v.max() <= 1500


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: TaxiFeed(n_sources=1, rate=1.0, drift=0.6), "taxi drift must be a number in"),
        (lambda: TaxiFeed(n_sources=1, rate=1.0, pool_routes=105), "multiple of top_k"),
        (lambda: TaxiFeed(n_sources=1, rate=1.0, fare_cv=-0.1), "taxi fare_cv must be"),
        (lambda: TaxiFeed(n_sources=1, rate=1.0, n_routes=0), "taxi n_routes must be an int"),
        (lambda: TaskFeed(n_sources=1, rate=1.0, n_classes=1), "tasks n_classes must be an int"),
        (lambda: TaskFeed(n_sources=1, rate=1.0, zipf_s=0), "tasks zipf_s must be a finite"),
        (lambda: PacketFeed(n_sources=1, rate=1.0, amplitude=0.5), "packets amplitude must be"),
        (lambda: PacketFeed(n_sources=1, rate=-1.0), "rate must be a finite number > 0"),
    ],
)
def test_bad_settings(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_bad_epoch_and_source():
    f = TaxiFeed(n_sources=1, rate=1.0)
    with pytest.raises(ConfigError, match="epoch must be an int >= 0"):
        f.premium_routes(-1)
    with pytest.raises(ConfigError, match="source must be an int in 0..0"):
        f.payload(1, np.arange(3))


@pytest.mark.parametrize(
    ("name", "cls"), [("taxi", TaxiFeed), ("tasks", TaskFeed), ("packets", PacketFeed)]
)
def test_buildable_like_make_feed(name, cls):
    # What spillway.feeds.make_feed does once the feed is registered in FEEDS.
    feed = construct(
        "feed", {name: cls}, name, n_sources=2, rate=50.0, profile="bursty",
        profile_options={}, seed=3,
    )  # fmt: skip
    assert feed.n_sources == 2 and feed.payload(1, np.arange(10))["key"].shape == (10,)
    assert set(feed.options()) <= set(inspect.signature(cls).parameters)
    with pytest.raises(ConfigError, match="unknown option"):
        construct("feed", {name: cls}, name, n_sources=1, rate=1.0, colour="red")
