"""Every command the README and spillway/examples/ show runs here, shortened.

:data:`COMMANDS` lists each ``spillway`` command line written in README.md's shell blocks and
in the example config's header, with how it is shortened for a test; a command added to either
file without an entry here fails :func:`test_every_shown_command_is_listed`. The quick commands
run in ``make test``; the runs take a minute or more each (the example node as shipped, with its
two window lengths and its 20 s capacity measurement in up to five rounds, two to three) and run
with ``make readme`` (marked ``readme``).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spillway" / "examples" / "node.toml"
SPILLWAY = Path(sys.executable).with_name("spillway")

#: Command as shown → extra arguments that shorten it for a test ("" when it is quick as is).
COMMANDS: dict[str, str] = {
    "spillway run --policy balance-sic --duration 120 --out runs/demo": "--duration 6",
    "spillway run --policy cod": "--duration 6",
    "spillway run --config spillway/examples/node.toml": "--duration 8",
    "spillway run --config spillway/examples/node.toml --policy random --overload 4": "--duration 6",
    "spillway run --config spillway/examples/node.toml --ui": "--duration 6",
    "spillway run --config spillway/examples/node.toml --metrics-port 9464": "--duration 6",
    "spillway --help": "",
    "spillway experiment --help": "",
    "spillway bench --quick --only decision --out runs/bench": "",
}


#: Commands another test module runs (with its own folder and ports), shortened there.
ELSEWHERE: dict[str, str] = {
    "spillway kafka up": "tests/kafka/test_cli.py",
    "spillway kafka status": "tests/kafka/test_cli.py",
    "spillway produce clicks --rate 10000 --profile bursty --duration 60": "tests/kafka/test_cli.py",
    "spillway kafka topics": "tests/kafka/test_cli.py",
    "spillway kafka down": "tests/kafka/test_cli.py",
    "spillway produce clicks --sources 4 --rate 20000 --duration 120": "tests/kafka/test_example.py",
    "spillway run --config spillway/examples/kafka.toml --duration 60": "tests/kafka/test_example.py",
    "spillway produce fares --feed taxi --rate 20000 --duration 120": "tests/kafka/test_own_query.py",
    "spillway run --config spillway/examples/own_query.toml --duration 60": "tests/kafka/test_own_query.py",
    "spillway federation up spillway/examples/federation.toml --duration 60 --out runs/fed": "tests/federation/test_up.py",
}


def shown_commands() -> set[str]:
    """The ``spillway`` commands in README.md's ``sh`` blocks and the example's header."""
    readme = (ROOT / "README.md").read_text()
    lines = [
        ln for block in re.findall(r"```sh\n(.*?)```", readme, re.S) for ln in block.splitlines()
    ]
    lines += [ln.lstrip("# ") for ln in EXAMPLE.read_text().splitlines() if ln.startswith("#  ")]
    found = set()
    for ln in lines:
        # a command sent to the background (`... &`) is the same command
        cmd = ln.split("#")[0].strip().removesuffix("&").strip().removeprefix(".venv/bin/")
        if cmd.startswith("spillway"):
            found.add(" ".join(cmd.split()))
    return found


def test_every_shown_command_is_listed() -> None:
    assert shown_commands() == set(COMMANDS) | set(ELSEWHERE)
    for where in set(ELSEWHERE.values()):
        assert (ROOT / where).is_file()


def _run(
    command: str, tmp_path: Path, *, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)[1:] + shlex.split(COMMANDS[command])
    if argv[0] in ("run", "bench"):
        if "--out" in argv:  # into the test's folder, not the checkout's runs/
            argv[argv.index("--out") + 1] = str(tmp_path / "out")
        else:
            argv += ["--out", str(tmp_path / "out")]
        argv += ["--no-live"] if argv[0] == "run" else []
    if "--metrics-port" in argv:
        argv[argv.index("--metrics-port") + 1] = "0"  # 9464 may be taken here
    return subprocess.run(
        [str(SPILLWAY), *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s
    )


def _check_run(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    assert proc.stdout.splitlines()[-1] == str(out / "report.md")
    assert "log4j profile" not in proc.stdout + proc.stderr  # a quiet start
    summary = json.loads((out / "summary.json").read_text())
    assert summary["intervals"] > 0 and not summary["failed"]
    return dict(summary)


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith("spillway run")])
def test_quick_commands(command: str, tmp_path: Path) -> None:
    proc = _run(command, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()


@pytest.mark.slow
@pytest.mark.readme
@pytest.mark.spark
def test_the_example_node_runs_as_shipped_with_its_two_windows(tmp_path: Path) -> None:
    """The shipped example: six queries, windows of 1 and 2 s, a 20 s capacity measurement
    at 2x overload; the capacity measurement shows as it happens."""
    command = "spillway run --config spillway/examples/node.toml"
    proc = _run(command, tmp_path)
    summary = _check_run(proc, tmp_path)
    # the capacity measurement shows while it runs (plain lines: not a terminal here)
    assert "spillway  measuring capacity: round 1" in proc.stdout
    proc_out = (tmp_path / "out" / "spark.log").read_text()
    assert "resolves to a loopback address" in proc_out  # the noise went to the log
    cal = summary["calibration"]
    assert cal is not None and cal["capacity_tuples_per_s"] > 0
    results = pd.read_csv(tmp_path / "out" / "results.csv")
    windows = {q["name"]: q["windows"] for q in summary["queries"]}
    assert all(n > 0 for n in windows.values()), windows  # 1 s and 2 s windows both answered
    assert set(results["query"]) == set(windows)


@pytest.mark.slow
@pytest.mark.readme
@pytest.mark.parametrize(
    "command",
    [
        c
        for c in COMMANDS
        if c.startswith("spillway run") and c != "spillway run --config spillway/examples/node.toml"
    ],
)
def test_the_other_run_commands(command: str, tmp_path: Path) -> None:
    proc = _run(command, tmp_path, timeout_s=900)
    summary = _check_run(proc, tmp_path)
    if "--ui" in command:
        assert "spillway: dashboard at http://127.0.0.1:" in proc.stdout
    if "--metrics-port" in command:
        assert "spillway: Prometheus metrics at http://127.0.0.1:" in proc.stdout
    if "--overload 4" in command:
        assert summary["overload_requested"] == 4.0 and summary["policy"] == "random"
