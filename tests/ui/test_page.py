"""The dashboard page in headless Chromium, fed by a board (no Spark): calibration shown as it
happens, then every query, numbers as the board says, charts drawn, the end of the run."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from spillway.events import BatchEvent, DecisionEvent
from spillway.status import ClassStatus, NodeSnapshot, QueryStatus
from spillway.telemetry import Hub, NodeBoard
from spillway.ui.server import DashboardServer

QUERIES = ("avg-a", "avg-b", "top5-c")


def snapshot(t: float) -> NodeSnapshot:
    qs = tuple(
        QueryStatus(
            name=n,
            kind=n.split("-")[0],
            arrival_rate=1000.0 + 10 * t,
            kept_fraction=0.5,
            sic=0.5 if i < 2 else 0.25 + t / 100,  # avg-a and avg-b share one series
            latency_p95_s=1.25 + i,
            latency_target_s=4.0,
            rows_in=1,
            rows_kept=1,
        )
        for i, n in enumerate(QUERIES)
    )
    return NodeSnapshot(
        t=t, capacity_tuples_per_s=2000.0, processed_tuples_per_s=1900.0 + t, jain=0.97, queries=qs
    )


@pytest.fixture
def served() -> Iterator[tuple[NodeBoard, DashboardServer]]:
    board = NodeBoard("node", queries=QUERIES, stw_s=10.0, calibrate_s=20.0, duration_s=60.0)
    server = DashboardServer(Hub([board]))
    try:
        yield board, server
    finally:
        server.close()


def calibrate(board: NodeBoard) -> None:
    for k in range(4):
        board.observe(
            "calibrate-0",
            DecisionEvent(
                t=float(k),
                queries=QUERIES,
                lane_query=np.arange(3),
                lane_source=np.zeros(3, dtype=np.int64),
                arrived=np.full(3, 100),
                kept=np.full(3, 100),
            ),
        )
        board.observe(
            "calibrate-0", BatchEvent(plan="mixed", batch_id=k, rows=300, duration_s=0.25)
        )
    board.set_calibration_rounds([{"rate": 300.0, "capacity_tuples_per_s": 1200.0}])
    board.note("spillway: [9s] measuring capacity, round 1: capacity 1,200 tuples per second")
    board.observe("calibrate-1", BatchEvent(plan="mixed", batch_id=0, rows=10, duration_s=1.0))


def test_the_page_shows_calibration_then_the_run_then_its_end(
    served: tuple[NodeBoard, DashboardServer], page: Any
) -> None:
    board, server = served
    page.goto(server.url)
    node = page.locator("#node-node")
    node.wait_for()
    assert page.locator(".calibration").is_visible()
    assert "Starting Spark" in page.locator(".cal-summary").inner_text()

    calibrate(board)
    page.wait_for_function("() => document.querySelector('.cal-summary')?.dataset.round === '2'")
    text = page.locator(".cal-summary").inner_text()
    assert "Round 2 (of at most 5)" in text and "Capacity so far: 1,200 t/s" in text
    assert page.locator(".cal-rounds tbody tr").count() == 1
    assert "round 1: capacity 1,200" in page.locator(".lines").inner_text()

    for t in (1.0, 2.0, 3.0):
        board.tick(snapshot(t))
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.t === '3'")
    assert not page.locator(".calibration").is_visible()
    rows = page.locator(".queries tbody tr")
    assert [rows.nth(i).get_attribute("data-query") for i in range(rows.count())] == list(QUERIES)

    def cell(q: str, field: str) -> str:
        return page.locator(f'tr[data-query="{q}"] [data-field="{field}"]').inner_text()

    assert cell("top5-c", "sic") == "0.280" and cell("avg-a", "kept_fraction") == "50.0"
    assert cell("avg-b", "latency_p95_s") == "2.25" and cell("top5-c", "status") == "on target"
    assert cell("avg-a", "arrival_rate") == "1,030" and cell("avg-a", "error") == "n/a"
    assert page.locator('[data-field="capacity_tuples_per_s"]').inner_text() == "2,000 t/s"
    assert page.locator('[data-field="jain"]').inner_text() == "0.970"
    # three charts drawn; the two identical SIC series are one line
    page.wait_for_function("() => document.querySelectorAll('.uplot').length === 3")
    legend = page.locator(".chart-sic .u-legend").inner_text()
    assert "avg-a (+1 identical)" in legend and "top5-c" in legend and "avg-b" not in legend

    board.tick(snapshot(4.0))
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.t === '4'")
    assert cell("top5-c", "sic") == "0.290"  # the numbers follow the board

    board.finish(snapshot(4.0), report="runs/x/report.md")
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.phase === 'done'")
    assert "report: runs/x/report.md" in page.locator(".report").inner_text()


def test_the_page_reconnects_on_its_own(
    served: tuple[NodeBoard, DashboardServer], page: Any
) -> None:
    board, server = served
    page.goto(server.url)
    page.wait_for_function("() => document.querySelector('#connection')?.dataset.state === 'live'")
    stop = threading.Event()

    def feed() -> None:
        t = 1.0
        while not stop.is_set():
            board.tick(snapshot(t))
            t += 1.0
            time.sleep(0.1)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        page.wait_for_function("() => Number(document.querySelector('#node-node')?.dataset.t) >= 5")
    finally:
        stop.set()
        thread.join()


def test_the_class_panel_shows_every_class_only_on_a_node_with_classes(
    served: tuple[NodeBoard, DashboardServer], page: Any
) -> None:
    board, server = served
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url)
    board.tick(snapshot(1.0))
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.t === '1'")
    assert not page.locator(".classes").is_visible()
    page.wait_for_function("() => document.querySelectorAll('.uplot').length === 3")
    assert not page.locator(".class-chart").first.is_visible()

    def with_classes(t: float) -> NodeSnapshot:
        classes = tuple(
            ClassStatus(
                klass=k, weight=w, queries=(q,), arrived=100, dropped=10 * k,
                latency_p95_s=math.nan if k == 3 else 2.0 + t / 10,  # shared batches
                latency_target_s=1.0 + k, headroom=0.8 * w / 10 + t / 100, share=w / 10,
                arrived_total=1000, dropped_total=100 * k,
            )
            for k, w, q in ((1, 6, "avg-a"), (2, 3, "avg-b"), (3, 1, "top5-c"))
        )  # fmt: skip
        return replace(snapshot(t), classes=classes)

    for t in (2.0, 3.0):
        board.tick(with_classes(t))
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.t === '3'")
    assert page.locator(".classes").is_visible()
    rows = page.locator(".class-table tbody tr")
    assert [rows.nth(i).get_attribute("data-class") for i in range(rows.count())] == ["1", "2", "3"]

    def cell(k: int, field: str) -> str:
        return page.locator(f'tr[data-class="{k}"] [data-field="{field}"]').inner_text()

    assert cell(1, "queries") == "avg-a" and cell(1, "weight") == "6"
    assert cell(1, "kept_fraction") == "90.0" and cell(3, "loss") == "30.0"
    assert cell(1, "latency_p95_s") == "2.30" and cell(1, "latency_target_s") == "2.00"
    assert cell(1, "class_status") == "MISS" and cell(3, "class_status") == "no result yet"
    assert cell(2, "class_status") == "on target" and cell(1, "headroom") == "0.510"
    assert cell(3, "share") == "10.0"
    time.sleep(1.1)  # the page redraws its charts at most once a second
    board.tick(with_classes(4.0))
    page.wait_for_function("() => document.querySelector('#node-node')?.dataset.t === '4'")
    assert cell(1, "headroom") == "0.520"  # the numbers follow the board
    page.wait_for_function("() => document.querySelectorAll('.uplot').length === 6")
    legend = page.locator(".chart-class-latency .u-legend").inner_text()
    assert "class 1 (+1 identical)" in legend and "class 3" in legend and "D 3" in legend
    assert "class 2" not in legend  # drawn once with class 1's
    assert errors == []
