"""The federation's dashboard boards: built from the status files and the coordinator's view."""

from __future__ import annotations

import math

from spillway.federation.board import federation_view
from spillway.federation.config import load_federation
from spillway.federation.dashboard import FederationBoards, node_lanes
from spillway.federation.update import NodeUpdate
from tests.federation.test_up import EXAMPLE


def _status(t, lanes, kept=0.5, capacity=1000.0):
    return {
        "t": t,
        "capacity_tuples_per_s": capacity,
        "queries": [
            {"name": n, "query_id": qi, "role": "link" if n.endswith(".in") else "sources",
             "root": root, "arrived_recent": 100, "kept_recent": int(100 * kept),
             "kept_fraction": kept, "sic": kept, "latency_p95_s": 1.0, "latency_target_s": 4.0}
            for n, qi, root in lanes
        ],
    }  # fmt: skip


def test_each_panel_moves_with_its_own_status_and_the_federation_with_the_coordinator():
    import numpy as np

    fed = load_federation(EXAMPLE)
    assert node_lanes(fed, "a") == ("avg-all.root", "avg-all.root.in", "cov.middle",
                                    "cov.middle.in")  # fmt: skip
    boards = FederationBoards(fed, duration_s=60.0)
    a = _status(1.0, [("avg-all.root", 0, True), ("avg-all.root.in", 0, True),
                      ("cov.middle", 2, False), ("cov.middle.in", 2, False)])  # fmt: skip
    statuses = {"a": a, "b": None, "c": None}
    u = NodeUpdate(node=0, as_of=5.0, queries=np.array([0, 2]), sic=np.array([0.3, 0.9]),
                   ceiling=np.array([1.0, 1.0]), lost_nodes=(), orphaned=np.array([], int))  # fmt: skip
    boards.update(federation_view(fed, {"a": u}, statuses), statuses, t=10.0)
    boards.update(federation_view(fed, {"a": u}, statuses), statuses, t=11.0)
    na = boards.nodes["a"].state()
    assert len(na.series) == 1  # the same status file twice: one tick
    assert boards.nodes["b"].state().snapshot is None and boards.nodes["b"].state().phase == (
        "starting"
    )
    f = boards.federation.state()
    assert len(f.series) == 2 and f.snapshot is not None
    sic = {q.name: q.sic for q in f.snapshot.queries}
    assert sic["avg-all"] == 0.3 and sic["cov"] == 0.9 and math.isnan(sic["top-5"])
    assert f.snapshot.jain == federation_view(fed, {"a": u}, statuses).jain
    assert {q.name: q.latency_target_s for q in f.snapshot.queries}["avg-all"] == 4.0
    rows = {q.name: (q.rows_in, q.rows_kept) for q in f.snapshot.queries}
    assert rows["avg-all"] == (100, 50) and rows["top-5"] == (0, 0)  # source lanes only
    boards.update(federation_view(fed, {"a": u}, statuses),
                  {**statuses, "a": {**a, "t": 2.0, "capacity_tuples_per_s": 2000.0}}, t=12.0)  # fmt: skip
    assert boards.nodes["a"].state().snapshot.capacity_tuples_per_s == 2000.0
    boards.finish(report="out/report.md")
    assert {b.state().phase for b in boards.boards} == {"done"}
    boards.finish(error="boom")
    assert boards.nodes["c"].state().error == "boom"
