"""Federation: the query coordinator as a service for nodes in separate processes (THEMIS §6).

- :mod:`~spillway.federation.update`: :class:`NodeUpdate`, what one node receives (its own
  queries' Eq. 4 values, ceilings, lost nodes, orphaned fragments);
- :mod:`~spillway.federation.service`: :class:`CoordinatorService`, the coordinator logic of
  :mod:`spillway.quality.coordination` behind the authenticated loopback channel;
- :mod:`~spillway.federation.client`: :class:`CoordinatorClient`, a node's side;
- :mod:`~spillway.federation.config`: :class:`FederationConfig`, the federation file (nodes,
  queries, placement of their fragments) and the coordinator's settings;
- :mod:`~spillway.federation.command`: ``spillway coordinator FED.toml``;
- :mod:`~spillway.federation.link`: :class:`LinkWriter`, a fragment's output to the next node
  through Kafka, each batch exactly once (a transaction per batch, replays recognised);
- :mod:`~spillway.federation.placement`: :func:`node_links`, the fragments a node hosts and the
  link topics between them (one per consumer, a partition per producer, a replicated output's
  SIC divided among its copies). The Spark side is :mod:`spillway.spark.links`;
- :mod:`~spillway.federation.view`: :class:`CoordinatorView`, a node's last update projected
  over its own shedding (THEMIS §6), the base its controller balances, with the fallback to
  the local view when the coordinator is unreachable or stale.

No pyspark here: the service and the nodes' clients run in any process; the channel module
they share (:mod:`spillway.spark.channel`) is standard library only, and the link uses
:mod:`spillway.kafka`'s client helpers.

Examples
--------
>>> from spillway.federation import CoordinatorClient, CoordinatorService, NodeUpdate
>>> NodeUpdate.__name__
'NodeUpdate'
"""

from __future__ import annotations

from spillway.federation.client import CoordinatorClient, parse_update
from spillway.federation.config import FederationConfig, load_federation
from spillway.federation.link import LinkWriter, read_link
from spillway.federation.placement import NodeLinks, all_topics, node_links
from spillway.federation.service import CoordinatorService, update_payload
from spillway.federation.update import NodeUpdate, node_queries, node_update
from spillway.federation.view import CoordinatorView, ProjectedBase

__all__ = [
    "CoordinatorClient",
    "CoordinatorService",
    "CoordinatorView",
    "FederationConfig",
    "LinkWriter",
    "NodeLinks",
    "NodeUpdate",
    "ProjectedBase",
    "all_topics",
    "node_queries",
    "load_federation",
    "node_links",
    "node_update",
    "parse_update",
    "read_link",
    "update_payload",
]
