"""SIC mass by source time: what arrived, what was admitted, what the results carried.

THEMIS Eq. 4 sums the SIC of a query's result tuples over the source time window (STW); §4's
membership rule ties a result to the STW of its *source* tuples (a result belongs to an STW
together with the source tuples it was computed from). :class:`SourceTimeAccount` keeps, per
query, three series of SIC *mass* over intervals of source time (feed seconds):

- ``arrived``: every tuple that arrived, at the SIC it was stamped with (THEMIS Eq. 1), whether
  it was then kept or shed: one record per decided range ``[t0, t1)`` of a query;
- ``admitted``: the part of it the shedder kept;
- ``results``: the SIC the query's result rows carried (Eq. 3), one record per result window
  ``[window start, window end)``.

A record's mass is spread evenly over its interval, so the mass of an interval of source time is
the overlap-weighted sum of the records (:meth:`SourceTimeAccount.mass`).

Why a ratio (the decision)
--------------------------
Eq. 1 stamps a tuple with ``1 / (|S| n_s)`` where ``n_s`` counts the source's tuples in the STW
*trailing the decision*. Summed over any other window the stamps make 1 only while rates are
constant: after a source doubles its rate, the tuples of the next STW are stamped against
windows still half at the old rate, and their stamps sum to ``2 ln 2 = 1.39`` (an unshed query
would read 1.39, which is no information about loss at all). The same happens at the start, when
results of several windows come at once. So the query SIC this module measures is

    q_SIC(W) = results mass in W / arrived mass in W

over an STW ``W`` of source time: the share of the SIC that arrived in the window which the
results carry. With constant rates the arrived mass of a full STW is exactly 1 and this is Eq. 4
itself; whatever the rates, a query that loses nothing reads 1 and one that loses a share of
its input mass reads 1 minus that share. Nothing is clipped: a result carrying more than its
inputs (a propagation bug) reads above 1.

Which STW (the decision)
------------------------
The window is the latest STW whose results are all in: ``[E - STW, E)`` with ``E`` the source
time up to which the query's input has been processed (:meth:`set_processed`, from the batches
Spark finished). Counting results by the time they were produced instead (results in
``[now - STW, now)``) reads above 1 whenever results come in bursts (the first micro-batch of a
run delivers several windows at once: 1.3-1.4 measured on Spark), and counting the STW ending
now reads ``1 - lag / STW`` for an unshed query, because the newest windows are still being
processed. The lag is reported as latency, not as lost information.

Examples
--------
Two queries, 1 s windows, a 4 s STW; the first keeps everything, the second half:

>>> acc = SourceTimeAccount(n_queries=2, stw_s=4.0)
>>> for t in range(6):
...     acc.add("arrived", [0, 1], [t, t], [t + 1, t + 1], [0.25, 0.25])
...     acc.add("results", [0, 1], [t, t], [t + 1, t + 1], [0.25, 0.125])
>>> acc.set_processed([0, 1], 6.0)
>>> acc.measured(now=6.5).tolist()
[1.0, 0.5]
>>> acc.mass("results", 5.5, 6.0).tolist()        # half of the last window
[0.125, 0.0625]
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from spillway.errors import ConfigError

#: The series an account keeps.
SERIES: tuple[str, ...] = ("arrived", "admitted", "results")

#: Records are kept this many STWs behind the newest one (a decision may look one STW back from
#: a point up to one STW behind the newest record).
KEEP_STWS = 3.0

#: The series an archive keeps (see "The archive" in the module docstring).
ARCHIVED: tuple[str, ...] = ("arrived", "results")

#: Windows measured at once by :meth:`SourceTimeAccount.archived_mass` (bounds the memory of the
#: windows x records overlap matrix).
_CHUNK = 2048


class _Series:
    """Records (query, t0, t1, mass) in chunks, concatenated on demand."""

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.cached: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, q: np.ndarray, t0: np.ndarray, t1: np.ndarray, m: np.ndarray) -> None:
        self.chunks.append((q, t0, t1, m))
        self.cached = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self.cached is None:
            if self.chunks:
                self.cached = tuple(  # type: ignore[assignment]
                    np.concatenate([c[i] for c in self.chunks]) for i in range(4)
                )
            else:
                z = np.zeros(0)
                self.cached = (np.zeros(0, np.int64), z, z, z)
            self.chunks = [self.cached] if self.chunks else []  # type: ignore[list-item]
        assert self.cached is not None
        return self.cached

    def prune(self, before: float) -> None:
        q, t0, t1, m = self.arrays()
        keep = t1 >= before
        if not keep.all():
            self.chunks = [(q[keep], t0[keep], t1[keep], m[keep])]
            self.cached = None


def _share(t0: np.ndarray, t1: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Share of each record ``[t0, t1)`` (mass spread evenly) inside ``[a, b)``; a record of
    zero width counts whole when ``a <= t0 < b``. Broadcasts."""
    width = t1 - t0
    overlap = np.minimum(t1, b) - np.maximum(t0, a)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(
            width > 0,
            np.clip(overlap / np.where(width > 0, width, 1.0), 0.0, 1.0),
            ((t0 >= a) & (t0 < b)).astype(np.float64),
        )


