"""The query coordinator: every logical query's result SIC, latency and row counts.

THEMIS §6 gives each query a coordinator that sums the SIC of the query's result tuples over the
STW (Eq. 4) and tells the nodes, whose shedders use it to balance queries. On Spark the result
sink (the ``foreachBatch`` function, possibly in several threads) calls
:meth:`QueryCoordinator.record`; the NodeController tells it, per decision, the SIC mass that
arrived and was admitted for each query (:meth:`QueryCoordinator.record_decision`) and, as Spark
finishes batches, up to which source time each query's input is processed
(:meth:`QueryCoordinator.set_processed`). The SIC itself is kept by a
:class:`~spillway.quality.stw_account.SourceTimeAccount`, in source time (feed seconds since the
node's epoch), so a result counts in the STW of the source tuples it was computed from (THEMIS
§4's membership rule), and :meth:`QueryCoordinator.query_sic` is the query's SIC over its latest
complete STW: results mass over arrived mass (the account's module docstring says why a ratio,
and why that window).

Counting is per result *window*: a TOP-5 window's five rows carry one latency and one ``n_in``
between them, so the latency and input-row figures take each (query, window) once, while the SIC
adds every row (the rows split the window's SIC).

Examples
--------
>>> import pandas as pd
>>> coord = QueryCoordinator(n_queries=2, stw_s=4.0, windows_s=1.0, epoch_s=100.0)
>>> for t in range(4):
...     coord.record_decision([0, 1], t, t + 1, arrived=[0.25, 0.25], admitted=[0.25, 0.125])
>>> coord.record(pd.DataFrame({"query_id": [0, 1, 1] * 4,
...     "window_start": [100.0 + t for t in range(4) for _ in range(3)],
...     "sic": [0.25, 0.0625, 0.0625] * 4, "n_in": [10, 6, 6] * 4,
...     "latency_s": [1.0, 2.0, 2.0] * 4, "produced_at": [105.0] * 12}))
>>> coord.set_processed([0, 1], 4.0)
>>> coord.query_sic(now=105.0).tolist()
[1.0, 0.5]
>>> coord.latency_p95(now=105.0).tolist()
[1.0, 2.0]
>>> coord.counters().rows_in.tolist(), coord.counters().rows_out.tolist()
([40, 24], [4, 8])
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
from spillway.quality.stw_account import SourceTimeAccount

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


def unix_seconds(values: pd.Series) -> np.ndarray:
    """Timestamps (pandas datetimes) or numbers as float Unix seconds.

    >>> unix_seconds(pd.Series(pd.to_datetime([1.5], unit="s", utc=True))).tolist()
    [1.5]
    """
    if pd.api.types.is_datetime64_any_dtype(values):
        return values.map(pd.Timestamp.timestamp).to_numpy(dtype=np.float64)
    return values.to_numpy(dtype=np.float64)


class QueryCoordinator:
    """Query SIC over the latest complete STW (THEMIS Eq. 4), p95 latency and counters.

    Thread-safe: the sink may record while the controller reads.

    Parameters
    ----------
    n_queries : number of logical queries on the node (``query_id`` 0..Q-1).
    stw_s : the source time window in seconds (THEMIS: 10 s).
    windows_s : every query's tumbling window length (one value for all, or one per query):
        a result of the window starting at ``w`` covers source time ``[w, w + window)``.
    epoch_s : the node's feed time 0 in Unix seconds (``window_start`` and ``produced_at`` are
        Unix times); may be set later (:attr:`epoch_s`), before the first result.
    event_clocks : per query, ``(origin, speed)`` when its feed has its own event clock (a
        replayed file: ``window_start`` is in the data's time, feed time ``(t - origin) /
        speed``), or None (the default for every query: the node's clock).
    archive : keep every arrived and results record of the run in :attr:`account`
        (:meth:`~spillway.quality.stw_account.SourceTimeAccount.archived_mass`: each result
        window's SIC against the mass that arrived in it, after the run).

    Raises
    ------
    ConfigError
        A negative ``n_queries``, a bad ``stw_s`` or a window that is not > 0.

    Examples
    --------
    >>> coord = QueryCoordinator(n_queries=1, stw_s=10.0, windows_s=1.0)
    >>> coord.query_sic(now=5.0).tolist(), bool(np.isnan(coord.latency_p95(now=5.0)[0]))
    ([nan], True)
    """

    def __init__(
        self,
        n_queries: int,
        stw_s: float,
        *,
        windows_s: Any = 1.0,
        epoch_s: float | None = None,
        event_clocks: Any = None,
        archive: bool = False,
    ) -> None:
        self.account = SourceTimeAccount(n_queries, stw_s, archive=archive)
        windows = np.broadcast_to(np.asarray(windows_s, dtype=np.float64), (n_queries,))
        if not (np.isfinite(windows).all() and (windows > 0).all()):
            raise ConfigError(f"windows_s must be > 0 (seconds), got {windows_s!r}")
        self.windows_s = np.array(windows)
        clocks = list(event_clocks) if event_clocks is not None else [None] * n_queries
        if len(clocks) != n_queries:
            raise ConfigError(f"event_clocks needs one entry per query ({n_queries})")
        self._origin = np.array([c[0] if c else np.nan for c in clocks], dtype=np.float64)
        self._speed = np.array([c[1] if c else 1.0 for c in clocks], dtype=np.float64)
        self.stw_s = float(stw_s)
        #: Feed time 0 in Unix seconds (set by the controller once its epoch is fixed).
        self.epoch_s = epoch_s
        self._n = n_queries
        self._lock = threading.Lock()
        self._latency: deque[tuple[float, int, float]] = deque()
        self._windows = np.zeros(n_queries, dtype=np.int64)
        self._rows_out = np.zeros(n_queries, dtype=np.int64)
        self._rows_in = np.zeros(n_queries, dtype=np.int64)

    @property
    def n_queries(self) -> int:
        """Number of queries Q."""
        return self._n

    def _epoch(self) -> float:
        if self.epoch_s is None:
            raise ConfigError("the coordinator's epoch_s is not set: the node has not started")
        return float(self.epoch_s)

    def record_decision(self, query: Any, t0: Any, t1: Any, *, arrived: Any, admitted: Any) -> None:
        """A decision covered source time ``[t0, t1)`` (feed seconds) of ``query`` (ids): the
        SIC mass that arrived there and the part admitted."""
        self.account.add("arrived", query, t0, t1, arrived)
        self.account.add("admitted", query, t0, t1, admitted)

    def set_processed(self, query: Any, t: float) -> None:
        """The input of ``query`` (ids) is processed up to feed time ``t``."""
        self.account.set_processed(query, t)

    def record(self, results: pd.DataFrame | Mapping[str, Any]) -> None:
        """Record result rows (any number of queries and windows).

        Parameters
        ----------
        results : a table with the :data:`RECORD_COLUMNS` (pandas DataFrame or a mapping of
            equal-length arrays): one row per result row; ``window_start`` and ``produced_at``
            in Unix time (seconds or timestamps).

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
        start, end = self.feed_window(q, unix_seconds(df["window_start"]))
        self.account.add("results", q, start, end, sic)
        wins = df.drop_duplicates(["query_id", "window_start"])
        wq = wins["query_id"].to_numpy(dtype=np.int64)
        with self._lock:
            np.add.at(self._rows_out, q, 1)
            np.add.at(self._windows, wq, 1)
            np.add.at(self._rows_in, wq, wins["n_in"].to_numpy(dtype=np.int64))
            for tp, qi, lat in zip(wins["produced_at"], wq, wins["latency_s"], strict=True):
                self._latency.append((float(tp), int(qi), float(lat)))
            self._prune(float(t.max()))

    def feed_window(self, query: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Feed-time interval ``[start, end)`` of result windows of ``query`` starting at
        ``start`` (Unix seconds, or the data's own time for a feed with an event clock)."""
        q = np.asarray(query, dtype=np.int64)
        start = np.asarray(start, dtype=np.float64)
        origin = self._origin[q]
        speed = self._speed[q]
        nodes_clock = np.isnan(origin)
        base = np.where(nodes_clock, self._epoch() if nodes_clock.any() else 0.0, origin)
        lo = (start - base) / speed
        return lo, lo + self.windows_s[q] / speed

    def _prune(self, now: float) -> None:
        while self._latency and self._latency[0][0] < now - self.stw_s:
            self._latency.popleft()

    def query_sic(self, now: float) -> np.ndarray:
        """Every query's SIC over its latest complete STW ending by ``now`` (Unix s), (Q,).

        Results mass over arrived mass in ``[E - STW, E)``, ``E`` the source time up to which
        the query's input is processed (at most ``now``); NaN before anything is processed.
        Not clipped (see :mod:`spillway.quality.stw_account`).
        """
        now = float(now)
        if not math.isfinite(now):
            raise ConfigError(f"now must be finite (seconds), got {now!r}")
        if self.epoch_s is None:
            return np.full(self.n_queries, np.nan)
        return self.account.measured(now - self._epoch())

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
