"""What a running node tells its observers, as it happens: decisions, batches, results.

A :class:`~spillway.spark.node.Node` calls each of its ``observers`` as
``observer(phase, event)`` (``phase`` is ``"calibrate-<round>"`` while the node measures its
capacity, then ``"run"``) with one of three plain values:

- :class:`DecisionEvent` after every admission decision: per lane (query, source) the tuples
  that arrived and those kept, so counters per source stay exact (THEMIS §5: a node sheds per
  source; the shed tuples are ``arrived - kept``);
- :class:`BatchEvent` after every measured micro-batch: its rows and its duration (Spark's
  ``batchDuration``), from which a capacity is measured from batch time;
- :class:`ResultsEvent` after a micro-batch's results are stored: each result row's query,
  window and latency.

Observers run in the thread that produced the event (the control channel, Spark's listener
bus or a ``foreachBatch`` thread), sometimes under the controller's lock: they must be quick,
must not block and must not call back into the node. The live views (:mod:`spillway.telemetry`)
only count and append. :func:`notify` never lets an observer's exception into Spark.

Examples
--------
>>> import numpy as np
>>> seen = []
>>> forward = bind_phase([lambda phase, ev: seen.append((phase, ev.shed.tolist()))], "run")
>>> ev = DecisionEvent(t=2.0, queries=("q",), lane_query=np.array([0, 0]),
...                    lane_source=np.array([0, 1]), arrived=np.array([10, 4]),
...                    kept=np.array([5, 4]))
>>> errors = notify([forward], ev)
>>> seen, errors
([('run', [5, 0])], [])
>>> notify([lambda ev: 1 / 0], ev)
['ZeroDivisionError: division by zero']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import SpillwayError

#: An observer of a node: ``observer(phase, event)``.
Observer = Callable[[str, Any], None]


@dataclass(frozen=True, kw_only=True)
class DecisionEvent:
    """One admission decision, per lane.

    ``t`` is the decision's boundary in feed seconds; ``queries`` the query names by query id;
    ``lane_query`` and ``lane_source`` say which query and source each lane is; ``arrived`` and
    ``kept`` are the lane's tuples decided and admitted by this decision.
    """

    t: float
    queries: tuple[str, ...]
    lane_query: np.ndarray
    lane_source: np.ndarray
    arrived: np.ndarray
    kept: np.ndarray

    @property
    def shed(self) -> np.ndarray:
        """Tuples shed per lane (``arrived - kept``)."""
        return np.asarray(self.arrived) - np.asarray(self.kept)


@dataclass(frozen=True, kw_only=True)
class BatchEvent:
    """One measured micro-batch of a plan: rows read and the batch's duration in seconds."""

    plan: str
    batch_id: int | None
    rows: int
    duration_s: float


@dataclass(frozen=True, kw_only=True)
class ResultsEvent:
    """The results of one micro-batch: per result row its query id, window start (Unix
    seconds) and latency in seconds (a TOP-5 window has five rows with one latency), and its
    SIC (None where the rows have no ``sic`` column)."""

    plan: str
    batch_id: int
    query_id: np.ndarray
    window_start_s: np.ndarray
    latency_s: np.ndarray
    sic: np.ndarray | None = None

    @classmethod
    def from_frame(cls, plan: str, batch_id: int, rows: pd.DataFrame) -> ResultsEvent:
        """The event of a batch's stored result rows (a missing column reads NaN).

        >>> rows = pd.DataFrame({"query_id": [1], "latency_s": [0.8],
        ...                      "window_start": pd.to_datetime([10.0], unit="s", utc=True)})
        >>> ev = ResultsEvent.from_frame("mixed", 3, rows)
        >>> ev.query_id.tolist(), ev.window_start_s.tolist(), ev.latency_s.tolist()
        ([1], [10.0], [0.8])
        """
        n = len(rows)

        def column(name: str) -> np.ndarray:
            if name not in rows:
                return np.full(n, np.nan)
            col = rows[name]
            if isinstance(col.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(col):
                return (col - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(np.float64)
            return col.to_numpy(dtype=np.float64, na_value=np.nan)

        qid = rows["query_id"].to_numpy(dtype=np.int64) if "query_id" in rows else np.zeros(0)
        return cls(
            plan=plan,
            batch_id=int(batch_id),
            query_id=qid.astype(np.int64),
            window_start_s=column("window_start"),
            latency_s=column("latency_s"),
            sic=column("sic") if "sic" in rows else None,
        )


def notify(observers: Iterable[Callable[[Any], None]], event: Any) -> list[str]:
    """Call every observer with ``event``; the messages of those that raised (never raised:
    an observer must not break the controller, the listener bus or a batch)."""
    errors = []
    for observer in list(observers):
        try:
            observer(event)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
    return errors


def bind_phase(observers: list[Observer], phase: str) -> Callable[[Any], None]:
    """One callable ``forward(event)`` that calls every observer as ``observer(phase, event)``
    (the list is read at each call, so observers added later are called too). Every observer
    is called; if some raised, ``forward`` then raises one :class:`SpillwayError` naming them.
    """

    def forward(event: Any) -> None:
        errors = notify([functools.partial(o, phase) for o in list(observers)], event)
        if errors:
            raise SpillwayError(f"node observers failed in phase {phase!r}: {'; '.join(errors)}")

    return forward
