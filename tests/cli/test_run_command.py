"""``spillway run`` end to end with a node double that replays recorded intervals."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.config import NodeConfig
from spillway.errors import SpillwayError, UnknownNameError

from .conftest import ReplayNode

Factory = Callable[..., Callable[[NodeConfig], ReplayNode]]


def test_run_drives_the_node_and_prints_the_report_path(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["run", "--policy", "random", "--duration", "8", "--seed", "3", "--out", str(out)]
    assert main([*argv, "--no-live"], node_factory=replay_factory(n=12)) == 0
    (node,) = ReplayNode.instances
    assert node.config.policy == "random" and node.config.seed == 3
    assert node.config.overload == 3.0 and node.config.master == "local[2]"
    assert len(node.config.queries) == 15  # the default THEMIS mix
    assert node.config.trigger_s == 2.0  # one Spark plan per node; 2 s intervals on 2 cores
    assert node.run_args == (8.0, 1.0) and node.ticks == 4  # the double ticks per interval
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == str(out / "report.md")
    assert lines[0].startswith(
        "spillway: 15 queries, policy random, master local[2]: first measuring its capacity"
    )
    plain = [line.split()[0] for line in lines if line.startswith("t=")]
    assert plain == ["t=2s/8s", "t=8s/8s"]  # plain lines every 5 s (not a terminal)
    assert not any("\x1b[" in line for line in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "random" and summary["duration_s"] == 8.0
    assert summary["intervals"] == 4 and summary["interrupted"] is False
    assert len(summary["queries"]) == 15
    assert (out / "capacity.png").exists() and (out / "results.csv").exists()
    # the double has no exact job: the keys are there, null, and the report says why
    assert {"error_mean", "spearman_sic_error"} <= set(summary["queries"][0])
    assert summary["queries"][0]["error_mean"] is None
    assert summary["exact"]["computed"] is False
    assert summary["exact"]["reason"].startswith("the exact job failed")
    assert (
        "## Error against the exact answer\n\nNot computed: the exact job failed"
        in (out / "report.md").read_text()
    )


def test_no_exact_skips_the_exact_job_and_says_so(tmp_path: Path, replay_factory: Factory) -> None:
    calls: list[object] = []
    factory = replay_factory(n=6)

    def spy(config: NodeConfig) -> ReplayNode:
        node = factory(config)
        run = node.run
        node.run = lambda *a, **kw: (calls.append(kw.get("before_stop")), run(*a, **kw))[1]  # type: ignore[method-assign]
        return node

    argv = ["run", "--duration", "4", "--no-exact", "--out", str(tmp_path / "r"), "--no-live"]
    assert main(argv, node_factory=spy) == 0
    assert calls == [None]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["exact"]["reason"] == "--no-exact was given"
    argv = ["run", "--exact-rows", "0", "--out", str(tmp_path / "s")]
    assert main(argv, node_factory=spy) == 2


def test_run_with_the_example_config_and_overrides(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    example = files("spillway") / "examples" / "node.toml"
    argv = ["run", "--config", str(example), "--overload", "4", "--master", "local[1]"]
    argv += ["--duration", "3", "--out", str(tmp_path)]
    assert main(argv, node_factory=replay_factory()) == 0
    (node,) = ReplayNode.instances
    cfg = node.config
    assert (cfg.overload, cfg.master, cfg.policy, cfg.seed) == (4.0, "local[1]", "balance-sic", 42)
    replay = next(q for q in cfg.queries if q.feed == "replay")
    path = Path(replay.feed_options["path"])
    assert path.is_absolute() and path.is_file() and path.name == "cpu_trace.csv"
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(tmp_path / "report.md")


def test_ctrl_c_stops_the_node_and_still_writes_the_report(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    factory = replay_factory(n=20, interrupt_after=5)
    code = main(
        ["run", "--duration", "20", "--out", str(tmp_path), "--no-live"], node_factory=factory
    )
    assert code == 130
    (node,) = ReplayNode.instances
    assert node.stopped and node.ticks == 5
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.out.strip().splitlines()
    assert lines[-1] == str(tmp_path / "report.md")
    assert any("interrupted" in line for line in lines)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["intervals"] == 5
    assert summary["duration_s"] == 20.0 and summary["elapsed_s"] == 10.0  # 5 ticks of 2 s


def test_default_out_folder_is_timestamped_under_runs(
    tmp_path: Path,
    replay_factory: Factory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--duration", "2", "--no-live"], node_factory=replay_factory()) == 0
    report = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert report.parent.parent == Path("runs") and report.parent.name.startswith("run-")
    assert report.parent.name.endswith("Z") and (tmp_path / report).is_file()


def test_node_error_is_one_line_and_leaves_no_empty_report_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(config: NodeConfig) -> ReplayNode:
        raise UnknownNameError("feed must be one of cluster, gaussian; got 'gausian'")

    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--no-live"], node_factory=failing) == 2
    err = capsys.readouterr().err
    assert err == "spillway: error: feed must be one of cluster, gaussian; got 'gausian'\n"
    assert not out.exists()


def test_ctrl_c_while_measuring_capacity_still_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Calibrating(ReplayNode):
        """Interrupted while measuring capacity: the node has nothing to report yet."""

        def run(self, *args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        def history(self) -> list:
            raise SpillwayError("the node is not started: call node.start()")

    made: list[ReplayNode] = []

    def factory(config: NodeConfig) -> ReplayNode:
        made.append(Calibrating(config, records=[], snaps=[], results=None))  # type: ignore[arg-type]
        return made[-1]

    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--no-live"], node_factory=factory) == 130
    assert len(made) == 1 and made[0].stopped
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == str(out / "report.md")
    assert "Traceback" not in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["intervals"] == 0
    assert "interrupted" in (out / "report.md").read_text()
