from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.errors import ConfigError, InputDataError
from spillway.federation import CoordinatorClient
from spillway.federation.command import write_state

EXAMPLE = Path(__file__).resolve().parents[2] / "spillway" / "examples" / "federation.toml"
SPILLWAY = [sys.executable, "-m", "spillway.cli"]


def test_coordinator_serves_the_example_until_sigterm(tmp_path: Path) -> None:
    state = tmp_path / "coord.json"
    proc = subprocess.Popen(
        [*SPILLWAY, "coordinator", str(EXAMPLE), "--state", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("coordinator on 127.0.0.1:")
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
        assert json.loads(state.read_text())["nodes"] == ["a", "b", "c"]
        now = time.time()
        # cov runs c -> a -> b (fragments 5, 6, 7): each hop done to now, its input cut after
        # the hop before reported, so a result of source time now - 0.1 counts at once
        for node, frag in (("c", 5), ("a", 6)):
            with CoordinatorClient.from_state(state, node) as client:
                client.report(sent=now, fragment=[frag], done=[now], decided=[time.time()])
        with CoordinatorClient.from_state(state, "b") as b:
            # node b hosts avg-all's leaf, top-5's first fragment and cov's root
            assert b.layout() == {"queries": [0, 1, 2], "fragments": [1, 3, 7]}
            u = b.report(sent=now, result_time=[now - 0.1], query=[2], sic=[0.25],
                         fragment=[7], done=[now], decided=[time.time()])  # fmt: skip
        assert u.queries.tolist() == [0, 1, 2]
        assert u.sic[2] > 0
        assert u.sic[:2].tolist() == [0.0, 0.0]
        with CoordinatorClient.from_state(state, 0) as a:
            assert a.update().queries.tolist() == [0, 2]  # avg-all's root, cov's middle
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == 0
    assert "coordinator stopped: 3 reports" in err
    assert not state.exists()


def test_a_state_file_in_the_way_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "coord.json"
    state.write_text("{}")
    assert main(["coordinator", str(EXAMPLE), "--state", str(state)]) == 2
    assert "another coordinator may be running" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="exists: another coordinator may be running"):
        write_state(state, {})


def test_from_state_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="cannot read the coordinator state file"):
        CoordinatorClient.from_state(tmp_path / "none.json", "a")
    state = tmp_path / "coord.json"
    state.write_text(json.dumps({"address": "127.0.0.1:1", "authkey": "00" * 32, "nodes": ["a"]}))
    with pytest.raises(ConfigError, match=r"node must be one of the federation's nodes \['a'\]"):
        CoordinatorClient.from_state(state, "z")
    state.write_text("{}")
    with pytest.raises(InputDataError, match="KeyError"):
        CoordinatorClient.from_state(state, "a")
