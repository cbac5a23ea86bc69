"""The Grafana dashboard in the repository uses only metrics the endpoint exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from spillway.telemetry import Hub
from spillway.telemetry.prometheus import exposition

from .test_prometheus import class_board

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "spillway.json"


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs.append(dash["templating"]["list"][0]["definition"])
    used = {m for e in exprs for m in re.findall(r"\bspillway_[a-z0-9_]+", e)}
    exported = {
        s.name
        for fam in text_string_to_metric_families(exposition(Hub([class_board()])))
        for s in fam.samples
    }
    assert used and used <= exported, sorted(used - exported)
    assert {"spillway_query_sic", "spillway_capacity_tuples_per_second"} <= used
    assert {"spillway_class_latency_p95_seconds", "spillway_class_headroom"} <= used


def test_every_panel_has_a_unique_id_and_a_place() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert all({"x", "y", "w", "h"} <= set(p["gridPos"]) for p in panels)
