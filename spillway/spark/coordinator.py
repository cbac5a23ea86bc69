"""The query coordinator: every logical query's result SIC, latency and row counts.

THEMIS §6 gives each query a coordinator that sums the SIC of the query's result tuples over the
STW (Eq. 4) and tells the nodes, whose shedders use it to balance queries. On Spark the result
sinks of all plans (``foreachBatch`` functions, possibly running concurrently in several
threads) call :meth:`QueryCoordinator.record`; the NodeController reads
:meth:`QueryCoordinator.query_sic` every shedding interval. This class keeps the recent result
rows (time, query, SIC) and sums them over the STW exactly, under a lock, with the latency of
each result over the recent STW and row counters.

A result's time (THEMIS ``t^r_τ``) is the moment the sink produced it (``produced_at``,
in the same clock as ``now``). Counting is per result *window*: a TOP-5 window's five rows carry
one latency and one ``n_in`` between them, so the latency and input-row figures take each
(query, window) once, while the SIC adds every row (the rows split the window's SIC).

Eq. 4 is the sum over the STW ``[now - STW, now)``, sliding continuously (THEMIS §6). It is
summed from the recorded rows rather than kept in a :class:`spillway.quality.QuerySicLedger`
(one bucket per slide in a ring of ``STW/slide`` buckets that follows the newest result)
because the ledger is exact only when asked on a slide boundary before any result of the next
slide arrived: asked between two boundaries its window is the whole slides before the current
one plus the current slide's part so far, short by the rest of that slide, and once a result of
the current slide is recorded the ring has dropped the oldest whole slide, so a boundary asked
after that (a shedding decision Spark asks for late) is short by one slide too. A node producing
one result window per slide then reads ``1 - slide/STW`` at such moments (measured on Spark: a
100 s STW sampled every second averaged 0.981 where the exact sum of the same results over the
STW was 0.988).

Examples
--------
>>> import pandas as pd
>>> coord = QueryCoordinator(n_queries=2, stw_s=4.0, slide_s=1.0)
>>> coord.record(pd.DataFrame({"query_id": [0, 1, 1], "window_start": [0.0, 0.0, 0.0],
...     "sic": [0.5, 0.25, 0.25], "n_in": [10, 6, 6], "latency_s": [1.0, 2.0, 2.0],
...     "produced_at": [1.5, 1.5, 1.5]}))
>>> coord.query_sic(now=4.0).tolist()
[0.5, 0.5]
>>> coord.latency_p95(now=4.0).tolist()
[1.0, 2.0]
>>> coord.counters().rows_in.tolist(), coord.counters().rows_out.tolist()
([10, 6], [1, 2])
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import ConfigError
from spillway.quality.sic import StwConfig

#: Result rows are kept this many STWs behind the newest one, so an STW ending up to one STW
#: before the newest result (a late shedding decision) is still summed whole.
KEEP_STWS = 2.0

#: Columns :meth:`QueryCoordinator.record` reads.
RECORD_COLUMNS: tuple[str, ...] = (
    "query_id",
    "window_start",
    "sic",
    "n_in",
    "latency_s",
    "produced_at",
)


@dataclass(frozen=True, kw_only=True)
class QueryCounters:
    """Totals since the coordinator started, per query (arrays of length Q).

    ``windows``: result windows reported; ``rows_out``: result rows; ``rows_in``: input rows
    the results were computed from (tuples that survived shedding).
    """

    windows: np.ndarray
    rows_out: np.ndarray
    rows_in: np.ndarray


class QueryCoordinator:
    """Query SIC over the STW (THEMIS Eq. 4), p95 latency and counters, for Q queries.

    Thread-safe: every method holds one lock, so the sinks of several plans may record while
    the controller reads.

    Parameters
    ----------
    n_queries : number of logical queries on the node (``query_id`` 0..Q-1).
    stw_s : the source time window in seconds (THEMIS: 10 s).
    slide_s : the STW's slide, the shedding interval (default ``stw_s / 10``); ``stw_s`` must
        be a multiple of it. Kept in :attr:`config`; Eq. 4 itself slides continuously.
    origin_s : when the queries started producing (one value or one per query), in the clock of
        ``now``; used to extrapolate Eq. 4 while less than one STW has passed.

    Raises
    ------
    ConfigError
        A negative ``n_queries``, a bad window (see :class:`spillway.quality.sic.StwConfig`) or
        a non-finite ``origin_s`` (or one of the wrong length).

    Examples
    --------
    >>> coord = QueryCoordinator(n_queries=1, stw_s=10.0)
    >>> coord.query_sic(now=5.0).tolist(), bool(np.isnan(coord.latency_p95(now=5.0)[0]))
    ([0.0], True)
    """

    def __init__(
        self, n_queries: int, stw_s: float, *, slide_s: float | None = None, origin_s: Any = 0.0
    ) -> None:
        if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 0:
            raise ConfigError(f"n_queries must be an int >= 0, got {n_queries!r}")
        if slide_s is None:
            # A stw_s that is not a number gets no slide: StwConfig rejects it (stw_s first).
            numeric = isinstance(stw_s, int | float) and not isinstance(stw_s, bool)
            slide_s = stw_s / 10 if numeric else math.nan
        self.config = StwConfig(stw_s=stw_s, slide_s=slide_s)
        origin = np.asarray(origin_s, dtype=np.float64)
        if origin.ndim > 1 or (origin.ndim == 1 and origin.shape[0] != n_queries):
            raise ConfigError(
                f"origin_s must be one time or one per query ({n_queries}), got shape "
                f"{origin.shape}"
            )
        if not np.isfinite(origin).all():
            raise ConfigError(f"origin_s must be finite (seconds), got {origin_s!r}")
        self._origin = np.array(np.broadcast_to(origin, (n_queries,)), dtype=np.float64)
        self._n = n_queries
        #: Recorded result rows, one (times, query ids, SIC) triple per record() call.
        self._rows: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque()
        self._newest = -math.inf
        self._lock = threading.Lock()
        self._latency: deque[tuple[float, int, float]] = deque()
        self._windows = np.zeros(n_queries, dtype=np.int64)
        self._rows_out = np.zeros(n_queries, dtype=np.int64)
        self._rows_in = np.zeros(n_queries, dtype=np.int64)

    @property
    def n_queries(self) -> int:
        """Number of queries Q."""
        return self._n

    def record(self, results: pd.DataFrame | Mapping[str, Any]) -> None:
        """Record result rows (any number of queries and windows).

        Parameters
        ----------
        results : a table with the :data:`RECORD_COLUMNS` (pandas DataFrame or a mapping of
            equal-length arrays): one row per result row.

        Raises
        ------
        ConfigError
            A column is missing, a query id is out of range, a SIC is negative or not finite,
            or a time is not finite.
        """
        df = results if isinstance(results, pd.DataFrame) else pd.DataFrame(dict(results))
        missing = [c for c in RECORD_COLUMNS if c not in df.columns]
        if missing:
            raise ConfigError(
                f"record needs the columns {', '.join(RECORD_COLUMNS)}; missing "
                f"{', '.join(missing)}: pass the sink's result rows"
            )
        if df.empty:
            return
        q = df["query_id"].to_numpy(dtype=np.int64)
        if q.min() < 0 or q.max() >= self.n_queries:
            raise ConfigError(
                f"query_id must be in 0..{self.n_queries - 1}, got {sorted(set(q.tolist()))}"
            )
        t = df["produced_at"].to_numpy(dtype=np.float64)
        sic = df["sic"].to_numpy(dtype=np.float64)
        if not np.isfinite(t).all():
            raise ConfigError(f"produced_at must be finite (seconds), got {t[~np.isfinite(t)]}")
        if not np.isfinite(sic).all() or sic.min() < 0:
            raise ConfigError(f"sic must be finite and >= 0, got {sic[~(sic >= 0)]}")
        wins = df.drop_duplicates(["query_id", "window_start"])
        wq = wins["query_id"].to_numpy(dtype=np.int64)
        with self._lock:
            self._rows.append((t, q, sic))
            self._newest = max(self._newest, float(t.max()))
            keep_from = self._newest - KEEP_STWS * self.config.stw_s
            while self._rows and self._rows[0][0].max() < keep_from:
                self._rows.popleft()
            np.add.at(self._rows_out, q, 1)
            np.add.at(self._windows, wq, 1)
            np.add.at(self._rows_in, wq, wins["n_in"].to_numpy(dtype=np.int64))
            for t, qi, lat in zip(wins["produced_at"], wq, wins["latency_s"], strict=True):
                self._latency.append((float(t), int(qi), float(lat)))
            self._prune(float(df["produced_at"].max()))

    def _prune(self, now: float) -> None:
        while self._latency and self._latency[0][0] < now - self.config.stw_s:
            self._latency.popleft()

    def query_sic(self, now: float) -> np.ndarray:
        """Every query's result SIC over the STW ending at ``now`` (THEMIS Eq. 4), shape (Q,).

        The sum of the SIC of the results produced in ``[now - STW, now)``. While a query is
        younger than one STW the sum is extrapolated by ``STW / age``, the factor
        :class:`spillway.quality.StwCounter` uses for its source counts, so an unshed query
        reads about 1 from the start (0 before its origin). Not clipped: it can slightly
        exceed 1. Exact for any ``now`` up to one STW before the newest result recorded
        (:data:`KEEP_STWS`); older rows are dropped.

        One result per second, each carrying half of a 2 s STW, produced 0.4 s into the second:

        >>> coord = QueryCoordinator(n_queries=1, stw_s=2.0, slide_s=1.0, origin_s=-5.0)
        >>> coord.record({"query_id": [0, 0, 0], "window_start": [-1.0, 0.0, 1.0],
        ...               "sic": [0.5] * 3, "n_in": [4] * 3, "latency_s": [0.4] * 3,
        ...               "produced_at": [0.4, 1.4, 2.4]})
        >>> [coord.query_sic(now).tolist() for now in (2.0, 2.2, 2.9, 3.0)]
        [[1.0], [1.0], [1.0], [1.0]]
        """
        now = float(now)
        if not math.isfinite(now):
            raise ConfigError(f"now must be finite (seconds), got {now!r}")
        lo = now - self.config.stw_s
        raw = np.zeros(self._n)
        with self._lock:
            for t, q, sic in self._rows:
                inside = (t >= lo) & (t < now)
                if inside.any():
                    raw += np.bincount(q[inside], weights=sic[inside], minlength=self._n)
        age = now - self._origin
        stw = self.config.stw_s
        scale = np.where(age >= stw, 1.0, 0.0)
        young = (age > 0) & (age < stw)
        scale[young] = stw / age[young]
        return raw * scale

    def latency_p95(self, now: float) -> np.ndarray:
        """95th percentile of result latency over the STW ending at ``now``, per query (Q,).

        NaN for a query with no result in that window. Results older than the STW are dropped.
        """
        out = np.full(self.n_queries, np.nan)
        with self._lock:
            self._prune(now)
            recent = [(q, lat) for t, q, lat in self._latency if t <= now]
        if recent:
            arr = np.asarray(recent, dtype=np.float64)
            for q in np.unique(arr[:, 0]).astype(np.int64):
                out[q] = np.percentile(arr[arr[:, 0] == q, 1], 95)
        return out

    def counters(self) -> QueryCounters:
        """Windows, result rows and input rows recorded per query since the start."""
        with self._lock:
            return QueryCounters(
                windows=self._windows.copy(),
                rows_out=self._rows_out.copy(),
                rows_in=self._rows_in.copy(),
            )
