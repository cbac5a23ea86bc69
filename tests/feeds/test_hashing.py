from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds import hashing


def test_same_coordinates_same_numbers_and_subranges_are_slices():
    full = hashing.hash64(11, "value", 4, np.arange(10_000))
    again = hashing.hash64(11, "value", 4, np.arange(10_000))
    assert np.array_equal(full, again)
    idx = np.array([9_999, 3, 512, 3])
    assert np.array_equal(hashing.hash64(11, "value", 4, idx), full[idx])


@pytest.mark.parametrize(
    "other",
    [(12, "value", 4), (11, "burst", 4), (11, "value", 5)],
)
def test_seed_stream_and_source_change_the_numbers(other):
    a = hashing.hash64(11, "value", 4, np.arange(1000))
    b = hashing.hash64(*other, np.arange(1000))
    assert np.mean(a == b) < 0.01


def test_broadcasts_sources_against_indices():
    grid = hashing.uniform(3, "x", np.arange(5)[:, None], np.arange(7)[None, :])
    assert grid.shape == (5, 7)
    assert np.array_equal(grid[2], hashing.uniform(3, "x", 2, np.arange(7)))


def test_stable_across_processes():
    # Python's hash() is salted per process; the streams must not be.
    code = (
        "import numpy as np; from spillway.feeds import hashing; "
        "print(hashing.hash64(5, 'value', 2, np.arange(4)).tolist())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == str(hashing.hash64(5, "value", 2, np.arange(4)).tolist())


def test_uniform_is_uniform_on_the_open_interval():
    u = hashing.uniform(1, "u", 0, np.arange(200_000))
    assert u.min() > 0 and u.max() < 1
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    expected = u.size / 20
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 45  # 19 degrees of freedom: p ≈ 0.001


def test_normal_exponential_pareto_moments():
    idx = np.arange(300_000)
    z = hashing.normal(2, "z", 1, idx)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs(np.mean(np.abs(z) > 1.96) - 0.05) < 0.003
    e = hashing.exponential(2, "e", 1, idx)
    assert abs(e.mean() - 1) < 0.01 and e.min() > 0
    p = hashing.pareto(2, "p", 1, idx, alpha=2.5, low=1.0)
    assert abs(p.mean() - 2.5 / 1.5) < 0.02
    assert abs(np.mean(p > 2.0) - 2.0**-2.5) < 0.005


def test_normal_uses_independent_substreams():
    idx = np.arange(100_000)
    z = hashing.normal(2, "value", 0, idx)
    u = hashing.uniform(2, "value", 0, idx)
    assert abs(np.corrcoef(z, u)[0, 1]) < 0.02


def test_errors():
    with pytest.raises(
        ConfigError, match=r"pareto needs alpha > 0 and 0 < low < high, got alpha=0"
    ):
        hashing.pareto(0, "p", 0, np.arange(3), alpha=0.0)
    with pytest.raises(ConfigError, match=r"stream must be an int or a str, got float"):
        hashing.uniform(0, 1.5, 0, np.arange(3))  # type: ignore[arg-type]


def test_lognormal_has_mean_one_and_the_asked_spread():
    idx = np.arange(300_000)
    x = hashing.lognormal(2, "f", 1, idx, cv=0.3)
    assert x.min() > 0
    assert abs(x.mean() - 1) < 0.005 and abs(x.std() / x.mean() - 0.3) < 0.01
    # A transform of the stream's normal: the same ranks, no other randomness.
    z = hashing.normal(2, "f", 1, idx)
    assert np.array_equal(np.argsort(x[:1000]), np.argsort(z[:1000]))
    assert np.array_equal(hashing.lognormal(2, "f", 1, idx[:5], cv=0.0), np.ones(5))


def test_the_numbers_are_those_every_earlier_run_drew():
    """Feeds regenerate tuples from these hashes, so a recorded run, a checkpoint's replay and
    an exact answer computed later all rest on them: the values are pinned (SplitMix64 as the
    module docstring writes it; drawn before one source's key was computed in Python ints)."""
    one = hashing.hash64(7, "value", 3, np.array([0, 1, 2**40]))
    assert one.tolist() == [8352012354887504588, 8436882724029681893, 17778208450540679100]
    grid = hashing.hash64(-3, 12, np.array([[0], [5]]), np.array([4, 9]))
    assert grid.tolist() == [
        [10869920696451538660, 91732055630529727],
        [18325935935454874909, 15662218521252711961],
    ]
    # one source as an int, a numpy scalar or a 0-d array: the same numbers as in an array
    for src in (5, np.int64(5), np.array(5)):
        assert np.array_equal(hashing.hash64(-3, 12, src, np.array([4, 9])), grid[1])


def test_a_stream_that_is_neither_int_nor_text_is_refused_whatever_was_drawn_before():
    hashing.hash64(0, 1, 0, 0)  # 1 is cached now; True must not find its entry
    for bad in (True, [1], 2.0):
        with pytest.raises(ConfigError, match="stream must be an int or a str"):
            hashing.hash64(0, bad, 0, 0)
