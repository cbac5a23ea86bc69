"""Spark's console output during ``spillway run``: the whole of it in a log file, the noise off
the screen.

A local Spark application writes to the process's standard error: the JVM (log4j lines such as
``26/11/26 09:16:40 WARN Utils: ...``, and its own warnings), the Python workers it starts, and
spillway itself. At every start it prints the same lines a user can do nothing about: "Using
Spark's default log4j profile", "Your hostname ... resolves to a loopback address", "Unable to
load native-hadoop library", "Using incubator modules", "Setting default log level". The JVM
inherits the file descriptor, not Python's ``sys.stderr``, so the filter works on descriptor 2:
:class:`StderrFilter` points it at a pipe while the node runs and a thread reads the pipe,
writes every line to a log file (the run folder's ``spark.log``) and passes to the terminal
only what :class:`LineFilter` shows:

- log4j lines at ERROR or FATAL, with the lines that continue them (stack traces);
- any other line (a Python traceback, spillway's own messages) that is not known noise
  (:data:`NOISE`);
- everything, with ``verbose=True`` (``spillway run --verbose``).

Log4j lines at WARN, INFO and below go to the log file only.

Examples
--------
>>> f = LineFilter()
>>> [f.show(line) for line in [
...     "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
...     "26/11/26 09:16:40 WARN Utils: Your hostname, vm, resolves to a loopback address",
...     "26/11/26 09:16:41 ERROR MicroBatchExecution: Query failed",
...     "\\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.run",
...     "26/11/26 09:16:42 WARN ProcessingTimeExecutor: Current batch is falling behind.",
...     "\\tat org.apache.spark.util.Utils$.logWarning",
...     "spillway: [27s] measuring capacity, round 1: 3,200 tuples/s arriving"]]
[False, False, True, True, False, False, True]
>>> LineFilter(verbose=True).show("Setting default log level to \\"WARN\\".")
True
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

#: Lines Spark and the JVM print at every start that say nothing actionable to a user.
NOISE: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"^Using Spark's default log4j profile",
        r"resolves to a loopback address",
        r"Set SPARK_LOCAL_IP if you need to bind to another address",
        r"NativeCodeLoader: Unable to load native-hadoop library",
        r"^WARNING: Using incubator modules",
        r"^Setting default log level to",
        r"^To adjust logging level use sc\.setLogLevel",
        r"^Setting Spark log level to",
    )
)

#: The start of a log4j line in Spark's default layout: date, time, level.
LOG4J = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\b")

#: Levels of log4j lines shown on the terminal.
SHOWN_LEVELS = frozenset({"ERROR", "FATAL"})


class LineFilter:
    """Decides, line by line, what reaches the terminal (see the module docstring)."""

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self._continue = True  # whether lines continuing the last log4j line are shown

    def show(self, line: str) -> bool:
        """True when ``line`` (without its newline) goes to the terminal."""
        if self.verbose:
            return True
        m = LOG4J.match(line)
        if m:
            self._continue = m.group(1) in SHOWN_LEVELS and not _noise(line)
            return self._continue
        if line[:1] in (" ", "\t") or line.startswith("Caused by"):
            return self._continue
        self._continue = not _noise(line)
        return self._continue


def _noise(line: str) -> bool:
    return any(p.search(line) for p in NOISE)


class StderrFilter:
    """Route file descriptor 2 through :class:`LineFilter` into ``terminal``, and all of it
    into ``log_path``, while the ``with`` block runs (and after, for the processes started
    inside it: a JVM keeps the descriptor it inherited, so its later lines are still filtered
    and logged until this process exits).

    Parameters
    ----------
    log_path : the log file (created at the first line; appended to).
    verbose : show every line on the terminal too.
    """

    def __init__(self, log_path: str | Path, *, verbose: bool = False) -> None:
        self.log_path = Path(log_path)
        self.filter = LineFilter(verbose=verbose)
        self._saved: int | None = None
        self._read: int | None = None
        self._thread: threading.Thread | None = None
        self._last_read = 0.0
        self._log: IO[str] | None = None
        self._terminal: IO[str] | None = None

    def __enter__(self) -> StderrFilter:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self._saved = os.dup(2)
        self._terminal = os.fdopen(os.dup(self._saved), "w", encoding="utf-8", errors="replace")
        read, write = os.pipe()
        self._read = read
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._pump, name="spillway-stderr", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self.drain()
        if self._saved is not None:
            os.dup2(self._saved, 2)  # our end of the pipe closes; a JVM's stays open
            os.close(self._saved)
            self._saved = None

    def drain(self, idle_s: float = 0.05, limit_s: float = 2.0) -> None:
        """Wait until the pipe is empty and was last read ``idle_s`` ago (at most
        ``limit_s``), so what was written before is on the terminal and in the log."""
        if self._read is None:
            return
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            waiting = bool(select.select([self._read], [], [], 0)[0])
            if not waiting and time.monotonic() - self._last_read >= idle_s:
                return
            time.sleep(idle_s / 2)

    def _pump(self) -> None:
        assert self._read is not None and self._terminal is not None
        pending = b""
        while True:
            ready, _, _ = select.select([self._read], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(self._read, 65536)
            self._last_read = time.monotonic()
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            self._write([ln.decode("utf-8", "replace") for ln in lines])
        if pending:
            self._write([pending.decode("utf-8", "replace")])
        if self._log is not None:
            self._log.close()

    def _write(self, lines: list[str]) -> None:
        assert self._terminal is not None
        shown = [ln for ln in lines if self.filter.show(ln)]
        if self._log is None:
            self._log = self.log_path.open("a", encoding="utf-8", errors="replace")
        self._log.write("".join(ln + "\n" for ln in lines))
        self._log.flush()
        if shown:
            with contextlib.suppress(OSError, ValueError):
                self._terminal.write("".join(ln + "\n" for ln in shown))
                self._terminal.flush()
