from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from spillway.errors import ConfigError, ControlChannelError
from spillway.events import ResultsEvent
from spillway.federation import CoordinatorClient, CoordinatorService, load_federation
from spillway.federation.config import FederationConfig
from spillway.federation.view import CoordinatorView
from spillway.kafka.connection import KafkaConnection
from spillway.quality.sic import StwConfig
from spillway.spark.fed_node import Heartbeat, RootReporter, node_config
from tests.spark.test_controller import RandomShare

EXAMPLE = Path(__file__).resolve().parents[2] / "spillway" / "examples" / "federation.toml"
CONN = KafkaConnection(bootstrap_servers="127.0.0.1:9")


def test_every_fragment_becomes_the_nodes_queries_with_the_whole_querys_sources() -> None:
    fed = load_federation(EXAMPLE)
    cfg, local = node_config(fed, "c", CONN, prefix="p")
    by_name = {q.name: q for q in cfg.queries}
    # c hosts avg-all's leaf (10 of 30 sources), top-5's root (20 of 40, fed by b) and cov's
    # first fragment (2 of 6)
    assert [(q.name, q.sic_sources) for q in cfg.queries if q.feed != "kafka"] == [
        ("avg-all.leaf-c", 30), ("top-5.last", 40), ("cov.first", 6)
    ]  # fmt: skip
    link = by_name["top-5.last.in"]
    assert link.feed_options["subscribe"] == "p.top-5.last"
    assert link.feed_options["sic_column"] == "sic"
    assert [q.root for q in local] == [False, True, True, False]
    assert cfg.master == "local[1]" and cfg.stw_s == fed.stw_s


def test_a_node_sheds_with_the_policy_its_entry_names() -> None:
    data = load_federation(EXAMPLE).to_dict()
    data["nodes"][1]["policy"] = "random"
    fed = FederationConfig.from_dict(data)
    assert node_config(fed, "b", CONN, prefix="p", seed=4)[0].policy == "random"
    assert node_config(fed, "b", CONN, prefix="p", seed=4)[0].seed == 4
    assert node_config(fed, "a", CONN, prefix="p")[0].policy == "balance-sic"


def test_a_node_must_exist_and_host_a_fragment() -> None:
    fed = load_federation(EXAMPLE)
    with pytest.raises(ConfigError, match="node must be one of a, b, c, got 'z'"):
        node_config(fed, "z", CONN)
    idle = FederationConfig.from_dict({**fed.to_dict(), "nodes": [*fed.to_dict()["nodes"],
                                                                  {"name": "d"}]})  # fmt: skip
    with pytest.raises(ConfigError, match="node 'd' hosts no fragment"):
        node_config(idle, "d", CONN)


class _Client:
    def __init__(self) -> None:
        self.reports: list[dict] = []

    def report(self, **kw):
        self.reports.append(kw)
        raise ControlChannelError("offline")


def test_a_root_reporter_reports_its_roots_rows_only() -> None:
    view = CoordinatorView([0, 0, 2], StwConfig(stw_s=10.0, slide_s=1.0), stale_s=3.0)
    client = _Client()
    rep = RootReporter(client, view, roots=[0, 1], clock=lambda: 5.0)  # type: ignore[arg-type]
    rep(ResultsEvent(plan="mixed", batch_id=0, query_id=np.array([0, 1, 2]),
                     window_start_s=np.array([1.0, 1.0, 1.0]), latency_s=np.ones(3),
                     sic=np.array([0.1, 0.2, 0.4])))  # fmt: skip
    (sent,) = client.reports
    assert sent["query"].tolist() == [0, 0]  # global query 0: both root lanes
    assert sent["sic"].tolist() == pytest.approx([0.1, 0.2])  # the upstream fragment's 0.4 not
    assert rep.waiting_sic == pytest.approx(0.3)  # kept for the next report


def test_a_heartbeating_node_stays_alive_and_a_silent_one_is_lost() -> None:
    fed = load_federation(EXAMPLE)
    cfg = fed.coordinator()
    cfg = type(cfg)(stw=cfg.stw, timeout_s=0.5)
    with CoordinatorService(fed.layout(), cfg) as service:
        view = CoordinatorView([0, 2], StwConfig(stw_s=10.0, slide_s=1.0), stale_s=3.0)
        beat = Heartbeat(CoordinatorClient(service.address, service.authkey, node=0), view,
                         interval_s=0.1).start()  # fmt: skip
        try:
            time.sleep(1.0)  # b and c never report: lost after 0.5 s; a beats every 0.1 s
            assert beat.beats >= 5
            assert view.update is not None and view.update.lost_nodes == (1, 2)
            assert fed.nodes[0] not in [fed.nodes[n] for n in service.federation().lost_nodes]
        finally:
            beat.stop()
        time.sleep(0.8)  # a stops beating: lost too
        assert service.federation().lost_nodes == (0, 1, 2)
    with pytest.raises(ConfigError, match="interval_s must be > 0 seconds"):
        Heartbeat(None, view, interval_s=0)  # type: ignore[arg-type]


def test_a_fragments_tuples_carry_their_share_of_the_whole_querys_sic() -> None:
    """THEMIS Eq. 1 counts every source of the federated query: a fragment reading 2 of its 6
    sources prices its tuples at a third of what the 2 sources alone would give."""
    from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
    from spillway.testing import ListFeed

    def tuple_sic(sic_sources):
        times = [list(np.arange(0.05, 1.0, 0.1)) for _ in range(2)]
        feed = ListFeed(times=times, values=[[1.0] * 10] * 2)
        q = PlanQuery(query_id=0, name="q", feed=feed, sic_sources=sic_sources)
        plan = PlanSpec(name="avg", kind="avg", window_s=1.0, queries=(q,))
        c = NodeController(ControllerConfig(clock="logical", stw_s=1.0, seed=0), [plan],
                           RandomShare(), epoch_s=0.0)  # fmt: skip
        c.decide(1)
        return c.stw_view()["tuple_sic"], c.describe("avg").lane_n_sources

    alone, n_alone = tuple_sic(None)
    shared, n_shared = tuple_sic(6)
    np.testing.assert_allclose(alone, [0.05, 0.05])  # 1 / (10 tuples x 2 sources)
    np.testing.assert_allclose(shared, alone / 3)
    assert n_alone == (2, 2) and n_shared == (6, 6)  # what the executors price with
