"""A node's board: everything the live views show, gathered as the node runs.

:class:`NodeBoard` listens to a node (``node.observers``, :mod:`spillway.events`) and to the
driver's loop (:meth:`NodeBoard.tick` with each :class:`~spillway.status.NodeSnapshot`), and
hands out consistent, immutable :class:`BoardState` values to whoever shows them: the web
dashboard (:mod:`spillway.ui`), the Prometheus endpoint (:mod:`spillway.telemetry.prometheus`)
and the terminal view. It counts, per query and source, the tuples that arrived, were kept and
shed (run phase only: the capacity measurement's own tuples are not the workload's); keeps
histograms of result latency (one observation per result window) and of batch durations;
measures the capacity from batch time over the last STW (rows processed over seconds of
micro-batch, as the run report's ``capacity_measured_tuples_per_s``); follows the calibration
rounds as they happen; and keeps a bounded time series of the snapshots.

The phases a board goes through: ``starting`` (Spark starts), ``calibrating`` (the capacity
measurement, from its first event), ``running`` (from the run's first event or tick),
``done`` or ``failed``.

Examples
--------
>>> import numpy as np
>>> from spillway.events import BatchEvent, DecisionEvent
>>> from spillway.status import NodeSnapshot
>>> clock = iter(range(100)).__next__
>>> board = NodeBoard("node", queries=("a", "b"), stw_s=10.0, clock=lambda: float(clock()))
>>> board.state().phase
'starting'
>>> board.observe("run", DecisionEvent(t=1.0, queries=("a", "b"), lane_query=np.array([0, 1]),
...     lane_source=np.array([0, 0]), arrived=np.array([100, 50]), kept=np.array([40, 50])))
>>> board.observe("run", BatchEvent(plan="mixed", batch_id=1, rows=90, duration_s=0.5))
>>> board.tick(NodeSnapshot(t=1.0, capacity_tuples_per_s=100.0, processed_tuples_per_s=90.0,
...                         jain=1.0))
>>> s = board.state()
>>> s.phase, s.intervals, s.capacity_measured_tuples_per_s, len(s.series)
('running', 1, 180.0, 1)
>>> [(c.query, c.source, c.arrived, c.kept, c.shed) for c in s.counts]
[('a', 0, 100, 40, 60), ('b', 0, 50, 50, 0)]
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.events import BatchEvent, DecisionEvent, ResultsEvent
from spillway.status import CalibrationProgress, NodeSnapshot

#: Upper bounds (seconds) of the result latency histogram's buckets (+Inf added).
LATENCY_BUCKETS_S = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0)
#: Upper bounds (seconds) of the micro-batch duration histogram's buckets (+Inf added).
BATCH_BUCKETS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0)
#: The first measured batches of each calibration round start workers and generate code
#: (``spillway.spark.node.WARMUP_BATCHES``): they do not bound the capacity.
WARMUP_BATCHES = 2

PHASES = ("starting", "calibrating", "running", "done", "failed")


@dataclass(frozen=True, kw_only=True)
class Histogram:
    """Cumulative bucket counts (``counts[i]``: observations <= ``bounds[i]``, the last bucket
    +Inf), their sum and count: Prometheus's histogram."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float
    count: int


class _Hist:
    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.n = np.zeros(len(self.bounds) + 1, dtype=np.int64)  # per bucket, not cumulative
        self.total = 0.0

    def add(self, values: np.ndarray) -> None:
        values = values[np.isfinite(values)]
        if values.size:
            idx = np.searchsorted(self.bounds, values, side="left")
            self.n += np.bincount(idx, minlength=self.n.size)
            self.total += float(values.sum())

    def value(self) -> Histogram:
        cum = np.cumsum(self.n)
        return Histogram(
            bounds=self.bounds,
            counts=tuple(int(c) for c in cum),
            total=self.total,
            count=int(cum[-1]),
        )


@dataclass(frozen=True, kw_only=True)
class SourceCount:
    """Tuples of one (query, source) since the run began: arrived, kept and shed."""

    query: str
    source: int
    arrived: int
    kept: int

    @property
    def shed(self) -> int:
        """Tuples shed: arrived and not kept."""
        return self.arrived - self.kept


@dataclass(frozen=True, kw_only=True)
class SeriesPoint:
    """One tick of the time series: the snapshot's node figures and per-query SIC and kept
    share (in the board's query order), with the capacity measured from batch time; on a node
    with priority classes, per class (class 1 first) its kept share over the STW, p95 latency
    and manager's headroom (empty without classes)."""

    seq: int
    t: float
    capacity_tuples_per_s: float
    processed_tuples_per_s: float
    capacity_measured_tuples_per_s: float
    jain: float
    sic: tuple[float, ...]
    kept: tuple[float, ...]
    class_kept: tuple[float, ...] = ()
    class_latency_p95_s: tuple[float, ...] = ()
    class_headroom: tuple[float, ...] = ()


