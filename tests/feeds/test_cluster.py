from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds import make_feed
from spillway.feeds.cluster import MEM_THRESHOLD_KB, ClusterFeed

T = 1_200  # tuples per source (one per second at rate 1)


@pytest.fixture(scope="module")
def fleet() -> ClusterFeed:
    return ClusterFeed(n_sources=300, rate=1.0, seed=3)


def test_layout_keys_and_bounds(fleet):
    for m in (0, 7, 149):
        cpu = fleet.payload(2 * m, np.arange(T))
        mem = fleet.payload(2 * m + 1, np.arange(T))
        assert (cpu["key"] == m).all() and (mem["key"] == m).all()
        assert cpu["value"].min() >= 0 and cpu["value"].max() <= 100
        assert mem["value"].min() >= 0 and mem["value"].max() <= 2_000_000
        assert mem["value"].max() > 100  # memory in KB, not a percentage
    assert fleet.n_machines == 150


def test_about_half_of_the_machines_pass_the_top5_memory_filter(fleet):
    passes = np.array(
        [fleet.payload(2 * m + 1, np.arange(T))["value"] >= MEM_THRESHOLD_KB for m in range(150)]
    )
    assert passes.mean() == pytest.approx(0.5, abs=0.1)
    per_time = passes.mean(axis=0)
    assert per_time.min() > 0.3 and per_time.max() < 0.7
    # The filter matters: many machines switch between passing and failing over 20 minutes.
    switching = (passes.any(axis=1) & ~passes.all(axis=1)).mean()
    assert switching > 0.1


def test_cpu_wanders_smoothly_with_bursts(fleet):
    cpu = np.array([fleet.payload(2 * m, np.arange(T))["value"] for m in range(150)])
    assert 25 < cpu.mean() < 60
    # Machines differ...
    assert cpu.mean(axis=1).std() > 10
    # ...each series is autocorrelated (random-walk-like), not white noise...
    step = np.diff(cpu, axis=1).std()
    assert step < 0.3 * cpu.std()
    # ...and bursts push some machines to saturation.
    assert (cpu >= 99.9).mean() > 0.002


def test_deterministic_and_subranges_are_slices():
    a = make_feed("cluster", n_sources=20, rate=20.0, seed=5)
    b = make_feed("cluster", n_sources=20, rate=20.0, seed=5, profile="constant")
    for s in (0, 1, 19):
        full = a.payload(s, np.arange(10_000))["value"]
        assert np.array_equal(b.payload(s, np.arange(10_000))["value"], full)
        assert np.array_equal(a.payload(s, np.arange(3_000, 3_100))["value"], full[3_000:3_100])
        idx = np.array([9_999, 0, 5_000])
        assert np.array_equal(a.payload(s, idx)["value"], full[idx])


def test_readings_follow_arrival_time_under_any_profile():
    # The latent state is a function of time: a bursty source samples the same machine curve.
    smooth = ClusterFeed(n_sources=2, rate=50.0, seed=2)
    bursty = ClusterFeed(n_sources=2, rate=50.0, seed=2, profile="bursty")
    t = bursty.arrival_time(0, np.arange(5_000))
    curve = bursty.cpu(0, t)
    assert np.array_equal(curve, smooth.cpu(0, t))
    noisy = bursty.payload(0, np.arange(5_000))["value"]
    inside = (curve > 3) & (curve < 97)
    assert (noisy - curve)[inside].std() == pytest.approx(1.5, rel=0.1)


def test_cpu_layout_and_machine_offset():
    f = make_feed("cluster", n_sources=3, rate=5.0, layout="cpu", machine_offset=10)
    assert [int(f.payload(s, np.arange(1))["key"][0]) for s in range(3)] == [10, 11, 12]
    g = make_feed("cluster", n_sources=2, rate=5.0, machine_offset=10)
    assert np.array_equal(f.payload(0, np.arange(50))["key"], g.payload(0, np.arange(50))["key"])


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"n_sources": 3}, r"layout 'cpu_mem' needs an even number of sources .* got 3"),
        ({"layout": "disk"}, r"cluster layout must be one of cpu_mem, cpu; got 'disk'"),
        ({"machine_offset": -1}, r"cluster machine_offset must be an int >= 0, got -1"),
    ],
)
def test_errors(opts, match):
    kwargs = {"n_sources": 4, "rate": 1.0, **opts}
    with pytest.raises(ConfigError, match=match):
        make_feed("cluster", **kwargs)
