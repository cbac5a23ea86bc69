"""The web dashboard of a federation (``spillway federation up --ui``): one panel for the whole
federation and one per node, drawn by the page ``spillway run --ui`` serves.

A federation's nodes are processes of their own. Every second ``federation up`` reads each
node's status file (:func:`~spillway.spark.fed_node.node_status`) and the coordinator's updates,
folded into a :class:`~spillway.federation.board.FederationView`; :class:`FederationBoards`
turns both into :class:`~spillway.telemetry.board.NodeBoard` snapshots, which the dashboard's
hub serves:

- the ``federation`` panel: per query the SIC the coordinator computed (THEMIS Eq. 4), the share
  of its source tuples kept over the recent STW (all its fragments), the p95 latency at its
  root, and Jain's index over the queries' SIC; its capacity is the sum of the nodes' estimates;
- one panel per node: its fragments' lanes (``query.fragment``, and ``query.fragment.in`` for
  the rows a fragment reads from its upstream's Kafka link), each with its kept share, the SIC
  of its own results and its p95 latency, against the node's latency target; the node's
  capacity estimate, what it processed, and its policy.

A node's panel moves only when its status file does (a node that stopped writing keeps its
last figures). Pure: no I/O, no Spark.

Examples
--------
>>> import math
>>> from spillway.federation.board import federation_view
>>> from spillway.federation.config import FederationConfig
>>> fed = FederationConfig.from_dict({"nodes": [{"name": "a"}, {"name": "b"}],
...     "queries": [{"name": "q", "fragments": [
...         {"name": "leaf", "node": "a", "sources": 2, "to": ["root"]},
...         {"name": "root", "node": "b", "sources": 2}]}]})
>>> boards = FederationBoards(fed)
>>> [(b.name, b.queries) for b in boards.boards]
[('federation', ('q',)), ('a', ('q.leaf',)), ('b', ('q.root', 'q.root.in'))]
>>> status = {"t": 100.0, "capacity_tuples_per_s": 5000.0, "processed_tuples_per_s": 900.0,
...     "policy": "balance-sic", "queries": [{"name": "q.root", "kind": "avg", "query_id": 0,
...     "role": "sources", "root": True, "arrived_recent": 100, "kept_recent": 40,
...     "kept_fraction": 0.4, "sic": 0.4,
...     "latency_p95_s": 2.5, "latency_target_s": 4.0, "arrival_rate": 10.0}]}
>>> statuses = {"a": None, "b": status}
>>> boards.update(federation_view(fed, {}, statuses), statuses, t=100.0)
>>> b = boards.nodes["b"].state().snapshot
>>> b.capacity_tuples_per_s, [(q.name, q.kept_fraction, q.sic) for q in b.queries]
(5000.0, [('q.root', 0.4, 0.4)])
>>> f = boards.federation.state().snapshot
>>> f.capacity_tuples_per_s, f.queries[0].kept_fraction, f.queries[0].latency_p95_s
(5000.0, 0.4, 2.5)
>>> boards.nodes["a"].state().snapshot is None  # no status yet: nothing to draw
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from spillway.federation.board import FederationView
from spillway.federation.config import FederationConfig
from spillway.federation.placement import fragment_id, node_links
from spillway.quality import jain_index
from spillway.status import NodeSnapshot, QueryStatus
from spillway.telemetry.board import NodeBoard

#: The name of the federation-wide panel.
FEDERATION = "federation"


def node_lanes(fed: FederationConfig, node: str) -> tuple[str, ...]:
    """The names a node's status gives its fragments' lanes, in the node's order
    (:func:`~spillway.spark.fed_node.node_config`): ``query.fragment`` for a fragment with
    sources, then ``query.fragment.in`` when it reads a link (:func:`node_links`)."""
    inputs = {i.fragment for i in node_links(fed, node).inputs}
    names: list[str] = []
    for q in fed.queries:
        for f in q.fragments:
            if f.node != node:
                continue
            base = f"{q.name}.{f.name}"
            if f.sources > 0:
                names.append(base)
            if fragment_id(q.name, f.name) in inputs:
                names.append(f"{base}.in")
    return tuple(names)


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else math.nan


def node_snapshot(status: Mapping[str, Any]) -> NodeSnapshot:
    """A node's status file as the snapshot its panel draws (NaN where it says nothing)."""
    queries = tuple(
        QueryStatus(
            name=str(q["name"]),
            kind=str(q.get("kind") or ""),
            arrival_rate=_num(q.get("arrival_rate")),
            kept_fraction=_num(q.get("kept_fraction")),
            sic=_num(q.get("sic")),
            latency_p95_s=_num(q.get("latency_p95_s")),
            latency_target_s=_num(q.get("latency_target_s")),
            rows_in=int(q.get("arrived_recent") or 0),
            rows_kept=int(q.get("kept_recent") or 0),
        )
        for q in status.get("queries", [])
    )
    sic = np.array([q.sic for q in queries if math.isfinite(q.sic)])
    return NodeSnapshot(
        t=_num(status.get("t")),
        capacity_tuples_per_s=_num(status.get("capacity_tuples_per_s")),
        processed_tuples_per_s=_num(status.get("processed_tuples_per_s")),
        jain=float(jain_index(sic)) if sic.size else math.nan,
        queries=queries,
        policy=str(status.get("policy") or ""),
    )


