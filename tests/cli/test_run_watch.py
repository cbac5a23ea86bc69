"""``spillway run`` with --ui, --metrics-port and --verbose (node double; the real run is in
tests/ui/test_live_run.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from spillway.cli import build_parser, main, watch_options
from spillway.config import NodeConfig

from .conftest import ReplayNode

Factory = Callable[..., Callable[[NodeConfig], ReplayNode]]


def test_ui_and_metrics_addresses_are_printed_after_the_banner(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--duration", "3", "--out", str(tmp_path / "r"), "--no-live"]
    assert main([*argv, "--ui", "--metrics-port", "0"], node_factory=replay_factory()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("spillway: 15 queries")
    assert lines[1].startswith("spillway: dashboard at http://127.0.0.1:")
    assert lines[2].startswith("spillway: Prometheus metrics at http://127.0.0.1:")
    assert lines[2].endswith("/metrics") and lines[-1].endswith("report.md")


@pytest.mark.parametrize(
    ("extra", "ui", "host", "port"),
    [
        ([], False, "127.0.0.1", 0),
        (["--ui"], True, "127.0.0.1", 0),
        (["--ui-port", "8123"], True, "127.0.0.1", 8123),
        (["--ui", "--ui-host", "0.0.0.0"], True, "0.0.0.0", 0),
    ],
)
def test_ui_options(extra: list[str], ui: bool, host: str, port: int, tmp_path: Path) -> None:
    o = watch_options(build_parser().parse_args(["run", *extra]), tmp_path)
    assert (o.ui, o.ui_host, o.ui_port) == (ui, host, port)
    assert o.spark_log == tmp_path / "spark.log" and o.metrics_port is None and not o.verbose


def test_metrics_and_verbose_options(tmp_path: Path) -> None:
    args = build_parser().parse_args(["run", "--metrics-port", "9464", "--verbose"])
    o = watch_options(args, tmp_path)
    assert (o.metrics_port, o.metrics_host, o.verbose) == (9464, "127.0.0.1", True)


@pytest.mark.parametrize("option", ["--ui-port", "--metrics-port"])
@pytest.mark.parametrize("value", ["70000", "-1", "http"])
def test_a_bad_port_is_a_usage_error(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", option, value]) == 2
    assert "port number" in capsys.readouterr().err


def test_a_busy_port_exits_2_before_the_node_starts_and_leaves_no_folder(
    tmp_path: Path, replay_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = tmp_path / "r"
        argv = ["run", "--ui-port", str(port), "--out", str(out), "--no-live"]
        assert main(argv, node_factory=replay_factory()) == 2
    assert ReplayNode.instances == [] and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"spillway: error: --ui-port {port}: cannot listen")
