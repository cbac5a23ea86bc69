"""Quality accounting: how much of the source data every result reflects, and how fair and
accurate the results are.

This layer is pure Python + numpy (it never imports pyspark), so the Spark runtime, the
simulator and the tests share one implementation.

- :mod:`~spillway.quality.sic`: source tuple SIC (THEMIS Eq. 1) and :class:`StwCounter`, the
  per-lane arrival counts over a sliding source time window (STW), re-estimated every slide.
- :mod:`~spillway.quality.propagation`: how SIC flows through operators (THEMIS Eq. 3; DISSP
  replication vs partitioning and empty results).
- :mod:`~spillway.quality.reference`: :class:`OperatorGraph`, an exact (Fraction-based)
  reference evaluator for small query DAGs that checks those rules end to end.
- :mod:`~spillway.quality.query_sic`: :class:`QuerySicLedger`, every query's result SIC over
  the STW (THEMIS Eq. 4), as a query coordinator keeps it.
- :mod:`~spillway.quality.coordination`: :class:`SicCoordinator`, the query coordinator's
  logic for a federation (Eq. 4 exactly, node liveness, what still reaches a result), and
  :class:`QueryLayout`, the query graphs it watches.
- :mod:`~spillway.quality.projection`: :class:`LocalProjection`, a node's projection of its
  queries' SIC between coordinator updates (THEMIS §6).
- :mod:`~spillway.quality.metrics`: Jain's index, SIC spread, mean absolute relative error,
  normalised top-k distance, covariance error and Spearman's rho.
- :mod:`~spillway.quality.concept`: CoD window concepts, drift and per-group error (import
  from that module directly).
- :mod:`~spillway.quality.unseen`: how many groups a bounded sample never saw (Chao's
  estimate) and its coverage (import from that module directly).

The invariant every piece keeps: with nothing shed, a query's result SIC over an STW is about 1;
shedding lowers it by exactly the SIC of what was dropped.

Examples
--------
>>> from spillway.quality import StwConfig, StwCounter, QuerySicLedger, jain_index
>>> cfg = StwConfig(stw_s=1.0, slide_s=0.25)
>>> counter, ledger = StwCounter(cfg, n_lanes=2), QuerySicLedger(cfg, n_queries=2)
>>> for k in range(4):                       # 2 single-source queries, 8 and 2 tuples a slide
...     counter.push([8, 2])
...     sic = counter.tuple_sic(n_sources_per_lane=1)
...     ledger.add([k * 0.25] * 2, [0, 1], [8 * sic[0], 2 * sic[1] / 2])   # q1 sheds half
>>> ledger.value(now=1.0).tolist(), jain_index(ledger.value(now=1.0))
([1.0, 0.5], 0.9)
"""

from __future__ import annotations

from spillway.quality.coordination import (
    CoordinatorConfig,
    QueryLayout,
    SicCoordinator,
    SicUpdate,
)
from spillway.quality.metrics import (
    SicSpread,
    covariance_error,
    jain_index,
    mean_absolute_relative_error,
    sic_spread,
    spearman_rho,
    topk_distance,
)
from spillway.quality.projection import LocalProjection
from spillway.quality.propagation import (
    GroupedSic,
    filter_or_map,
    group_by,
    grouped_window_sic,
    join,
    partition,
    partition_totals,
    replicate,
    sliding_window_share,
    spread,
    top_k,
    top_k_rows,
    tumbling_aggregate,
    union,
    window_totals,
    windows_entered,
)
from spillway.quality.query_sic import QuerySicLedger
from spillway.quality.reference import Batch, Evaluation, Operator, OperatorGraph, Source
from spillway.quality.sic import StwConfig, StwCounter, source_tuple_sic

__all__ = [
    "Batch",
    "CoordinatorConfig",
    "Evaluation",
    "GroupedSic",
    "LocalProjection",
    "Operator",
    "OperatorGraph",
    "QueryLayout",
    "QuerySicLedger",
    "SicCoordinator",
    "SicSpread",
    "SicUpdate",
    "Source",
    "StwConfig",
    "StwCounter",
    "covariance_error",
    "filter_or_map",
    "group_by",
    "grouped_window_sic",
    "jain_index",
    "join",
    "mean_absolute_relative_error",
    "partition",
    "partition_totals",
    "replicate",
    "sic_spread",
    "sliding_window_share",
    "source_tuple_sic",
    "spearman_rho",
    "spread",
    "top_k",
    "top_k_rows",
    "topk_distance",
    "tumbling_aggregate",
    "union",
    "window_totals",
    "windows_entered",
]
