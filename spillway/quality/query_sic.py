"""Query SIC from result tuples over a sliding STW (THEMIS Eq. 4).

``q_SIC = sum of t_SIC over the query's result tuples in the STW``. Propagation (Eq. 3) carries
every processed source tuple's SIC into the results, so in an unshed run this sums to about 1
and shedding lowers it by exactly the SIC that was dropped (THEMIS §4; Fiscato Eq. 4.1).
THEMIS's query coordinator computes it and sends it to the nodes every 250 ms (§6).

:class:`QuerySicLedger` keeps, for many queries at once, one bucket of result SIC per slide in a
ring of ``STW/slide`` buckets (a ``(n_slots, Q)`` numpy array). :meth:`QuerySicLedger.add` takes
arrays of results (time, query, SIC); :meth:`QuerySicLedger.value` returns every query's SIC over
the window ending at ``now``.

Conventions
-----------
- Bucket ``b`` holds results with time in ``[b * slide, (b + 1) * slide)``. At ``now`` the
  window is the ``n_slots`` buckets ending with the one that contains the instant just before
  ``now``; called on slide boundaries (as a shedding loop does) that is exactly
  ``[now - STW, now)``, as long as no result of the next slide has arrived yet (the two
  windowing limits are in :class:`QuerySicLedger`'s Notes).
- A result older than the window kept in the ring is dropped on arrival and counted in
  :attr:`QuerySicLedger.expired`.
- No clipping: a value can slightly exceed 1 (rate changes, STW alignment; THEMIS §7 measured
  1.0086 with a 100 s STW).
- **Partial window.** While less than one STW has passed since a query's ``origin`` (its
  deployment), :meth:`QuerySicLedger.value` extrapolates the sum to a full window by
  ``STW / (now - origin)``, the same factor :class:`spillway.quality.StwCounter` uses for its
  source counts, so an unshed query reads about 1 from the start. Results lag their source
  tuples by the processing latency ``L``; in the first window the reading is therefore about
  ``1 - L / (now - origin)`` (after it, ``1 - L / STW``): a reason for THEMIS's rule that the
  STW be much longer than the latency. :meth:`QuerySicLedger.window_sum` gives the raw sum.

Examples
--------
>>> import numpy as np
>>> ledger = QuerySicLedger(StwConfig(stw_s=2.0, slide_s=0.5), n_queries=2)
>>> ledger.add(result_time=[0.2, 0.9, 1.7], query_index=[0, 0, 1], sic=[0.25, 0.25, 0.5])
>>> ledger.value(now=2.0).tolist()
[0.5, 0.5]
>>> ledger.value(now=2.5).tolist()     # the result at 0.2 has left the window
[0.25, 0.5]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.quality.sic import StwConfig

_TIME_TOL = 1e-9


def _finite_times(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ConfigError(f"{name} must be finite (seconds), got {values!r}")
    return arr


def _origins(values: Any, n: int) -> np.ndarray:
    arr = _finite_times(values, "origin_s")
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != n):
        raise ConfigError(
            f"origin_s must be a scalar or have one entry per query ({n}), got shape {arr.shape}"
        )
    return np.array(np.broadcast_to(arr, (n,)), dtype=np.float64)


class QuerySicLedger:
    """Per-query rolling sum of result SIC over the STW (THEMIS Eq. 4), vectorised.

    Parameters
    ----------
    config : StwConfig
        Window length and slide (the same window the sources are stamped with).
    n_queries : int
        Number of queries (more can be added with :meth:`add_queries`).
    origin_s : float or array-like (Q,)
        Time each query started producing (its deployment); used only to extrapolate the
        window while it is younger than one STW. Default 0.

    Raises
    ------
    ConfigError
        On a wrong config type, a negative ``n_queries`` or non-finite origins.

    Notes
    -----
    The window is whole slides of a ring that follows the newest result, which limits it twice:

    1. Asked between two slide boundaries, the window is the whole slides before the current
       one plus the current slide's part so far: short by the rest of the current slide (the
       missing part is at its old end).
    2. Once a result of the next slide has arrived, the ring has already dropped its oldest
       slide, so a boundary asked after that (a decision taken late) is short by one slide.

    A query producing one result per slide then reads ``1 - slide / STW`` at such moments. The
    Spark runtime's query coordinator (:class:`spillway.spark.coordinator.QueryCoordinator`)
    therefore does not use this ledger for Eq. 4: it keeps the recent result rows and sums them
    exactly over ``[now - STW, now)`` for any ``now``.

    Examples
    --------
    A query deployed at 0 whose results carry 1/4 of its window every 0.25 s of a 1 s STW:

    >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.25), n_queries=1)
    >>> ledger.add([0.0], [0], [0.25])
    >>> float(ledger.window_sum(0.25)[0]), float(ledger.value(0.25)[0])
    (0.25, 1.0)

    The two limits, with a 2 s STW of 1 s slides (the exact sum over ``[now - 2, now)`` is 1.0
    at every ``now`` below):

    >>> ledger = QuerySicLedger(StwConfig(stw_s=2.0, slide_s=1.0), n_queries=1)
    >>> ledger.add([0.5, 1.5], [0, 0], [0.5, 0.5])
    >>> ledger.window_sum(2.0).tolist(), ledger.window_sum(2.5).tolist()
    ([1.0], [0.5])
    >>> ledger.add([2.2], [0], [0.5])
    >>> ledger.window_sum(2.0).tolist()
    [0.5]
    """

    def __init__(self, config: StwConfig, n_queries: int, origin_s: Any = 0.0) -> None:
        if not isinstance(config, StwConfig):
            raise ConfigError(f"config must be a StwConfig, got {type(config).__name__}")
        if isinstance(n_queries, bool) or not isinstance(n_queries, int | np.integer):
            raise ConfigError(f"n_queries must be an int >= 0, got {n_queries!r}")
        if n_queries < 0:
            raise ConfigError(f"n_queries must be an int >= 0, got {n_queries!r}")
        self.config = config
        n = config.n_slots
        self._sums = np.zeros((n, int(n_queries)), dtype=np.float64)
        self._ids = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        self._origin = _origins(origin_s, int(n_queries))
        self.expired = 0

    @property
    def n_queries(self) -> int:
        """Number of queries Q."""
        return int(self._sums.shape[1])

    @property
    def origin_s(self) -> np.ndarray:
        """Start time of every query (Q,)."""
        return self._origin.copy()

    def _bucket(self, t: np.ndarray) -> np.ndarray:
        return np.floor(t / self.config.slide_s + _TIME_TOL).astype(np.int64)

    def _last_bucket(self, now: float) -> int:
        return int(np.ceil(now / self.config.slide_s - _TIME_TOL)) - 1

    def add_queries(self, n: int, origin_s: Any) -> np.ndarray:
        """Append ``n`` queries that started at ``origin_s``; returns their indices.

        >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=1)
        >>> ledger.add_queries(2, origin_s=3.0).tolist(), ledger.n_queries
        ([1, 2], 3)
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ConfigError(f"add_queries needs an int n >= 0, got {n!r}")
        start = self.n_queries
        origin = _origins(origin_s, int(n))
        self._sums = np.concatenate(
            [self._sums, np.zeros((self._sums.shape[0], int(n)), dtype=np.float64)], axis=1
        )
        self._origin = np.concatenate([self._origin, origin])
        return np.arange(start, start + int(n), dtype=np.int64)

    def add(self, result_time: Any, query_index: Any, sic: Any) -> None:
        """Record result tuples (or whole result batches with their summed SIC).

        Parameters
        ----------
        result_time : array-like of float, shape (R,)
            Time of each result (THEMIS ``t^r_tau``), in the same clock as ``now``.
        query_index : array-like of int, shape (R,)
            Query of each result, ``0 <= query_index < n_queries``.
        sic : array-like of float >= 0, shape (R,)
            SIC of each result (an empty result carries its firing's SIC, see
            :mod:`spillway.quality.propagation`).

        Raises
        ------
        ConfigError
            On mismatched shapes, unknown query indices, or negative or non-finite SIC.

        Examples
        --------
        >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=2)
        >>> ledger.add(result_time=[0.1, 0.2, 0.3], query_index=[1, 1, 0], sic=[0.2, 0.3, 0.4])
        >>> ledger.window_sum(0.5).tolist()
        [0.4, 0.5]
        """
        t = np.atleast_1d(_finite_times(result_time, "result_time"))
        q = np.atleast_1d(np.asarray(query_index))
        s = np.atleast_1d(np.asarray(sic, dtype=np.float64))
        if t.ndim != 1 or q.shape != t.shape or s.shape != t.shape:
            raise ConfigError(
                "result_time, query_index and sic must be 1-D arrays of one length, got shapes "
                f"{t.shape}, {q.shape}, {s.shape}"
            )
        if t.size == 0:
            return
        if q.dtype.kind not in "iu" or q.min() < 0 or q.max() >= self.n_queries:
            raise ConfigError(
                f"query_index must be ints in 0..{self.n_queries - 1}, got {query_index!r}"
            )
        if not np.isfinite(s).all() or s.min() < 0:
            raise ConfigError(f"sic must be finite and >= 0, got {sic!r}")
        n = self._ids.shape[0]
        b = self._bucket(t)
        slot = b % n
        newest = self._ids.copy()
        np.maximum.at(newest, slot, b)
        renew = newest > self._ids
        self._sums[renew] = 0.0
        self._ids = newest
        # A result is kept if its bucket is the one its slot now holds and is not older than
        # the window ending at the newest bucket seen.
        keep = (self._ids[slot] == b) & (b > self._ids.max() - n)
        self.expired += int((~keep).sum())
        flat = slot[keep] * self.n_queries + q[keep].astype(np.int64)
        self._sums += np.bincount(flat, weights=s[keep], minlength=self._sums.size).reshape(
            self._sums.shape
        )

    def window_sum(self, now: float) -> np.ndarray:
        """Raw sum of result SIC per query over the window ending at ``now`` (Q,).

        >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=1)
        >>> ledger.add([0.1, 0.6], [0, 0], [0.25, 0.5])
        >>> ledger.window_sum(1.0).tolist(), ledger.window_sum(1.5).tolist()
        ([0.75], [0.5])
        """
        e = self._last_bucket(float(_finite_times(now, "now")))
        n = self._ids.shape[0]
        live = (self._ids > e - n) & (self._ids <= e)
        return self._sums[live].sum(axis=0)

    def value(self, now: float) -> np.ndarray:
        """Query SIC over the STW ending at ``now`` (THEMIS Eq. 4), per query (Q,).

        The raw :meth:`window_sum`, extrapolated by ``STW / (now - origin)`` for queries younger
        than one STW; 0 for queries that have not started. Never clipped to 1.

        >>> ledger = QuerySicLedger(StwConfig(stw_s=4.0, slide_s=1.0), n_queries=2,
        ...                         origin_s=[0.0, 2.0])
        >>> ledger.add([0.5, 1.5, 2.5, 3.5], [0, 0, 1, 0], [0.25, 0.25, 0.25, 0.25])
        >>> ledger.window_sum(4.0).tolist(), ledger.value(4.0).tolist()
        ([0.75, 0.25], [0.75, 0.5])
        """
        now_f = float(_finite_times(now, "now"))
        raw = self.window_sum(now_f)
        age = now_f - self._origin
        scale = np.where(age >= self.config.stw_s, 1.0, 0.0)
        young = (age > 0) & (age < self.config.stw_s)
        scale[young] = self.config.stw_s / age[young]
        return raw * scale

    def snapshot(self) -> dict[str, Any]:
        """The ledger's state as plain picklable values (config included).

        >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=1)
        >>> ledger.add([0.1], [0], [0.5])
        >>> other = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=0)
        >>> other.restore(ledger.snapshot()); other.window_sum(0.5).tolist()
        [0.5]
        """
        return {
            "config": self.config.to_dict(),
            "sums": self._sums.copy(),
            "ids": self._ids.copy(),
            "origin": self._origin.copy(),
            "expired": self.expired,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot` (queries and config included).

        Raises
        ------
        ConfigError
            When the snapshot's window differs from this ledger's config.

        Examples
        --------
        >>> ledger = QuerySicLedger(StwConfig(stw_s=1.0, slide_s=0.5), n_queries=1)
        >>> snap = ledger.snapshot(); ledger.add([0.1], [0], [0.5]); ledger.restore(snap)
        >>> ledger.window_sum(0.5).tolist()
        [0.0]
        """
        cfg = StwConfig.from_dict(snapshot["config"])
        if cfg != self.config:
            raise ConfigError(
                f"snapshot was taken with {cfg}, this ledger has {self.config}; restore into a "
                "ledger built with the same StwConfig"
            )
        self._sums = np.array(snapshot["sums"], dtype=np.float64)
        self._ids = np.array(snapshot["ids"], dtype=np.int64)
        self._origin = np.array(snapshot["origin"], dtype=np.float64)
        self.expired = int(snapshot["expired"])

    def __repr__(self) -> str:
        return f"QuerySicLedger({self.config!r}, n_queries={self.n_queries})"