@dataclass(frozen=True, kw_only=True)
class BoardState:
    """One consistent reading of a board (see :class:`NodeBoard`)."""

    name: str
    phase: str
    version: int
    queries: tuple[str, ...]
    duration_s: float | None
    snapshot: NodeSnapshot | None
    calibration: CalibrationProgress | None
    capacity_measured_tuples_per_s: float
    intervals: int
    batches: int
    counts: tuple[SourceCount, ...]
    latency: Mapping[str, Histogram]
    batch_duration: Histogram
    series: tuple[SeriesPoint, ...]
    lines: tuple[str, ...]
    report: str | None = None
    error: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


class NodeBoard:
    """Gathers one node's live figures (see the module docstring); every method is
    thread-safe and quick.

    Parameters
    ----------
    name : the node's name (the ``node`` label of the metrics, the title of its panel).
    queries : the node's query names, in config order (query id ``i`` is ``queries[i]``).
    stw_s : the source time window: the capacity measured from batch time covers the batches
        of the last ``stw_s`` seconds.
    duration_s : the planned run length (for progress bars), if known.
    calibrate_s : the configured minimum calibration time (for progress bars).
    clock : monotonic seconds (injected for tests).
    max_points : the time series keeps the latest this many ticks.
    max_lines : the latest progress lines kept.
    info : constant facts shown beside the node (policy, master, ...).
    """

    def __init__(
        self,
        name: str,
        *,
        queries: Sequence[str],
        stw_s: float,
        duration_s: float | None = None,
        calibrate_s: float = math.nan,
        clock: Callable[[], float] = time.monotonic,
        max_points: int = 3600,
        max_lines: int = 50,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        if not (isinstance(name, str) and name):
            raise ConfigError(f"board name must be a non-empty string, got {name!r}")
        if not stw_s > 0:
            raise ConfigError(f"stw_s must be > 0, got {stw_s!r}")
        if not (isinstance(max_points, int) and max_points > 0):
            raise ConfigError(f"max_points must be a positive integer, got {max_points!r}")
        self.name = name
        self.queries = tuple(queries)
        self.stw_s = float(stw_s)
        self.duration_s = duration_s
        self.calibrate_s = calibrate_s
        self.info = dict(info or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._version = 0
        self._phase = "starting"
        self._snapshot: NodeSnapshot | None = None
        self._counts: dict[tuple[str, int], list[int]] = {}
        self._latency = {q: _Hist(LATENCY_BUCKETS_S) for q in self.queries}
        self._batch_hist = _Hist(BATCH_BUCKETS_S)
        self._recent: deque[tuple[float, int, float]] = deque()  # (clock, rows, duration)
        self._intervals = 0
        self._batches = 0
        self._series: deque[SeriesPoint] = deque(maxlen=max_points)
        self._seq = 0
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._report: str | None = None
        self._error: str | None = None
        # calibration
        self._cal_phase: str | None = None
        self._cal_start: float | None = None
        self._cal_round_batches: list[tuple[int, float]] = []
        self._cal_round_t: list[float] = []
        self._cal_round_arrived = 0
        self._cal_rounds: tuple[tuple[float, float], ...] = ()

    # ------------------------------------------------------------------ writers
    def observe(self, phase: str, event: Any) -> None:
        """A node observer (``node.observers.append(board.observe)``)."""
        with self._lock:
            if phase.startswith("calibrate"):
                self._observe_calibration(phase, event)
            elif phase == "run":
                if self._phase in ("starting", "calibrating"):
                    self._phase = "running"
                self._observe_run(event)
            self._version += 1

    def _observe_run(self, event: Any) -> None:
        if isinstance(event, DecisionEvent):
            self._intervals += 1
            for q, s, a, k in zip(
                event.lane_query.tolist(),
                event.lane_source.tolist(),
                np.asarray(event.arrived).tolist(),
                np.asarray(event.kept).tolist(),
                strict=True,
            ):
                c = self._counts.setdefault((event.queries[q], int(s)), [0, 0])
                c[0] += int(a)
                c[1] += int(k)
        elif isinstance(event, BatchEvent):
            self._batches += 1
            self._batch_hist.add(np.array([event.duration_s], dtype=np.float64))
            now = self._clock()
            self._recent.append((now, event.rows, event.duration_s))
            while self._recent and self._recent[0][0] < now - self.stw_s:
                self._recent.popleft()
        elif isinstance(event, ResultsEvent) and event.query_id.size:
            # one observation per (query, window): a TOP-5 window's rows share one latency
            keys = np.stack([event.query_id.astype(np.float64), event.window_start_s])
            _, first = np.unique(keys, axis=1, return_index=True)
            for q in np.unique(event.query_id[first]).tolist():
                if 0 <= q < len(self.queries):
                    mine = first[event.query_id[first] == q]
                    self._latency[self.queries[q]].add(event.latency_s[mine])

    def _observe_calibration(self, phase: str, event: Any) -> None:
        if self._phase == "starting":
            self._phase = "calibrating"
        if self._cal_start is None:
            self._cal_start = self._clock()
        if phase != self._cal_phase:  # a new round
            self._cal_phase = phase
            self._cal_round_batches = []
            self._cal_round_t = []
            self._cal_round_arrived = 0
        if isinstance(event, DecisionEvent):
            self._cal_round_t.append(event.t)
            self._cal_round_arrived += int(np.asarray(event.arrived).sum())
        elif isinstance(event, BatchEvent):
            self._cal_round_batches.append((event.rows, event.duration_s))

    def set_calibration_rounds(self, rounds: Sequence[Mapping[str, Any]]) -> None:
        """The finished calibration rounds (``Node.calibration_rounds``: ``rate`` and
        ``capacity_tuples_per_s`` of each)."""
        with self._lock:
            self._cal_rounds = tuple(
                (float(r.get("rate", math.nan)), float(r.get("capacity_tuples_per_s", math.nan)))
                for r in rounds
            )
            self._version += 1

    def tick(self, snapshot: NodeSnapshot) -> None:
        """The node's snapshot of this tick (the driver's ``on_tick``)."""
        with self._lock:
            if self._phase in ("starting", "calibrating"):
                self._phase = "running"
            self._snapshot = snapshot
            self._seq += 1
            by_name = {q.name: q for q in snapshot.queries}
            self._series.append(
                SeriesPoint(
                    seq=self._seq,
                    t=snapshot.t,
                    capacity_tuples_per_s=snapshot.capacity_tuples_per_s,
                    processed_tuples_per_s=snapshot.processed_tuples_per_s,
                    capacity_measured_tuples_per_s=self._measured(),
                    jain=snapshot.jain,
                    sic=tuple(by_name[n].sic if n in by_name else math.nan for n in self.queries),
                    kept=tuple(
                        by_name[n].kept_fraction if n in by_name else math.nan for n in self.queries
                    ),
                    class_kept=tuple(c.kept_fraction for c in snapshot.classes),
                    class_latency_p95_s=tuple(c.latency_p95_s for c in snapshot.classes),
                    class_headroom=tuple(c.headroom for c in snapshot.classes),
                )
            )
            self._version += 1

    def note(self, line: str) -> None:
        """One progress line (``spillway.progress``) to show beside the figures."""
        with self._lock:
            self._lines.append(str(line))
            self._version += 1

    def finish(
        self,
        snapshot: NodeSnapshot | None = None,
        *,
        report: str | None = None,
        error: str | None = None,
    ) -> None:
        """The run ended: its final snapshot, report folder and error (``failed`` phase)."""
        with self._lock:
            if snapshot is not None:
                self._snapshot = snapshot
            self._report = report
            self._error = error
            self._phase = "failed" if error else "done"
            self._version += 1

    # ------------------------------------------------------------------ readers
    @property
    def version(self) -> int:
        """Grows with every change (a reader redraws when it moved)."""
        return self._version

    def _measured(self) -> float:
        rows = sum(r for _, r, _ in self._recent)
        secs = sum(d for _, _, d in self._recent)
        return rows / secs if secs > 0 else math.nan

    def _calibration(self) -> CalibrationProgress | None:
        if self._cal_start is None:
            return None
        rates = [r / d for r, d in self._cal_round_batches[WARMUP_BATCHES:] if r > 0 and d > 0]
        span = (max(self._cal_round_t) - min(self._cal_round_t)) if self._cal_round_t else 0.0
        rounds = self._cal_rounds
        return CalibrationProgress(
            round=len(rounds) + (0 if self._phase != "calibrating" else 1),
            elapsed_s=self._clock() - self._cal_start,
            min_s=self.calibrate_s,
            arrival_rate=self._cal_round_arrived / span if span > 0 else math.nan,
            batches=len(self._cal_round_batches),
            largest_batch=max((r for r, _ in self._cal_round_batches), default=0),
            best_tuples_per_s=max(rates, default=math.nan),
            capacity_tuples_per_s=rounds[-1][1] if rounds else math.nan,
            rounds=rounds,
        )

    def state(self) -> BoardState:
        """A consistent, immutable reading of everything on the board."""
        with self._lock:
            return BoardState(
                name=self.name,
                phase=self._phase,
                version=self._version,
                queries=self.queries,
                duration_s=self.duration_s,
                snapshot=self._snapshot,
                calibration=self._calibration(),
                capacity_measured_tuples_per_s=self._measured(),
                intervals=self._intervals,
                batches=self._batches,
                counts=tuple(
                    SourceCount(query=q, source=s, arrived=c[0], kept=c[1])
                    for (q, s), c in sorted(
                        self._counts.items(), key=lambda kv: (self._order(kv[0][0]), kv[0][1])
                    )
                ),
                latency={q: h.value() for q, h in self._latency.items()},
                batch_duration=self._batch_hist.value(),
                series=tuple(self._series),
                lines=tuple(self._lines),
                report=self._report,
                error=self._error,
                info=dict(self.info),
            )

    def _order(self, query: str) -> int:
        return self.queries.index(query) if query in self.queries else len(self.queries)
