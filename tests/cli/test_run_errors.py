"""``spillway run`` when things go wrong: exit codes, errors before Spark, failed runs, reused
folders, feeds that end, progress of long commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.config import NodeConfig
from spillway.errors import RunFailedError
from spillway.run_report import summarise_run

from .conftest import ReplayNode, small_config, synthetic_run

Factory = Callable[..., Callable[[NodeConfig], ReplayNode]]


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "node.toml"
    p.write_text(text)
    return p


def _never_built(config: NodeConfig) -> ReplayNode:
    raise AssertionError("the node must not be built: the config is wrong")


@pytest.mark.parametrize(
    ("toml", "extra", "message"),
    [
        (
            '[[query]]\nname = "q"\nkind = "avg"\nfeed = "gaussian"\n',
            ["--master", "bogus://x"],
            "master must be a Spark master URL",
        ),
        (
            '[[query]]\nkind = "avg"\nfeed = "gaussian"\n',
            [],
            "query #1: missing required key(s) name",
        ),
        (
            '[[query]]\nname = "q"\nkind = "avg"\nfeed = "gaussian"\nprofile = "stepp"\n',
            [],
            "query 'q' (feed 'gaussian'): profile must be one of",
        ),
        (
            '[[query]]\nname = "q"\nkind = "avg"\nfeed = "gaussian"\nfeed_options = {sd = 1}\n',
            [],
            "query 'q' (feed 'gaussian'): feed 'gaussian': unknown option(s) sd",
        ),
        (
            '[[query]]\nname = "q"\nkind = "avg"\nfeed = "replay"\n'
            'feed_options = {path = "absent.csv", time_column = "t", value_column = "v"}\n',
            [],
            "query 'q' (feed 'replay')",
        ),
    ],
)
def test_config_errors_are_found_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, extra: list[str], message: str
) -> None:
    cfg = _toml(tmp_path, toml)
    out = tmp_path / "out"
    argv = ["run", "--config", str(cfg), "--out", str(out), "--no-live", *extra]
    assert main(argv, node_factory=_never_built) == 2
    err = capsys.readouterr().err
    assert err.startswith("spillway: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


class Failing(ReplayNode):
    """A node whose streaming query dies after two ticks, as a crashed Python worker does."""

    def run(self, duration_s, on_tick=None, tick_s=1.0, before_stop=None):  # type: ignore[no-untyped-def]
        for s in self._snaps[:2]:
            self.ticks += 1
            if on_tick is not None:
                on_tick(s)
        self.failure = {
            "plan": "mixed",
            "phase": "run",
            "after_batch": 7,
            "error": "org.apache.spark.SparkException: [FOREACH_BATCH_USER_FUNCTION_ERROR]\n"
            "java.io.EOFException\n\tat java.io.DataInputStream.readInt",
        }
        raise RunFailedError("the streaming query of plan 'mixed' failed while running: EOF")


def test_a_failed_run_exits_1_with_one_line_and_a_report_that_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def factory(config: NodeConfig) -> ReplayNode:
        records, snaps, results = synthetic_run(config, 6)
        return Failing(config, records=records, snaps=snaps, results=results)

    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--no-live"], node_factory=factory) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "spillway: error: the streaming query of plan 'mixed' failed while running: EOF"
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] is True and summary["failure"]["plan"] == "mixed"
    assert summary["failure"]["after_batch"] == 7
    md = (out / "report.md").read_text()
    assert "The run failed" in md and "after micro-batch 7" in md and "EOFException" in md


def test_spark_that_cannot_start_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def factory(config: NodeConfig) -> ReplayNode:
        raise RunFailedError("Spark could not start on master 'local[2]': no java")

    assert main(["run", "--out", str(tmp_path / "x"), "--no-live"], node_factory=factory) == 1
    assert "Spark could not start" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_non_empty_out_is_refused_unless_overwrite(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    (out / "queries").mkdir(parents=True)
    (out / "queries" / "old-query.csv").write_text("t_s,sic\n")
    argv = ["run", "--out", str(out), "--duration", "4", "--no-live"]
    assert main(argv, node_factory=replay_factory(n=6)) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"], node_factory=replay_factory(n=6)) == 0
    assert not (out / "queries" / "old-query.csv").exists()  # nothing of the old run stays
    assert (out / "summary.json").exists()


def test_kept_fraction_is_each_querys_own_and_a_feed_that_ended_is_said() -> None:
    cfg = small_config()
    records, snaps, results = synthetic_run(cfg, 12)
    names = [q.name for q in cfg.queries]
    # per interval: query i had 100 (i + 1) tuples and kept 30 (i + 1) + i
    records = [
        r.__class__(
            **{
                **r.__dict__,
                "query_arrived": {n: 100 * (i + 1) for i, n in enumerate(names)},
                "query_admitted": {n: 30 * (i + 1) + i for i, n in enumerate(names)},
            }
        )
        for r in records
    ]
    s = summarise_run(
        config=cfg,
        history=records,
        snapshot=snaps[-1],
        results=results,
        duration_s=12,
        feeds_end_s={names[0]: 8.0, names[1]: None},
    )
    kept = [q["kept_fraction"] for q in s["queries"]]
    assert kept == pytest.approx([30 / 100, 61 / 200, 92 / 300])
    q0 = s["queries"][0]
    assert q0["rows_in"] == 100 * 4  # intervals 5..8: the steady part up to its feed's end
    assert q0["feed_ended_s"] == 8.0 and s["feeds_ended"] == {names[0]: 8.0}
    assert s["queries"][1]["rows_in"] == 200 * 8  # intervals 5..12


def test_bench_reports_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--only", "decision", "--quick", "--out", str(tmp_path / "b")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "spillway: [" in err and "benchmark decision (1 of 1) started" in err
