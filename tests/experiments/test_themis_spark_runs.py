"""run_level on a real (small) spillway Node: shed results, exact answers and their points."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.experiments import sic_correlation as sc
from spillway.experiments._spark_runs import (
    KEEP_ALL,
    LevelRun,
    at_rate,
    check_levels,
    check_positive,
    closed_windows,
    exact_span,
    feed_seconds,
    input_rate,
    measure_capacity,
    measured_overload,
    run_level,
)
from spillway.policies import make_policy
from spillway.status import IntervalRecord


def test_validators_name_the_setting():
    with pytest.raises(ConfigError, match="tick_s must be a finite number > 0, got nan"):
        check_positive("tick_s", math.nan)
    with pytest.raises(ConfigError, match="levels must be strictly increasing"):
        check_levels("levels", "123")
    assert check_positive("warmup_s", 0, allow_zero=True) == 0.0


def test_feed_seconds_from_utc_timestamps():
    ts = pd.to_datetime([1_700_000_000.5], unit="s", utc=True)
    assert feed_seconds(ts, 1_700_000_000.0).tolist() == [0.5]


def _two_queries(rate: float = 400.0) -> NodeConfig:
    return NodeConfig(
        queries=(
            QuerySpec(name="avg", kind="avg", feed="gaussian", rate=rate),
            QuerySpec(name="count", kind="count", feed="uniform", rate=3 * rate),
        ),
        policy="random",
        seed=1,
        stw_s=10.0,
        overload=2.0,
    )


def test_at_rate_scales_every_query_to_the_total_and_drops_the_calibration():
    node = at_rate(_two_queries(), 8000.0)
    assert [q.rate for q in node.queries] == [2000.0, 6000.0]
    assert input_rate(node) == 8000.0 and node.overload is None
    with pytest.raises(ConfigError, match="rate must be a finite number > 0, got 0"):
        at_rate(_two_queries(), 0.0)


def _run(history: list[IntervalRecord]) -> LevelRun:
    return LevelRun(
        results=pd.DataFrame(), exact=None, ticks=pd.DataFrame(), history=history,
        until_s=0.0, epoch_s=0.0, ready_s=0.0, wall_s=1.0,
    )  # fmt: skip


def test_measured_overload_reads_the_batches_not_the_config():
    def rec(t: float, processed: int, batch_s: float) -> IntervalRecord:
        return IntervalRecord(t=t, capacity_tuples=0.0, arrived_tuples=1000,
                              admitted_tuples=processed, processed_tuples=processed,
                              batch_s=batch_s)  # fmt: skip

    # 1000 tuples/s arrive; the batches process 250 rows in 0.5 s: 500/s, so 2x overloaded
    m = measured_overload(_run([rec(float(t), 250, 0.5) for t in range(10)]), from_s=0.0)
    assert m["overload_measured"] == pytest.approx(2.0)
    assert m["kept_fraction"] == pytest.approx(0.25)
    # a node that keeps up (batches of 1000 rows in 0.4 s) is not overloaded, whatever it was told
    assert measured_overload(_run([rec(float(t), 1000, 0.4) for t in range(10)]), from_s=0.0)[
        "overload_measured"] == pytest.approx(0.4)  # fmt: skip
    # intervals before from_s do not count; nothing measured is NaN, not 0
    assert math.isnan(measured_overload(_run([rec(1.0, 0, 0.0)]), from_s=0.0)["overload_measured"])
    assert math.isnan(measured_overload(_run([rec(1.0, 9, 1.0)]), from_s=5.0)["kept_fraction"])


@pytest.mark.spark
def test_measured_capacity_overloads_the_node_and_the_exact_span_is_the_tail(spark):
    node = _two_queries()
    cal = measure_capacity(node, spark=spark, calibrate_s=4.0)
    cap = cal["capacity_tuples_per_s"]
    assert cap > 0 and cal["rounds"]
    assert not spark.streams.active  # the calibration node was stopped
    run = run_level(
        at_rate(node, 2.0 * cap),
        spark=spark,
        duration_s=6.0,
        policy=make_policy("random", seed=1),
        exact=True,
        exact_span_s=3.0,
    )
    measured = measured_overload(run, from_s=run.ready_s)
    assert measured["kept_fraction"] < 0.8  # twice the measured capacity arrives: it sheds
    assert measured["overload_measured"] > 1.0
    assert run.exact is not None and len(run.exact)
    assert run.exact["t"].min() >= run.until_s - 3.0  # feed time of the window start
    assert run.exact["t"].max() < run.until_s


@pytest.mark.spark
def test_run_level_sheds_and_compares_with_the_exact_answers():
    from spillway.testing import local_spark

    spark = local_spark("spillway-tests")
    cases = [
        sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0),
        sc.Case(kind="count", dataset="uniform", sources=1, rate=400.0),
    ]
    queries = tuple(
        QuerySpec(name=c.label, kind=c.kind, feed=c.dataset, sources=1, rate=c.rate) for c in cases
    )
    node = NodeConfig(queries=queries, policy="random", seed=1, stw_s=10.0)
    run = run_level(
        node,
        spark=spark,
        duration_s=5.0,
        policy=make_policy("random", seed=1),
        capacity_tuples_per_s=400.0,  # half the arrivals: SIC about 0.5 or less
        exact=True,
    )
    assert run.exact is not None and run.until_s > run.ready_s > 0
    assert set(run.results["kind"]) == {"avg", "count"}
    assert run.results.groupby(["query_id", "window_start", "rank"]).size().max() == 1
    assert not spark.streams.active  # the node's streaming queries were stopped
    ticks = run.ticks[run.ticks["t"] >= run.ready_s]
    assert len(ticks) >= 2 * 3 and ticks["kept_fraction"].max() < 0.8
    windows = sc.level_windows(
        run.results, run.exact, cases, level=1, stw_s=10.0, window_s=1.0, warmup_s=run.ready_s
    )
    by = {p["case"]: p for p in sc.aggregate(windows)}
    assert set(by) == {"avg/gaussian", "count/uniform"}
    count = by["count/uniform"]
    assert 0.0 < count["sic"] < 0.8
    # A COUNT over a random share of the tuples misses the rest: error about 1 - SIC.
    assert count["error"] == pytest.approx(1.0 - count["sic"], abs=0.15)
    assert by["avg/gaussian"]["error"] < count["error"]


def test_exact_span_and_closed_windows():
    assert exact_span([126.0, 124.0, math.nan], 30.0) == (96.0, 126.0)
    assert exact_span([], None) == (0.0, 0.0)
    rows = pd.DataFrame({"query": ["a", "a", "b", "c"], "window_end_feed_s": [2.0, 4.0, 4.0, 2.0]})
    kept = closed_windows(rows, {"a": 4.0, "b": 2.0, "c": math.nan})
    assert kept[["query", "window_end_feed_s"]].values.tolist() == [["a", 2.0], ["a", 4.0]]


def _count_and_mean(rows):
    from pyspark.sql import functions as F

    return rows.groupBy("window_start").agg(
        F.count(F.lit(1)).alias("n"), F.avg("value").alias("mean")
    )


@pytest.mark.spark
def test_a_run_that_sheds_nothing_has_a_result_for_every_window_it_scores(spark):
    """Nothing shed: every window with an exact answer has its streamed result, equal to it.

    The run is stopped 20-30 ms after a trigger fired, while that trigger's batch runs. Before
    the fix the exact answers reached the feed time at the stop, the streaming queries were
    stopped mid-batch, and the window ending at that trigger had an exact answer and no
    result: a loss of 1.0 in a run that shed nothing (the last window of kafka-overload)."""
    queries = (
        QuerySpec(name="avg", kind="avg", feed="gaussian", rate=200.0),
        QuerySpec(name="mine", kind="user", feed="uniform", rate=200.0, window_s=1.0,
                  function=_count_and_mean),
    )  # fmt: skip
    node = NodeConfig(queries=queries, seed=1, stw_s=5.0, trigger_s=1.0)

    def just_after_a_trigger(t: float) -> None:  # t: feed time; triggers at whole seconds
        time.sleep(math.floor(t) + 1.02 - t)

    run = run_level(node, spark=spark, duration_s=4.0, tick_s=4.0, exact=True,
                    capacity_tuples_per_s=KEEP_ALL, on_tick=just_after_a_trigger)  # fmt: skip
    assert run.exact is not None
    key = ["query_id", "window_start", "rank"]
    both = run.exact.merge(run.results, on=key, how="left", suffixes=("", "_shed"))
    assert len(both) >= 4 and both["value_shed"].notna().all(), both[["t", "value_shed"]]
    assert np.allclose(both["value_shed"], both["value"], rtol=1e-9)
    mine = run.user_exact["mine"].merge(run.user["mine"], on="window_start", how="left",
                                        suffixes=("", "_shed"))  # fmt: skip
    assert len(mine) >= 4 and (mine["n_shed"] == mine["n"]).all(), mine
    # the scored windows end by the last one the finished batches closed, before the stop
    assert set(run.closed_s) == {"avg", "mine"}
    assert all(run.until_s >= c and c <= run.stopped_s for c in run.closed_s.values())
    assert both["window_end_feed_s"].max() <= run.closed_s["avg"] + 1e-3
