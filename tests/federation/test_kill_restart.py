"""``federation up --kill``: a node crashed mid-run and restarted resumes from its checkpoint
and catches up (three Spark nodes, their broker and coordinator: run under the heavy lock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spillway" / "examples" / "federation.toml"


@pytest.mark.spark
@pytest.mark.kafka
def test_a_killed_node_restarts_from_its_checkpoint_and_catches_up(tmp_path: Path) -> None:
    """Node c killed 20 s after every node is up and restarted 5 s later. Its new process took
    40-57 s to report again here (a JVM beside two busy nodes on two cores: --kill c@10+5 in a
    60 s run, then c@20+5 in 90 s, alive again at 55.9 s and 82.1 s), later 72-73 s alone under
    the lock (2026-11-28: alive again at 97.9 and 99.2 s, the code before and after that day's
    changes) and more than 94 s in a full test run (not heard again by 120 s), hence 160 s."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "spillway.cli", "federation", "up", str(EXAMPLE), "--duration",
         "160", "--kill", "c@20+5", "--out", str(out), "--kafka-dir", str(tmp_path / "kafka")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
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
    assert [(e["event"], e["node"]) for e in events] == [("kill", "c"), ("restart", "c")]
    assert "restart c at" in proc.stdout
    # its results: from before the kill (kept across the restart, beside the offset log) and
    # from after, whose windows start after the restart
    rows = pd.read_csv(out / "nodes" / "c" / "results.csv")
    start = pd.to_datetime(rows["window_start"], utc=True).astype("int64") / 1e9
    assert (start < kill["killed_wall"] - 2).any()
    assert (start > kill["restarted_wall"]).any()
