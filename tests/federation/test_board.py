from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from spillway.federation import NodeUpdate, load_federation
from spillway.federation.board import federation_view, render
from spillway.quality import jain_index

EXAMPLE = Path(__file__).resolve().parents[2] / "spillway" / "examples" / "federation.toml"


def _update(node: int, as_of: float, queries, sic, lost=()) -> NodeUpdate:
    q = np.asarray(queries)
    return NodeUpdate(node=node, as_of=as_of, queries=q, sic=np.asarray(sic, float),
                      ceiling=np.ones(q.size), lost_nodes=tuple(lost),
                      orphaned=np.array([], dtype=np.int64))  # fmt: skip


def _status(*rows) -> dict:
    return {"queries": [
        {"query_id": q, "role": role, "root": root, "arrived_recent": a, "kept_recent": k,
         "latency_p95_s": lat}
        for q, role, root, a, k, lat in rows
    ]}  # fmt: skip


def test_the_view_takes_each_querys_newest_sic_and_sums_kept_over_nodes() -> None:
    fed = load_federation(EXAMPLE)
    updates = {
        "a": _update(0, 10.0, [0, 2], [0.5, 0.7]),
        "b": _update(1, 11.0, [0, 1, 2], [0.6, 0.4, 0.8], lost=(2,)),
        "c": None,
    }
    statuses = {
        "a": _status((0, "sources", True, 100, 50, 2.0), (0, "link", True, 20, 20, 3.0)),
        "b": _status((0, "sources", False, 100, 30, None), (1, "sources", False, 40, 10, None)),
        "c": None,
    }
    assert federation_view(fed, updates, statuses).lost_nodes == ()  # c never came up
    statuses["c"] = _status((1, "sources", True, 10, 10, 1.0))
    view = federation_view(fed, updates, statuses, {"c": "exited -9"})
    assert [q.sic for q in view.queries] == [0.6, 0.4, 0.8]  # node b's update is newer
    assert view.queries[0].kept_fraction == pytest.approx(80 / 200)  # source lanes only
    assert view.queries[0].latency_p95_s == 3.0  # the root's slowest lane
    assert math.isnan(view.queries[2].kept_fraction)  # nothing decided yet
    assert view.jain == pytest.approx(jain_index([0.6, 0.4, 0.8]))
    assert view.lost_nodes == ("c",)
    assert view.nodes == {"a": "running", "b": "running", "c": "exited -9"}
    text = render(view, elapsed_s=12.0)
    assert "nodes: a running, b running, c LOST (no heartbeat)" in text
    assert "avg-all    0.600    40.0           3.00" in text


def test_an_empty_view_shows_dashes_and_starting_nodes() -> None:
    fed = load_federation(EXAMPLE)
    view = federation_view(fed, {}, {n: None for n in fed.nodes})
    assert math.isnan(view.jain)
    text = render(view)
    assert "Jain over the queries' SIC: -" in text
    assert "nodes: a starting, b starting, c starting" in text