def _as_1d(name: str, values: Any, n: int | None = None) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or (n is not None and arr.shape[0] not in (1, n)):
        raise ConfigError(f"{name} must be one value or one per record, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError(f"{name} must be finite, got {values!r}")
    return arr if n is None or arr.shape[0] == n else np.full(n, arr[0])


class SourceTimeAccount:
    """Per-query SIC mass over source time (see the module docstring).

    Thread-safe: one lock around every method (the Spark runtime records results from the sink
    threads while the controller reads).

    Parameters
    ----------
    n_queries : number of queries (ids ``0..Q-1``).
    stw_s : the source time window (s).
    archive : also keep every ``arrived`` and ``results`` record of the run
        (:meth:`archived_mass`; module docstring, "The archive").

    Raises
    ------
    ConfigError
        ``n_queries`` is not an int >= 0, ``stw_s`` is not a number > 0 or ``archive`` is not a
        bool.

    Examples
    --------
    >>> acc = SourceTimeAccount(n_queries=1, stw_s=10.0)
    >>> acc.measured(now=5.0).tolist()          # nothing processed yet: no value
    [nan]
    """

    def __init__(self, n_queries: int, stw_s: float, *, archive: bool = False) -> None:
        if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 0:
            raise ConfigError(f"n_queries must be an int >= 0, got {n_queries!r}")
        ok = isinstance(stw_s, int | float) and not isinstance(stw_s, bool)
        if not (ok and math.isfinite(stw_s) and stw_s > 0):
            raise ConfigError(f"stw_s must be a finite number > 0 (seconds), got {stw_s!r}")
        if not isinstance(archive, bool):
            raise ConfigError(f"archive must be True or False, got {archive!r}")
        self.n_queries = n_queries
        self.stw_s = float(stw_s)
        self._series = {s: _Series() for s in SERIES}
        self._archive = {s: _Series() for s in ARCHIVED} if archive else None
        self._processed = np.full(n_queries, -math.inf)
        self._newest = -math.inf
        self._lock = threading.Lock()

    def _check_series(self, series: str) -> _Series:
        try:
            return self._series[series]
        except KeyError:
            raise ConfigError(
                f"series must be one of {', '.join(SERIES)}; got {series!r}"
            ) from None

    def add(self, series: str, query: Any, t0: Any, t1: Any, mass: Any) -> None:
        """Record SIC ``mass`` of ``query`` spread over source time ``[t0, t1)`` (arrays or
        scalars, broadcast to one record each).

        Raises
        ------
        ConfigError
            An unknown series or query id, a negative or non-finite mass, or ``t1 < t0``.
        """
        s = self._check_series(series)
        q = np.atleast_1d(np.asarray(query, dtype=np.int64))
        n = q.shape[0]
        lo, hi = _as_1d("t0", t0, n), _as_1d("t1", t1, n)
        m = _as_1d("mass", mass, n)
        if n == 0:
            return
        if q.min() < 0 or q.max() >= self.n_queries:
            raise ConfigError(f"query ids must be in 0..{self.n_queries - 1}, got {q.tolist()}")
        if (m < 0).any():
            raise ConfigError(f"mass must be >= 0, got {m[m < 0].tolist()}")
        if (hi < lo).any():
            raise ConfigError("every record needs t1 >= t0 (an interval of source time)")
        with self._lock:
            s.add(q, lo, hi, m)
            if self._archive is not None and series in self._archive:
                self._archive[series].add(q, lo, hi, m)
            newest = float(hi.max())
            if newest > self._newest:
                self._newest = newest
                before = newest - KEEP_STWS * self.stw_s
                for other in self._series.values():
                    other.prune(before)

    def mass(self, series: str, lo: Any, hi: Any) -> np.ndarray:
        """Every query's mass of ``series`` inside source time ``[lo, hi)`` (one bound for all
        queries, or one per query), shape (Q,).

        >>> acc = SourceTimeAccount(n_queries=1, stw_s=4.0)
        >>> acc.add("arrived", 0, 0.0, 2.0, 1.0)
        >>> acc.mass("arrived", 1.5, 10.0).tolist(), acc.mass("arrived", 2.0, 3.0).tolist()
        ([0.25], [0.0])
        """
        s = self._check_series(series)
        lo_q = np.broadcast_to(np.asarray(lo, dtype=np.float64), (self.n_queries,))
        hi_q = np.broadcast_to(np.asarray(hi, dtype=np.float64), (self.n_queries,))
        with self._lock:
            q, t0, t1, m = s.arrays()
        if q.size == 0:
            return np.zeros(self.n_queries)
        share = _share(t0, t1, lo_q[q], hi_q[q])
        return np.bincount(q, weights=m * share, minlength=self.n_queries)

    def archived_mass(self, series: str, query: Any, lo: Any, hi: Any) -> np.ndarray:
        """Mass of ``series`` of each ``query[i]`` inside ``[lo[i], hi[i])``, from the archive
        (every record of the run), shape (N,): one value per (query, interval) given.

        Raises
        ------
        ConfigError
            The account keeps no archive (``archive=False``), ``series`` is not archived
            (:data:`ARCHIVED`), or the arrays do not match.

        Examples
        --------
        >>> acc = SourceTimeAccount(n_queries=2, stw_s=2.0, archive=True)
        >>> for t in range(10):                           # long after the live part is pruned
        ...     acc.add("arrived", [0, 1], t, t + 1, [0.5, 0.25])
        >>> acc.archived_mass("arrived", [0, 1, 0], [0.0, 0.0, 0.5], [1.0, 1.0, 2.0]).tolist()
        [0.5, 0.25, 0.75]
        >>> acc.mass("arrived", 0.0, 1.0).tolist()         # the live account forgot it
        [0.0, 0.0]
        """
        if self._archive is None:
            raise ConfigError(
                "archived_mass needs an account built with archive=True (it keeps every record "
                "of the run); this one keeps only the last STWs"
            )
        if series not in self._archive:
            raise ConfigError(f"series must be one of {', '.join(ARCHIVED)}; got {series!r}")
        qs = np.atleast_1d(np.asarray(query, dtype=np.int64))
        n = qs.shape[0]
        a, b = _as_1d("lo", lo, n), _as_1d("hi", hi, n)
        with self._lock:
            rq, t0, t1, m = self._archive[series].arrays()
        out = np.zeros(n)
        for qi in np.unique(qs):
            mine = rq == qi
            want = np.flatnonzero(qs == qi)
            r0, r1, rm = t0[mine], t1[mine], m[mine]
            for i in range(0, want.size, _CHUNK):
                w = want[i : i + _CHUNK]
                share = _share(r0[None, :], r1[None, :], a[w][:, None], b[w][:, None])
                out[w] = share @ rm
        return out

    def fraction(self, lo: Any, hi: Any, numerator: str = "results") -> np.ndarray:
        """``numerator`` mass over arrived mass inside ``[lo, hi)``, per query (NaN where
        nothing arrived)."""
        num = self.mass(numerator, lo, hi)
        den = self.mass("arrived", lo, hi)
        out = np.full(self.n_queries, np.nan)
        np.divide(num, den, out=out, where=den > 0)
        return out

    def set_processed(self, query: Any, t: float) -> None:
        """The input of ``query`` (ids) has been processed up to source time ``t`` (never moves
        back)."""
        q = np.atleast_1d(np.asarray(query, dtype=np.int64))
        if q.size and (q.min() < 0 or q.max() >= self.n_queries):
            raise ConfigError(f"query ids must be in 0..{self.n_queries - 1}, got {q.tolist()}")
        with self._lock:
            self._processed[q] = np.maximum(self._processed[q], float(t))

    @property
    def processed(self) -> np.ndarray:
        """Source time up to which each query's input is processed (-inf before any)."""
        with self._lock:
            return self._processed.copy()

    def measured(self, now: float | None = None) -> np.ndarray:
        """Every query's SIC over its latest complete STW (module docstring), shape (Q,).

        ``now`` (source time) caps the window's end; NaN for a query with nothing processed or
        no arrivals in that window.
        """
        end = self.processed
        if now is not None:
            end = np.minimum(end, float(now))
        done = np.isfinite(end)
        out = np.full(self.n_queries, np.nan)
        if done.any():
            e = np.where(done, end, 0.0)
            out[done] = self.fraction(e - self.stw_s, e)[done]
        return out

    def windows(self, series: str, queries: Sequence[int] | None = None) -> int:
        """Number of records of ``series`` kept (for ``queries``, default all)."""
        q = self._check_series(series).arrays()[0]
        return int(q.size if queries is None else np.isin(q, list(queries)).sum())
