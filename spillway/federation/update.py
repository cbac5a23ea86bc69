"""What one node receives from the query coordinator: its own queries' values (THEMIS §6).

The coordinator sends each query's result SIC "to all nodes hosting fragments of that query"
(THEMIS §6, "query coordinator"); a node therefore receives the values of its own queries
only, not the whole federation's. :class:`NodeUpdate` is that message, cut from a
:class:`~spillway.quality.coordination.SicUpdate` by :func:`node_update`, and turned back into
per-query arrays of the node's local numbering by :meth:`NodeUpdate.for_queries`, ready for
:meth:`spillway.quality.LocalProjection.base` (the node's projection between updates).

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §5.2 ``updateSIC`` and §6 "query coordinator";
Fiscato, PhD thesis 2012, §4.3 (failed nodes).

Examples
--------
Query 0 spans nodes 0 and 1; query 1 runs on node 1 alone. Node 0 hears only of query 0.

>>> from spillway.quality.coordination import (
...     CoordinatorConfig, QueryLayout, SicCoordinator)
>>> from spillway.quality.sic import StwConfig
>>> layout = QueryLayout(fragment_query=[0, 0, 1], fragment_node=[0, 1, 1],
...                      fragment_sources=[2, 2, 1], edge_from=[0], edge_to=[1])
>>> stw = StwConfig(stw_s=1.0, slide_s=0.25)
>>> coord = SicCoordinator(layout, CoordinatorConfig(stw=stw, timeout_s=1.0))
>>> coord.record([0.5, 0.6], [0, 1], [0.25, 0.5])
>>> coord.heard([0, 1], at=0.9)
>>> u = node_update(layout, coord.update(1.0), node=0)
>>> u.queries.tolist(), u.sic.tolist(), u.ceiling.tolist(), u.lost_nodes
([0], [0.25], [1.0], ())
>>> u.for_queries([0, 0])[0].tolist()  # both of node 0's lanes belong to query 0
[0.25, 0.25]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.quality.coordination import QueryLayout, SicUpdate


@dataclass(frozen=True, kw_only=True, eq=False)
class NodeUpdate:
    """The coordinator's message to one node: its queries' Eq. 4 values at ``as_of``.

    Parameters
    ----------
    node : int
        The node it is addressed to.
    as_of : float
        When the coordinator computed it (seconds, its clock).
    queries : int array (K,)
        The queries with a fragment on this node, ascending (global query indices).
    sic : float array (K,)
        Their result SIC (THEMIS Eq. 4), never clipped.
    ceiling : float array (K,)
        The SIC each can still reach with the nodes alive (1 with all of them).
    lost_nodes : tuple of int
        Nodes the coordinator has not heard from within its timeout.
    orphaned : int array
        This node's fragments (global indices) whose output no longer reaches a result: shed
        their tuples rather than spend capacity on them.
    stw_end : float array (K,), optional
        Where each query's STW ends in source time: ``sic`` covers ``[stw_end - STW,
        stw_end)`` (the query's watermark, :meth:`~spillway.quality.coordination.
        SicCoordinator.stw_end`); None: ``as_of``.
    """

    node: int
    as_of: float
    queries: np.ndarray
    sic: np.ndarray
    ceiling: np.ndarray
    lost_nodes: tuple[int, ...]
    orphaned: np.ndarray
    stw_end: np.ndarray | None = None

    def ends(self, query_ids: Any) -> np.ndarray:
        """The STW end of each entry of ``query_ids`` (``as_of`` without ``stw_end``).

        >>> u = NodeUpdate(node=0, as_of=9.0, queries=np.array([0, 3]), sic=np.zeros(2),
        ...                ceiling=np.ones(2), lost_nodes=(), orphaned=np.zeros(0, int),
        ...                stw_end=np.array([5.0, 7.0]))
        >>> u.ends([3, 0]).tolist()
        [7.0, 5.0]
        """
        ids = np.atleast_1d(np.asarray(query_ids, dtype=np.int64))
        if self.stw_end is None:
            return np.full(ids.size, self.as_of)
        self.for_queries(ids)  # refuses a query this update does not carry
        return self.stw_end[np.searchsorted(self.queries, ids)]

    @property
    def balance(self) -> np.ndarray:
        """``sic / ceiling`` (0 where the ceiling is 0): what the node balances (K,)."""
        out = np.zeros_like(self.sic)
        np.divide(self.sic, self.ceiling, out=out, where=self.ceiling > 0)
        return out

    def for_queries(self, query_ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(sic, ceiling)`` for each entry of ``query_ids`` (global indices, any order).

        For a node that numbers its queries (or fragments) locally: pass the global query of
        each local one and get arrays in the local order, e.g. for
        :meth:`spillway.quality.LocalProjection.base`.

        Raises
        ------
        ConfigError
            A query this update does not carry (it has no fragment on this node).

        Examples
        --------
        A node whose two fragments belong to queries 3 and 0, with nothing admitted yet: its
        projection before deciding is the update's ``sic / ceiling`` (THEMIS §6).

        >>> from spillway.quality import LocalProjection
        >>> from spillway.quality.sic import StwConfig
        >>> u = NodeUpdate(node=0, as_of=10.0, queries=np.array([0, 3]),
        ...                sic=np.array([0.3, 0.2]), ceiling=np.array([1.0, 0.5]),
        ...                lost_nodes=(2,), orphaned=np.array([], dtype=np.int64))
        >>> sic, ceiling = u.for_queries([3, 0])
        >>> p = LocalProjection(StwConfig(stw_s=4.0, slide_s=1.0), n_queries=2, lag_s=1.0)
        >>> p.base(11.0, sic=sic, as_of=u.as_of, ceiling=ceiling).round(3).tolist()
        [0.4, 0.3]
        """
        ids = np.atleast_1d(np.asarray(query_ids, dtype=np.int64))
        pos = np.searchsorted(self.queries, ids)
        pos_c = np.minimum(pos, max(self.queries.size - 1, 0))
        ok = (
            (pos < self.queries.size) & (self.queries[pos_c] == ids)
            if self.queries.size
            else ids < 0
        )
        if not ok.all():
            bad = int(ids[~ok][0])
            raise ConfigError(
                f"query {bad} has no fragment on node {self.node}, so the coordinator does not "
                f"send its SIC there; ask for the node's own queries {self.queries.tolist()[:10]}"
            )
        return self.sic[pos_c], self.ceiling[pos_c]


def node_queries(layout: QueryLayout, node: int) -> np.ndarray:
    """The queries with at least one fragment on ``node``, ascending.

    >>> layout = QueryLayout(fragment_query=[0, 1, 1], fragment_node=[1, 0, 1],
    ...                      fragment_sources=[1, 1, 1], edge_from=[1], edge_to=[2])
    >>> node_queries(layout, 1).tolist(), node_queries(layout, 0).tolist()
    ([0, 1], [1])
    """
    return np.unique(layout.fragment_query[layout.fragment_node == node])


def node_update(layout: QueryLayout, update: SicUpdate, node: int) -> NodeUpdate:
    """Cut the whole federation's :class:`SicUpdate` down to what ``node`` receives.

    Raises
    ------
    ConfigError
        ``node`` is not one of the layout's nodes.
    """
    n_nodes = int(layout.n_nodes or 0)
    if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 0 <= node < n_nodes:
        raise ConfigError(f"node must be an int in 0..{n_nodes - 1}, got {node!r}")
    q = node_queries(layout, int(node))
    own = layout.fragment_node == node
    return NodeUpdate(
        node=int(node),
        as_of=float(update.as_of),
        queries=q,
        sic=update.sic[q].copy(),
        ceiling=update.ceiling[q].copy(),
        lost_nodes=tuple(update.lost_nodes),
        orphaned=np.flatnonzero(own & update.orphaned),
        stw_end=None if update.stw_end is None else update.stw_end[q].copy(),
    )


__all__ = ["NodeUpdate", "node_queries", "node_update"]
