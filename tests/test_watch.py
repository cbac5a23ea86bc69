"""RunWatch: the terminal during calibration and the run, the servers, progress lines."""

from __future__ import annotations

import io
import re
import socket
import time
from urllib.request import urlopen

import numpy as np
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.events import BatchEvent, DecisionEvent
from spillway.progress import report
from spillway.status import NodeSnapshot
from spillway.watch import RunWatch, WatchOptions

CONFIG = NodeConfig(
    queries=(QuerySpec(name="q", kind="avg", feed="gaussian"),), overload=2.0, calibrate_s=4.0
)


class CalibratingNode:
    """A node double that is measuring its capacity: observers and finished rounds."""

    def __init__(self) -> None:
        self.observers: list = []
        self.calibration_rounds: list[dict[str, float]] = []

    def emit(self, phase: str, k: int) -> None:
        ev = DecisionEvent(
            t=float(k),
            queries=("q",),
            lane_query=np.array([0]),
            lane_source=np.array([0]),
            arrived=np.array([500]),
            kept=np.array([500]),
        )
        for o in self.observers:
            o(phase, ev)
            o(phase, BatchEvent(plan="avg", batch_id=k, rows=500 * (k + 1), duration_s=0.5))


def wait_for(predicate, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_plain_output_shows_calibration_lines_and_progress_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    node = CalibratingNode()
    opts = WatchOptions(live=False)
    with RunWatch(CONFIG, opts, duration_s=10.0, stdout=out, stderr=err, refresh_s=0.02) as w:
        w.attach(node)
        for k in range(4):
            node.emit("calibrate-0", k)
        wait_for(lambda: "measuring capacity: round 1" in out.getvalue())
        node.calibration_rounds.append({"rate": 500.0, "capacity_tuples_per_s": 3000.0})
        report("measuring capacity, round 1: capacity 3,000 tuples per second")
        w.tick(NodeSnapshot(t=1.0, capacity_tuples_per_s=5.0, processed_tuples_per_s=5.0, jain=1.0))
    assert "round 1: capacity 3,000" in err.getvalue()
    state = w.board.state()
    assert state.calibration is not None and state.calibration.capacity_tuples_per_s == 3000.0
    assert state.lines[-1].endswith("round 1: capacity 3,000 tuples per second")
    assert out.getvalue().splitlines()[-1].startswith("t=1s/10s")


def test_live_output_redraws_the_calibration_in_place_with_the_progress_lines() -> None:
    out, err = io.StringIO(), io.StringIO()
    node = CalibratingNode()
    with RunWatch(
        CONFIG, WatchOptions(live=True), duration_s=10.0, stdout=out, stderr=err, refresh_s=0.02
    ) as w:
        w.attach(node)
        node.emit("calibrate-0", 0)
        report("measuring capacity, round 1: capacity 3,000 tuples per second")
        wait_for(lambda: out.getvalue().count("measuring capacity: round") >= 3)
    text = out.getvalue()
    assert re.search(r"\x1b\[\d+F\x1b\[Jspillway  measuring capacity: round 1", text)  # in place
    assert "round 1: capacity 3,000 tuples per second" in text
    assert err.getvalue() == ""  # the progress lines are in the view, not under it


def test_servers_start_print_their_addresses_and_stop() -> None:
    opts = WatchOptions(live=False, ui=True, metrics_port=0)
    with RunWatch(CONFIG, opts, duration_s=10.0, stdout=io.StringIO()) as w:
        lines = w.addresses()
        assert lines[0] == f"spillway: dashboard at {w.dashboard.url}"
        assert lines[1] == f"spillway: Prometheus metrics at {w.metrics.url}"
        body = urlopen(w.metrics.url, timeout=5).read().decode()
        assert 'spillway_node_phase{node="node",phase="starting"} 1.0' in body
        assert urlopen(w.dashboard.url, timeout=5).status == 200
    for url in (w.dashboard.url, w.metrics.url):
        with pytest.raises(OSError):
            urlopen(url, timeout=2)


def test_another_ui_host_is_announced_as_open() -> None:
    opts = WatchOptions(live=False, ui=True, ui_host="localhost")
    with RunWatch(CONFIG, opts, duration_s=1.0, stdout=io.StringIO()) as w:
        assert "has no login" in w.addresses()[1]


def test_a_busy_port_fails_before_anything_runs_and_leaves_nothing_open() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        opts = WatchOptions(live=False, ui=True, metrics_port=port)
        with pytest.raises(ConfigError, match=f"--metrics-port {port}"):
            RunWatch(CONFIG, opts, duration_s=1.0, stdout=io.StringIO()).__enter__()
