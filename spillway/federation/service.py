"""The query coordinator as a service: Eq. 4 for every query, over an authenticated channel.

THEMIS gives every query a coordinator that sums its result SIC over the STW (Eq. 4) and sends
the value every shedding interval to each node hosting one of the query's fragments (§6);
Fiscato's coordinator also notices nodes that fail (§4.3). :class:`CoordinatorService` runs the
very logic the simulator runs (:class:`~spillway.quality.coordination.SicCoordinator`) behind
the authenticated loopback control channel of the Spark runtime
(:class:`~spillway.spark.channel.ControlServer`: ``127.0.0.1`` only, HMAC handshake both ways
with a random 32-byte key, nothing read before the handshake). Nodes reach it with
:class:`~spillway.federation.client.CoordinatorClient`.

Protocol (one request per shedding interval per node, so dissemination rides on the report):

- ``report``: ``node``, ``sent`` (the node's clock), and the results its root fragments
  produced since its last report as three equal-length lists ``result_time``, ``query``,
  ``sic`` (empty for a node without roots: the report is then a heartbeat); optionally its
  progress as three equal-length lists ``fragment``, ``done``, ``decided`` (per fragment it
  hosts: the source time below which every result has been reported or sent downstream, and
  when its last processed input was cut; :meth:`~spillway.quality.coordination.
  SicCoordinator.progress`, recorded at the service's clock when it arrives). The reply is the
  node's :class:`~spillway.federation.update.NodeUpdate` as of the service's clock now.
- ``update``: ``node``; the reply as above, without reporting (a node that only listens).
- ``layout``: the queries and fragments of ``node`` (what its update will carry).

A node the service has not heard from within ``timeout_s`` is lost: its queries' ceilings
drop, fragments whose output can no longer reach a result are named orphaned, and the other
nodes keep balancing ``sic / ceiling`` (see :mod:`spillway.quality.coordination`).

Time is passed in: ``clock`` returns the service's now in seconds (default
:func:`time.time`, the clock the nodes of one machine share; a test passes a manual clock).

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §4 Eq. 4, §5.2 ``updateSIC``, §6;
Fiscato, PhD thesis 2012, §4.3.

Examples
--------
Two nodes: query 0's leaf on node 0 feeds its root on node 1.

>>> from spillway.federation.client import CoordinatorClient
>>> from spillway.quality.coordination import CoordinatorConfig, QueryLayout
>>> from spillway.quality.sic import StwConfig
>>> layout = QueryLayout(fragment_query=[0, 0], fragment_node=[0, 1],
...                      fragment_sources=[1, 1], edge_from=[0], edge_to=[1])
>>> now = [1.0]
>>> cfg = CoordinatorConfig(stw=StwConfig(stw_s=2.0, slide_s=0.25), timeout_s=0.5)
>>> with CoordinatorService(layout, cfg, clock=lambda: now[0], origin_s=-10.0) as service:
...     leaf = CoordinatorClient(service.address, service.authkey, node=0)
...     root = CoordinatorClient(service.address, service.authkey, node=1)
...     _ = leaf.report(sent=1.0)                                   # a heartbeat
...     u = root.report(sent=1.0, result_time=[0.5], query=[0], sic=[0.6])
...     print(u.sic.tolist(), u.lost_nodes)
...     now[0] = 1.75                                               # node 0 falls silent
...     u = root.report(sent=1.75)
...     print(u.lost_nodes, u.ceiling.tolist(), u.balance.round(2).tolist())
...     leaf.close(); root.close()
[0.6] ()
(0,) [0.5] [1.2]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.federation.update import NodeUpdate, node_queries, node_update
from spillway.quality.coordination import CoordinatorConfig, QueryLayout, SicCoordinator
from spillway.spark.channel import ControlServer


def _node(request: dict[str, Any], n_nodes: int) -> int:
    node = request.get("node")
    if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < n_nodes:
        raise ConfigError(f"node must be an int in 0..{n_nodes - 1}, got {node!r}")
    return node


def update_payload(update: NodeUpdate) -> dict[str, Any]:
    """A :class:`NodeUpdate` as the plain dict the channel sends (lists and floats).

    >>> import numpy as np
    >>> u = NodeUpdate(node=1, as_of=2.0, queries=np.array([3]), sic=np.array([0.5]),
    ...                ceiling=np.array([1.0]), lost_nodes=(), orphaned=np.array([], int))
    >>> update_payload(u)["sic"]
    [0.5]
    """
    return {
        "node": update.node,
        "as_of": update.as_of,
        "queries": update.queries.tolist(),
        "sic": update.sic.tolist(),
        "ceiling": update.ceiling.tolist(),
        "lost_nodes": list(update.lost_nodes),
        "orphaned": update.orphaned.tolist(),
        "stw_end": None if update.stw_end is None else update.stw_end.tolist(),
    }


class CoordinatorService:
    """The query coordinator of a federation, served on ``127.0.0.1`` with an authkey.

    Parameters
    ----------
    layout : QueryLayout
        Every query's fragments, their nodes and edges.
    config : CoordinatorConfig
        The STW of Eq. 4 and the silence after which a node counts as lost.
    clock : callable returning seconds, optional
        The service's now (default :func:`time.time`).
    origin_s : float or array (Q,)
        When each query was deployed (Eq. 4 extrapolates younger queries); default: the
        clock at start, so every node counts as heard from then.
    authkey : bytes, optional
        The key nodes must present (at least 16 bytes); a fresh random one when None.

    Attributes
    ----------
    address : ``("127.0.0.1", port)``; :attr:`authkey`: the key to hand the nodes.
    reports : int
        Reports received so far.

    Raises
    ------
    ConfigError
        A wrong layout or config type, a short authkey; a request naming an unknown node or
        carrying malformed results comes back to its caller as an error reply.
    """

    def __init__(
        self,
        layout: QueryLayout,
        config: CoordinatorConfig,
        *,
        clock: Callable[[], float] | None = None,
        origin_s: Any = None,
        authkey: bytes | None = None,
    ) -> None:
        self._clock = clock or time.time
        origin = self._clock() if origin_s is None else origin_s
        self._coord = SicCoordinator(layout, config, origin_s=origin)
        self.layout = layout
        self._n_nodes = int(layout.n_nodes or 0)
        self._lock = threading.Lock()
        self.reports = 0
        self._server = ControlServer(self._handle, authkey=authkey)
        self.address = self._server.address
        self.authkey = self._server.authkey

    def _handle(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op not in ("report", "update", "layout"):
            raise ConfigError(f"unknown op {op!r}; the coordinator serves report, update, layout")
        node = _node(request, self._n_nodes)
        if op == "layout":
            own = np.flatnonzero(self.layout.fragment_node == node)
            return {
                "queries": node_queries(self.layout, node).tolist(),
                "fragments": own.tolist(),
            }
        with self._lock:
            if op == "report":
                sent = request.get("sent")
                if isinstance(sent, bool) or not isinstance(sent, int | float):
                    raise ConfigError(f"sent must be the node's time in seconds, got {sent!r}")
                self._coord.record(
                    np.asarray(request.get("result_time", []), dtype=np.float64),
                    np.asarray(request.get("query", []), dtype=np.int64),
                    np.asarray(request.get("sic", []), dtype=np.float64),
                )
                self._coord.heard([node], at=float(sent))
                fragment = np.atleast_1d(np.asarray(request.get("fragment", []), dtype=np.int64))
                inside = (fragment >= 0) & (fragment < self.layout.n_fragments)
                if not inside.all() or (self.layout.fragment_node[fragment] != node).any():
                    raise ConfigError(f"node {node} reported progress of another node's fragment")
                self._coord.progress(
                    fragment,
                    np.asarray(request.get("done", []), dtype=np.float64),
                    np.asarray(request.get("decided", []), dtype=np.float64),
                    at=self._clock(),
                )
                self.reports += 1
            update = self._coord.update(self._clock())
        return update_payload(node_update(self.layout, update, node))

    def federation(self) -> Any:
        """The whole federation's :class:`~spillway.quality.coordination.SicUpdate` now."""
        with self._lock:
            return self._coord.update(self._clock())

    @property
    def address_text(self) -> str:
        """``"127.0.0.1:<port>"``."""
        return self._server.address_text

    def close(self) -> None:
        """Stop serving and close every connection (idempotent)."""
        self._server.close()

    def __enter__(self) -> CoordinatorService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CoordinatorService", "update_payload"]
