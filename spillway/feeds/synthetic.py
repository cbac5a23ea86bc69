"""THEMIS synthetic data sets: gaussian, uniform, exponential and mixed values of mean 50.

THEMIS §7 ("Data sets") only fixes the mean (50) and, for "mixed", that "each value is drawn
from a randomly chosen one of those distributions". The spreads are ours:

- ``gaussian``: normal, mean 50, standard deviation ``std = 10`` (not clipped: a value below 0
  has probability 3e-7);
- ``uniform``: uniform on ``[mean − width/2, mean + width/2] = [0, 100]`` (std 28.9);
- ``exponential``: exponential of mean 50 (std 50, values >= 0, long right tail);
- ``mixed``: per tuple, one of the three above chosen uniformly at random (mean 50; the value
  is the one the chosen feed would give the same tuple).

Every value is a pure function of (seed, source, index) through :mod:`spillway.feeds.hashing`;
all sources share the distribution and draw independent values. ``key`` is 0.

Examples
--------
>>> f = GaussianFeed(n_sources=2, rate=400.0, seed=1)
>>> v = f.payload(0, np.arange(100_000))["value"]
>>> round(float(v.mean())), round(float(v.std()))
(50, 10)
>>> bool(np.array_equal(v[10:20], f.payload(0, np.arange(10, 20))["value"]))
True
"""

from __future__ import annotations

from typing import Unpack

import numpy as np

from spillway.feeds import hashing
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import positive

_VALUE = "value"
_CHOICE = "mixed.choice"


class GaussianFeed(GeneratedFeed):
    """Normal values of mean ``mean`` (50) and standard deviation ``std`` (10).

    >>> GaussianFeed(n_sources=1, rate=1.0, std=0.0001).payload(0, np.arange(2))["value"].round()
    array([50., 50.])
    """

    name = "gaussian"

    def __init__(
        self, *, mean: float = 50.0, std: float = 10.0, **settings: Unpack[FeedSettings]
    ) -> None:
        super().__init__(**settings)
        self.mean = positive("gaussian mean", mean, allow_zero=True)
        self.std = positive("gaussian std", std)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.mean + self.std * hashing.normal(self.seed, _VALUE, source, index)


class UniformFeed(GeneratedFeed):
    """Uniform values on ``[mean − width/2, mean + width/2]`` (default [0, 100]).

    >>> v = UniformFeed(n_sources=1, rate=1.0).payload(0, np.arange(10_000))["value"]
    >>> bool(v.min() > 0 and v.max() < 100)
    True
    """

    name = "uniform"

    def __init__(
        self, *, mean: float = 50.0, width: float = 100.0, **settings: Unpack[FeedSettings]
    ) -> None:
        super().__init__(**settings)
        self.mean = positive("uniform mean", mean, allow_zero=True)
        self.width = positive("uniform width", width)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        u = hashing.uniform(self.seed, _VALUE, source, index)
        return self.mean + self.width * (u - 0.5)


class ExponentialFeed(GeneratedFeed):
    """Exponential values of mean ``mean`` (50).

    >>> v = ExponentialFeed(n_sources=1, rate=1.0).payload(0, np.arange(100_000))["value"]
    >>> round(float(v.mean())), bool(v.min() >= 0)
    (50, True)
    """

    name = "exponential"

    def __init__(self, *, mean: float = 50.0, **settings: Unpack[FeedSettings]) -> None:
        super().__init__(**settings)
        self.mean = positive("exponential mean", mean)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.mean * hashing.exponential(self.seed, _VALUE, source, index)


class MixedFeed(GeneratedFeed):
    """Each value drawn from gaussian, uniform or exponential, chosen per tuple with prob. 1/3.

    The three use the settings of :class:`GaussianFeed`, :class:`UniformFeed` and
    :class:`ExponentialFeed` (``mean`` is shared).

    >>> f = MixedFeed(n_sources=1, rate=1.0, seed=2)
    >>> np.bincount(f.choice(0, np.arange(30_000))).round(-3).tolist()
    [10000, 10000, 10000]
    """

    name = "mixed"

    def __init__(
        self,
        *,
        mean: float = 50.0,
        std: float = 10.0,
        width: float = 100.0,
        **settings: Unpack[FeedSettings],
    ) -> None:
        super().__init__(**settings)
        common: FeedSettings = {**settings, "profile": self.profile}  # the same arrivals
        self.parts: tuple[GeneratedFeed, ...] = (
            GaussianFeed(mean=mean, std=std, **common),
            UniformFeed(mean=mean, width=width, **common),
            ExponentialFeed(mean=mean, **common),
        )
        self.mean, self.std, self.width = float(mean), float(std), float(width)

    def choice(self, source: int, index: np.ndarray) -> np.ndarray:
        """Which distribution each tuple uses: 0 gaussian, 1 uniform, 2 exponential."""
        u = hashing.uniform(self.seed, _CHOICE, source, index)
        return np.minimum((u * 3).astype(np.int64), 2)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        which = self.choice(source, index)
        out = np.empty(index.shape, dtype=np.float64)
        for k, part in enumerate(self.parts):
            sel = which == k
            out[sel] = part.values(source, index[sel])
        return out