def federation_snapshot(
    fed: FederationConfig,
    view: FederationView,
    statuses: Mapping[str, Mapping[str, Any] | None],
    t: float,
) -> NodeSnapshot:
    """The federation panel's snapshot: per query the coordinator's SIC, the kept share and
    rows over its fragments and the p95 latency at its root (``view``), against its root's
    latency target; the nodes' capacities and processed rates summed."""
    kinds = {q.name: q.kind or "" for q in fed.queries}
    target = {q.name: math.nan for q in fed.queries}
    capacity = processed = 0.0
    for status in statuses.values():
        if not status:
            continue
        capacity += float(np.nan_to_num(_num(status.get("capacity_tuples_per_s"))))
        processed += float(np.nan_to_num(_num(status.get("processed_tuples_per_s"))))
        for lq in status.get("queries", []):
            if lq.get("root"):
                name = fed.queries[int(lq["query_id"])].name
                target[name] = np.fmax(target[name], _num(lq.get("latency_target_s")))
    return NodeSnapshot(
        t=float(t),
        capacity_tuples_per_s=capacity,
        processed_tuples_per_s=processed,
        jain=view.jain,
        queries=tuple(
            QueryStatus(
                name=q.name,
                kind=kinds[q.name],
                arrival_rate=math.nan,
                kept_fraction=q.kept_fraction,
                sic=q.sic,
                latency_p95_s=q.latency_p95_s,
                latency_target_s=float(target[q.name]),
                rows_in=q.arrived,
                rows_kept=q.kept,
            )
            for q in view.queries
        ),
        policy=", ".join(sorted(set(fed.policies))),
    )


class FederationBoards:
    """The dashboard's boards for ``fed``: :attr:`federation` and one per node (:attr:`nodes`);
    :meth:`update` every second, :meth:`finish` at the end."""

    def __init__(self, fed: FederationConfig, *, duration_s: float | None = None) -> None:
        self.fed = fed
        self.federation = NodeBoard(
            FEDERATION,
            queries=[q.name for q in fed.queries],
            stw_s=fed.stw_s,
            duration_s=duration_s,
            info={"nodes": ", ".join(fed.nodes), "coordinated": fed.coordinated},
        )
        self.nodes = {
            n: NodeBoard(
                n,
                queries=node_lanes(fed, n),
                stw_s=fed.stw_s,
                duration_s=duration_s,
                info={"policy": fed.policy_of(n)},
            )
            for n in fed.nodes
        }
        self._seen: dict[str, Any] = {}

    @property
    def boards(self) -> list[NodeBoard]:
        """Every board, the federation's first (the dashboard draws them in this order)."""
        return [self.federation, *self.nodes.values()]

    def update(
        self,
        view: FederationView,
        statuses: Mapping[str, Mapping[str, Any] | None],
        *,
        t: float,
    ) -> None:
        """The federation at Unix time ``t``: ``view`` and every node's latest status."""
        for n, status in statuses.items():
            if status and n in self.nodes and status.get("t") != self._seen.get(n):
                self._seen[n] = status.get("t")
                self.nodes[n].tick(node_snapshot(status))
        if any(statuses.values()):
            self.federation.tick(federation_snapshot(self.fed, view, statuses, t))

    def finish(self, *, report: str | None = None, error: str | None = None) -> None:
        """The run ended (its report, or why it failed): every panel says so."""
        for b in self.boards:
            b.finish(report=report, error=error)


__all__ = ["FEDERATION", "FederationBoards", "federation_snapshot", "node_lanes", "node_snapshot"]
