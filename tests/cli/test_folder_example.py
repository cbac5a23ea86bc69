"""The README's folder config is the shipped example's, and `spillway run --config` runs it
(shortened) while a thread writes files into the folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from importlib.resources import files
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.config import load_config

README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE = Path(str(files("spillway") / "examples" / "folder.toml"))
CLI = "import sys; from spillway.cli import main; sys.exit(main())"


def _readme_config() -> str:
    text = README.read_text()
    section = text[text.index("### Shedding a folder of arriving files") :]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block is not None, "the README's folder section has no TOML block"
    return block.group(1)


def test_the_readme_shows_the_shipped_example(tmp_path) -> None:
    (tmp_path / "folder.toml").write_text(_readme_config())
    assert load_config(tmp_path / "folder.toml").queries == load_config(EXAMPLE).queries


def _write(folder: Path, stop: threading.Event, bad: list[str]) -> None:
    i = 0
    while not stop.is_set():
        lines = [json.dumps({"route": r, "fare": 10.0 + i}) for r in ("JFK-LAX", "SFO-SEA")] * 20
        lines.append("{broken " + str(i))
        bad.append(lines[-1])
        tmp = folder / f".part-{i:04d}.jsonl"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, folder / f"part-{i:04d}.jsonl")
        i += 1
        time.sleep(0.3)


@pytest.mark.spark
def test_the_readme_folder_config_runs(tmp_path, monkeypatch) -> None:
    config = tmp_path / "folder.toml"
    config.write_text(_readme_config())
    (tmp_path / "incoming").mkdir()
    monkeypatch.chdir(tmp_path)  # the dead-letter folder is relative to where it runs
    stop, bad = threading.Event(), []
    writer = threading.Thread(target=_write, args=(tmp_path / "incoming", stop, bad))
    writer.start()
    try:
        # its own process: the run owns (and stops) its SparkSession, which must not be the
        # test session the other Spark tests share
        # long enough that a cold JVM's first batches finish on a loaded machine (8 s once
        # ended before any did)
        argv = ["run", "--config", str(config), "--duration", "20", "--no-live"]
        code = subprocess.run(
            [sys.executable, "-c", CLI, *argv, "--out", str(tmp_path / "out")],
            cwd=tmp_path,
            timeout=600,
        ).returncode
    finally:
        stop.set()
        writer.join()
    assert code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (q,) = summary["queries"]
    assert q["name"] == "fares" and q["windows"] > 0 and q["rows_in"] > 0
    # the error beside SIC: the exact answer has the two routes, and the node found them
    assert q["groups"] == 2 and q["error_windows"] > 0 and q["missing_groups"] < 0.5
    dead = tmp_path / "runs" / "dead-letters" / "fares"
    rows = [json.loads(x) for f in dead.iterdir() for x in f.read_text().splitlines()]
    assert rows and {r["raw"] for r in rows} <= set(bad)
    assert len({(r["topic"], r["offset"]) for r in rows}) == len(rows)  # each once
    assert (tmp_path / "incoming" / "_spillway" / "manifest.jsonl").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"path": "nope"}, r"folder option 'path': '.*nope' is not a folder; create it"),
        ({"format": "xml"}, "folder option 'format' must be one of json, csv, parquet, got 'xml'"),
        ({"schema": "route text"}, "schema: field 'route' has type 'text'"),
    ],
)
def test_a_bad_folder_source_is_one_line_and_exit_2(tmp_path, capsys, change, message) -> None:
    (tmp_path / "incoming").mkdir()
    text = _readme_config()
    for key, value in change.items():
        text = re.sub(rf'{key} = "[^"]*"', f'{key} = "{value}"', text, count=1)
    (tmp_path / "folder.toml").write_text(text)
    argv = ["run", "--config", str(tmp_path / "folder.toml"), "--duration", "1", "--no-live"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
