"""The Spark runtime: quality-aware load shedding for Spark Structured Streaming.

One node = one Spark application (docs/design.md, "Data flow on Spark"). Queries of one kind share one Spark plan, fed by
one ``spillway`` streaming data source that carries every logical query's tuples; the node's
controller decides once per trigger interval, over all plans, how many tuples of every
(query, source) lane to keep, and puts the decision inside the source's offsets so Spark's
offset log replays it exactly after a failure.

- :mod:`~spillway.spark.session`: :func:`configure_spark` (loopback only, UI off, small
  shuffles, Arrow) for a user's ``SparkSession.builder``;
- :mod:`~spillway.spark.channel`: the authenticated loopback control channel;
- :mod:`~spillway.spark.source`: the ``spillway`` data source (offsets with the decision,
  balanced partitions, vectorised rows, deterministic keep selection; keep-all batch reads);
- :mod:`~spillway.spark.controller`: :class:`NodeController`, the joint per-interval decision
  (tuple SIC over the STW, node budget from cost models, policy, query SIC projection);
- :mod:`~spillway.spark.listener`: streaming progress → cost models and interval records;
- :mod:`~spillway.spark.node`: :class:`Node`, everything wired (what the CLI runs);
- :mod:`~spillway.spark.queries`, :mod:`~spillway.spark.sic_ops`, :mod:`~spillway.spark.sink`,
  :mod:`~spillway.spark.coordinator`, :mod:`~spillway.spark.exact`: the THEMIS queries with
  SIC propagation, the result sink, the query coordinator and exact answers.

Submodules import pyspark; import them directly (this package imports nothing eagerly).

Examples
--------
>>> from spillway.spark.session import configure_spark
>>> from spillway.spark.source import SOURCE_NAME
>>> SOURCE_NAME
'spillway'
"""

from __future__ import annotations
