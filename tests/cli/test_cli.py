"""The ``spillway`` command line: help, one-line errors with exit code 2, dispatch."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import spillway.experiments
from spillway.bench.command import DECISION_SIZES_QUICK, run_benchmarks
from spillway.cli import main
from spillway.config import NodeConfig
from spillway.errors import UnknownNameError
from spillway.policies import POLICIES
from spillway.workloads import default_node_config


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("spillway: error: ")
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------- help
def test_main_help_lists_commands_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for part in ("run", "experiment", "bench", "examples:", "spillway run --config"):
        assert part in out


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        (
            "run",
            [
                "--policy",
                "--duration",
                "--out",
                "--config",
                "--seed",
                "--overload",
                "--master",
                "--no-live",
                "examples:",
                "Ctrl-C",
                "MISS",
            ],
        ),
        ("experiment", ["NAME", "--quick", "--seed", "--out", "known experiments:"]),
        ("bench", ["--quick", "--out", "--only", "decision", "examples:"]),
    ],
)
def test_subcommand_help_explains_itself(
    command: str, parts: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: spillway {command}")
    for part in parts:
        assert part in out, part


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("spillway ")


# --------------------------------------------------------------------------- errors
def _never(config: object) -> object:
    raise AssertionError("the node must not start when the command line is wrong")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            'trigger_s = -1\n[[query]]\nname="a"\nkind="avg"\nfeed="gaussian"\n',
            "trigger_s must be a finite number > 0, got -1",
        ),
        (
            'bogus = 1\n[[query]]\nname="a"\nkind="avg"\nfeed="gaussian"\n',
            "node: unknown setting(s) bogus; known:",
        ),
        (
            '[[query]]\nname="a"\nkind="avg"\nfeed="gaussian"\nwindw_s=2\n',
            "query #1: unknown setting(s) windw_s",
        ),
        (
            '[[query]]\nname="a"\nkind="median"\nfeed="gaussian"\n',
            "query kind must be one of avg, avg_all, count, cov, group_avg, max, top5, user; got 'median'",
        ),
        ("policy = \n[[query]]\n", "is not valid TOML"),
        (
            'policy = "nope"\n[[query]]\nname="a"\nkind="avg"\nfeed="gaussian"\n',
            "unknown policy 'nope'; known: ",
        ),
    ],
    ids=[
        "bad-value",
        "unknown-key",
        "unknown-query-key",
        "unknown-kind",
        "bad-toml",
        "unknown-policy-in-file",
    ],
)
def test_invalid_config_is_one_line_exit_2(
    toml: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "node.toml"
    cfg.write_text(toml)
    code = main(["run", "--config", str(cfg), "--out", str(tmp_path / "o")], node_factory=_never)
    assert code == 2
    assert message in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--policy", "no-such-policy"], "no-such-policy"),
        (["run", "--config", "/nonexistent/node.toml"], "cannot read config file"),
        (["run", "--duration", "0"], "argument --duration: must be a finite number > 0"),
        (["run", "--seed", "-3"], "argument --seed: must be a non-negative integer"),
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (["experiment", "no-such-experiment"], "unknown experiment 'no-such-experiment'; known:"),
        (["bench", "--only", "nope"], "argument --only: invalid choice: 'nope'"),
        ([], "the following arguments are required: COMMAND"),
        (["run", "--workload", "tpch"], "argument --workload: invalid choice: 'tpch'"),
        (
            ["run", "--workload", "grouped", "--config", "spillway/examples/node.toml"],
            "--workload picks built-in queries; it cannot be used with --config",
        ),
    ],
    ids=[
        "unknown-policy",
        "unreadable-config",
        "bad-duration",
        "bad-seed",
        "unknown-option",
        "unknown-experiment",
        "unknown-benchmark",
        "no-command",
        "unknown-workload",
        "workload-with-config",
    ],
)
def test_usage_errors_are_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, node_factory=_never) == 2
    assert message in _one_error_line(capsys.readouterr().err)


def test_config_that_is_a_folder_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--config", str(tmp_path)], node_factory=_never) == 2
    assert "cannot read config file" in _one_error_line(capsys.readouterr().err)


def test_unwritable_out_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", "--out", str(blocker / "sub")], node_factory=_never) == 2
    assert "cannot create the report folder" in _one_error_line(capsys.readouterr().err)


def test_error_from_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[[query]]\nname = "a"\nkind = "avg"\nfeed = "gaussian"\nrate = -5\n')
    proc = subprocess.run(
        [sys.executable, "-m", "spillway.cli", "run", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert "query 'a': rate must be a finite number > 0, got -5" in line
    assert proc.stdout == ""


# --------------------------------------------------------------------------- experiment
def test_experiment_dispatches_to_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, object]] = []

    def make_config(*, quick: bool = False, seed: int = 0) -> dict[str, object]:
        calls.append(("make_config", (quick, seed)))
        return {"quick": quick, "seed": seed}

    def run(config: dict[str, object], out_dir: Path) -> dict[str, object]:
        calls.append(("run", (config, out_dir)))
        (out_dir / "report.md").write_text("# demo\n")
        return {"config": config}

    demo = SimpleNamespace(
        NAME="demo", DESCRIPTION="A demo figure.", make_config=make_config, run=run
    )
    monkeypatch.setattr(spillway.experiments, "EXPERIMENTS", {"demo": demo})
    out = tmp_path / "exp"
    assert main(["experiment", "demo", "--quick", "--seed", "4", "--out", str(out)]) == 0
    assert calls == [
        ("make_config", (True, 4)),
        ("run", ({"quick": True, "seed": 4}, out)),
    ]
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out / "report.md")
    assert main(["experiment", "other"]) == 2
    assert "unknown experiment 'other'; known: demo" in _one_error_line(capsys.readouterr().err)
    assert main(["experiment", "--help"]) == 0
    assert "  demo  A demo figure." in capsys.readouterr().out


def test_experiment_prints_every_verdict_and_a_fail_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    checks = [
        {"name": "jain_ge_0.95", "verdict": "pass", "why": "0.99 >= 0.95"},
        {"name": "rho_le_-0.8", "verdict": "fail", "why": "rho -0.2 is not <= -0.8"},
        {"name": "beats_random", "verdict": "not applicable", "why": "random never unfair"},
    ]

    def run(config: object, out_dir: Path) -> dict[str, object]:
        (out_dir / "report.md").write_text("# demo\n")
        return {"checks": checks}

    demo = SimpleNamespace(DESCRIPTION="A demo.", make_config=lambda **kw: kw, run=run)
    monkeypatch.setattr(spillway.experiments, "EXPERIMENTS", {"demo": demo})
    out = tmp_path / "exp"
    assert main(["experiment", "demo", "--out", str(out)]) == 0  # a FAIL is a finding
    assert capsys.readouterr().out.strip().splitlines() == [
        "PASS  jain_ge_0.95: 0.99 >= 0.95",
        "FAIL  rho_le_-0.8: rho -0.2 is not <= -0.8",
        "n/a   beats_random: random never unfair",
        "checks: 1 pass, 1 FAIL, 1 not applicable",
        str(out / "report.md"),
    ]


def test_experiment_help_lists_the_registered_experiments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["experiment", "--help"]) == 0
    out = capsys.readouterr().out
    for name, module in spillway.experiments.EXPERIMENTS.items():
        (line,) = [line for line in out.splitlines() if line.startswith(f"  {name} ")]
        assert line.split(None, 1) == [name, module.DESCRIPTION.splitlines()[0]]


# --------------------------------------------------------------------------- default node
def test_default_node_hosts_the_themis_mix() -> None:
    cfg = default_node_config(policy="random", seed=9, overload=3.0, master="local[2]")
    kinds = {q.kind for q in cfg.queries}
    assert kinds == {"avg", "max", "count", "avg_all", "top5", "cov"}
    synthetic = {q.feed for q in cfg.queries if q.kind in ("avg", "max", "count")}
    assert synthetic == {"gaussian", "uniform", "exponential", "mixed"}
    assert {q.feed for q in cfg.queries if q.kind in ("avg_all", "top5", "cov")} == {"cluster"}
    assert (cfg.policy, cfg.seed, cfg.overload) == ("random", 9, 3.0)
    assert len({q.name for q in cfg.queries}) == len(cfg.queries)
    # One window length: the node runs ONE Spark plan for all 15 queries, on 2 s intervals.
    from spillway.spark.node import plan_layout

    assert [p.name for p in plan_layout(cfg)] == ["mixed"]
    assert cfg.trigger_s == 2.0 and cfg.stw_s % cfg.trigger_s == 0


def test_cod_runs_the_grouped_workload_unless_told_otherwise() -> None:
    from spillway.cli import build_parser, node_config_from_args

    def cfg(*argv: str):
        return node_config_from_args(build_parser().parse_args(["run", *argv]))

    grouped = cfg("--policy", "cod")
    assert [(q.kind, q.feed) for q in grouped.queries] == [
        ("group_avg", "taxi"),
        ("group_avg", "tasks"),
    ]
    assert grouped.policy == "cod" and grouped.overload == 3.0
    assert {q.kind for q in cfg("--policy", "cod", "--workload", "themis").queries} == {
        "avg", "max", "count", "avg_all", "top5", "cov"
    }  # fmt: skip
    assert {q.kind for q in cfg("--workload", "grouped").queries} == {"group_avg"}
    assert cfg("--workload", "grouped").policy == "balance-sic"


def test_the_spark_node_factory_logs_spark_warnings_and_keeps_source_mass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark logs at WARN: its warnings reach spark.log, the terminal filter keeps them off
    the screen (spillway.sparklog); the node keeps the SIC mass for the exact answers."""
    import spillway.spark.node
    from spillway.cli import RUN_LOG_LEVEL, spark_node

    made: list[tuple[NodeConfig, dict[str, object]]] = []

    class Recorder:
        def __init__(self, config: NodeConfig, **kw: object) -> None:
            made.append((config, kw))

    monkeypatch.setattr(spillway.spark.node, "Node", Recorder)
    cfg = default_node_config()
    spark_node(cfg)
    assert made == [(cfg, {"log_level": RUN_LOG_LEVEL, "keep_source_mass": True})]
    assert RUN_LOG_LEVEL == "WARN"


