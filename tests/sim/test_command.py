"""``spillway simulate``: the report folder and the CLI wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.errors import ConfigError
from spillway.sim.command import run_simulate


def test_run_simulate_writes_the_report_folder(tmp_path: Path) -> None:
    out = run_simulate(nodes=4, fragments=40, minutes=0.5, per_query=(1, 3), out=tmp_path / "s")
    s = json.loads((out / "summary.json").read_text())
    for key in ("wall_s", "jain", "mean_sic", "std_sic", "per_query_sic", "accounting"):
        assert key in s
    assert s["nodes"] == 4 and s["fragments"] >= 40 and len(s["per_query_sic"]) == s["queries"]
    assert s["accounting"]["balanced"] is True
    for name in ("queries.csv", "nodes.csv", "sic_over_time.csv", "sic_over_time.png"):
        assert (out / name).exists()
    assert len((out / "queries.csv").read_text().splitlines()) == s["queries"] + 1


def test_cli_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli"
    args = ["simulate", "--nodes", "3", "--fragments", "12", "--minutes", "0.5"]
    assert main([*args, "--per-query", "2", "--policy", "random", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    s = json.loads((out / "summary.json").read_text())
    assert s["policy"] == "random" and s["fragments_per_query"] == [2, 2]


def test_cli_simulate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--nodes", "2", "--per-query", "3", "--out", str(tmp_path)]) == 2
    assert "must not exceed n_nodes" in capsys.readouterr().err
    assert main(["simulate", "--per-query", "two"]) == 2
    assert "expected a number of fragments or a range" in capsys.readouterr().err
    assert main(["simulate", "--help"]) == 0
    assert "--per-query" in capsys.readouterr().out
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.json").write_text("{}")
    assert (
        main(["simulate", "--nodes", "2", "--per-query", "1", "--out", str(tmp_path / "old")]) == 2
    )
    assert "--overwrite" in capsys.readouterr().err


def test_minutes_must_make_whole_steps(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--minutes"):
        run_simulate(nodes=2, fragments=2, minutes=1e-4, per_query=1, out=tmp_path)
