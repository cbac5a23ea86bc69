"""The query coordinator: every logical query's result SIC, latency and row counts.

THEMIS §6 gives each query a coordinator that sums the SIC of the query's result tuples over the
STW (Eq. 4) and tells the nodes, whose shedders use it to balance queries. On Spark the result
sinks of all plans (``foreachBatch`` functions, possibly running concurrently in several
threads) call :meth:`QueryCoordinator.record`; the NodeController reads
:meth:`QueryCoordinator.query_sic` every shedding interval. The SIC accounting is
:class:`spillway.quality.query_sic.QuerySicLedger`; this class adds a lock, the latency of each
result over the recent STW, and row counters.

A result's time (``t^r_tau`` in the ledger) is the moment the sink produced it (``produced_at``,
in the same clock as ``now``). Counting is per result *window*: a TOP-5 window's five rows carry
one latency and one ``n_in`` between them, so the latency and input-row figures take each
(query, window) once, while the SIC adds every row (the rows split the window's SIC).

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

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import ConfigError
from spillway.quality.query_sic import QuerySicLedger
from spillway.quality.sic import StwConfig

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
    slide_s : the ledger's slide (default ``stw_s / 10``); ``stw_s`` must be a multiple of it.
    origin_s : when the queries started producing (one value or one per query), in the clock of
        ``now``; used by the ledger to extrapolate while less than one STW has passed.

    Raises
    ------
    ConfigError
        A negative ``n_queries`` or a bad window (see :class:`spillway.quality.sic.StwConfig`).

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
        if slide_s is None and isinstance(stw_s, int | float) and not isinstance(stw_s, bool):
            slide_s = stw_s / 10
        self.config = StwConfig(stw_s=stw_s, slide_s=slide_s)  # type: ignore[arg-type]
        self._ledger = QuerySicLedger(self.config, n_queries, origin_s=origin_s)
        self._lock = threading.Lock()
        self._latency: deque[tuple[float, int, float]] = deque()
        self._windows = np.zeros(n_queries, dtype=np.int64)
        self._rows_out = np.zeros(n_queries, dtype=np.int64)
        self._rows_in = np.zeros(n_queries, dtype=np.int64)

    @property
    def n_queries(self) -> int:
        """Number of queries Q."""
        return self._ledger.n_queries

    def record(self, results: pd.DataFrame | Mapping[str, Any]) -> None:
        """Record result rows (any number of queries and windows).

        Parameters
        ----------
        results : a table with the :data:`RECORD_COLUMNS` (pandas DataFrame or a mapping of
            equal-length arrays): one row per result row.

        Raises
        ------
        ConfigError
            A column is missing, or a value breaks the ledger's rules (query id out of range,
            negative or non-finite SIC, non-finite time).
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
        wins = df.drop_duplicates(["query_id", "window_start"])
        wq = wins["query_id"].to_numpy(dtype=np.int64)
        with self._lock:
            self._ledger.add(df["produced_at"].to_numpy(), q, df["sic"].to_numpy())
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

        Not clipped: it can slightly exceed 1 (see :class:`QuerySicLedger`).
        """
        with self._lock:
            return self._ledger.value(now)

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
