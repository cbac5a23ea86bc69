"""The priority classes in every live view (terminal, dashboard payload, Prometheus), from one
snapshot whose classes a real controller measured over recorded intervals (no Spark)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from spillway.live import LiveWriter, plain_line, render
from spillway.status import ClassStatus, NodeSnapshot, QueryStatus
from spillway.telemetry import Hub, NodeBoard
from spillway.telemetry.prometheus import exposition
from spillway.ui.payload import node_payload
from tests.spark.test_class_control import _controller

QUERIES = ("qa", "qb", "qc")


def _measured() -> tuple[ClassStatus, ...]:
    """Three classes after 4 recorded intervals; classes 1 and 2 (plan "avg") with a measured
    batch, class 3 (plan "max") without."""
    c = _controller(capacity=0.2)
    start = c.initial_offset("avg")
    off = c.latest_offset("avg", start)
    c.observe_batch("avg", rows=50, duration_s=0.2, end_offset=off, start_offset=start)
    for k in range(2, 5):
        c.decide(k)
    return c.class_status(4.0, 4.0)


def _snapshot(t: float, classes: tuple[ClassStatus, ...]) -> NodeSnapshot:
    qs = tuple(
        QueryStatus(
            name=n, kind="avg", arrival_rate=40.0, kept_fraction=0.5, sic=0.5,
            latency_p95_s=1.0, latency_target_s=4.0, rows_in=40, rows_kept=20,
        )
        for n in QUERIES
    )  # fmt: skip
    return NodeSnapshot(
        t=t, capacity_tuples_per_s=100.0, processed_tuples_per_s=90.0, jain=1.0, queries=qs,
        policy="dilos", classes=classes,
    )  # fmt: skip


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_the_measured_classes_are_what_the_views_start_from() -> None:
    c1, c2, c3 = _measured()
    assert c1.latency_p95_s == pytest.approx(0.5) and c1.on_target
    assert math.isnan(c3.latency_p95_s) and not c3.on_target
    assert 0 < c3.kept_fraction < c2.kept_fraction < c1.kept_fraction < 1
    assert c3.headroom == pytest.approx(0.02) and c3.share == pytest.approx(0.1)


def test_the_terminal_shows_one_row_per_class_with_its_figures() -> None:
    classes = _measured()
    text = render(_snapshot(4.0, classes), 100)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("class "))
    assert lines[at].split() == [
        "class", "wt", "queries", "kept", "%", "loss", "%", "p95", "s", "D", "s", "H", "share",
    ]  # fmt: skip
    rows = [ln.split() for ln in lines[at + 1 :]]
    assert [r[:3] for r in rows] == [["1", "6", "qa"], ["2", "3", "qb"], ["3", "1", "qc"]]
    for r, c in zip(rows, classes, strict=True):
        assert float(r[3]) == pytest.approx(100 * c.kept_fraction, abs=0.05)
        assert float(r[4]) == pytest.approx(100 * c.loss, abs=0.05)
        assert float(r[7]) == pytest.approx(c.headroom, abs=5e-4)
    assert rows[0][5:7] == ["0.50", "3.00"] and "MISS" not in lines[at + 1]
    assert rows[2][5] == "-" and lines[at + 3].endswith("(no result yet)")
    late = replace(classes[0], latency_p95_s=3.5)
    assert render(_snapshot(4.0, (late,)), 100).splitlines()[-1].endswith("MISS")
    assert all(len(ln) <= 60 for ln in render(_snapshot(4.0, classes), 60).splitlines())
    assert not any(ln.startswith("class ") for ln in render(_snapshot(4.0, ()), 100).splitlines())


def test_the_terminal_keeps_room_for_the_class_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda: os.terminal_size((100, 12)))
    out = io.StringIO()
    LiveWriter(out, live=True).update(_snapshot(4.0, _measured()))
    shown = out.getvalue().replace("\x1b[J", "").splitlines()
    assert len(shown) <= 12 - 1  # the prompt's line stays free
    assert shown[-1].startswith("3 ") and any(ln.startswith("... 2 more") for ln in shown)


def test_the_payload_and_its_series_carry_every_class() -> None:
    classes = _measured()
    board = NodeBoard("node", queries=QUERIES, stw_s=4.0)
    board.tick(_snapshot(3.0, ()))
    board.tick(_snapshot(4.0, classes))
    p = node_payload(board.state())
    assert [c["class"] for c in p["classes"]] == [1, 2, 3]
    for got, c in zip(p["classes"], classes, strict=True):
        assert got["queries"] == list(c.queries)
        assert got["kept_fraction"] == c.kept_fraction and got["loss"] == c.loss
        assert got["headroom"] == c.headroom and got["share"] == c.share
        assert got["latency_target_s"] == c.latency_target_s and got["on_target"] == c.on_target
    assert p["classes"][0]["latency_p95_s"] == pytest.approx(0.5)
    assert p["classes"][2]["latency_p95_s"] is None  # NaN is JSON's null
    first, last = p["points"]
    assert first["class_kept"] == first["class_headroom"] == []
    assert last["class_kept"] == [c.kept_fraction for c in classes]
    assert last["class_headroom"] == [c.headroom for c in classes]
    assert last["class_latency_p95_s"] == [pytest.approx(0.5), pytest.approx(0.5), None]


def test_prometheus_exports_every_class_by_label() -> None:
    classes = _measured()
    board = NodeBoard("node", queries=QUERIES, stw_s=4.0)
    board.tick(_snapshot(4.0, classes))
    got = _samples(exposition(Hub([board])))
    n = ("node", "node")
    for c in classes:
        lab = (("class", str(c.klass)), n)
        assert got[("spillway_class_kept_ratio", lab)] == c.kept_fraction
        assert got[("spillway_class_headroom", lab)] == c.headroom
        assert got[("spillway_class_share_ratio", lab)] == c.share
        assert got[("spillway_class_weight", lab)] == c.weight
        assert got[("spillway_class_latency_target_seconds", lab)] == c.latency_target_s
        assert got[("spillway_class_tuples_arrived_total", lab)] == c.arrived_total
        assert got[("spillway_class_tuples_shed_total", lab)] == c.dropped_total
        (q,) = c.queries
        assert got[("spillway_query_class_info", (("class", str(c.klass)), n, ("query", q)))] == 1
    assert got[("spillway_class_latency_p95_seconds", (("class", "1"), n))] == pytest.approx(0.5)
    assert np.isnan(got[("spillway_class_latency_p95_seconds", (("class", "3"), n))])
    plain = NodeBoard("node", queries=QUERIES, stw_s=4.0)
    plain.tick(_snapshot(4.0, ()))
    assert not [k for k in _samples(exposition(Hub([plain]))) if "class" in k[0]]


def test_the_log_line_sums_up_the_classes() -> None:
    classes = _measured()
    line = plain_line(_snapshot(4.0, classes))
    kept = "/".join(f"{100 * c.kept_fraction:.0f}%" for c in classes)
    assert line.endswith(f" class_kept={kept} class_latency_misses=1/3")  # class 3: no result
    assert "class_" not in plain_line(_snapshot(4.0, ()))
