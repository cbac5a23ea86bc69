"""Watching a run: the terminal view, the web dashboard, the metrics endpoint, Spark's log.

``spillway run`` wraps its node in a :class:`RunWatch`. The watch owns one
:class:`~spillway.telemetry.board.NodeBoard`, fed by the node's observers (decisions, batches,
results: :mod:`spillway.events`), by the driver's ticks (snapshots) and by the progress lines
(:mod:`spillway.progress`); everything that shows the run reads that board:

- the terminal (:class:`~spillway.live.LiveWriter`): while the node measures its capacity, a
  calibration view refreshed every second (round, batches, best rate, capacity so far, the
  progress lines) instead of a blank screen; then the live table;
- ``--ui``: the dashboard (:class:`~spillway.ui.server.DashboardServer`), on 127.0.0.1 unless
  ``--ui-host`` names another address;
- ``--metrics-port``: Prometheus text at ``/metrics``
  (:class:`~spillway.telemetry.prometheus.MetricsServer`);
- Spark's console output (:class:`~spillway.sparklog.StderrFilter`): all of it in the run
  folder's ``spark.log``, on the terminal only what is not known start-up noise (unless
  ``--verbose``).

The servers start before Spark (a busy port or a missing asset is an error before anything
runs) and stop after the report is written; between the end of the run and then, they show
the final figures (phase ``done``) and the report's path.

Examples
--------
>>> import io
>>> from spillway.config import NodeConfig, QuerySpec
>>> from spillway.status import NodeSnapshot
>>> cfg = NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="gaussian"),))
>>> out = io.StringIO()
>>> with RunWatch(cfg, WatchOptions(live=False), duration_s=10.0, stdout=out) as watch:
...     watch.tick(NodeSnapshot(t=1.0, capacity_tuples_per_s=5.0, processed_tuples_per_s=5.0,
...                             jain=1.0))
...     watch.finished(None, report="runs/x/report.md")
>>> out.getvalue().split()[0], watch.board.state().phase
('t=1s/10s', 'done')
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from spillway.config import NodeConfig
from spillway.errors import SpillwayError
from spillway.live import LiveWriter
from spillway.progress import to_callback
from spillway.status import NodeSnapshot
from spillway.telemetry import Hub, NodeBoard

#: The loopback address the servers listen on unless told otherwise.
LOOPBACK = "127.0.0.1"
#: The board's (and the metrics' ``node`` label's) name for the node of ``spillway run``.
NODE_NAME = "node"


@dataclass(frozen=True, kw_only=True)
class WatchOptions:
    """How a run is shown (the ``spillway run`` options of the same names).

    ``live``: redraw in place (None: when standard output is a terminal); ``ui``: serve the
    dashboard on ``ui_host:ui_port`` (port 0 picks one); ``metrics_port``: serve Prometheus
    text on ``metrics_host:metrics_port`` (None: no endpoint); ``spark_log``: the file
    Spark's console output goes to (None: left alone); ``verbose``: show all of it.
    """

    live: bool | None = None
    ui: bool = False
    ui_host: str = LOOPBACK
    ui_port: int = 0
    metrics_port: int | None = None
    metrics_host: str = LOOPBACK
    spark_log: Path | None = None
    verbose: bool = False


class RunWatch:
    """Shows one run everywhere it is asked to (see the module docstring).

    Parameters
    ----------
    config : the node's config.
    options : what to show and where.
    duration_s : the run's planned length.
    stdout, stderr : the terminal (default ``sys.stdout`` and ``sys.stderr``).
    refresh_s : how often the calibration view is redrawn.
    """

    def __init__(
        self,
        config: NodeConfig,
        options: WatchOptions,
        *,
        duration_s: float,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        refresh_s: float = 1.0,
    ) -> None:
        self.options = options
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.board = NodeBoard(
            NODE_NAME,
            queries=[q.name for q in config.queries],
            stw_s=config.stw_s,
            duration_s=duration_s,
            calibrate_s=config.calibrate_s if config.overload is not None else math.nan,
            info={"policy": config.policy, "master": config.master},
        )
        self.hub = Hub([self.board])
        self.view = LiveWriter(self.stdout, duration_s=duration_s, live=options.live)
        self.refresh_s = refresh_s
        self.dashboard: Any = None
        self.metrics: Any = None
        self._node: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stack = contextlib.ExitStack()
        self._ticker: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> RunWatch:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        o = self.options
        if o.metrics_port is not None:
            from spillway.telemetry.prometheus import MetricsServer

            self.metrics = MetricsServer(self.hub, host=o.metrics_host, port=o.metrics_port)
            self._stack.callback(self.metrics.close)
        if o.ui:
            from spillway.ui.server import DashboardServer

            self.dashboard = DashboardServer(self.hub, host=o.ui_host, port=o.ui_port)
            self._stack.callback(self.dashboard.close)
        if o.spark_log is not None:
            from spillway.sparklog import StderrFilter

            self._stack.enter_context(StderrFilter(o.spark_log, verbose=o.verbose))
        self._stack.enter_context(to_callback(self._progress))
        self._ticker = threading.Thread(target=self._tick_calibration, daemon=True)
        self._ticker.start()
        self._stack.callback(self._stop_ticker)

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def _stop_ticker(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)

    def addresses(self) -> list[str]:
        """One line per server started: where to point a browser or Prometheus."""
        lines = []
        if self.dashboard is not None:
            lines.append(f"spillway: dashboard at {self.dashboard.url}")
            if self.options.ui_host != LOOPBACK:
                lines.append(
                    "spillway: the dashboard has no login and listens on "
                    f"{self.options.ui_host}: anyone who can reach it sees this run"
                )
        if self.metrics is not None:
            lines.append(f"spillway: Prometheus metrics at {self.metrics.url}")
        return lines

    def serving_cpu_s(self) -> dict[str, float]:
        """CPU seconds each server started took so far in the driver (``dashboard``,
        ``metrics``; empty when none runs): what watching this run costs the node, beside the
        board every view shares."""
        out = {}
        if self.dashboard is not None:
            out["dashboard"] = round(float(self.dashboard.cpu_s), 4)
        if self.metrics is not None:
            out["metrics"] = round(float(self.metrics.cpu_s), 4)
        return out

    # ------------------------------------------------------------------ feeding the board
    def attach(self, node: Any) -> None:
        """Listen to ``node`` (its ``observers`` list, when it has one)."""
        self._node = node
        observers = getattr(node, "observers", None)
        if isinstance(observers, list):
            observers.append(self.board.observe)

    def tick(self, snapshot: NodeSnapshot) -> None:
        """The node's snapshot of this tick (pass as the node's ``on_tick``)."""
        self.board.tick(snapshot)
        with self._lock:
            self.view.update(snapshot)

    def note(self, message: str) -> None:
        """A message on the terminal, under the view."""
        with self._lock:
            self.view.note(message)

    def finished(
        self,
        snapshot: NodeSnapshot | None,
        *,
        report: str | None = None,
        error: str | None = None,
    ) -> None:
        """The run ended (``report`` once it is written; ``error`` when it failed)."""
        self.board.finish(snapshot, report=report, error=error)

    def _progress(self, line: str) -> None:
        self.board.note(line)
        rounds = getattr(self._node, "calibration_rounds", None)
        if isinstance(rounds, list):
            with contextlib.suppress(SpillwayError, TypeError, ValueError):
                self.board.set_calibration_rounds(rounds)
        state = self.board.state()
        with self._lock:
            if not self.view.live:
                self.stderr.write(line + "\n")
                self.stderr.flush()
            elif state.phase == "calibrating" and state.calibration is not None:
                self.view.calibrating(state.calibration, state.lines)
            else:
                self.view.note(line)

    def _tick_calibration(self) -> None:
        while not self._stop.wait(self.refresh_s):
            state = self.board.state()
            if state.phase in ("running", "done", "failed"):
                return
            if state.calibration is not None:
                with self._lock:
                    if self.board.state().phase == "calibrating":
                        self.view.calibrating(state.calibration, state.lines)
