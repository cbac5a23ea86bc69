"""spillway's figures in Spark's own progress reports: observed metrics on the source stream.

Spark users read a streaming query's ``StreamingQueryProgress`` (``query.lastProgress``, the
Structured Streaming tab, a ``StreamingQueryListener``). :func:`observe_source` adds named
metrics to a node's source stream with ``DataFrame.observe``, so every micro-batch's progress
carries, under ``observedMetrics["spillway"]``:

- ``admitted_rows``: the tuples the shedder admitted into this batch (the rows read);
- ``admitted_sic``: their SIC mass (the sum of the tuples' SIC values, THEMIS Eq. 1);
- ``oldest_event_ts`` and ``newest_arrival_ts``: the batch's oldest event time and newest
  arrival time (how far behind the batch is);
- ``rows:<query>`` per logical query: its admitted rows in the batch.

The Python Data Source API has no custom source metrics, so the figures are aggregates over
the rows the source produced, computed by Spark in the same pass that reads them.

Examples
--------
>>> metric_names(["q-avg", "q-max"])  # doctest: +NORMALIZE_WHITESPACE
['admitted_rows', 'admitted_sic', 'oldest_event_ts', 'newest_arrival_ts', 'rows:q-avg',
 'rows:q-max']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The observation's name: ``progress.observedMetrics[OBSERVATION]``.
OBSERVATION = "spillway"


#: The node-wide metrics, before the per-query ``rows:<query>`` ones.
NODE_METRICS = ("admitted_rows", "admitted_sic", "oldest_event_ts", "newest_arrival_ts")


def metric_names(query_names: Sequence[str]) -> list[str]:
    """The names of the observed metrics, in order (query ``i`` is ``query_names[i]``)."""
    return [*NODE_METRICS, *(f"rows:{name}" for name in query_names)]


def metric_columns(query_names: Sequence[str]) -> list[Any]:
    """The observed metrics as named Spark columns (needs an active SparkSession)."""
    from pyspark.sql import functions as F

    exprs = [
        F.count(F.lit(1)),
        F.coalesce(F.sum("sic"), F.lit(0.0)),
        F.min("event_ts"),
        F.max("arrival_ts"),
        *(F.count(F.when(F.col("query_id") == i, 1)) for i in range(len(query_names))),
    ]
    return [e.alias(n) for e, n in zip(exprs, metric_names(query_names), strict=True)]


def observe_source(stream: Any, query_names: Sequence[str]) -> Any:
    """``stream`` with spillway's metrics observed (see the module docstring)."""
    return stream.observe(OBSERVATION, *metric_columns(query_names))
