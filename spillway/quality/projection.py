"""A node's projection of its queries' SIC between coordinator updates (THEMIS §6).

The coordinator's value of a query (:class:`~spillway.quality.coordination.SicUpdate`) is
late twice: the message takes time to arrive, and the results it sums lag the admissions that
made them (processing, window firing, the hops of a multi-fragment query). THEMIS §6 has each
shedder project "the effect that its shedding will have on the result SIC value": it "assumes
that all batches in the IB are discarded" and "subtracts the sum of the SIC values of batches
from the current updated query result SIC", then adds back the SIC of what it keeps (Alg. 1
line 21; DISSP Alg. 1 lines 4-8 alike). :class:`LocalProjection` gives that base
(:attr:`spillway.policies.Backlog.query_sic`), with the node's own admissions since the update
added, because the node knows them exactly::

    base_q = (sic_q + own_q(now) - own_q(as_of - lag_q) - waiting_q) / ceiling_q

- ``sic_q`` and ``ceiling_q``: the last update received (Eq. 4 at ``as_of``, and the SIC the
  query can still reach, 1 with every node alive);
- ``own_q(t)``: SIC this node admitted for ``q`` in decisions in ``[t - STW, t)`` (Eq. 4
  applied to the node's own admissions);
- ``lag_q``: how long an admission takes to show in the query's results, so the update's
  value reflects this node's admissions up to about ``as_of - lag_q``; the difference replaces
  the node's part of the stale value by its part now (what entered and left the window since);
- ``waiting_q``: SIC of the query's tuples waiting in this node's input buffer, "as if
  discarded" (THEMIS).

Subtracting the waiting SIC is what makes a query with a valuable batch waiting (an upstream
fragment's partial result, which carries the SIC of many source tuples) rank low, so that
Algorithm 1 admits that batch first (highest SIC first within ``q'``) instead of wasting the
upstream node's work (THEMIS §5.2, "wasted upstream work"). Other nodes' changes arrive with
the next update. Without a coordinator (THEMIS Fig. 4, top) the base is
:meth:`LocalProjection.own`: the node balances only the SIC its own fragments secured.

Times are on the STW's slide grid (decisions happen once per shedding interval = slide); a
time between two slides counts at the slide it falls in. The ring keeps ``STW + history_s`` of
admissions: asking about an older instant uses the oldest one kept.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §5.2 (Assumption 3, ``updateSIC``) and §6 "Tuple
shedder"; Fiscato, PhD thesis 2012, §5.3 Algorithm 1 (projected SCR from the global value).

Examples
--------
A node hosting two queries admits 0.05 of query 0's SIC every 1 s slide; the coordinator's
value at 10 s, received late, still says 0.3 for both (its results lag by 2 s).

>>> p = LocalProjection(StwConfig(stw_s=4.0, slide_s=1.0), n_queries=2, lag_s=2.0)
>>> for t in range(12):
...     p.record(float(t), [0.05 if t >= 8 else 0.0, 0.0])
>>> p.own(12.0).tolist()
[0.2, 0.0]
>>> p.base(12.0, sic=[0.3, 0.3], as_of=10.0).round(3).tolist()
[0.5, 0.3]
>>> p.base(12.0, sic=[0.3, 0.3], as_of=10.0, waiting=[0.0, 0.1]).round(3).tolist()
[0.5, 0.2]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.quality.sic import StwConfig

_TIME_TOL = 1e-9


def _per_query(values: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != n):
        raise ConfigError(
            f"{name} must be a scalar or have one entry per query ({n}), got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise ConfigError(f"{name} must be finite, got {values!r}")
    return np.array(np.broadcast_to(arr, (n,)), dtype=np.float64)


class LocalProjection:
    """A node's own admitted SIC per query over the STW, and the projected base it gives.

    Parameters
    ----------
    stw : StwConfig
        The source time window (its slide is the shedding interval).
    n_queries : int
        Queries (fragments) the node hosts.
    lag_s : float or array (n_queries,)
        Time from an admission to its effect on the query's results (>= 0).
    history_s : float
        How far before ``now`` the projection may be asked about (``as_of - lag``): update
        delay plus lag. Default: one STW plus the largest lag.
    origin_s : float or array (n_queries,)
        Deployment time of each query; :meth:`own` is extrapolated while younger than one STW.

    Raises
    ------
    ConfigError
        A wrong ``stw`` type, a negative count, lag or history, or a non-finite value.

    Examples
    --------
    >>> p = LocalProjection(StwConfig(stw_s=2.0, slide_s=0.5), n_queries=1)
    >>> p.record(0.0, [0.1]); p.record(0.5, [0.1])
    >>> p.own(1.0).tolist()           # 0.2 over half a window, extrapolated to a full one
    [0.4]
    >>> p.record(0.0, [0.1])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: record times must not go back: got 0.0 after 0.5
    """

    def __init__(
        self,
        stw: StwConfig,
        n_queries: int,
        *,
        lag_s: Any = 0.0,
        history_s: float | None = None,
        origin_s: Any = 0.0,
    ) -> None:
        if not isinstance(stw, StwConfig):
            raise ConfigError(f"stw must be a StwConfig, got {type(stw).__name__}")
        if (
            isinstance(n_queries, bool)
            or not isinstance(n_queries, int | np.integer)
            or n_queries < 0
        ):
            raise ConfigError(f"n_queries must be an int >= 0, got {n_queries!r}")
        n = int(n_queries)
        self.stw = stw
        self.lag_s = _per_query(lag_s, n, "lag_s")
        if n and self.lag_s.min() < 0:
            raise ConfigError(f"lag_s must be >= 0, got {lag_s!r}")
        self.origin_s = _per_query(origin_s, n, "origin_s")
        hist = (
            stw.stw_s + (float(self.lag_s.max()) if n else 0.0) if history_s is None else history_s
        )
        if (
            isinstance(hist, bool)
            or not isinstance(hist, int | float)
            or not math.isfinite(hist)
            or hist < 0
        ):
            raise ConfigError(
                f"history_s must be a finite number >= 0 (seconds), got {history_s!r}"
            )
        # Cumulative admitted SIC through slide j, kept at ring[j % size].
        self._size = stw.n_slots + int(math.ceil(hist / stw.slide_s)) + 2
        self._ring = np.zeros((self._size, n))
        self._first: int | None = None
        self._last = 0
        self._n = n

    @property
    def n_queries(self) -> int:
        """Number of hosted queries."""
        return self._n

    def _slide(self, t: Any) -> Any:
        return np.floor(np.asarray(t, dtype=np.float64) / self.stw.slide_s + _TIME_TOL).astype(
            np.int64
        )

    def record(self, now: float, gained: Any) -> None:
        """Add the SIC this node admitted per query in the decision at ``now``.

        Raises
        ------
        ConfigError
            ``gained`` of the wrong shape, negative or not finite; ``now`` before an earlier
            record.
        """
        g = np.asarray(gained, dtype=np.float64)
        if g.shape != (self._n,):
            raise ConfigError(
                f"gained must have one entry per query ({self._n}), got shape {g.shape}"
            )
        if not np.isfinite(g).all() or (g.size and g.min() < 0):
            raise ConfigError("gained must be finite and >= 0")
        j = int(self._slide(float(now)))
        if self._first is None:
            self._first = self._last = j
            self._ring[j % self._size] = g
            return
        if j < self._last:
            raise ConfigError(
                f"record times must not go back: got {float(now)} after "
                f"{self._last * self.stw.slide_s}"
            )
        if j > self._last:
            prev = self._ring[self._last % self._size].copy()
            for i in range(max(self._last + 1, j - self._size + 1), j + 1):
                self._ring[i % self._size] = prev
            self._last = j
        self._ring[j % self._size] += g

    def _through(self, j: np.ndarray) -> np.ndarray:
        """Cumulative admitted SIC through slide ``j`` for every query (j per query)."""
        if self._first is None:
            return np.zeros(self._n)
        jj = np.minimum(j, self._last)
        jj = np.maximum(jj, self._last - self._size + 1)
        vals = self._ring[jj % self._size, np.arange(self._n)]
        return np.where(j < self._first, 0.0, vals)

    def _window(self, t: Any) -> np.ndarray:
        """Raw own SIC admitted in ``[t - STW, t)`` per query (``t`` scalar or per query)."""
        end = np.broadcast_to(self._slide(t), (self._n,))
        n = self.stw.n_slots
        if self._first is not None:
            oldest_end = self._last - self._size + 2 + n  # both ends of the window still kept
            if oldest_end - 1 - n > self._first:  # the ring has dropped admissions: clamp
                end = np.maximum(end, oldest_end)
        return self._through(end - 1) - self._through(end - 1 - n)

    def own(self, now: float) -> np.ndarray:
        """SIC this node admitted per query in ``[now - STW, now)``; extrapolated by
        ``STW / age`` for queries younger than one STW (the base without a coordinator)."""
        raw = self._window(float(now))
        age = float(now) - self.origin_s
        stw = self.stw.stw_s
        scale = np.where(age >= stw, 1.0, 0.0)
        young = (age > 0) & (age < stw)
        scale[young] = stw / age[young]
        return raw * scale

    def base(
        self, now: float, sic: Any, as_of: Any, ceiling: Any = 1.0, waiting: Any = 0.0
    ) -> np.ndarray:
        """The projected SIC of every hosted query before this node's decision at ``now``.

        Parameters
        ----------
        now : float
            The decision's time.
        sic : float array (n_queries,)
            Each query's SIC in the last update received (Eq. 4 at ``as_of``).
        as_of : float or array (n_queries,)
            The instant that update refers to.
        ceiling : float or array (n_queries,)
            The update's reachable SIC per query; the base is divided by it (0 where it is 0).
        waiting : float or array (n_queries,)
            SIC of each query's tuples waiting in the node's input buffer (>= 0).

        Returns
        -------
        float array (n_queries,): the projection (clipped at 0) minus the waiting SIC, over
        the ceiling; negative when more is waiting than the query has secured.
        """
        s = _per_query(sic, self._n, "sic")
        ref = _per_query(as_of, self._n, "as_of") - self.lag_s
        c = _per_query(ceiling, self._n, "ceiling")
        w = _per_query(waiting, self._n, "waiting")
        if self._n and w.min() < 0:
            raise ConfigError("waiting must be >= 0 (SIC of the tuples in the input buffer)")
        projected = np.maximum(s + self._window(float(now)) - self._window(ref), 0.0) - w
        out = np.zeros(self._n)
        np.divide(projected, c, out=out, where=c > 0)
        return out

    def __repr__(self) -> str:
        return f"LocalProjection({self.stw!r}, n_queries={self._n})"


__all__ = ["LocalProjection"]
