"""The Prometheus exposition: names, labels, values, histograms; the HTTP endpoint."""

from __future__ import annotations

import math
import re
import socket
from dataclasses import replace
from pathlib import Path
from urllib.request import urlopen

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from spillway.errors import ConfigError
from spillway.events import BatchEvent, DecisionEvent, ResultsEvent
from spillway.status import ClassStatus, NodeSnapshot, QueryStatus
from spillway.telemetry import Hub, NodeBoard, prometheus
from spillway.telemetry.prometheus import MetricsServer, exposition


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def busy_board(name: str = "node") -> NodeBoard:
    board = NodeBoard(
        name, queries=("a", "b"), stw_s=10.0, info={"policy": "random", "master": "local[2]"}
    )
    board.observe(
        "run",
        DecisionEvent(
            t=1.0,
            queries=("a", "b"),
            lane_query=np.array([0, 1, 1]),
            lane_source=np.array([0, 0, 1]),
            arrived=np.array([100, 30, 20]),
            kept=np.array([40, 30, 5]),
        ),
    )
    board.observe("run", BatchEvent(plan="p", batch_id=1, rows=75, duration_s=0.6))
    rows = pd.DataFrame(
        {
            "query_id": [0, 1],
            "window_start": pd.to_datetime([0.0, 0.0], unit="s", utc=True),
            "latency_s": [1.5, 7.0],
        }
    )
    board.observe("run", ResultsEvent.from_frame("p", 1, rows))
    qs = tuple(
        QueryStatus(
            name=n,
            kind="avg",
            arrival_rate=r,
            kept_fraction=k,
            sic=k,
            latency_p95_s=lat,
            latency_target_s=4.0,
            rows_in=1,
            rows_kept=1,
        )
        for n, r, k, lat in (("a", 100.0, 0.4, 1.5), ("b", 50.0, 0.7, math.nan))
    )
    board.tick(
        NodeSnapshot(
            t=3.0, capacity_tuples_per_s=80.0, processed_tuples_per_s=75.0, jain=0.9, queries=qs
        )
    )
    return board


def test_exposition_names_labels_and_values() -> None:
    got = samples(exposition(Hub([busy_board()])))
    n = ("node", "node")
    assert got[("spillway_query_sic", (n, ("query", "a")))] == 0.4
    assert got[("spillway_query_kept_ratio", (n, ("query", "b")))] == 0.7
    assert math.isnan(got[("spillway_query_latency_p95_seconds", (n, ("query", "b")))])  # no result
    shed = {k[1]: v for k, v in got.items() if k[0] == "spillway_tuples_shed_total"}
    assert shed == {
        (n, ("query", "a"), ("source", "0")): 60.0,
        (n, ("query", "b"), ("source", "0")): 0.0,
        (n, ("query", "b"), ("source", "1")): 15.0,
    }
    assert got[("spillway_tuples_arrived_total", (n, ("query", "b"), ("source", "1")))] == 20.0
    assert got[("spillway_capacity_tuples_per_second", (n,))] == 80.0
    assert got[("spillway_capacity_measured_tuples_per_second", (n,))] == pytest.approx(125.0)
    assert got[("spillway_jain_index", (n,))] == 0.9
    assert got[("spillway_intervals_total", (n,))] == 1.0
    assert got[("spillway_node_phase", (n, ("phase", "running")))] == 1.0
    assert got[("spillway_node_phase", (n, ("phase", "calibrating")))] == 0.0
    assert got[("spillway_node_info", (("master", "local[2]"), n, ("policy", "random")))] == 1.0
    assert got[("spillway_result_latency_seconds_count", (n, ("query", "b")))] == 1.0
    assert (
        got[("spillway_result_latency_seconds_bucket", (("le", "6.0"), n, ("query", "b")))] == 0.0
    )
    assert (
        got[("spillway_result_latency_seconds_bucket", (("le", "8.0"), n, ("query", "b")))] == 1.0
    )
    assert got[("spillway_batch_duration_seconds_sum", (n,))] == 0.6


def test_one_endpoint_serves_several_nodes_by_label() -> None:
    got = samples(exposition(Hub([busy_board("x"), busy_board("y")])))
    nodes = {dict(k[1])["node"] for k in got if k[0] == "spillway_query_sic"}
    assert nodes == {"x", "y"}


def test_a_board_before_its_first_tick_exports_every_series_as_nan() -> None:
    got = samples(exposition(Hub([NodeBoard("n", queries=("a",), stw_s=1.0)])))
    assert math.isnan(got[("spillway_query_sic", (("node", "n"), ("query", "a")))])
    assert math.isnan(got[("spillway_capacity_tuples_per_second", (("node", "n"),))])
    assert math.isnan(got[("spillway_calibration_capacity_tuples_per_second", (("node", "n"),))])
    assert got[("spillway_node_phase", (("node", "n"), ("phase", "starting")))] == 1.0


def test_metrics_server_serves_on_loopback_and_stops() -> None:
    server = MetricsServer(Hub([busy_board()]), port=0)
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/metrics")
        body = urlopen(server.url, timeout=5).read().decode()
        assert 'spillway_query_sic{node="node",query="a"} 0.4' in body
    finally:
        server.close()


def test_a_busy_metrics_port_is_a_config_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--metrics-port {port}: cannot listen"):
            MetricsServer(Hub(), port=port)


def test_a_bad_metrics_port_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--metrics-port must be a port number"):
        MetricsServer(Hub(), port=70000)


def class_board() -> NodeBoard:
    """:func:`busy_board` whose latest snapshot has a priority class (``dilos`` policy)."""
    board = busy_board()
    snap = board.state().snapshot
    assert snap is not None
    c = ClassStatus(
        klass=1, weight=6, queries=("a", "b"), arrived=10, dropped=2, latency_p95_s=1.0,
        latency_target_s=3.0, headroom=0.5, share=1.0, arrived_total=10, dropped_total=2,
    )  # fmt: skip
    board.tick(replace(snap, t=4.0, classes=(c,)))
    return board


def test_the_documented_metric_lists_are_what_the_endpoint_exports() -> None:
    families = {f.name: f for f in text_string_to_metric_families(exposition(Hub([class_board()])))}
    exported = {n + ("_total" if f.type == "counter" else "") for n, f in families.items()}
    doc = prometheus.__doc__ or ""
    table = set(re.findall(r"^``(spillway_[a-z0-9_]+)``", doc, flags=re.M))
    assert table == exported, (sorted(table - exported), sorted(exported - table))
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    named = set(re.findall(r"`(spillway_[a-z0-9_]+)`", readme))
    assert {"spillway_class_kept_ratio", "spillway_class_headroom"} <= named
    assert named <= exported, sorted(named - exported)
