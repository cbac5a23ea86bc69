"""Spark's console output: noise off the terminal, everything in the log file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spillway.sparklog import LineFilter, StderrFilter

#: What a local Spark application printed at its start on this machine (``spillway run``).
SPARK_START = """\
WARNING: Using incubator modules: jdk.incubator.vector
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
26/11/26 09:11:19 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.0.1; using 192.0.2.2 instead (on interface eth0)
26/11/26 09:11:19 WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address
Setting default log level to "WARN".
To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).
26/11/26 09:11:20 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using builtin-java classes where applicable
Setting Spark log level to "WARN".
"""

ERROR = """\
26/11/26 09:12:01 ERROR MicroBatchExecution: Query spillway-mixed terminated with error
java.lang.IllegalStateException: boom
\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.run(MicroBatchExecution.scala:1)
Caused by: java.io.EOFException
"""


def test_the_known_start_up_lines_are_all_noise() -> None:
    f = LineFilter()
    assert [line for line in SPARK_START.splitlines() if f.show(line)] == []


def test_errors_and_their_stack_traces_are_shown_warnings_are_not() -> None:
    f = LineFilter()
    shown = [line for line in ERROR.splitlines() if f.show(line)]
    assert shown == ERROR.splitlines()
    warn = "26/11/26 09:12:02 WARN ProcessingTimeExecutor: Current batch is falling behind."
    assert not f.show(warn) and not f.show("\tat org.apache.spark.Foo")


def test_other_lines_are_shown_and_verbose_shows_everything() -> None:
    f = LineFilter()
    assert f.show("Traceback (most recent call last):")
    assert f.show('  File "x.py", line 1')
    assert f.show("spillway: [3s] measuring capacity, round 1")
    verbose = LineFilter(verbose=True)
    assert all(verbose.show(line) for line in SPARK_START.splitlines())


def test_stderr_of_this_process_and_its_children_is_filtered_and_logged(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "spark.log"
    child = f"import sys; sys.stderr.write({SPARK_START + ERROR!r})"
    with StderrFilter(log):
        subprocess.run([sys.executable, "-c", child], check=True)  # inherits fd 2, as a JVM
        os.write(2, b"spillway: [1s] a progress line\n")
    err = capfd.readouterr().err
    assert err.splitlines() == [*ERROR.splitlines(), "spillway: [1s] a progress line"]
    assert log.read_text().splitlines() == [
        *(SPARK_START + ERROR).splitlines(),
        "spillway: [1s] a progress line",
    ]


def test_verbose_passes_everything_and_no_output_writes_no_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with StderrFilter(tmp_path / "quiet.log"):
        pass
    assert not (tmp_path / "quiet.log").exists()
    with StderrFilter(tmp_path / "v.log", verbose=True):
        os.write(2, SPARK_START.encode())
    assert capfd.readouterr().err == SPARK_START
