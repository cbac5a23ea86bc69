"""The query coordinator's logic: layouts, reach through query graphs, Eq. 4, liveness."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.quality.coordination import (
    CoordinatorConfig,
    QueryLayout,
    SicCoordinator,
    SicUpdate,
)
from spillway.quality.sic import StwConfig


def chain3() -> QueryLayout:
    """Query 0: fragments 0 -> 1 -> 2 (root) on nodes 0, 1, 2; query 1: fragment 3 on node 2."""
    return QueryLayout(
        fragment_query=[0, 0, 0, 1],
        fragment_node=[0, 1, 2, 2],
        fragment_sources=[2, 2, 2, 5],
        edge_from=[0, 1],
        edge_to=[1, 2],
    )


def test_layout_properties() -> None:
    lay = chain3()
    assert lay.n_fragments == 4 and lay.n_queries == 2 and lay.n_nodes == 3
    assert lay.root.tolist() == [False, False, True, True]
    assert lay.depth.tolist() == [2, 1, 0, 0]
    assert lay.query_sources.tolist() == [6, 5]
    assert lay.out_degree.tolist() == [1, 1, 0, 0]
    assert np.allclose(lay.share, [1 / 3, 1 / 3, 1 / 3, 1.0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fragment_node": [0]}, "one entry per fragment"),
        ({"edge_from": [0], "edge_to": []}, "one length"),
        ({"edge_from": [0], "edge_to": [5]}, "join fragments 0..1"),
        ({"fragment_query": [0, 1], "edge_from": [0], "edge_to": [1]}, "same query"),
        ({"edge_from": [1], "edge_to": [1]}, "to itself"),
        ({"edge_from": [0, 1], "edge_to": [1, 0]}, "cycle"),
        ({"fragment_query": [0, 2]}, "at least one fragment"),
        ({"fragment_sources": [0, 0]}, "reads no source"),
        ({"n_nodes": 1}, "n_nodes must exceed"),
        ({"fragment_node": [0, -1]}, "must be >= 0"),
        ({"fragment_query": [[0, 0]]}, "one-dimensional"),
        ({"fragment_sources": [0.5, 1.0]}, "whole numbers"),
    ],
)
def test_layout_errors(kwargs: dict, match: str) -> None:
    base = {"fragment_query": [0, 0], "fragment_node": [0, 1], "fragment_sources": [1, 1]}
    with pytest.raises(ConfigError, match=match):
        QueryLayout(**{**base, **kwargs})


def test_reach_chain_cut_in_the_middle_orphans_upstream() -> None:
    w, ceiling = chain3().reach([True, False, True])
    assert w.tolist() == [0.0, 0.0, 1.0, 1.0]
    assert ceiling.tolist() == pytest.approx([1 / 3, 1.0])


def test_reach_all_alive_is_one_for_every_shape() -> None:
    # a replicated fan-out (fragment 0 -> 1 and 2, both roots) and a tree (3, 4 -> 5)
    lay = QueryLayout(
        fragment_query=[0, 0, 0, 1, 1, 1],
        fragment_node=[0, 1, 2, 0, 1, 2],
        fragment_sources=[3, 0, 1, 10, 10, 10],
        edge_from=[0, 0, 3, 4],
        edge_to=[1, 2, 5, 5],
    )
    w, ceiling = lay.reach(np.ones(3, dtype=bool))
    assert ceiling.tolist() == pytest.approx([1.0, 1.0])
    # one consumer of the fan-out lost: the producer reaches half of what it sends
    w, ceiling = lay.reach([True, False, True])
    assert w[0] == pytest.approx(0.5)
    assert ceiling[0] == pytest.approx(0.75 * 0.5 + 0.25)
    assert ceiling[1] == pytest.approx(2 / 3)


def test_reach_needs_one_flag_per_node() -> None:
    with pytest.raises(ConfigError, match="one entry per node"):
        chain3().reach([True])


def coordinator(**kw: float) -> SicCoordinator:
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=2.0, slide_s=0.5), timeout_s=kw.pop("timeout", 1.0))
    return SicCoordinator(chain3(), cfg, **kw)


def test_eq4_is_exact_off_the_slide_grid_and_counts_late_results() -> None:
    c = coordinator()
    c.record([0.1, 0.6, 1.7], [0, 0, 1], [0.2, 0.3, 0.4])
    assert c.query_sic(2.0).tolist() == pytest.approx([0.5, 0.4])
    assert c.query_sic(2.15).tolist() == pytest.approx([0.3, 0.4])  # 0.1 left at 2.1
    c.record([1.9], [0], [0.25])  # arrives late, counts where it belongs
    assert c.query_sic(2.15).tolist() == pytest.approx([0.55, 0.4])
    assert c.query_sic(1.7).tolist()[1] == 0.0  # [now - STW, now) excludes now


def test_eq4_extrapolates_young_queries_and_is_zero_before_origin() -> None:
    c = coordinator(origin_s=np.array([0.0, 1.0]))
    c.record([0.5, 1.2], [0, 1], [0.25, 0.25])
    assert c.query_sic(1.0).tolist() == pytest.approx([0.5, 0.0])
    assert c.query_sic(1.5).tolist() == pytest.approx([0.25 * 2 / 1.5, 0.25 * 2 / 0.5])


def test_old_results_are_dropped() -> None:
    c = coordinator()
    c.record([0.0], [0], [0.5])
    c.record([10.0], [0], [0.5])
    assert c.expired == 1
    assert c.query_sic(10.5).tolist() == pytest.approx([0.5, 0.0])


def test_liveness_and_update() -> None:
    c = coordinator()
    c.heard([0, 1, 2], at=1.0)
    u = c.update(1.5)
    assert u.lost_nodes == () and not u.orphaned.any()
    c.heard([0, 2], at=2.5)
    u = c.update(2.6)
    assert u.lost_nodes == (1,)
    assert u.orphaned.tolist() == [True, False, False, False]  # fragment 0's path is cut
    assert u.ceiling.tolist() == pytest.approx([1 / 3, 1.0])
    assert c.node_alive(2.6).tolist() == [True, False, True]


def test_a_node_never_heard_from_is_lost_after_the_timeout() -> None:
    c = coordinator(timeout=0.5)
    assert c.update(0.5).lost_nodes == ()
    assert c.update(0.6).lost_nodes == (0, 1, 2)


def test_balance_divides_by_the_ceiling() -> None:
    u = SicUpdate(
        as_of=0.0,
        sic=np.array([0.1, 0.3]),
        ceiling=np.array([0.5, 1.0]),
        lost_nodes=(),
        orphaned=np.zeros(2, dtype=bool),
    )
    assert u.balance.tolist() == pytest.approx([0.2, 0.3])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.1], [0, 1], [0.1, 0.1]), "one length"),
        (([0.1], [2], [0.1]), "query_index must be ints"),
        (([0.1], [0], [-0.1]), "finite and >= 0"),
        (([np.nan], [0], [0.1]), "result_time must be finite"),
    ],
)
def test_record_errors(args: tuple, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        coordinator().record(*args)


def test_other_errors() -> None:
    c = coordinator()
    with pytest.raises(ConfigError, match="nodes must be in 0..2"):
        c.heard([3], at=0.0)
    with pytest.raises(ConfigError, match="at must be finite"):
        c.heard([0], at=float("inf"))
    with pytest.raises(ConfigError, match="now must be finite"):
        c.query_sic(float("nan"))
    with pytest.raises(ConfigError, match="layout must be a QueryLayout"):
        SicCoordinator("x", CoordinatorConfig())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="config must be a CoordinatorConfig"):
        SicCoordinator(chain3(), {})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="origin_s must be one time or one per query"):
        SicCoordinator(chain3(), CoordinatorConfig(), origin_s=[0.0, 1.0, 2.0])
    with pytest.raises(ConfigError, match="origin_s must be finite"):
        SicCoordinator(chain3(), CoordinatorConfig(), origin_s=float("nan"))
    with pytest.raises(ConfigError, match="stw must be a StwConfig"):
        CoordinatorConfig(stw=10.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout_s must be a finite number > 0"):
        CoordinatorConfig(timeout_s=-1.0)
    with pytest.raises(ConfigError, match="lag_s must be a finite number >= 0"):
        CoordinatorConfig(lag_s=float("nan"))
    with pytest.raises(ConfigError, match="lag_s must be finite"):
        CoordinatorConfig(lag_s=float("inf"))
