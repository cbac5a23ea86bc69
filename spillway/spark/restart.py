"""Restarting a driver from its checkpoint in a fresh Python process.

A driver that dies loses its JVM with it; the one started after it has a new JVM that knows
nothing of the first one's streaming queries. Restarting a :class:`~spillway.spark.node.Node`
inside the process that ran it is not the same thing: Spark may still hold the stopped query's
checkpoint as in use there (docs/design.md, "Known limits"). So a restart is shown the way a
user would see it: a new Python process (:func:`run_fresh`) that builds the node from the same
checkpoint and runs it until what it must redo is done (:func:`run_until`), then stops.

Examples
--------
>>> run_fresh(["-c", "print(6 * 7)"], timeout_s=60).stdout
'42\\n'
>>> run_fresh(["-c", "import sys; sys.exit(3)"], timeout_s=60).returncode
3
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from spillway.errors import SpillwayError


def run_fresh(argv: Sequence[str], *, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGV...`` (this interpreter) in a new process; its exit code and output.

    Raises
    ------
    SpillwayError
        The process did not end within ``timeout_s`` seconds (it is killed).
    """
    cmd = [sys.executable, *argv]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise SpillwayError(
            f"the driver process {' '.join(argv)[:200]} did not end within {timeout_s:g} s; "
            "give it more time or look at what it printed"
        ) from e


def run_until(
    node: Any, done: Callable[[], bool], *, timeout_s: float, poll_s: float = 0.1
) -> None:
    """Start ``node``, wait until ``done()`` holds, then stop it (also on failure).

    Raises
    ------
    SpillwayError
        A streaming query of the node failed, or ``done()`` did not hold within ``timeout_s``.
    """
    node.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not done():
            for plan in node.plans:
                err = node.query_error(plan)
                if err is not None:
                    raise SpillwayError(f"the streaming query of plan {plan!r} failed: {err}")
            if time.monotonic() > deadline:
                raise SpillwayError(
                    f"the restarted node did not finish its work within {timeout_s:g} s"
                )
            time.sleep(poll_s)
    finally:
        node.stop()


__all__ = ["run_fresh", "run_until"]
