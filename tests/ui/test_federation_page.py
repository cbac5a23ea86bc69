"""The dashboard page of `spillway federation up --ui` in headless Chromium, fed by the
federation's boards (no Spark): the federation's panel and one per node, each with its numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from spillway.federation.board import federation_view
from spillway.federation.config import load_federation
from spillway.federation.dashboard import FederationBoards, node_lanes
from spillway.federation.update import NodeUpdate
from spillway.telemetry import Hub
from spillway.ui.server import DashboardServer
from tests.federation.test_up import EXAMPLE


def _status(fed: Any, node: str, t: float) -> dict[str, Any]:
    ids = {q.name: i for i, q in enumerate(fed.queries)}
    return {
        "t": t,
        "capacity_tuples_per_s": 4000.0,
        "processed_tuples_per_s": 3500.0,
        "policy": "balance-sic",
        "queries": [
            {"name": n, "kind": "avg", "query_id": ids[n.split(".")[0]],
             "role": "link" if n.endswith(".in") else "sources", "root": True,
             "arrived_recent": 1000, "kept_recent": 250, "kept_fraction": 0.25, "sic": 0.25,
             "latency_p95_s": 3.5, "latency_target_s": 4.0, "arrival_rate": 500.0}
            for n in node_lanes(fed, node)
        ],
    }  # fmt: skip


def test_the_federation_page_shows_its_panel_and_every_node(page: Any) -> None:
    fed = load_federation(EXAMPLE)
    boards = FederationBoards(fed, duration_s=60.0)
    server = DashboardServer(Hub(boards.boards))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url)
        u = NodeUpdate(node=0, as_of=5.0, queries=np.array([0, 1, 2]),
                       sic=np.array([0.3, 0.6, 0.9]), ceiling=np.ones(3), lost_nodes=(),
                       orphaned=np.array([], int))  # fmt: skip
        for t in (1.0, 2.0):
            statuses = {n: _status(fed, n, t) for n in fed.nodes}
            boards.update(federation_view(fed, {"a": u}, statuses), statuses, t=t)
        page.wait_for_function(
            "() => ['federation', 'a', 'b', 'c'].every("
            "n => document.querySelector('#node-' + n)?.dataset.t === '2')"
        )

        def cell(node: str, q: str, field: str) -> str:
            return page.locator(
                f'#node-{node} tr[data-query="{q}"] [data-field="{field}"]'
            ).inner_text()

        rows = page.locator("#node-federation .queries tbody tr")
        assert [rows.nth(i).get_attribute("data-query") for i in range(rows.count())] == [
            "avg-all", "top-5", "cov"
        ]  # fmt: skip
        assert cell("federation", "cov", "sic") == "0.900"
        assert cell("federation", "avg-all", "kept_fraction") == "25.0"
        assert cell("federation", "avg-all", "status") == "on target"
        rows = page.locator("#node-a .queries tbody tr")
        assert [rows.nth(i).get_attribute("data-query") for i in range(rows.count())] == list(
            node_lanes(fed, "a")
        )
        assert cell("a", "cov.middle", "latency_p95_s") == "3.50"
        assert page.locator('#node-b [data-field="capacity_tuples_per_s"]').inner_text() == (
            "4,000 t/s"
        )
        assert page.locator(
            '#node-federation [data-field="capacity_tuples_per_s"]'
        ).inner_text() == ("12,000 t/s")
        boards.finish(report="runs/fed/report.md")
        page.wait_for_function("() => document.querySelector('#node-c')?.dataset.phase === 'done'")
        assert errors == []
    finally:
        server.close()
