"""The dashboard application: the page and its files, the state, the event stream, safety."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from spillway.errors import MissingAssetError
from spillway.status import NodeSnapshot
from spillway.telemetry import Hub, NodeBoard
from spillway.ui.app import CSP, make_app
from spillway.ui.assets import STATIC, check_assets


def snap(t: float) -> NodeSnapshot:
    return NodeSnapshot(t=t, capacity_tuples_per_s=10.0, processed_tuples_per_s=9.0, jain=1.0)


def client(hub: Hub, stop: threading.Event | None = None) -> TestClient:
    return TestClient(make_app(hub, stop=stop, poll_s=0.01), base_url="http://127.0.0.1")


def test_the_page_and_its_bundled_files_are_served_with_a_strict_policy() -> None:
    c = client(Hub([NodeBoard("node", queries=("q",), stw_s=10.0)]))
    page = c.get("/")
    assert page.status_code == 200 and "static/vendor/uPlot.iife.min.js" in page.text
    assert page.headers["content-security-policy"] == CSP
    assert "default-src 'self'" in CSP and "http" not in CSP  # nothing from elsewhere
    for rel in (
        "static/dashboard.js",
        "static/vendor/uPlot.iife.min.js",
        "static/vendor/uPlot.min.css",
    ):
        r = c.get("/" + rel)
        assert r.status_code == 200 and len(r.content) > 1000, rel
    assert c.get("/static/nope.js").status_code == 404


def test_the_page_loads_nothing_from_another_site() -> None:
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        text = (STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


def test_state_is_json_of_every_node() -> None:
    a = NodeBoard("a", queries=("q",), stw_s=10.0)
    a.tick(snap(2.0))
    nodes = (
        client(Hub([a, NodeBoard("b", queries=(), stw_s=1.0)])).get("/api/state").json()["nodes"]
    )
    assert [(n["name"], n["phase"], n["t"]) for n in nodes] == [
        ("a", "running", 2.0),
        ("b", "starting", None),
    ]


def test_the_event_stream_sends_the_series_whole_then_only_new_points() -> None:
    board = NodeBoard("node", queries=("q",), stw_s=10.0)
    board.tick(snap(1.0))
    board.tick(snap(2.0))
    stop = threading.Event()
    messages = []
    with client(Hub([board]), stop) as c, c.stream("GET", "/api/events") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                messages.append(json.loads(line[6:])["nodes"][0])
                if len(messages) == 1:
                    board.tick(snap(3.0))
                else:
                    stop.set()  # the stream ends: the server can shut down
    first, second = messages[:2]
    assert first["since"] == 0 and [p["t"] for p in first["points"]] == [1.0, 2.0]
    assert second["since"] == 2 and [p["t"] for p in second["points"]] == [3.0]


def test_a_request_for_another_host_is_refused() -> None:
    c = client(Hub())
    assert c.get("/api/state", headers={"host": "attacker.example"}).status_code == 400
    assert c.get("/api/state", headers={"host": "localhost:8000"}).status_code == 200


def test_missing_bundled_files_say_to_run_make_setup(tmp_path: Path) -> None:
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        (tmp_path / name).write_text("x")
    with pytest.raises(
        MissingAssetError, match=r"vendor/uPlot\.iife\.min\.js is missing .* run `make setup`"
    ):
        check_assets(tmp_path)
    with pytest.raises(MissingAssetError, match="make setup"):
        make_app(Hub(), static=tmp_path)


def test_the_installed_assets_are_complete() -> None:
    check_assets()  # make setup bundled the chart library
