from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds.popularity import DriftingZipf, zipf_cdf


def test_zipf_cdf_is_the_normalised_cumulative_law():
    c = zipf_cdf(5, 2.0)
    w = 1.0 / np.arange(1, 6) ** 2
    assert np.allclose(c, np.cumsum(w) / w.sum()) and c[-1] == 1.0


def test_draws_follow_the_shares_of_their_epoch():
    p = DriftingZipf(seed=3, stream="t", n=8, s=1.0, drift=1.0)
    u = np.random.default_rng(0).random(80_000)
    for e in (0, 5):
        items = p.draw(u, np.full(u.size, e))
        assert np.allclose(np.bincount(items, minlength=8) / u.size, p.share(e), atol=0.01)
    # Tuples of several epochs each follow their own epoch's ranking.
    ep = np.repeat([0, 5], u.size // 2)
    mixed = p.draw(u, ep)
    assert np.array_equal(mixed[ep == 5], p.draw(u[ep == 5], np.full((ep == 5).sum(), 5)))


@pytest.mark.parametrize("drift", [0.0, 0.25, 1.0])
def test_a_fraction_drift_of_the_scores_is_redrawn_per_epoch(drift):
    p = DriftingZipf(seed=4, stream="t", n=4000, s=1.2, drift=drift)
    changed = np.mean(np.floor(10 * drift + p.phase) != np.floor(11 * drift + p.phase))
    assert abs(changed - drift) < 0.03
    same_order = np.array_equal(p.order(10), p.order(11))
    assert same_order == (drift == 0.0)


def test_streams_and_seeds_separate_rankings():
    a = DriftingZipf(seed=1, stream="taxi", n=50, s=1.0, drift=0.5)
    b = DriftingZipf(seed=1, stream="tasks", n=50, s=1.0, drift=0.5)
    c = DriftingZipf(seed=2, stream="taxi", n=50, s=1.0, drift=0.5)
    assert not np.array_equal(a.order(3), b.order(3))
    assert not np.array_equal(a.order(3), c.order(3))


def test_epoch_errors():
    p = DriftingZipf(seed=1, stream="t", n=3, s=1.0, drift=0.5)
    with pytest.raises(ConfigError, match=r"epoch must be an int >= 0, got -1"):
        p.order(-1)
    with pytest.raises(ConfigError, match=r"epoch must be an int >= 0, got 1.5"):
        p.share(1.5)  # type: ignore[arg-type]
