from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.federation.update import NodeUpdate, node_queries, node_update
from spillway.quality.coordination import CoordinatorConfig, QueryLayout, SicCoordinator
from spillway.quality.sic import StwConfig

# Query 0: leaf on node 0 -> root on node 1; query 1 on node 1 only; query 2 on node 2 only.
LAYOUT = QueryLayout(
    fragment_query=[0, 0, 1, 2],
    fragment_node=[0, 1, 1, 2],
    fragment_sources=[3, 1, 2, 1],
    edge_from=[0],
    edge_to=[1],
)


def _coordinator() -> SicCoordinator:
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=2.0, slide_s=0.5), timeout_s=1.0)
    return SicCoordinator(LAYOUT, cfg, origin_s=-10.0)


def test_each_node_receives_exactly_the_queries_it_hosts() -> None:
    coord = _coordinator()
    coord.record([0.1, 0.2, 0.3], [0, 1, 2], [0.3, 0.4, 0.5])
    coord.heard([0, 1, 2], at=1.0)
    full = coord.update(1.0)
    got = {n: node_update(LAYOUT, full, n) for n in range(3)}
    assert [got[n].queries.tolist() for n in range(3)] == [[0], [0, 1], [2]]
    assert got[1].sic.tolist() == [0.3, 0.4]
    assert got[2].sic.tolist() == [0.5]
    # Every query reaches at least one node, with the same value everywhere.
    for q in range(LAYOUT.n_queries):
        vals = {float(got[n].sic[got[n].queries == q][0]) for n in range(3) if q in got[n].queries}
        assert vals == {float(full.sic[q])}


def test_a_lost_root_orphans_the_leaf_on_its_node_only() -> None:
    coord = _coordinator()
    coord.heard([0, 2], at=2.0)  # node 1 (query 0's root) silent since the origin
    u0 = node_update(LAYOUT, coord.update(2.0), 0)
    u2 = node_update(LAYOUT, coord.update(2.0), 2)
    assert u0.lost_nodes == (1,)
    assert u0.orphaned.tolist() == [0]
    assert u0.ceiling.tolist() == [0.0]
    assert u0.balance.tolist() == [0.0]
    assert u2.orphaned.tolist() == []
    assert u2.ceiling.tolist() == [1.0]


def test_for_queries_maps_to_the_nodes_local_order() -> None:
    u = NodeUpdate(
        node=1,
        as_of=1.0,
        queries=np.array([0, 1]),
        sic=np.array([0.2, 0.7]),
        ceiling=np.array([1.0, 0.5]),
        lost_nodes=(),
        orphaned=np.array([], dtype=np.int64),
    )
    sic, ceiling = u.for_queries([1, 0, 1])
    assert sic.tolist() == [0.7, 0.2, 0.7]
    assert ceiling.tolist() == [0.5, 1.0, 0.5]
    with pytest.raises(ConfigError, match="query 2 has no fragment on node 1"):
        u.for_queries([0, 2])


def test_for_queries_on_a_node_without_queries_refuses_any() -> None:
    u = NodeUpdate(
        node=3,
        as_of=1.0,
        queries=np.array([], dtype=np.int64),
        sic=np.array([]),
        ceiling=np.array([]),
        lost_nodes=(),
        orphaned=np.array([], dtype=np.int64),
    )
    with pytest.raises(ConfigError, match="query 0 has no fragment on node 3"):
        u.for_queries([0])


def test_node_update_names_a_bad_node() -> None:
    full = _coordinator().update(1.0)
    with pytest.raises(ConfigError, match=r"node must be an int in 0\.\.2, got 3"):
        node_update(LAYOUT, full, 3)
    with pytest.raises(ConfigError, match="node must be an int"):
        node_update(LAYOUT, full, True)  # type: ignore[arg-type]


def test_node_queries_of_an_empty_node() -> None:
    layout = QueryLayout(fragment_query=[0], fragment_node=[1], fragment_sources=[1])
    assert node_queries(layout, 0).tolist() == []
