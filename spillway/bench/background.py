"""Background load: a CPU-burning process that changes a node's true capacity mid-run.

Pham's load-manager experiments (§5.3.2) start a CPU-intensive job beside the stream engine at
``t = 100 s`` that is on and off in turn (periods of 10, 5, 2 and 1 s): the capacity the engine
really has drops while the job burns, and a load manager with a fixed headroom cannot know. This
module is that job: :class:`BurnPattern` says when it burns (a pure function of the time since
the job started, :meth:`BurnPattern.burning_at`), :class:`BackgroundLoad` runs it as a separate
process (``python -m spillway.bench.background``) so that it competes with Spark's executors for
the cores, not with the driver's Python threads. Arrivals are unaffected: the node's feeds
count tuples by their own clock, never by processing progress.

Examples
--------
>>> p = BurnPattern(start_s=100.0, on_s=10.0, off_s=10.0)
>>> [p.burning_at(t) for t in (50.0, 100.0, 109.9, 110.0, 120.0)]
[False, True, True, False, True]
>>> BurnPattern(start_s=0, on_s=0)
Traceback (most recent call last):
...
spillway.errors.ConfigError: on_s must be a finite number > 0, got 0
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.control.load_manager import check_count, check_number
from spillway.errors import SpillwayError

#: How long the job burns (or sleeps) before it looks at its pattern again (s).
SLICE_S = 0.01


@dataclass(frozen=True, kw_only=True)
class BurnPattern:
    """When the background job burns CPU.

    Parameters
    ----------
    start_s : seconds after the job is started that burning begins (Pham: 100 s into a run).
    on_s, off_s : the job burns ``on_s`` seconds, then idles ``off_s`` seconds, in turn
        (Pham's patterns: 10/10, 5/5, 2/2, 1/1 s); ``off_s = 0`` burns without a pause.
    workers : burning processes (each takes at most one core).
    """

    start_s: float = 0.0
    on_s: float = 10.0
    off_s: float = 0.0
    workers: int = 1

    def __post_init__(self) -> None:
        check_number("start_s", self.start_s, low=0)
        check_number("on_s", self.on_s, low=0, low_ok=False)
        check_number("off_s", self.off_s, low=0)
        check_count("workers", self.workers, low=1)

    def burning_at(self, t: float) -> bool:
        """Whether the job burns ``t`` seconds after it started."""
        if t < self.start_s:
            return False
        if self.off_s == 0:
            return True
        return math.fmod(t - self.start_s, self.on_s + self.off_s) < self.on_s

    def burn_fraction(self, t0: float, t1: float) -> float:
        """Share of ``[t0, t1)`` spent burning (per worker), from the pattern alone.

        >>> BurnPattern(start_s=10, on_s=2, off_s=2).burn_fraction(0, 20)
        0.3
        """
        if t1 <= t0:
            return 0.0
        n = max(int((t1 - t0) / SLICE_S), 1)
        step = (t1 - t0) / n
        return sum(self.burning_at(t0 + (i + 0.5) * step) for i in range(n)) / n


class BackgroundLoad:
    """The burning job as child processes; a context manager that always stops them.

    ``start()`` launches :attr:`BurnPattern.workers` processes whose clocks start then;
    ``stop()`` ends exactly those processes (by their ids).
    """

    def __init__(self, pattern: BurnPattern, *, until_s: float) -> None:
        self.pattern = pattern
        self.until_s = check_number("until_s", until_s, low=0, low_ok=False)
        self._procs: list[subprocess.Popen[bytes]] = []
        self.started_at: float | None = None

    def start(self) -> None:
        """Launch the workers (a second start is refused)."""
        if self._procs:
            raise SpillwayError("the background load is already running; stop() it first")
        p = self.pattern
        args = [
            sys.executable, "-m", "spillway.bench.background",
            "--start", repr(p.start_s), "--on", repr(p.on_s), "--off", repr(p.off_s),
            "--until", repr(self.until_s),
        ]  # fmt: skip
        self.started_at = time.time()
        self._procs = [
            subprocess.Popen(args, stdin=subprocess.DEVNULL, env=dict(os.environ))
            for _ in range(p.workers)
        ]

    def stop(self) -> None:
        """End the workers this object started and wait for them."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs = []

    def __enter__(self) -> BackgroundLoad:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def burn(pattern: BurnPattern, until_s: float) -> float:
    """Burn CPU per ``pattern`` for ``until_s`` seconds of wall time; returns the seconds burnt."""
    t0 = time.monotonic()
    burnt = 0.0
    while (t := time.monotonic() - t0) < until_s:
        if pattern.burning_at(t):
            end = time.monotonic() + SLICE_S
            x = 1.0
            while time.monotonic() < end:
                x = x * 1.000001 + 1e-9
            burnt += SLICE_S
        else:
            time.sleep(SLICE_S)
    return burnt


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m spillway.bench.background --start S --on S --off S --until S``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--start", type=float, default=0.0)
    ap.add_argument("--on", type=float, default=10.0)
    ap.add_argument("--off", type=float, default=0.0)
    ap.add_argument("--until", type=float, required=True)
    a = ap.parse_args(argv)
    burn(BurnPattern(start_s=a.start, on_s=a.on, off_s=a.off), a.until)


if __name__ == "__main__":  # pragma: no cover - the worker process
    main()
