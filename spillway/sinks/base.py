"""The sink protocol and the function sink.

A sink's :meth:`Sink.write` takes one batch's rows and returns True when it wrote them (False:
the batch was already in the sink, a replay it recognised and skipped).

>>> seen = []
>>> sink = FunctionSink(lambda rows, b: seen.append((b, len(rows))), query="q")
>>> import pandas as pd
>>> sink.write(0, pd.DataFrame({"sic": [1.0, 0.5]})), seen
(True, [(0, 2)])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pandas as pd

from spillway.errors import ConfigError


class Sink(Protocol):
    """Where one query's result rows go, batch by batch."""

    query: str

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        """Write batch ``batch_id``'s rows; False if the sink already holds that batch."""
        ...

    def close(self) -> None:
        """Release what the sink holds open (producers, files)."""
        ...


def check_batch_id(batch_id: Any) -> int:
    """``batch_id`` as an int >= 0 (Spark's batch ids).

    >>> check_batch_id(-1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: batch_id must be an int >= 0, got -1
    """
    if isinstance(batch_id, bool) or not hasattr(batch_id, "__index__") or int(batch_id) < 0:
        raise ConfigError(f"batch_id must be an int >= 0, got {batch_id!r}")
    return int(batch_id)


class FunctionSink:
    """Calls ``fn(rows, batch_id)`` once per batch run (a replayed batch comes again with the
    same id: make ``fn`` idempotent by batch id, as for Spark's ``foreachBatch``)."""

    def __init__(self, fn: Callable[[pd.DataFrame, int], Any], *, query: str) -> None:
        if not callable(fn):
            raise ConfigError(f"query {query!r}: a function sink must be callable, got {fn!r}")
        self.fn, self.query = fn, query

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        self.fn(rows, check_batch_id(batch_id))
        return True

    def close(self) -> None:
        return None
