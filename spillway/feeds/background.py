"""Background load: CPU-burning processes that change a node's true capacity on a schedule.

Pham's load managers must *learn* the capacity the node really has, so the experiments change
it under their feet: "background jobs" share the processor from t = 100 s on (Pham §4.3.3.1,
§5.3.2.2), or come and go in on/off patterns of 10, 5, 2 and 1 seconds, 60 s each (§5.3.2.6,
Fig. 21). This module has two parts:

- :class:`BackgroundSchedule`, a frozen value: when the background load is on, as a pure
  function of time (``is_on(t)``, ``on_intervals(until)``). The queue model turns it into a
  capacity schedule (:meth:`spillway.control.queue_model.CapacitySchedule.from_intervals`);
- :class:`BackgroundLoad`: ``jobs`` processes that spin on the CPU while the schedule is on and
  sleep while it is off, started with :meth:`~BackgroundLoad.start` (the schedule's time 0 is
  the given epoch on ``time.monotonic()``, a system-wide clock on Linux, so the node and the
  burners agree) and ended with :meth:`~BackgroundLoad.stop`, which always joins them. Each
  process publishes its own CPU time, so a caller can check the load really burned. The
  processes are spawned (no fork of a JVM-holding driver) and import spillway, which takes
  about half a second: start the load a second or more before its first on-phase.

Examples
--------
>>> s = BackgroundSchedule(start_s=100.0)
>>> [s.is_on(t) for t in (99.0, 100.0, 109.9, 110.0, 120.0, 160.0, 165.0, 340.0)]
[False, True, True, False, True, True, False, False]
>>> s.on_intervals(125.0)
[(100.0, 110.0), (120.0, 125.0)]
>>> s.end_s
340.0
>>> always = BackgroundSchedule(start_s=100.0, phases=(), then_on=True)
>>> always.on_intervals(400.0)
[(100.0, inf)]
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from types import TracebackType
from typing import Any

from spillway.errors import ConfigError

#: Pham §5.3.2.6: 10 s on / 10 s off for 60 s, then 5/5, 2/2 and 1/1, 60 s each.
PHAM_PATTERNS: tuple[tuple[float, float, float], ...] = (
    (10.0, 10.0, 60.0),
    (5.0, 5.0, 60.0),
    (2.0, 2.0, 60.0),
    (1.0, 1.0, 60.0),
)


def _number(name: str, value: Any, *, positive: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ConfigError(
            f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}"
        )
    return float(value)


@dataclass(frozen=True, kw_only=True)
class BackgroundSchedule:
    """When the background load runs: from ``start_s``, each phase's on/off pattern in turn.

    Parameters
    ----------
    start_s : time (s from the run's start) the first phase begins.
    phases : ``(on_s, off_s, duration_s)`` triples: within the phase the load is on for
        ``on_s``, off for ``off_s``, repeated until ``duration_s`` has passed. Default: Pham's
        10/5/2/1 s patterns, 60 s each.
    then_on : whether the load stays on after the last phase (``phases=()`` with
        ``then_on=True`` is "background jobs from ``start_s`` on", Pham Figs. 10 and 16).
    jobs : how many burner processes run while on (Pham: "two background jobs").
    """

    start_s: float = 100.0
    phases: tuple[tuple[float, float, float], ...] = PHAM_PATTERNS
    then_on: bool = False
    jobs: int = 1

    def __post_init__(self) -> None:
        _number("start_s", self.start_s, positive=False)
        phases = []
        for i, phase in enumerate(self.phases):
            if len(phase) != 3:
                raise ConfigError(f"phases[{i}] must be (on_s, off_s, duration_s), got {phase!r}")
            on, off, dur = (
                _number(f"phases[{i}] {n}", v, positive=n != "off_s")
                for n, v in zip(("on_s", "off_s", "duration_s"), phase, strict=True)
            )
            phases.append((on, off, dur))
        object.__setattr__(self, "phases", tuple(phases))
        if not isinstance(self.then_on, bool):
            raise ConfigError(f"then_on must be true or false, got {self.then_on!r}")
        if not isinstance(self.jobs, int) or isinstance(self.jobs, bool) or self.jobs < 1:
            raise ConfigError(f"jobs must be an int >= 1, got {self.jobs!r}")

    @property
    def end_s(self) -> float:
        """When the last phase ends."""
        return self.start_s + math.fsum(d for _, _, d in self.phases)

    def is_on(self, t: float) -> bool:
        """Whether the background load runs at time ``t`` (s)."""
        if t < self.start_s:
            return False
        begin = self.start_s
        for on, off, dur in self.phases:
            if t < begin + dur:
                return (t - begin) % (on + off) < on
            begin += dur
        return self.then_on

    def on_intervals(self, until_s: float) -> list[tuple[float, float]]:
        """The ``(start, end)`` intervals the load is on, up to ``until_s`` (an ``end`` of
        ``inf`` when it stays on for ever)."""
        out: list[tuple[float, float]] = []
        begin = self.start_s
        for on, off, dur in self.phases:
            t = begin
            while t < begin + dur and t < until_s:
                end = min(t + on, begin + dur, until_s)
                if out and out[-1][1] == t:  # contiguous with the previous (off_s == 0)
                    out[-1] = (out[-1][0], end)
                else:
                    out.append((t, end))
                t += on + off
            begin += dur
        if self.then_on and self.end_s < until_s:
            if out and out[-1][1] == self.end_s:
                out[-1] = (out[-1][0], math.inf)
            else:
                out.append((self.end_s, math.inf))
        return out


def _burn(
    schedule: BackgroundSchedule,
    epoch: float,
    stop: Any,
    cpu: Synchronized,
) -> None:  # pragma: no cover - runs in the child process (its effect is tested)
    """Child process: spin while the schedule is on, sleep while off, until stopped or done."""
    x = 1.0
    while not stop.is_set():
        now = time.monotonic() - epoch
        if now >= schedule.end_s and not schedule.then_on:
            break
        if schedule.is_on(now):
            until = time.monotonic() + 0.01
            while time.monotonic() < until:
                for _ in range(2000):
                    x = x * 1.0000001 + 1e-9
        else:
            stop.wait(0.01)
        cpu.value = time.process_time()
    cpu.value = time.process_time()


class BackgroundLoad:
    """Burner processes following a :class:`BackgroundSchedule`.

    Use it as a context manager or call :meth:`start` and :meth:`stop`; :meth:`stop` is safe
    to call twice and always joins the processes (terminating one that does not stop within
    ``timeout_s``).

    Raises
    ------
    ConfigError
        ``start`` on a load that already runs.
    """

    def __init__(self, schedule: BackgroundSchedule) -> None:
        self.schedule = schedule
        self._ctx = mp.get_context("spawn")
        self._procs: list[Any] = []
        self._cpu: list[Synchronized] = []
        self._stop: Any = None
        self.epoch: float | None = None

    def start(self, epoch: float | None = None) -> BackgroundLoad:
        """Start the burners; the schedule's time 0 is ``epoch`` (``time.monotonic()`` units,
        default: now)."""
        if self._procs:
            raise ConfigError("the background load already runs: stop() it before start()")
        self.epoch = time.monotonic() if epoch is None else float(epoch)
        self._stop = self._ctx.Event()
        self._cpu = [self._ctx.Value("d", 0.0) for _ in range(self.schedule.jobs)]
        self._procs = [
            self._ctx.Process(
                target=_burn,
                args=(self.schedule, self.epoch, self._stop, cpu),
                name=f"spillway-background-{i}",
                daemon=True,
            )
            for i, cpu in enumerate(self._cpu)
        ]
        for p in self._procs:
            p.start()
        return self

    @property
    def running(self) -> bool:
        """Whether any burner process is alive."""
        return any(p.is_alive() for p in self._procs)

    @property
    def pids(self) -> list[int]:
        """Process ids of the burners (empty before ``start``)."""
        return [p.pid for p in self._procs if p.pid is not None]

    def cpu_seconds(self) -> float:
        """CPU time the burners have used so far (s), summed over the processes."""
        return math.fsum(c.value for c in self._cpu)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop and join every burner (terminate any that outlives ``timeout_s``)."""
        if self._stop is not None:
            self._stop.set()
        for p in self._procs:
            p.join(timeout_s)
            if p.is_alive():
                p.terminate()
                p.join(timeout_s)
        self._procs = []

    def __enter__(self) -> BackgroundLoad:
        return self.start() if not self._procs else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
