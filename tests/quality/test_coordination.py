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


# ---- progress watermarks: the STW ends where each query's results are complete


def _late_run(use_progress: bool, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``chain3`` with every 1 s source window worth 0.1 of each query's SIC (1.0 per STW of
    10 s). Query 0's results reach the coordinator 14-73 s after their window (the Spark
    federation's measured p50-p95), query 1's 5 s after; ``lag_s`` is 20 s. Each node
    reports the progress a node would: a root is done up to its first window not delivered
    yet; the upstream fragments deliver 3 s after their windows. Returns, per coordinator
    second from 120 to 199, both queries' Eq. 4 values."""
    rng = np.random.default_rng(seed)
    windows = np.arange(0.0, 200.0)
    arrive0 = windows + rng.uniform(14.0, 73.0, windows.size)
    arrive1 = windows + 5.0
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=10.0, slide_s=1.0), timeout_s=5.0, lag_s=20.0)
    c = SicCoordinator(chain3(), cfg, origin_s=0.0)
    got = []
    for now in np.arange(1.0, 200.0):
        for arrive, q in ((arrive0, 0), (arrive1, 1)):
            new = (arrive <= now) & (arrive > now - 1.0)
            c.record(windows[new], np.full(int(new.sum()), q), np.full(int(new.sum()), 0.1))
        c.heard([0, 1, 2], at=now)
        if use_progress:
            done0 = float(windows[arrive0 > now].min())  # the first window not delivered
            done1 = float(windows[arrive1 > now].min())
            c.progress([0, 1], done=[now - 3.0] * 2, decided=[now - 1.0] * 2, at=now)
            c.progress([2, 3], done=[done0, done1], decided=[now, now], at=now)
        if now >= 120.0:
            got.append(c.update(now).sic)
    return np.array(got)[:, 0], np.array(got)[:, 1]


def test_late_results_count_once_the_roots_report_progress() -> None:
    # Old code (a fixed lag of 20 s): query 0's results 14-73 s late were counted only when
    # they had arrived within the lag, so its Eq. 4 fell to 0.0-0.4 (mean 0.155) while every STW in the
    # end held 1.0, and BALANCE-SIC would have seen it as the poorer query.
    late, prompt = _late_run(use_progress=False)
    assert late.max() < 0.8 and np.allclose(prompt, 1.0)
    late, prompt = _late_run(use_progress=True)
    assert np.allclose(late, 1.0) and np.allclose(prompt, 1.0)


def test_the_stw_ends_at_the_watermark_and_says_so() -> None:
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=4.0, slide_s=1.0), timeout_s=100.0, lag_s=2.0)
    c = SicCoordinator(chain3(), cfg, origin_s=-100.0)
    c.record([1.0, 2.0, 5.0], [0, 0, 0], [0.25, 0.25, 0.25])
    u = c.update(10.0)
    assert u.stw_end is not None and u.stw_end.tolist() == [8.0, 8.0]  # no progress: lag
    c.heard([0, 1, 2], at=9.0)
    for f in range(3):  # each hop reads what the one before delivered
        c.progress([f], done=[6.0], decided=[7.5 + f], at=7.0 + f)
    u = c.update(10.0)
    assert u.stw_end is not None and u.stw_end.tolist() == [6.0, 8.0]
    assert u.sic.tolist() == [0.5, 0.0]  # [2, 6): the results at 2 and 5


def test_a_root_waits_for_what_its_upstream_delivered_before_its_cut() -> None:
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=4.0, slide_s=1.0), timeout_s=100.0)
    c = SicCoordinator(chain3(), cfg)
    c.progress([0], done=[50.0], decided=[50.0], at=51.0)
    c.progress([1], done=[50.0], decided=[55.0], at=56.0)  # read the leaf's output to 50
    c.progress([2], done=[60.0], decided=[55.0], at=61.0)  # cut before the middle reported
    assert np.isnan(c.watermark(61.0)[0])
    c.progress([2], done=[64.0], decided=[57.0], at=65.0)  # cut after: the middle's 50
    assert c.watermark(65.0)[0] == 50.0
    c.progress([0], done=[70.0], decided=[70.0], at=71.0)
    c.progress([1], done=[70.0], decided=[72.0], at=73.0)
    assert c.watermark(73.0)[0] == 50.0  # delivered after the root's last cut
    c.progress([2], done=[80.0], decided=[75.0], at=76.0)
    assert c.watermark(76.0)[0] == 70.0
    c.progress([2], done=[70.0], decided=[70.0], at=77.0)  # an older report: no step back
    assert c.watermark(77.0)[0] == 70.0


def test_a_silent_node_freezes_only_the_queries_it_roots() -> None:
    # query 0: leaf on node 0 -> root on node 1; query 1 on node 1; query 2 on node 2
    lay = QueryLayout(fragment_query=[0, 0, 1, 2], fragment_node=[0, 1, 1, 2],
                      fragment_sources=[1, 1, 1, 1], edge_from=[0], edge_to=[1])  # fmt: skip
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=4.0, slide_s=1.0), timeout_s=2.0)
    c = SicCoordinator(lay, cfg)
    for now in range(10, 30):
        t = float(now)
        nodes = [1] if now >= 15 else [0, 1, 2]  # nodes 0 and 2 stop at 15
        c.heard(nodes, at=t)
        if 0 in nodes:
            c.progress([0], done=[t - 2], decided=[t - 1], at=t)
        if 2 in nodes:
            c.progress([3], done=[t - 2], decided=[t - 1], at=t)
        c.progress([1, 2], done=[t - 1, t - 1], decided=[t, t], at=t)
    end = c.update(29.0).stw_end
    assert end is not None
    assert end[1] == 28.0  # query 1 keeps advancing
    assert end[0] == 28.0  # its lost leaf no longer holds query 0 back
    assert end[2] == 12.0  # query 2's root is silent: frozen at its last report


def test_progress_errors() -> None:
    c = SicCoordinator(chain3(), CoordinatorConfig())
    with pytest.raises(ConfigError, match="one length"):
        c.progress([0, 1], done=[1.0], decided=[1.0], at=1.0)
    with pytest.raises(ConfigError, match="fragments must be in"):
        c.progress([9], done=[1.0], decided=[1.0], at=1.0)
    with pytest.raises(ConfigError, match="finite"):
        c.progress([0], done=[np.inf], decided=[1.0], at=1.0)
    c.progress([0], done=[np.nan], decided=[np.nan], at=1.0)  # nothing processed yet
    assert np.isnan(c.watermark(1.0)).all()


def test_with_progress_results_wait_for_the_first_watermark_however_far_behind() -> None:
    # the first watermark may come long after the first results (a run's catch-up batch):
    # results 40 s behind the newest are still there when it does
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=10.0, slide_s=1.0), timeout_s=100.0,
                            progress=True)  # fmt: skip
    lay = QueryLayout(fragment_query=[0], fragment_node=[0], fragment_sources=[1])
    c = SicCoordinator(lay, cfg, origin_s=0.0)
    for w in range(60):  # a report a second
        c.record([float(w)], [0], [0.1])
    assert c.update(60.0).sic.tolist() == [0.0]  # no watermark: no complete STW yet
    c.progress([0], done=[20.0], decided=[20.0], at=61.0)
    assert c.update(61.0).sic == pytest.approx([1.0]) and c.expired == 0
