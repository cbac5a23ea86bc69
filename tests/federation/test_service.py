from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from spillway.errors import ConfigError, ControlChannelError
from spillway.federation import CoordinatorClient, CoordinatorService, parse_update
from spillway.quality.coordination import CoordinatorConfig, QueryLayout, SicCoordinator
from spillway.quality.sic import StwConfig
from spillway.spark.channel import ControlClient

# Query 0: leaf on node 0 -> root on node 1; query 1 on node 1 only; query 2 on node 0 only.
LAYOUT = QueryLayout(
    fragment_query=[0, 0, 1, 2],
    fragment_node=[0, 1, 1, 0],
    fragment_sources=[1, 1, 2, 1],
    edge_from=[0],
    edge_to=[1],
)
STW = StwConfig(stw_s=2.0, slide_s=0.25)


class ManualClock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_updates_over_the_channel_equal_the_in_process_coordinator() -> None:
    """Reports from two nodes through the service give, at every step, exactly what the same
    results and heartbeats give an in-process SicCoordinator (the simulator's)."""
    cfg = CoordinatorConfig(stw=STW, timeout_s=0.5)
    ref = SicCoordinator(LAYOUT, cfg, origin_s=0.0)
    clock = ManualClock()
    rng = np.random.default_rng(3)
    roots = {0: [2], 1: [0, 1]}  # the queries whose results each node produces
    with CoordinatorService(LAYOUT, cfg, clock=clock, origin_s=0.0) as service:
        clients = {n: CoordinatorClient(service.address, service.authkey, node=n) for n in (0, 1)}
        try:
            for k in range(1, 41):
                clock.t = 0.25 * k
                for n, client in clients.items():
                    if n == 0 and k > 20:  # node 0 stops reporting after 5 s
                        continue
                    q = rng.choice(roots[n], size=3)
                    t = clock.t - rng.uniform(0.0, 0.5, size=3)
                    s = rng.uniform(0.0, 0.05, size=3)
                    got = client.report(sent=clock.t, result_time=t, query=q, sic=s)
                    ref.record(t, q, s)
                    ref.heard([n], at=clock.t)
                    want = ref.update(clock.t)
                    assert got.as_of == clock.t
                    assert got.sic.tolist() == want.sic[got.queries].tolist()
                    assert got.ceiling.tolist() == want.ceiling[got.queries].tolist()
                    assert got.lost_nodes == want.lost_nodes
            assert service.reports == 60
            final = clients[1].update()
        finally:
            for c in clients.values():
                c.close()
    assert final.lost_nodes == (0,)
    assert final.queries.tolist() == [0, 1]
    assert final.ceiling.tolist() == [0.5, 1.0]  # query 0 lost its leaf's source


def test_a_wrong_key_is_refused_before_any_report() -> None:
    with CoordinatorService(LAYOUT, CoordinatorConfig(stw=STW)) as service:
        client = CoordinatorClient(service.address, b"x" * 32, node=0, timeout_s=2.0)
        with pytest.raises(ControlChannelError, match="refused the key"):
            client.report(sent=time.time())
        assert service.reports == 0


def test_bad_requests_come_back_as_errors_naming_the_rule() -> None:
    with CoordinatorService(LAYOUT, CoordinatorConfig(stw=STW)) as service:
        stranger = CoordinatorClient(service.address, service.authkey, node=2)
        with pytest.raises(ControlChannelError, match=r"node must be an int in 0\.\.1, got 2"):
            stranger.report(sent=1.0)
        stranger.close()
        with CoordinatorClient(service.address, service.authkey, node=1) as node:
            with pytest.raises(ControlChannelError, match="sic must be finite and >= 0"):
                node.report(sent=1.0, result_time=[0.5], query=[1], sic=[-0.1])
            with pytest.raises(ControlChannelError, match="must be 1-D arrays of one length"):
                node.report(sent=1.0, result_time=[0.5, 0.6], query=[1], sic=[0.1])
            with pytest.raises(ControlChannelError, match=r"query_index must be ints in 0\.\.2"):
                node.report(sent=1.0, result_time=[0.5], query=[7], sic=[0.1])
            assert node.layout() == {"queries": [0, 1], "fragments": [1, 2]}
        raw = ControlClient(service.address, service.authkey)
        with pytest.raises(ControlChannelError, match="unknown op 'status'"):
            raw.call("status", node=0)
        with pytest.raises(ControlChannelError, match="sent must be the node's time"):
            raw.call("report", node=0, sent="now")
        raw.close()
        assert service.reports == 0