# --------------------------------------------------------------------------- bench
def test_bench_times_every_policy_and_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--only", "decision", "--seed", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out / "report.md")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["quick"] is True and summary["seed"] == 1
    (check,) = summary["checks"]  # its verdict depends on the machine's load: not asserted
    assert check["name"] == "fair_over_random_le_1.5" and check["why"]
    assert printed[0].split()[:2] in (["PASS", "fair_over_random_le_1.5:"],
                                      ["FAIL", "fair_over_random_le_1.5:"])  # fmt: skip
    assert printed[1].startswith("checks: ")
    decision = summary["benchmarks"]["decision"]
    assert decision["policies"] == sorted(POLICIES)
    assert [r["lanes"] for r in decision["results"]] == [q * s for q, s in DECISION_SIZES_QUICK]
    with (out / "decision.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(DECISION_SIZES_QUICK)
    for p in POLICIES:
        assert all(float(r[f"ms_{p}"]) > 0 for r in rows)
    md = (out / "report.md").read_text()
    assert "## decision" in md and "](decision.png)" in md
    assert (out / "decision.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_benchmark_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(
        UnknownNameError, match=r"unknown benchmark 'nope'; known: decision, spark, kafka"
    ):
        run_benchmarks(tmp_path, names=["decision", "nope"], quick=True, seed=0)
    assert list(tmp_path.iterdir()) == []
