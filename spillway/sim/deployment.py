"""What the simulator runs: nodes with capacities, queries split into fragments placed on nodes.

A :class:`Deployment` is a frozen description (THEMIS §3): ``n_nodes`` nodes, each able to
process ``capacity`` tuples per second, and queries, each a DAG of :class:`FragmentSpec`. A
fragment runs on one node, reads its own sources, and every window (1 s in THEMIS Table 1)
emits ``rows_out`` rows to the fragments listed in ``downstream`` (or, for a root, to the
query's result). Each fragment of a query runs on a different node (THEMIS §3: "each fragment
of the same query goes to a different node").

A fragment's output to several consumers is either *replicated* (every consumer gets every
row, each copy carrying ``1/k`` of its SIC: DISSP Assumption 9) or *partitioned* (the rows are
dealt round-robin, each keeping its SIC: DISSP §3.5). Either way SIC is conserved (THEMIS
Eq. 3). :meth:`Deployment.topology` turns the description into the flat arrays the engine
works on; :meth:`Topology.layout` is what the query coordinator needs
(:class:`~spillway.quality.coordination.QueryLayout`).

Examples
--------
A two-fragment chain across nodes 0 and 1, and a single-fragment query on node 1:

>>> d = Deployment(n_nodes=2, capacity=1000.0, queries=(
...     QuerySpec(kind="cov", fragments=(FragmentSpec(node=0, sources=2, downstream=(1,)),
...                                      FragmentSpec(node=1, sources=2))),
...     QuerySpec(kind="avg_all", fragments=(FragmentSpec(node=1, sources=10),))))
>>> t = d.topology()
>>> t.n_fragments, t.n_sources, t.n_edges, t.frag_node.tolist()
(3, 14, 1, [0, 1, 1])
>>> d.n_fragments, d.source_counts()
(3, [4, 10])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.quality.coordination import QueryLayout

#: How a fragment's rows reach several consumers.
FANOUTS = ("replicate", "partition")


def _int(v: Any, name: str, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


@dataclass(frozen=True, kw_only=True)
class FragmentSpec:
    """One fragment of a query: where it runs, what it reads and where its output goes.

    Parameters
    ----------
    node : int
        Node running the fragment.
    sources : int
        Sources it reads (THEMIS §7: AVG-all 10, TOP-5 20, COV 2 per fragment).
    rows_out : int
        Rows each window firing emits (TOP-5: 5; an aggregate: 1).
    downstream : tuple of int
        Indices (within the query) of the fragments consuming its output; empty for a root.
    fanout : {"replicate", "partition"}
        How the rows reach several consumers (only matters with more than one).
    rate : float or None
        Tuples per second of each of its sources; None: the run's ``SimConfig.source_rate``
        (a measured federation's producers run at a rate per query).

    Examples
    --------
    >>> FragmentSpec(node=0, fanout="broadcast")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: fanout must be one of replicate, partition; got 'broadcast'
    >>> FragmentSpec(node=0, sources=1, rate=0.0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: rate must be a finite number > 0 (tuples/s per source) or None, got 0.0
    """

    node: int
    sources: int = 0
    rows_out: int = 1
    downstream: tuple[int, ...] = ()
    fanout: str = "replicate"
    rate: float | None = None

    def __post_init__(self) -> None:
        _int(self.node, "node", 0)
        _int(self.sources, "sources", 0)
        _int(self.rows_out, "rows_out", 1)
        if not isinstance(self.downstream, tuple):
            raise ConfigError(
                f"downstream must be a tuple of fragment indices, got {self.downstream!r}"
            )
        for d in self.downstream:
            _int(d, "downstream index", 0)
        if len(set(self.downstream)) != len(self.downstream):
            raise ConfigError(f"downstream must not repeat a fragment, got {self.downstream}")
        if self.fanout not in FANOUTS:
            raise ConfigError(f"fanout must be one of {', '.join(FANOUTS)}; got {self.fanout!r}")
        r = self.rate
        if r is not None and not (
            isinstance(r, int | float) and not isinstance(r, bool) and math.isfinite(r) and r > 0
        ):
            raise ConfigError(
                f"rate must be a finite number > 0 (tuples/s per source) or None, got {r!r}"
            )


@dataclass(frozen=True, kw_only=True)
class QuerySpec:
    """A query: a DAG of fragments (at least one root, at least one source).

    Parameters
    ----------
    fragments : tuple of FragmentSpec
    kind : str
        A label for reports (``avg_all``, ``top5``, ``cov``, ...).
    """

    fragments: tuple[FragmentSpec, ...]
    kind: str = "custom"

    def __post_init__(self) -> None:
        if not isinstance(self.fragments, tuple) or not self.fragments:
            raise ConfigError("a query needs a non-empty tuple of fragments")
        n = len(self.fragments)
        for f in self.fragments:
            if not isinstance(f, FragmentSpec):
                raise ConfigError(f"fragments must be FragmentSpec values, got {type(f).__name__}")
            if any(d >= n for d in f.downstream):
                raise ConfigError(
                    f"downstream index out of range: a {self.kind} query has {n} fragments, "
                    f"got {f.downstream}"
                )
        nodes = [f.node for f in self.fragments]
        if len(set(nodes)) != n:
            raise ConfigError(
                f"each fragment of a query must run on a different node (THEMIS §3), got nodes "
                f"{nodes} for a {self.kind} query"
            )
        if sum(f.sources for f in self.fragments) < 1:
            raise ConfigError(f"a {self.kind} query must read at least one source")

    @property
    def n_sources(self) -> int:
        """``|S|``: the sources of all its fragments."""
        return sum(f.sources for f in self.fragments)


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """Nodes and the queries placed on them.

    Parameters
    ----------
    n_nodes : int
    capacity : float or tuple of float
        Tuples per second each node processes (one value for all, or one per node).
    queries : tuple of QuerySpec
    capacity_steps : tuple of (float, tuple of float)
        A capacity that changes during the run: ``(from_s, per node)`` pieces in time order,
        each node processing ``per node`` tuples per second from ``from_s`` on (``capacity``
        before the first); its cost model sees the change only in its processing times, as
        a Spark node's does. Empty: ``capacity`` throughout.

    Raises
    ------
    ConfigError
        A fragment on a node that does not exist, a capacity that is not a positive number, a
        cyclic query graph, capacity steps out of time order or not one per node.

    Examples
    --------
    >>> Deployment(n_nodes=1, capacity=0.0, queries=())
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: capacity must be finite numbers > 0 (tuples per second per node), got 0.0
    >>> d = Deployment(n_nodes=2, capacity=(10.0, 20.0), queries=(),
    ...                capacity_steps=((5.0, (12.0, 18.0)), (9.0, (14.0, 16.0))))
    >>> d.capacities_at(0.0).tolist(), d.capacities_at(5.0).tolist(), d.capacities_at(99.0).tolist()
    ([10.0, 20.0], [12.0, 18.0], [14.0, 16.0])
    >>> Deployment(n_nodes=1, capacity=1.0, queries=(), capacity_steps=((5.0, (1.0,)), (2.0, (1.0,))))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: capacity_steps must be (from_s, one capacity per node) pairs with from_s >= 0 increasing; got times [5.0, 2.0]
    """

    n_nodes: int
    capacity: float | tuple[float, ...]
    queries: tuple[QuerySpec, ...]
    capacity_steps: tuple[tuple[float, tuple[float, ...]], ...] = ()

    def __post_init__(self) -> None:
        _int(self.n_nodes, "n_nodes", 1)
        cap = np.asarray(self.capacity, dtype=np.float64)
        if cap.ndim > 1 or (cap.ndim == 1 and cap.shape[0] != self.n_nodes):
            raise ConfigError(f"capacity must be one number or one per node ({self.n_nodes})")
        if not np.isfinite(cap).all() or (cap <= 0).any():
            raise ConfigError(
                f"capacity must be finite numbers > 0 (tuples per second per node), got {self.capacity!r}"
            )
        if not isinstance(self.queries, tuple):
            raise ConfigError("queries must be a tuple of QuerySpec")
        for q in self.queries:
            if not isinstance(q, QuerySpec):
                raise ConfigError(f"queries must be QuerySpec values, got {type(q).__name__}")
            for f in q.fragments:
                if f.node >= self.n_nodes:
                    raise ConfigError(
                        f"a fragment runs on node {f.node}, but there are {self.n_nodes} nodes"
                    )
        self._check_steps()

    def _check_steps(self) -> None:
        steps = self.capacity_steps
        ok = isinstance(steps, tuple) and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], tuple) for p in steps
        )
        times = [p[0] for p in steps] if ok else []
        ok = ok and all(
            isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
            for t in times
        )
        ok = ok and all(b > a for a, b in zip(times, times[1:], strict=False))
        ok = ok and all(len(p[1]) == self.n_nodes for p in steps)
        if not ok:
            raise ConfigError(
                "capacity_steps must be (from_s, one capacity per node) pairs with from_s >= 0 "
                f"increasing; got times {times if times else steps!r}"
            )
        for _, caps in steps:
            c = np.asarray(caps, dtype=np.float64)
            if not np.isfinite(c).all() or (c <= 0).any():
                raise ConfigError(
                    f"capacity_steps capacities must be finite numbers > 0 (tuples per second per "
                    f"node), got {caps!r}"
                )

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return len(self.queries)

    @property
    def n_fragments(self) -> int:
        """Number of fragments over all queries."""
        return sum(len(q.fragments) for q in self.queries)

    def capacities(self) -> np.ndarray:
        """Tuples per second of every node (N,)."""
        return np.array(
            np.broadcast_to(np.asarray(self.capacity, dtype=np.float64), (self.n_nodes,))
        )

    def capacities_at(self, t: float) -> np.ndarray:
        """Tuples per second of every node at time ``t`` (``capacity_steps``) (N,)."""
        got = self.capacities()
        for start, caps in self.capacity_steps:
            if start > t:
                break
            got = np.asarray(caps, dtype=np.float64)
        return np.array(got)

    def source_counts(self) -> list[int]:
        """``|S|`` of every query."""
        return [q.n_sources for q in self.queries]

    def topology(self) -> Topology:
        """The flat, node-sorted arrays the engine runs on."""
        return Topology.build(self)


@dataclass(frozen=True, kw_only=True, eq=False)
class Topology:
    """A deployment as arrays, fragments and lanes sorted by node (built by
    :meth:`Deployment.topology`).

    Fragments: ``frag_query``, ``frag_index`` (its position among its query's fragments),
    ``frag_node``, ``frag_sources``, ``frag_rows`` (rows per firing), ``frag_rate`` (tuples/s
    per source, NaN: the run's ``source_rate``); ``node_frags`` (N+1,) bounds each node's
    contiguous fragments. Edges (one per producer → consumer): ``edge_from``, ``edge_to``,
    ``edge_partition`` (bool), ``edge_k`` (consumers of the producer), ``edge_j`` (this
    consumer's position among them). Lanes (the input-buffer streams a node decides on, THEMIS
    Eq. 1 per source): one per source, then one per edge at the consumer's node, sorted by
    node; ``lane_frag``, ``lane_is_source``, ``node_lanes`` (N+1,) bounds, ``source_lane`` (S,)
    and ``edge_lane`` (E,) positions, ``source_frag`` (S,).
    """

    n_nodes: int
    capacity: np.ndarray
    kinds: tuple[str, ...]
    query_kind: np.ndarray
    query_sources: np.ndarray
    frag_query: np.ndarray
    frag_index: np.ndarray
    frag_node: np.ndarray
    frag_sources: np.ndarray
    frag_rows: np.ndarray
    frag_rate: np.ndarray
    node_frags: np.ndarray
    edge_from: np.ndarray
    edge_to: np.ndarray
    edge_partition: np.ndarray
    edge_k: np.ndarray
    edge_j: np.ndarray
    source_frag: np.ndarray
    lane_frag: np.ndarray
    lane_is_source: np.ndarray
    node_lanes: np.ndarray
    source_lane: np.ndarray
    edge_lane: np.ndarray
    layout: QueryLayout

    @property
    def n_queries(self) -> int:
        """Queries Q."""
        return int(self.query_sources.shape[0])

    @property
    def n_fragments(self) -> int:
        """Fragments F."""
        return int(self.frag_query.shape[0])

    @property
    def n_sources(self) -> int:
        """Sources S (one lane each)."""
        return int(self.source_frag.shape[0])

    @property
    def n_edges(self) -> int:
        """Edges E (one derived lane each)."""
        return int(self.edge_from.shape[0])

    @property
    def n_lanes(self) -> int:
        """Lanes L = S + E."""
        return int(self.lane_frag.shape[0])

    @staticmethod
    def build(d: Deployment) -> Topology:
        """Flatten ``d`` (see the class docstring)."""
        kinds = tuple(dict.fromkeys(q.kind for q in d.queries))
        kind_of = {k: i for i, k in enumerate(kinds)}
        rows: list[
            tuple[int, int, int, int, int]
        ] = []  # query, index in query, node, sources, rows
        edges: list[tuple[int, int, int, int, int, bool]] = []  # q, from, to (in query), k, j, part
        rates: dict[tuple[int, int], float] = {}
        for qi, q in enumerate(d.queries):
            for fi, f in enumerate(q.fragments):
                rows.append((qi, fi, f.node, f.sources, f.rows_out))
                rates[(qi, fi)] = math.nan if f.rate is None else float(f.rate)
                k = len(f.downstream)
                for j, to in enumerate(f.downstream):
                    edges.append((qi, fi, to, k, j, f.fanout == "partition"))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
        order = np.lexsort((arr[:, 1], arr[:, 0], arr[:, 2]))  # by node, then query, index
        arr = arr[order]
        n_f = arr.shape[0]
        new_index = {(int(q), int(i)): g for g, (q, i) in enumerate(arr[:, :2])}
        frag_query, frag_node = arr[:, 0].copy(), arr[:, 2].copy()
        frag_sources, frag_rows = arr[:, 3].copy(), arr[:, 4].copy()
        node_frags = np.searchsorted(frag_node, np.arange(d.n_nodes + 1))
        e = np.array(
            [(new_index[(q, a)], new_index[(q, b)], k, j, p) for q, a, b, k, j, p in edges],
            dtype=np.int64,
        ).reshape(-1, 5)
        layout = QueryLayout(
            fragment_query=frag_query,
            fragment_node=frag_node,
            fragment_sources=frag_sources,
            edge_from=e[:, 0],
            edge_to=e[:, 1],
            n_nodes=d.n_nodes,
        )
        source_frag = np.repeat(np.arange(n_f), frag_sources)
        n_s = source_frag.shape[0]
        lane_frag_unsorted = np.concatenate([source_frag, e[:, 1]])
        lane_kind = np.concatenate(
            [np.zeros(n_s, dtype=np.int64), np.ones(e.shape[0], dtype=np.int64)]
        )
        lane_order = np.lexsort(
            (np.arange(lane_kind.size), lane_kind, frag_node[lane_frag_unsorted])
        )
        position = np.empty_like(lane_order)
        position[lane_order] = np.arange(lane_order.size)
        lane_frag = lane_frag_unsorted[lane_order]
        return Topology(
            n_nodes=d.n_nodes,
            capacity=d.capacities(),
            kinds=kinds,
            query_kind=np.array([kind_of[q.kind] for q in d.queries], dtype=np.int64),
            query_sources=np.array(d.source_counts(), dtype=np.int64),
            frag_query=frag_query,
            frag_index=arr[:, 1].copy(),
            frag_node=frag_node,
            frag_sources=frag_sources,
            frag_rows=frag_rows,
            frag_rate=np.array([rates[(int(q), int(i))] for q, i in arr[:, :2]], dtype=np.float64),
            node_frags=node_frags,
            edge_from=e[:, 0].copy(),
            edge_to=e[:, 1].copy(),
            edge_partition=e[:, 4].astype(bool),
            edge_k=e[:, 2].copy(),
            edge_j=e[:, 3].copy(),
            source_frag=source_frag,
            lane_frag=lane_frag,
            lane_is_source=lane_kind[lane_order] == 0,
            node_lanes=np.searchsorted(frag_node[lane_frag], np.arange(d.n_nodes + 1)),
            source_lane=position[:n_s],
            edge_lane=position[n_s:],
            layout=layout,
        )


def chain(nodes: Sequence[int], sources: int, rows_out: int = 1) -> tuple[FragmentSpec, ...]:
    """Fragments of a chain (THEMIS TOP-5, COV): each feeds the next; the last is the root.

    >>> [f.downstream for f in chain([3, 1, 2], sources=2)]
    [(1,), (2,), ()]
    """
    n = len(nodes)
    return tuple(
        FragmentSpec(node=int(v), sources=sources, rows_out=rows_out,
                     downstream=(i + 1,) if i + 1 < n else ())
        for i, v in enumerate(nodes)
    )  # fmt: skip


def tree(nodes: Sequence[int], sources: int, rows_out: int = 1) -> tuple[FragmentSpec, ...]:
    """Fragments of a tree (THEMIS AVG-all): the first is the root, every other feeds it.

    >>> [f.downstream for f in tree([0, 4, 5], sources=10)]
    [(), (0,), (0,)]
    """
    return tuple(
        FragmentSpec(node=int(v), sources=sources, rows_out=rows_out,
                     downstream=() if i == 0 else (0,))
        for i, v in enumerate(nodes)
    )  # fmt: skip


__all__ = ["FANOUTS", "Deployment", "FragmentSpec", "QuerySpec", "Topology", "chain", "tree"]
