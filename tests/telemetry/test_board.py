"""NodeBoard: counts per source, histograms, measured capacity, calibration, phases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.events import BatchEvent, DecisionEvent, ResultsEvent
from spillway.status import NodeSnapshot, QueryStatus
from spillway.telemetry.board import LATENCY_BUCKETS_S, NodeBoard


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def decision(arrived: list[int], kept: list[int], t: float = 1.0) -> DecisionEvent:
    return DecisionEvent(
        t=t,
        queries=("a", "b"),
        lane_query=np.array([0, 0, 1]),
        lane_source=np.array([0, 1, 0]),
        arrived=np.array(arrived),
        kept=np.array(kept),
    )


def snapshot(t: float, sic: float = 0.5) -> NodeSnapshot:
    q = QueryStatus(
        name="a",
        kind="avg",
        arrival_rate=10.0,
        kept_fraction=0.5,
        sic=sic,
        latency_p95_s=1.0,
        latency_target_s=4.0,
        rows_in=10,
        rows_kept=5,
    )
    return NodeSnapshot(
        t=t, capacity_tuples_per_s=10.0, processed_tuples_per_s=9.0, jain=1.0, queries=(q,)
    )


def test_counts_add_up_per_query_and_source_in_the_run_only() -> None:
    board = NodeBoard("n", queries=("a", "b"), stw_s=10.0)
    board.observe("calibrate-0", decision([1000, 1000, 1000], [1000, 1000, 1000]))
    board.observe("run", decision([10, 20, 30], [5, 20, 0]))
    board.observe("run", decision([10, 0, 30], [10, 0, 3]))
    got = {(c.query, c.source): (c.arrived, c.kept, c.shed) for c in board.state().counts}
    assert got == {("a", 0): (20, 15, 5), ("a", 1): (20, 20, 0), ("b", 0): (60, 3, 57)}
    assert board.state().intervals == 2


def test_capacity_measured_from_the_batches_of_the_last_stw() -> None:
    clock = Clock()
    board = NodeBoard("n", queries=("a",), stw_s=10.0, clock=clock)
    assert math.isnan(board.state().capacity_measured_tuples_per_s)
    board.observe("run", BatchEvent(plan="p", batch_id=1, rows=1000, duration_s=1.0))
    clock.t = 5.0
    board.observe("run", BatchEvent(plan="p", batch_id=2, rows=3000, duration_s=1.0))
    assert board.state().capacity_measured_tuples_per_s == 2000.0
    clock.t = 12.0  # the first batch is older than the STW now
    board.observe("run", BatchEvent(plan="p", batch_id=3, rows=1000, duration_s=1.0))
    assert board.state().capacity_measured_tuples_per_s == 2000.0
    assert board.state().batch_duration.count == 3


def test_latency_histogram_counts_each_window_once() -> None:
    board = NodeBoard("n", queries=("a", "b"), stw_s=10.0)
    rows = pd.DataFrame(
        {
            "query_id": [1] * 5 + [0],
            "window_start": pd.to_datetime([10.0] * 5 + [10.0], unit="s", utc=True),
            "latency_s": [2.5] * 5 + [0.4],
        }
    )
    board.observe("run", ResultsEvent.from_frame("mixed", 7, rows))
    board.observe("calibrate-1", ResultsEvent.from_frame("mixed", 8, rows))  # not counted
    lat = board.state().latency
    assert (lat["a"].count, lat["b"].count) == (1, 1)
    assert lat["b"].total == 2.5 and lat["a"].total == 0.4
    i = LATENCY_BUCKETS_S.index(3.0)
    assert lat["b"].counts[i] == 1 and lat["b"].counts[i - 1] == 0


def test_phases_follow_the_node() -> None:
    board = NodeBoard("n", queries=("a",), stw_s=10.0)
    assert board.state().phase == "starting"
    board.observe("calibrate-0", BatchEvent(plan="p", batch_id=0, rows=1, duration_s=1.0))
    assert board.state().phase == "calibrating"
    board.tick(snapshot(1.0))
    assert board.state().phase == "running"
    board.finish(error="boom")
    assert board.state().phase == "failed" and board.state().error == "boom"
    board.finish(report="r.md")
    assert board.state().phase == "done" and board.state().report == "r.md"


def test_calibration_progress_of_the_round_under_way() -> None:
    clock = Clock()
    board = NodeBoard("n", queries=("a", "b"), stw_s=10.0, calibrate_s=20.0, clock=clock)
    assert board.state().calibration is None
    for k, rows in enumerate([50, 60, 1000, 4000, 2000]):
        board.observe("calibrate-0", decision([rows, 0, 0], [rows, 0, 0], t=float(k + 1)))
        board.observe("calibrate-0", BatchEvent(plan="p", batch_id=k, rows=rows, duration_s=0.5))
    clock.t = 8.0
    cal = board.state().calibration
    assert cal is not None
    assert (cal.round, cal.batches, cal.largest_batch) == (1, 5, 4000)
    assert cal.best_tuples_per_s == 8000.0  # the two warm-up batches left out
    assert cal.arrival_rate == pytest.approx(7110 / 4.0)
    assert math.isnan(cal.capacity_tuples_per_s) and cal.elapsed_s == 8.0
    board.set_calibration_rounds([{"rate": 1800.0, "capacity_tuples_per_s": 7000.0}])
    board.observe("calibrate-1", BatchEvent(plan="p", batch_id=0, rows=10, duration_s=1.0))
    cal = board.state().calibration
    assert cal is not None and (cal.round, cal.batches) == (2, 1)
    assert cal.capacity_tuples_per_s == 7000.0 and cal.rounds == ((1800.0, 7000.0),)


def test_series_keeps_the_latest_points() -> None:
    board = NodeBoard("n", queries=("a", "b"), stw_s=10.0, max_points=3)
    for t in range(5):
        board.tick(snapshot(float(t), sic=t / 10))
    series = board.state().series
    assert [p.seq for p in series] == [3, 4, 5]
    assert series[-1].sic[0] == 0.4 and math.isnan(series[-1].sic[1])  # b not in the snapshot


def test_version_grows_with_every_change() -> None:
    board = NodeBoard("n", queries=("a",), stw_s=10.0)
    v = board.version
    board.note("spillway: [1s] hello")
    assert board.version > v and board.state().lines == ("spillway: [1s] hello",)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": ""}, "board name must be a non-empty string"),
        ({"stw_s": 0.0}, "stw_s must be > 0"),
        ({"max_points": 0}, "max_points must be a positive integer"),
    ],
)
def test_bad_board_settings_are_refused(kwargs: dict[str, object], match: str) -> None:
    settings: dict[str, object] = {"name": "n", "queries": ("a",), "stw_s": 10.0, **kwargs}
    name = settings.pop("name")
    with pytest.raises(ConfigError, match=match):
        NodeBoard(name, **settings)  # type: ignore[arg-type]
