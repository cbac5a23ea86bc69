"""Deployments: validation and the flat, node-sorted topology the engine runs on."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.sim.deployment import Deployment, FragmentSpec, QuerySpec, chain, tree


def two_queries() -> Deployment:
    return Deployment(
        n_nodes=3,
        capacity=(100.0, 200.0, 300.0),
        queries=(
            QuerySpec(kind="top5", fragments=chain([2, 0, 1], sources=20, rows_out=5)),
            QuerySpec(kind="avg_all", fragments=tree([1, 2], sources=10)),
        ),
    )


def test_topology_sorts_fragments_and_lanes_by_node() -> None:
    t = two_queries().topology()
    assert t.frag_node.tolist() == sorted(t.frag_node.tolist())
    assert t.node_frags.tolist() == [0, 1, 3, 5]
    lane_node = t.frag_node[t.lane_frag]
    assert lane_node.tolist() == sorted(lane_node.tolist())
    assert t.n_sources == 80 and t.n_edges == 3 and t.n_lanes == 83
    # every lane is where its fragment runs; the sources of a node come before its edges
    for n in range(3):
        kinds = t.lane_is_source[t.node_lanes[n] : t.node_lanes[n + 1]]
        assert kinds.tolist() == sorted(kinds.tolist(), reverse=True)
    assert (t.lane_frag[t.source_lane] == t.source_frag).all()
    assert (t.lane_frag[t.edge_lane] == t.edge_to).all()
    assert t.capacity.tolist() == [100.0, 200.0, 300.0]
    assert t.query_sources.tolist() == [60, 20]
    assert t.kinds == ("top5", "avg_all")


def test_topology_edges_follow_the_graph() -> None:
    t = two_queries().topology()
    pairs = {
        (int(t.frag_node[a]), int(t.frag_node[b]))
        for a, b in zip(t.edge_from, t.edge_to, strict=True)
    }
    assert pairs == {(2, 0), (0, 1), (2, 1)}
    assert t.layout.root.sum() == 2
    assert t.frag_rows[t.frag_query == 0].tolist() == [5, 5, 5]


def test_fanout_edges_carry_k_and_j() -> None:
    q = QuerySpec(
        fragments=(
            FragmentSpec(node=0, sources=3, downstream=(1, 2), fanout="partition"),
            FragmentSpec(node=1),
            FragmentSpec(node=2),
        )
    )
    t = Deployment(n_nodes=3, capacity=1.0, queries=(q,)).topology()
    assert t.edge_k.tolist() == [2, 2]
    assert sorted(t.edge_j.tolist()) == [0, 1]
    assert t.edge_partition.all()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: FragmentSpec(node=-1), "node must be an int >= 0"),
        (lambda: FragmentSpec(node=0, rows_out=0), "rows_out must be an int >= 1"),
        (lambda: FragmentSpec(node=0, downstream=[1]), "downstream must be a tuple"),
        (lambda: FragmentSpec(node=0, downstream=(1, 1)), "must not repeat"),
        (lambda: FragmentSpec(node=0, fanout="x"), "fanout must be one of"),
        (lambda: QuerySpec(fragments=()), "non-empty tuple"),
        (lambda: QuerySpec(fragments=("f",)), "FragmentSpec values"),  # type: ignore[arg-type]
        (
            lambda: QuerySpec(fragments=(FragmentSpec(node=0, sources=1, downstream=(3,)),)),
            "out of range",
        ),
        (lambda: QuerySpec(fragments=chain([0, 0], sources=1)), "different node"),
        (lambda: QuerySpec(fragments=(FragmentSpec(node=0),)), "at least one source"),
        (lambda: Deployment(n_nodes=0, capacity=1.0, queries=()), "n_nodes must be an int >= 1"),
        (lambda: Deployment(n_nodes=2, capacity=(1.0,), queries=()), "one number or one per node"),
        (
            lambda: Deployment(n_nodes=1, capacity=float("inf"), queries=()),
            "capacity must be finite",
        ),
        (lambda: Deployment(n_nodes=1, capacity=1.0, queries=[]), "tuple of QuerySpec"),  # type: ignore[arg-type]
        (lambda: Deployment(n_nodes=1, capacity=1.0, queries=("q",)), "QuerySpec values"),  # type: ignore[arg-type]
        (
            lambda: Deployment(
                n_nodes=1, capacity=1.0, queries=(QuerySpec(fragments=chain([1], 1)),)
            ),
            "there are 1 nodes",
        ),
    ],
)
def test_errors(make, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=match):
        make()


def test_cyclic_graph_is_rejected() -> None:
    q = QuerySpec(
        fragments=(
            FragmentSpec(node=0, sources=1, downstream=(1,)),
            FragmentSpec(node=1, sources=1, downstream=(0,)),
        )
    )
    with pytest.raises(ConfigError, match="cycle"):
        Deployment(n_nodes=2, capacity=1.0, queries=(q,)).topology()


def test_capacities_broadcast() -> None:
    d = Deployment(n_nodes=3, capacity=5.0, queries=())
    assert np.array_equal(d.capacities(), [5.0, 5.0, 5.0])
