"""Taxi rides with drifting route popularity and fares: a synthetic stand-in for DEBS 2015.

CoD (§I, Fig. 1-2, §VII-B) uses the ACM DEBS 2015 Grand Challenge data (NYC taxi trips of 2013):
``key`` = route, ``value`` = fare. Its motivating query, the top-10 routes by mean fare over
15-minute windows sliding every 5 minutes, sees its result *concept* change by 30 % on average
and up to 50 % between consecutive windows. The real data is 32 GB and not available offline, so
this feed is a **synthetic stand-in**, deterministic and documented, with the properties CoD's
experiments depend on:

- **Long-tailed, drifting route popularity.** ``n_routes`` ordinary routes share
  ``1 - pool_share`` of the rides by a Zipf law of exponent ``zipf_s`` over popularity ranks.
  Time is cut into *epochs* of ``epoch_s`` (the query's slide). Every route holds a hashed score
  that it redraws once every ``1 / popularity_drift`` epochs on average (at its own phase), and
  the ranks follow the scores: each epoch a fraction ``popularity_drift`` of the routes moves
  (:class:`~spillway.feeds.popularity.DriftingZipf`).
- **Fares with a small per-route spread.** A route's mean fare is ``median_fare · exp(0.35·Z_r)``
  (a fixed per-route level), and a ride's fare is that mean times a log-normal factor of
  coefficient of variation ``fare_cv`` (0.1 by default: fares follow distance, so rides of one
  route cost about the same; CoD's error metric, §VII-C3, needs this calibration).
- **A top-10 concept with a configured drift.** ``pool_routes`` further routes (ids
  ``0 .. pool_routes - 1``) share ``pool_share`` of the rides evenly and one ordinary fare level
  (``POOL_LEVEL · median_fare``). At every epoch exactly ``top_k`` of them are *premium* (surge
  or airport-like trips): their mean fare is ``PREMIUM_FACTOR`` times that level, far above
  every other route. Premium slot
  ``j`` cycles through its own sub-pool (routes ``j, j + top_k, ...``), never repeating a route
  at a change; between consecutive epochs ``Binomial(top_k // 2, p)`` slots change, with
  ``p = drift · top_k / (top_k // 2)``, and the changes go round-robin over the slots.
  Consequence: a slot changes at most once in any two consecutive epoch boundaries, so the
  top-10 of a window of three epochs aligned on epoch boundaries (CoD Fig. 1: 15 min / 5 min)
  is exactly the premium set of its middle epoch, and of a one-epoch window its own; the
  concept distance between consecutive such windows is (slots changed) / top_k, of expectation
  ``drift`` and at most ``(top_k // 2) / top_k`` = 50 % (``drift`` must be <= that). This needs
  every premium route to have rides in each epoch: give each pool route >= ~20 rides per epoch
  (``rate · epoch_s · pool_share / pool_routes``); :meth:`TaxiFeed.rides_per_pool_route` tells.

Arrivals follow the profile (:mod:`spillway.feeds.profiles`); the epoch of a ride is that of its
arrival time, so everything stays a pure function of (seed, source, index). Several sources are
several independent ride streams sharing the same routes, popularity and premium schedule.

Examples
--------
>>> f = TaxiFeed(n_sources=1, rate=4000.0, seed=3, epoch_s=5.0, drift=0.3)
>>> p = f.payload(0, np.arange(60_000))            # three epochs
>>> int(p["key"].min()) >= 0, bool((p["value"] > 0).all())
(True, True)
>>> sorted(f.premium_routes(1).tolist()) == sorted(f.premium_routes(1).tolist())
True
>>> from spillway.quality.concept import top_k_by_mean
>>> set(top_k_by_mean(p["key"], p["value"], 10).tolist()) == set(f.premium_routes(1).tolist())
True
"""

from __future__ import annotations

from typing import Unpack

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds import hashing
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import count_of, in_range, positive
from spillway.feeds.popularity import DriftingZipf

