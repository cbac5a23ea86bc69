"""The result sink of a spillway plan: ``foreachBatch`` → result store and query coordinator.

:class:`ResultSink` is the function a plan's streaming query passes to ``foreachBatch``: it
applies the plan's query kind to the micro-batch (stateless; the source ends every batch on a
window boundary, so a batch holds whole windows), collects the small result, stamps it with the
time it was produced and its latency (``produced_at - last_arrival_ts``: from the arrival of
the window's last input tuple to the result being available), and hands it to a
:class:`ResultStore` and a :class:`~spillway.spark.coordinator.QueryCoordinator`.

Replays are idempotent. After a failure Spark re-runs the last micro-batch with the same batch
id and the same input (the shedding decision is in the offset log). The store keys results by
``(plan, batch_id)``, so the re-run *replaces* that batch's rows instead of adding them again,
and the coordinator is told only about a batch it has not seen, so query SIC is not counted
twice. A CSV copy is rewritten whole on such a replacement (appended otherwise).

Stored columns (:data:`STORE_COLUMNS`): ``plan``, ``batch_id``, ``kind`` and the query result
columns (:data:`spillway.spark.queries.RESULT_COLUMNS`; ``window_start`` and
``last_arrival_ts`` as UTC pandas timestamps), plus ``produced_at`` (seconds, in the clock's
units: Unix seconds with the default wall clock) and ``latency_s``.

Examples
--------
>>> import pandas as pd
>>> store = ResultStore()
>>> rows = pd.DataFrame({"query_id": [0], "sic": [1.0]})
>>> store.put("avg", 3, rows), store.put("avg", 3, rows.assign(sic=0.5))
(True, False)
>>> store.to_pandas()[["plan", "batch_id", "sic"]].values.tolist()
[['avg', 3, 0.5]]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame

from spillway.errors import ConfigError
from spillway.spark.coordinator import QueryCoordinator
from spillway.spark.queries import (
    RESULT_COLUMNS,
    TIME_COLUMNS,
    QueryKind,
    query_kind,
    results_to_pandas,
)

#: Columns of :meth:`ResultStore.to_pandas`, in order.
STORE_COLUMNS: tuple[str, ...] = (
    "plan",
    "batch_id",
    "kind",
    *RESULT_COLUMNS,
    "produced_at",
    "latency_s",
)


def _seconds(t: float | datetime) -> float:
    """Clock reading as seconds: a float as is, a timezone-aware datetime as Unix seconds."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ConfigError(f"clock must return seconds or an aware datetime, got naive {t!r}")
        return t.timestamp()
    return float(t)


class ResultStore:
    """Thread-safe table of result rows, keyed by ``(plan, batch_id)``.

    Parameters
    ----------
    csv_path : optional CSV file that mirrors the store (header written once, rows appended
        per batch; rewritten whole when a replayed batch replaces its rows).

    Examples
    --------
    >>> store = ResultStore()
    >>> len(store), store.to_pandas().empty
    (0, True)
    """

    def __init__(self, csv_path: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, int], pd.DataFrame] = {}
        self.csv_path = Path(csv_path) if csv_path is not None else None
        if self.csv_path is not None:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            self.csv_path.unlink(missing_ok=True)

    def put(self, plan: str, batch_id: int, rows: pd.DataFrame) -> bool:
        """Store one batch's rows; True when new, False when they replace a replayed batch.

        The rows get ``plan`` and ``batch_id`` columns (first) from the key.
        """
        key = (str(plan), int(batch_id))
        frame = rows.drop(columns=["plan", "batch_id"], errors="ignore")
        frame.insert(0, "plan", key[0])
        frame.insert(1, "batch_id", key[1])
        with self._lock:
            new = key not in self._batches
            self._batches[key] = frame
            if self.csv_path is not None:
                if new:
                    header = not self.csv_path.exists()
                    frame.to_csv(self.csv_path, mode="a", header=header, index=False)
                else:
                    self._frame().to_csv(self.csv_path, index=False)
        return new

    def _frame(self) -> pd.DataFrame:
        frames = [f for f in self._batches.values() if not f.empty]
        if not frames:
            return pd.DataFrame(columns=list(STORE_COLUMNS))
        out = pd.concat(frames, ignore_index=True)
        order = [c for c in ("plan", "batch_id", "query_id", "window_start", "rank") if c in out]
        return out.sort_values(order, kind="stable").reset_index(drop=True)

    def to_pandas(self) -> pd.DataFrame:
        """Every stored row, sorted by plan, batch, query, window and rank (a copy)."""
        with self._lock:
            return self._frame()

    def batches(self) -> list[tuple[str, int]]:
        """The ``(plan, batch_id)`` keys stored, in the order first seen."""
        with self._lock:
            return list(self._batches)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(f) for f in self._batches.values())


class ResultSink:
    """The ``foreachBatch`` function of one plan: results, latency, store and coordinator.

    Parameters
    ----------
    kind : the plan's query kind (a :class:`QueryKind` or its registry name).
    window_s : tumbling window length in seconds.
    store : where result rows go.
    coordinator : optional; told about every new batch's results (Eq. 4 accounting).
    clock : returns now, as seconds (float) or an aware datetime, in the same clock as the
        rows' ``arrival_ts`` (Unix time); default :func:`time.time`.
    plan : name keying the store (default the kind's name).

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.spark.queries import SOURCE_SCHEMA_DDL
    >>> from spillway.testing import ManualClock, local_spark
    >>> ddl = SOURCE_SCHEMA_DDL.replace("timestamp", "double")
    >>> df = local_spark().createDataFrame([(0, 0, 0, 4.0, 1.0, 100.2, 100.2)], ddl)
    >>> df = df.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
    ...     "arrival_ts", F.timestamp_seconds("arrival_ts"))
    >>> store = ResultStore()
    >>> sink = ResultSink("max", 1.0, store, clock=ManualClock(101.5))
    >>> sink(df, 0)
    >>> r = store.to_pandas().iloc[0]
    >>> (float(r["value"]), float(r["sic"]), round(float(r["latency_s"]), 6), str(r["window_start"]))
    (4.0, 1.0, 1.3, '1970-01-01 00:01:40+00:00')
    """

    def __init__(
        self,
        kind: QueryKind | str,
        window_s: float,
        store: ResultStore,
        coordinator: QueryCoordinator | None = None,
        clock: Callable[[], Any] | None = None,
        *,
        plan: str | None = None,
    ) -> None:
        self.kind = query_kind(kind) if isinstance(kind, str) else kind
        self.window_s = window_s
        self.store = store
        self.coordinator = coordinator
        self.clock = clock or time.time
        self.plan = plan or self.kind.name

    def results(self, batch_df: DataFrame) -> pd.DataFrame:
        """The kind's results of one batch as pandas, without stamps (one Spark job)."""
        return results_to_pandas(self.kind.apply(batch_df, self.window_s))

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Process one micro-batch (the ``foreachBatch`` signature)."""
        pdf = results_to_pandas(self.kind.apply(batch_df, self.window_s), micros=True)
        produced_at = _seconds(self.clock())
        pdf["produced_at"] = produced_at
        pdf["latency_s"] = produced_at - pdf["last_arrival_ts"] / 1e6
        for c in TIME_COLUMNS:
            pdf[c] = pd.to_datetime(pdf[c], unit="us", utc=True)
        pdf.insert(0, "kind", self.kind.name)
        if self.store.put(self.plan, batch_id, pdf) and self.coordinator is not None:
            self.coordinator.record(pdf)
