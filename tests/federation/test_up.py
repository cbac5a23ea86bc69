from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.errors import BrokerError, ConfigError, InputDataError
from spillway.federation.up import add_federation_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spillway" / "examples" / "federation.toml"


def _up(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="spillway")
    add_federation_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["federation", "up", *argv])
    return int(args.handler(args))


def test_a_bad_federation_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "fed.toml"
    bad.write_text('[[nodes]]\nname = "a"\n[[queries]]\nname = "q"\nrate = -1\n'
                   'fragments = [{ name = "f", node = "a", sources = 1 }]\n')  # fmt: skip
    with pytest.raises(ConfigError, match="query 'q' rate must be a number > 0"):
        _up(str(bad), "--out", str(tmp_path / "out"))
    with pytest.raises(InputDataError, match="cannot read federation file"):
        _up(str(tmp_path / "missing.toml"), "--out", str(tmp_path / "out"))
    assert main(["federation", "up", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spillway: error: query 'q' rate")
    assert not (tmp_path / "out").exists()  # nothing started


@contextlib.contextmanager
def _busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 something listens on, while the block runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return [str(EXAMPLE), "--out", str(tmp_path / "out"), "--kafka-dir", str(tmp_path / "kafka"),
            *extra]  # fmt: skip


def test_a_busy_broker_port_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    with _busy_port() as port:
        argv = _argv(tmp_path, "--kafka-port", str(port))
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is in use"):
            _up(*argv)
        assert main(["federation", "up", *argv]) == 2
    assert capsys.readouterr().err.startswith(f"spillway: error: port {port} on 127.0.0.1")


def test_a_busy_dashboard_port_is_one_line_and_exit_2_before_the_broker_starts(
    tmp_path: Path, capsys
) -> None:
    from spillway.kafka.broker import read_state

    with _busy_port() as port:
        assert main(["federation", "up", *_argv(tmp_path, "--ui-port", str(port))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"spillway: error: --ui-port {port}: cannot")
    assert read_state(tmp_path / "kafka") is None  # no broker was started


def test_other_bad_options_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--duration must be > 0 seconds, got 0"):
        _up(str(EXAMPLE), "--out", str(tmp_path / "out"), "--duration", "0")
    with pytest.raises(ConfigError, match="--seed must be >= 0, got -1"):
        _up(str(EXAMPLE), "--out", str(tmp_path / "out"), "--seed", "-1")
    with pytest.raises(ConfigError, match=r"--ui-port must be a port number in \[0, 65535\]"):
        _up(str(EXAMPLE), "--out", str(tmp_path / "out"), "--ui-port", "70000")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "coordinator.json").write_text("{}")
    with pytest.raises(ConfigError, match="holds a coordinator state file"):
        _up(str(EXAMPLE), "--out", str(tmp_path / "busy"), "--kafka-dir", str(tmp_path / "k"))


def test_a_cpu_limit_that_cannot_be_set_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from spillway.federation import up
    from spillway.kafka.broker import read_state

    limited = tmp_path / "fed.toml"
    limited.write_text(EXAMPLE.read_text().replace('name = "b"', 'name = "b"\ncpu = 0.5', 1))
    assert "cpu = 0.5" in limited.read_text()
    monkeypatch.setattr(up, "find_controller", lambda: None)  # a machine without cgroups
    argv = [str(limited), "--out", str(tmp_path / "out"), "--kafka-dir", str(tmp_path / "k")]
    with pytest.raises(ConfigError, match="nodes b set cpu, which needs a writable cgroup"):
        _up(*argv)
    assert main(["federation", "up", *argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert read_state(tmp_path / "k") is None  # no broker was started


README_UP = "spillway federation up spillway/examples/federation.toml --duration 60 --out runs/fed"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _has_results(status: Path) -> bool:
    queries = json.loads(status.read_text())["queries"]
    return any(q["role"] == "sources" and q["stw_sic"] is not None for q in queries)


def _wait(path: Path, deadline: float) -> None:
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.5)


def _dashboard_matches_the_status_files(port: int, out: Path, deadline: float) -> None:
    """The dashboard (``--ui-port``) shows the federation's panel and one per node, each
    node's figures those of its status file at the same moment."""
    from urllib.request import urlopen

    from spillway.federation.config import load_federation
    from spillway.federation.dashboard import node_lanes

    fed = load_federation(EXAMPLE)
    for n in fed.nodes:
        while True:  # until the dashboard shows the status file the node wrote last
            status = json.loads((out / "nodes" / n / "status.json").read_text())
            with urlopen(f"http://127.0.0.1:{port}/api/state", timeout=10) as r:
                nodes = {p["name"]: p for p in json.loads(r.read())["nodes"]}
            assert list(nodes) == ["federation", *fed.nodes]
            assert [q["name"] for q in nodes["federation"]["queries"]] == [
                q.name for q in fed.queries
            ]
            panel = nodes[n]
            if panel["t"] == status["t"]:
                break
            assert time.monotonic() < deadline, f"the dashboard never showed {n}'s status"
            time.sleep(0.2)
        assert (
            [q["name"] for q in panel["queries"]]
            == list(node_lanes(fed, n))
            == [q["name"] for q in status["queries"]]
        )
        assert panel["capacity_tuples_per_s"] == status["capacity_tuples_per_s"]
        for shown, q in zip(panel["queries"], status["queries"], strict=True):
            assert shown["kept_fraction"] == pytest.approx(q["kept_fraction"])
            assert shown["latency_target_s"] == q["latency_target_s"]
    assert nodes["federation"]["capacity_tuples_per_s"] > 0


def _survivors_served(out: Path, before: dict[str, dict], deadline: float) -> tuple[bool, str]:
    """Wait until a and b each decided twice after ``before`` and the coordinator's last
    values (``updates.jsonl``) give avg-all and cov (the surviving roots) a SIC > 0; returns
    whether that happened by ``deadline`` and what was seen last."""
    seen = "nothing"
    while time.monotonic() < deadline:
        with contextlib.suppress(ValueError, OSError):  # a line or a status being written
            lines = (out / "updates.jsonl").read_text().splitlines()
            sic = json.loads(lines[-1]) if lines else {}
            intervals = {
                n: json.loads((out / "nodes" / n / "status.json").read_text())["intervals"]
                for n in ("a", "b")
            }
            seen = f"last update {sic}; intervals {intervals}"
            if all(intervals[n] >= before[n]["intervals"] + 2 for n in ("a", "b")) and all(
                sic.get(q, [0.0])[0] > 0.0 for q in ("avg-all", "cov")
            ):
                return True, seen
        time.sleep(1.0)
    return False, seen


@pytest.mark.spark
@pytest.mark.kafka
def test_the_shipped_federation_runs_and_a_killed_node_is_shown_lost(tmp_path: Path) -> None:
    """The README's command, shortened: its own broker, the coordinator and three Spark nodes.
    Node c is killed (its whole process group) once every node has run a full STW; the
    coordinator marks it lost and the other two keep shedding until the end. The test ends the
    run with SIGTERM (Ctrl-C's twin) once a and b decided twice more and the coordinator has
    both surviving roots' SIC: a loaded machine's nodes spend 20 s on a first micro-batch, and a
    fixed duration then ended the run before the coordinator knew cov's results complete."""
    out, kafka = tmp_path / "out", tmp_path / "kafka"
    argv = shlex.split(README_UP)[1:]
    argv[argv.index("--duration") + 1] = "400"  # a cap only: SIGTERM ends it (above)
    argv[argv.index("--out") + 1] = str(out)
    with socket.socket() as s:  # the dashboard's port (the README's command with --ui)
        s.bind(("127.0.0.1", 0))
        ui_port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillway.cli", *argv, "--kafka-dir", str(kafka),
         "--ui-port", str(ui_port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        _wait(out / "pids.json", deadline)
        pids = json.loads((out / "pids.json").read_text())
        for n in ("a", "b", "c"):  # every node's first results of its own sources
            _wait(out / "nodes" / n / "status.json", deadline)
            while not _has_results(out / "nodes" / n / "status.json"):
                assert time.monotonic() < deadline, f"node {n} produced no result"
                time.sleep(0.5)
        _dashboard_matches_the_status_files(ui_port, out, deadline)
        time.sleep(5.0)
        before = {n: json.loads((out / "nodes" / n / "status.json").read_text())
                  for n in ("a", "b")}  # fmt: skip
        os.killpg(pids["c"], signal.SIGKILL)
        served, seen = _survivors_served(out, before, time.monotonic() + 240)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert served, f"a and b never served avg-all and cov after the kill: {seen}"
    assert stdout.splitlines()[-1] == str(out / "report.md")
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "report.md").read_text().startswith("# spillway federation run")
    assert summary["broker_started"] is True
    assert summary["lost_nodes"] == ["c"]
    assert summary["nodes"]["c"]["state"] == "exited -9"
    assert "c LOST (no heartbeat)" in stdout
    for n in ("a", "b"):  # the others kept shedding after c was lost, and stopped cleanly
        node = summary["nodes"][n]
        assert node["state"] == "stopped" and not node["lost"]
        assert node["intervals"] > before[n]["intervals"]
        assert node["result_rows"] > 0
    # every node's fragments produced results (c: until killed), each source fragment adding
    # at most its share of its query's sources (THEMIS Eq. 1 over the whole query)
    share = {"avg-all": 10 / 30, "top-5": 20 / 40, "cov": 2 / 6}
    for n in ("a", "b", "c"):
        sic = summary["nodes"][n]["sources_sic"]
        assert sic and all(0.0 < s <= 1.0 for s in sic.values()), (n, sic)
        for f, s in sic.items():
            assert s <= share[f.split("/")[0]] + 1e-3, (n, f, s)
    assert summary["nodes"]["b"]["forwarded_rows"] > 0  # leaf-b and top-5's first, downstream
    # top-5's first fragment (on b) fed only top-5's last (on c): orphaned, b sheds it whole
    assert summary["nodes"]["b"]["orphaned"] == ["top-5.first"]
    assert summary["nodes"]["a"]["orphaned"] == []  # cov's middle still reaches cov's last
    assert summary["nodes"]["a"]["link_rows_in"] > 0  # leaf-b's rows reached the root on a
    # the queries whose root survived (avg-all on a, cov on b) have results at the coordinator
    for q in ("avg-all", "cov"):
        assert summary["queries"][q]["sic"] > 0.0, summary["queries"]
    # Eq. 4 counts every source tuple's information once: no STW of source time holds more
    # than 1 (the old coordinator, counting results when produced, showed 2.2-3.0 here), and
    # the coordinator's value is the one recomputed from the roots' stored results
    for q, got in summary["queries"].items():
        if got["max_stw_sic_from_results"] is not None:
            assert got["max_stw_sic_from_results"] <= 1.0 + 1e-6, (q, got)
        if got["sic"] is not None and got["sic_from_results"] is not None:
            assert got["sic"] <= 1.0 + 1e-6, (q, got)
            assert got["sic"] == pytest.approx(got["sic_from_results"], abs=0.05), (q, got)
    # nothing survives: no child's process group, no broker
    gone = time.monotonic() + 10.0  # the last SIGKILLed processes may still be being reaped
    while [n for n, pid in pids.items() if _group_alive(pid)] and time.monotonic() < gone:
        time.sleep(0.2)
    assert not [n for n, pid in pids.items() if _group_alive(pid)]
    from spillway.kafka.broker import read_state

    assert read_state(kafka) is None


def test_a_nodes_history_file_holds_every_decision_and_the_batches_its_cost_model_saw(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from spillway.control import CostModelConfig
    from spillway.federation.up import _write_history
    from spillway.policies import make_policy
    from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
    from spillway.testing import ListFeed

    times = [[i / 50 for i in range(500)]]
    plan = PlanSpec(name="avg", kind="avg", window_s=1.0, queries=(
        PlanQuery(query_id=0, name="q", feed=ListFeed(times=times, values=[[1.0] * 500])),
    ))  # fmt: skip
    cfg = ControllerConfig(clock="logical", stw_s=4.0, capacity_tuples=20, seed=1,
                           cost_model=CostModelConfig(warmup_batches=0))  # fmt: skip
    c = NodeController(cfg, [plan], make_policy("random"), epoch_s=100.0)
    start = c.initial_offset("avg")
    for _ in range(3):
        end = c.latest_offset("avg", start)
        c.observe_batch("avg", rows=sum(end["keep"]), duration_s=0.5, end_offset=end,
                        start_offset=start, batch_id=end["b"])  # fmt: skip
        start = end
    _write_history(tmp_path / "history.jsonl", SimpleNamespace(controller=c))
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    decisions, batches = lines[:-1], lines[-1]
    assert [d["admitted_tuples"] for d in decisions] == [20, 20, 20]
    assert all(d["capacity_tuples"] == 20 and "q" in d["query_kept"] for d in decisions)
    assert batches["plan"] == "avg"
    assert [(b["rows"], b["duration_s"]) for b in batches["batches"]] == [(20, 0.5)] * 3
