"""``federation up --kill``: a node crashed mid-run and restarted resumes from its checkpoint
and catches up (three Spark nodes, their broker and coordinator: run under the heavy lock)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spillway" / "examples" / "federation.toml"


def _caught_up(out: Path, deadline: float) -> bool:
    """Wait until the timeline shows c caught up and c's status three decisions after that
    (so it has results of windows after its restart); False at ``deadline``."""
    status, timeline = out / "nodes" / "c" / "status.json", out / "timeline.jsonl"
    at: int | None = None
    while time.monotonic() < deadline:
        with contextlib.suppress(ValueError, OSError):  # a line or a status being written
            lines = timeline.read_text().splitlines() if timeline.exists() else []
            events = [e["event"] for x in lines for e in json.loads(x).get("events", [])]
            if "caught up" in events:
                intervals = int(json.loads(status.read_text())["intervals"])
                at = intervals if at is None else at
                if intervals >= at + 3:
                    return True
        time.sleep(1.0)
    return False


@pytest.mark.spark
@pytest.mark.kafka
def test_a_killed_node_restarts_from_its_checkpoint_and_catches_up(tmp_path: Path) -> None:
    """Node c killed 20 s after every node is up and restarted 5 s later. Its new process took
    40-57 s to report again here (a JVM beside two busy nodes on two cores: --kill c@10+5 in a
    60 s run, then c@20+5 in 90 s, alive again at 55.9 s and 82.1 s), later 72-73 s alone under
    the lock (2026-11-28: alive again at 97.9 and 99.2 s, the code before and after that day's
    changes) and more than 94 s in a full test run (not heard again by 120 s). So the run's
    ``--duration`` is only a cap: the test ends it with SIGTERM (Ctrl-C's twin, the same clean
    stop and report) once the timeline shows c caught up and c decided three more times."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillway.cli", "federation", "up", str(EXAMPLE), "--duration",
         "400", "--kill", "c@20+5", "--out", str(out), "--kafka-dir", str(tmp_path / "kafka")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        caught = _caught_up(out, time.monotonic() + 420)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert caught, "the timeline never showed c caught up (or c stopped deciding after it)"
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    kill = summary["kill"]
    assert summary["command"].endswith("--kill c@20+5")
    assert kill["node"] == "c" and 20.0 <= kill["killed_at_s"] < 22.0
    assert kill["killed_at_s"] + 5.0 <= kill["restarted_at_s"] < kill["killed_at_s"] + 7.0
    # the coordinator noticed it lost, then heard it again once the new process decided
    assert kill["killed_at_s"] < kill["lost_seen_at_s"] < kill["restarted_at_s"]
    assert kill["restarted_at_s"] < kill["alive_again_at_s"] <= summary["duration_s"]
    # every offset of its input link (top-5's first fragment on b) that was in the log when
    # it restarted, and every tuple its sources made while it was down, decided by the end
    assert kill["caught_up"] is True, kill["catch_up"]
    assert kill["alive_again_at_s"] <= kill["caught_up_at_s"] <= summary["duration_s"]
    parts = kill["catch_up"]["partitions"]
    assert parts and all(p["end_at_restart"] > 0 for p in parts.values()), parts
    # the new process: the same argv, it stopped cleanly, not lost at the end
    assert summary["node_exit"]["c"] == 0 and summary["lost_nodes"] == []
    assert summary["nodes"]["c"]["state"] == "stopped"
    events = [
        e for line in (out / "timeline.jsonl").read_text().splitlines()
        for e in json.loads(line).get("events", [])
    ]  # fmt: skip
    assert [(e["event"], e["node"]) for e in events] == [
        ("kill", "c"), ("lost", "c"), ("restart", "c"), ("alive again", "c"), ("caught up", "c")
    ]  # fmt: skip
    # the events' times are the summary's
    at = {e["event"]: e["elapsed_s"] for e in events if e["event"] in ("lost", "caught up")}
    assert at == {"lost": kill["lost_seen_at_s"], "caught up": kill["caught_up_at_s"]}
    assert "restart c at" in stdout
    # its results: from before the kill (kept across the restart, beside the offset log) and
    # from after, whose windows start after the restart
    rows = pd.read_csv(out / "nodes" / "c" / "results.csv")
    start = pd.to_datetime(rows["window_start"], utc=True).astype("int64") / 1e9
    assert (start < kill["killed_wall"] - 2).any()
    assert (start > kill["restarted_wall"]).any()
