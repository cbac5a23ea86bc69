"""Where a user query's results go: one sink per query, each batch written exactly once.

A sink takes the rows of one micro-batch of one query (pandas, with the query's own columns
plus ``window_start``, ``sic``, ``query`` and ``batch_id``) and writes them so that a batch
Spark runs again after a failure (same batch id, same input: the shedding decision is in the
offset log) replaces or skips what the first run wrote instead of adding it twice: a replayed
batch never counts its SIC twice downstream.

========== ==================================================== ==============================
kind       settings                                             exactly once by
========== ==================================================== ==============================
parquet    ``path`` (a folder)                                  one file per batch, written
                                                                aside and renamed over its name
kafka      ``topic``, ``partition`` (0), ``kafka.*`` (the       one transaction per batch with
           broker; default the local one), ``create`` (true)    its progress, read back on start
delta      ``path`` (the Delta table's folder)                  one commit per batch with Delta's
                                                                transaction id (query, batch)
console    ``rows`` (20 shown per batch)                        (display only: no guarantee)
========== ==================================================== ==============================

Batch ids count within one checkpoint's history, its *lineage* (the node keeps a lineage id per
query in its checkpoint folder): a restarted driver continues its lineage, while a run from a
fresh checkpoint, whose batch ids start at 0 again, writes beside an earlier run's results
instead of being taken for a replay of them.

A function ``f(rows, batch_id)`` is a sink too (:class:`FunctionSink`): it is called once per
batch run, so it sees a replayed batch again with the same id, as Spark's ``foreachBatch`` does.

Examples
--------
>>> import pandas as pd, tempfile
>>> folder = tempfile.mkdtemp()
>>> sink = make_sink({"kind": "parquet", "path": folder}, query="fares", lineage="a1")
>>> rows = pd.DataFrame({"route": ["JFK-LAX"], "mean_fare": [41.5], "sic": [0.5]})
>>> sink.write(3, rows), sink.write(3, rows)      # a replay replaces the batch's file
(True, True)
>>> len(read_parquet_sink(folder))
1
>>> make_sink({"kind": "s3"}, query="fares")
Traceback (most recent call last):
...
spillway.errors.UnknownNameError: query 'fares': unknown sink kind 's3'; known: console, delta, kafka, parquet
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spillway.errors import ConfigError, UnknownNameError
from spillway.sinks.base import FunctionSink, Sink
from spillway.sinks.console import ConsoleSink
from spillway.sinks.delta import DeltaSink, read_delta_sink
from spillway.sinks.kafka import KafkaSink
from spillway.sinks.parquet import ParquetSink, read_parquet_sink

#: Sink kinds by name: ``cls(query=..., **settings)``.
SINKS: dict[str, Callable[..., Sink]] = {
    "console": ConsoleSink,
    "delta": DeltaSink,
    "kafka": KafkaSink,
    "parquet": ParquetSink,
}


def make_sink(
    spec: Mapping[str, Any] | Callable[..., Any], *, query: str, lineage: str = "0"
) -> Sink:
    """The sink a query's ``sink`` setting names (a table with ``kind``, or a function), for
    the checkpoint history ``lineage``.

    Raises
    ------
    UnknownNameError
        ``kind`` is not in :data:`SINKS`.
    ConfigError
        A setting the sink does not know or a bad value (the message names it).
    """
    if callable(spec):
        return FunctionSink(spec, query=query)
    settings = dict(spec)
    kind = settings.pop("kind", None)
    if kind not in SINKS:
        raise UnknownNameError(
            f"query {query!r}: unknown sink kind {kind!r}; known: {', '.join(sorted(SINKS))}"
        )
    try:
        return SINKS[kind](query=query, lineage=lineage, **settings)
    except TypeError as e:
        raise ConfigError(f"query {query!r}: sink {kind!r}: {e}") from None


__all__ = [
    "SINKS",
    "ConsoleSink",
    "DeltaSink",
    "FunctionSink",
    "KafkaSink",
    "ParquetSink",
    "Sink",
    "make_sink",
    "read_delta_sink",
    "read_parquet_sink",
]