#: Mean fare of a premium route over its ordinary level (keeps premium routes on top).
PREMIUM_FACTOR = 10.0
#: Ordinary fare level of pool routes, in units of ``median_fare``.
POOL_LEVEL = 1.5
#: Spread (log-sd) of the ordinary per-route fare levels.
ROUTE_FARE_SIGMA = 0.35


class TaxiFeed(GeneratedFeed):
    """DEBS-2015-like taxi rides: ``key`` = route id, ``value`` = fare ($). See the module doc.

    Parameters
    ----------
    n_sources, rate, profile, profile_options, seed : as :class:`GeneratedFeed`.
    n_routes : ordinary routes (thousands, like DEBS grid-cell pairs).
    zipf_s : Zipf exponent of the ordinary routes' popularity.
    popularity_drift : fraction of ordinary routes whose popularity is redrawn per epoch, [0, 1].
    drift : expected top-k concept distance between consecutive windows, [0, (top_k//2)/top_k].
    epoch_s : epoch length (s): the slide of the query whose drift ``drift`` describes.
    top_k : size of the premium set (the Fig. 1 query's limit, 10).
    pool_routes : premium-eligible routes (a multiple of ``top_k``, at least ``2·top_k``).
    pool_share : share of all rides on pool routes, (0, 0.5].
    median_fare : median ordinary fare level ($).
    fare_cv : coefficient of variation of the fares of one route, [0, 1].
    """

    name = "taxi"

    def __init__(
        self,
        *,
        n_routes: int = 3000,
        zipf_s: float = 1.2,
        popularity_drift: float = 0.2,
        drift: float = 0.3,
        epoch_s: float = 300.0,
        top_k: int = 10,
        pool_routes: int = 100,
        pool_share: float = 0.1,
        median_fare: float = 10.0,
        fare_cv: float = 0.1,
        **settings: Unpack[FeedSettings],
    ) -> None:
        super().__init__(**settings)
        self.n_routes = count_of("taxi n_routes", n_routes)
        self.zipf_s = positive("taxi zipf_s", zipf_s)
        self.popularity_drift = in_range("taxi popularity_drift", popularity_drift, 0.0, 1.0)
        self.top_k = count_of("taxi top_k", top_k, low=2)
        half = self.top_k // 2
        self.drift = in_range("taxi drift", drift, 0.0, half / self.top_k)
        self.epoch_s = positive("taxi epoch_s", epoch_s)
        self.pool_routes = count_of("taxi pool_routes", pool_routes, low=2 * self.top_k)
        if self.pool_routes % self.top_k:
            raise ConfigError(
                f"taxi pool_routes must be a multiple of top_k ({self.top_k}) so every premium "
                f"slot owns a sub-pool, got {pool_routes}"
            )
        self.pool_share = in_range("taxi pool_share", pool_share, 1e-9, 0.5)
        self.median_fare = positive("taxi median_fare", median_fare)
        self.fare_cv = in_range("taxi fare_cv", fare_cv, 0.0, 1.0)
        self.popularity = DriftingZipf(
            seed=self.seed,
            stream="taxi",
            n=self.n_routes,
            s=self.zipf_s,
            drift=self.popularity_drift,
        )
        self._change_p = self.drift * self.top_k / half
        self._changes = np.zeros(1, dtype=np.int64)  # C(e): premium changes by epoch e (cache)
        self._fare_level = self.median_fare * np.exp(
            ROUTE_FARE_SIGMA
            * hashing.normal(self.seed, "taxi.fare.level", np.arange(self.n_routes), 0)
        )
        # Pool routes share one ordinary level, so within a window their mean fares are ordered
        # by how much of the window they spent premium (what makes the top-k exact).
        self._pool_level = np.full(self.pool_routes, self.median_fare * POOL_LEVEL)

    # ------------------------------------------------------------------ concept schedule
    @property
    def n_keys(self) -> int:
        """Number of distinct route ids (pool and ordinary): keys are ``0 .. n_keys - 1``."""
        return self.pool_routes + self.n_routes

    def rides_per_pool_route(self) -> float:
        """Expected rides of one pool route per epoch and source (>= ~20 keeps top-k exact)."""
        return self.profile.mean_rate * self.epoch_s * self.pool_share / self.pool_routes

    def _changes_by(self, epoch: int) -> int:
        """C(epoch): premium slot changes at boundaries 1..epoch (cumulative, cached)."""
        if epoch >= self._changes.size:
            n = max(epoch + 1, 2 * self._changes.size)
            half = self.top_k // 2
            u = hashing.uniform(
                self.seed, "taxi.premium.change", np.arange(half)[:, None], np.arange(1, n)[None]
            )
            per = (u < self._change_p).sum(axis=0)
            self._changes = np.concatenate(([0], np.cumsum(per))).astype(np.int64)
        return int(self._changes[epoch])

    def premium_routes(self, epoch: int) -> np.ndarray:
        """Route ids of the premium (top-k) set of ``epoch`` (>= 0), by slot.

        >>> TaxiFeed(n_sources=1, rate=1.0, seed=0).premium_routes(0).size
        10
        """
        e = count_of("epoch", epoch, low=0)
        c = self._changes_by(e)
        k = self.top_k
        m = self.pool_routes // k
        slots = np.arange(k)
        tenure = np.maximum(0, -(-(c - slots) // k))  # ceil((c - j) / k), changes of slot j
        out = np.empty(k, dtype=np.int64)
        for j in range(k):
            t = int(tenure[j])
            start = int(m * hashing.uniform(self.seed, "taxi.premium.start", j, 0)[0])
            steps = 1 + np.floor(
                (m - 1) * hashing.uniform(self.seed, "taxi.premium.step", j, np.arange(1, t + 1))
            ).astype(np.int64)
            idx = (start + int(steps.sum())) % m
            out[j] = j + k * idx
        return out

    def popularity_order(self, epoch: int) -> np.ndarray:
        """Ordinary route indices (0-based) from the most to the least popular at ``epoch``."""
        return self.popularity.order(epoch)

    # ------------------------------------------------------------------ payload
    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        u = hashing.uniform(self.seed, "taxi.route", source, index)
        out = np.empty(index.shape, dtype=np.int64)
        pool = u < self.pool_share
        out[pool] = np.minimum(
            (u[pool] / self.pool_share * self.pool_routes).astype(np.int64), self.pool_routes - 1
        )
        v = (u[~pool] - self.pool_share) / (1.0 - self.pool_share)
        ep = self.epoch_of(source, index, self.epoch_s)[~pool]
        out[~pool] = self.pool_routes + self.popularity.draw(v, ep)
        return out

    def mean_fare(self, route: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """Expected fare of rides on ``route`` during ``epoch`` (arrays of equal shape)."""
        route = np.asarray(route, dtype=np.int64)
        epoch = np.asarray(epoch, dtype=np.int64)
        out = np.empty(route.shape)
        pool = route < self.pool_routes
        out[~pool] = self._fare_level[route[~pool] - self.pool_routes]
        level = self._pool_level[route[pool]]
        prem = np.zeros(level.shape, dtype=bool)
        ep = epoch[pool]
        for e in np.unique(ep):
            at = ep == e
            prem[at] = np.isin(route[pool][at], self.premium_routes(int(e)))
        out[pool] = np.where(prem, PREMIUM_FACTOR * level, level)
        return out

    def keyed_values(self, source: int, index: np.ndarray, key: np.ndarray) -> np.ndarray:
        mean = self.mean_fare(key, self.epoch_of(source, index, self.epoch_s))
        ride = hashing.lognormal(self.seed, "taxi.fare.ride", source, index, cv=self.fare_cv)
        return np.round(mean * ride, 2)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.keyed_values(source, index, self.keys(source, index))
