"""Streaming progress → cost models: what each micro-batch really cost.

:class:`ProgressListener` is a :class:`pyspark.sql.streaming.StreamingQueryListener`. For every
finished micro-batch of a node's streaming query it passes ``(numInputRows, batchDuration)`` and
the batch's end offset to :meth:`spillway.spark.controller.NodeController.observe_batch`, which
folds them into the plan's cost model (:func:`spillway.control.observe`) and into the record of
the interval the batch's offset was decided at (estimated capacity vs processed).

Which events count: only progress of the node's own streaming queries (matched by query name),
and only batches that read something: a trigger whose source offset did not move (``startOffset
== endOffset``) ran no batch and says nothing about costs, and neither does the batch Spark runs
up to the initial offset when a query starts (boundary 0: no decision, no data). A batch whose admitted rows were all
shed (0 rows, but the offset moved) is a real batch: it measures the fixed overhead alone.

The duration is ``batchDuration`` (the whole trigger: offset planning with the controller's
decision, reading, the query, the sink and the commit logs), because that is what has to fit in
the trigger interval.

Examples
--------
>>> class Progress(dict):
...     name, batchId, numInputRows, batchDuration = "spillway-avg", 3, 1200, 450
...     sources = [type("S", (), {"startOffset": '{"b": 1}', "endOffset": '{"b": 2}'})()]
>>> seen = []
>>> class Controller:
...     def observe_batch(self, plan, **kw):
...         seen.append((plan, kw["rows"], kw["duration_s"]))
>>> listener = ProgressListener(Controller(), {"spillway-avg": "avg"})
>>> listener.record(Progress())
True
>>> seen
[('avg', 1200, 0.45)]
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)


def _boundary(offset: Any) -> int | None:
    """The decision boundary ``b`` of a spillway offset (JSON text or dict), else None."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return None
    if isinstance(offset, Mapping) and isinstance(offset.get("b"), int):
        return int(offset["b"])
    return None


class ProgressListener(StreamingQueryListener):
    """Feeds a node controller from the progress of the node's streaming queries.

    Parameters
    ----------
    controller : has ``observe_batch(plan, *, rows, duration_s, end_offset, batch_id)``.
    query_plans : streaming query name → plan name, for the queries of this node.

    Attributes
    ----------
    errors : messages of events that could not be recorded (never raised into Spark).
    terminated : query name → exception text (None when stopped cleanly).
    """

    def __init__(self, controller: Any, query_plans: Mapping[str, str]) -> None:
        super().__init__()
        self.controller = controller
        self.query_plans = dict(query_plans)
        self.errors: list[str] = []
        self.terminated: dict[str, str | None] = {}
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def record(self, progress: Any) -> bool:
        """Record one ``StreamingQueryProgress``; True when it was a batch of this node."""
        plan = self.query_plans.get(progress.name or "")
        if plan is None:
            return False
        sources = list(progress.sources or [])
        end = sources[0].endOffset if sources else None
        if sources and sources[0].startOffset == end:
            return False
        if _boundary(end) == 0:  # Spark's first run up to the initial offset: nothing decided
            return False
        self.controller.observe_batch(
            plan,
            rows=int(progress.numInputRows),
            duration_s=float(progress.batchDuration) / 1000.0,
            end_offset=end,
            batch_id=int(progress.batchId),
            start_offset=sources[0].startOffset if sources else None,
        )
        return True

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        with self._lock:
            if event.name:
                self._ids[str(event.id)] = event.name

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        try:
            self.record(event.progress)
        except Exception as e:  # a listener must never break Spark's listener bus
            with self._lock:
                self.errors.append(f"{type(e).__name__}: {e}")

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        return None

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            name = self._ids.get(str(event.id))
            if name is not None:
                self.terminated[name] = event.exception