def test_client_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"node must be an int >= 0 .*got -1"):
        CoordinatorClient(("127.0.0.1", 1), b"k" * 32, node=-1)
    with pytest.raises(ConfigError, match="control address must be 127.0.0.1"):
        CoordinatorClient("10.0.0.1:5000", b"k" * 32, node=0)
    client = CoordinatorClient(("127.0.0.1", 1), b"k" * 32, node=0)
    with pytest.raises(ConfigError, match="sent must be a finite time"):
        client.report(sent=float("nan"))
    with pytest.raises(ControlChannelError, match="must be a dict"):
        parse_update([1, 2])


_NODE = textwrap.dedent(
    """
    import sys, time
    from spillway.federation import CoordinatorClient
    port, key = int(sys.argv[1]), sys.argv[2]
    client = CoordinatorClient(("127.0.0.1", port), key, node=1)
    while True:  # the root of query 0 and all of query 1, reporting every 50 ms until killed
        now = time.time()
        client.report(sent=now, result_time=[now - 0.01] * 2, query=[0, 1], sic=[0.01, 0.01])
        print("reported", flush=True)
        time.sleep(0.05)
    """
)


def test_a_node_process_killed_mid_run_is_noticed_by_the_others() -> None:
    """Wall clock, a real second process: node 1 reports until SIGKILL; node 0 (this process)
    sees it lost within the timeout, its leaf of query 0 orphaned (its only consumer is gone)
    and query 2, entirely its own, still at ceiling 1."""
    cfg = CoordinatorConfig(stw=STW, timeout_s=0.3)
    with CoordinatorService(LAYOUT, cfg) as service:
        proc = subprocess.Popen(
            [sys.executable, "-c", _NODE, str(service.address[1]), service.authkey.hex()],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "reported"  # node 1 is up and reporting
            with CoordinatorClient(service.address, service.authkey, node=0) as me:
                before = me.report(sent=time.time())
                assert before.lost_nodes == ()
                assert before.orphaned.tolist() == []
                assert before.sic[before.queries == 0][0] > 0  # node 1's results of query 0
                proc.kill()
                proc.wait(timeout=10)
                killed = time.time()
                deadline = time.time() + 5.0
                after = before
                while time.time() < deadline and not after.lost_nodes:
                    time.sleep(0.05)
                    after = me.report(sent=time.time())
        finally:
            proc.kill()
            proc.wait(timeout=10)
        assert after.lost_nodes == (1,)
        assert after.orphaned.tolist() == [0]
        assert after.queries.tolist() == [0, 2]
        assert after.ceiling.tolist() == [0.0, 1.0]
        assert service.federation().lost_nodes == (1,)
    # Noticed within the timeout after its last report, plus a few 50 ms polls.
    assert after.as_of - killed <= cfg.timeout_s + 0.5


def test_progress_reports_end_each_querys_stw_at_its_watermark() -> None:
    """A node's progress travels with its report; the update says where each STW ends, and
    a node may not report progress of another node's fragment."""
    cfg = CoordinatorConfig(stw=STW, timeout_s=5.0, lag_s=1.0)
    clock = ManualClock(10.0)
    with CoordinatorService(LAYOUT, cfg, clock=clock, origin_s=0.0) as service:
        leaf = CoordinatorClient(service.address, service.authkey, node=0)
        root = CoordinatorClient(service.address, service.authkey, node=1)
        try:
            leaf.report(sent=10.0, fragment=[0, 3], done=[7.0, 8.0], decided=[8.0, 9.0])
            clock.t = 11.0
            u = root.report(sent=11.0, result_time=[5.0, 6.5, 7.5], query=[0, 0, 1],
                            sic=[0.2, 0.3, 0.4], fragment=[1, 2], done=[7.0, 9.0],
                            decided=[10.5, 10.5])  # fmt: skip
            assert u.queries.tolist() == [0, 1]
            assert u.ends([0, 1]).tolist() == [7.0, 9.0]
            assert u.sic.tolist() == [0.5, 0.4]  # [5, 7) and [7, 9)
            assert leaf.update().ends([0, 2]).tolist() == [7.0, 8.0]
            with pytest.raises(ControlChannelError, match="another node's fragment"):
                leaf.report(sent=11.0, fragment=[1], done=[9.0], decided=[9.0])
        finally:
            leaf.close()
            root.close()
