"""Base class of generated feeds: arrivals from a profile, payloads from counter-based hashes.

A generated feed is fully described by its settings: ``n_sources``, ``rate`` (mean tuples per
second per source), an arrival-rate ``profile`` (:data:`spillway.feeds.profiles.PROFILES`) and a
``seed``. Subclasses only compute the payload of tuples ``index`` of a source, vectorised, from
:mod:`spillway.feeds.hashing` (and, if they like, from the tuples' arrival times, which are
themselves a pure function of seed, source and index).

To add a feed: subclass :class:`GeneratedFeed`, set ``name``, take your own settings as extra
keyword-only constructor arguments (validated there, with defaults), implement :meth:`values`
(and :meth:`keys` if the key column is used), then register the class in
``spillway.feeds.FEEDS``.

Examples
--------
>>> class Ramp(GeneratedFeed):
...     name = "ramp"
...     def values(self, source, index):
...         return index.astype(np.float64)
>>> f = Ramp(n_sources=2, rate=10.0)
>>> f.count(1.0).tolist(), f.payload(1, np.arange(3))["value"].tolist()
([10, 10], [0.0, 1.0, 2.0])
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds.base import Feed
from spillway.feeds.options import check_index, check_source, seed_of
from spillway.feeds.profiles import Profile, make_profile


class GeneratedFeed(Feed):
    """A feed whose arrivals follow a profile and whose payloads are hashed.

    Parameters
    ----------
    n_sources : number of sources.
    rate : mean tuples per second per source (the profile's ``rate``).
    profile : profile name in ``PROFILES`` (or a built :class:`Profile` with ``n_sources``
        sources, then ``rate`` and ``profile_options`` are ignored).
    profile_options : the profile's own settings.
    seed : seed of arrivals and values.
    """

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        profile: str | Profile = "constant",
        profile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.seed = seed_of(seed)
        if isinstance(profile, Profile):
            self.profile = profile
        else:
            self.profile = make_profile(
                profile,
                n_sources=n_sources,
                rate=rate,
                seed=self.seed,
                **dict(profile_options or {}),
            )
        if self.profile.n_sources != n_sources:
            raise ConfigError(
                f"profile has {self.profile.n_sources} sources but the feed {n_sources}: "
                "build the profile with the same n_sources"
            )

    @property
    def n_sources(self) -> int:
        return self.profile.n_sources

    def count(self, t: float) -> np.ndarray:
        return self.profile.count(t)

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.profile.arrival_time(source, index)

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        s = check_source(self.n_sources, source)
        idx = check_index(index)
        return {"key": self.keys(s, idx), "value": self.values(s, idx)}

    @abstractmethod
    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        """``value`` column (float64) of tuples ``index`` (int64, >= 0) of ``source``."""

    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        """``key`` column (int64); 0 unless the feed has keys."""
        return np.zeros(index.shape, dtype=np.int64)

    def options(self) -> dict[str, Any]:
        """The feed's own settings (for reports and repr)."""
        return {}

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}(seed={self.seed}, profile={self.profile!r}{opts})"
