"""Node: controller + channel + one streaming query per plan + listener, end to end on Spark."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec, feed_seed
from spillway.errors import ConfigError, RunFailedError, SpillwayError
from spillway.spark.node import RESULT_COLUMNS, Node, plan_layout
from tests.spark.test_controller import RandomShare


def _queries(rate=300.0, window_s=0.5):
    return (
        QuerySpec(name="a0", kind="avg", feed="gaussian", rate=rate, window_s=window_s),
        QuerySpec(name="a1", kind="avg", feed="uniform", rate=2 * rate, window_s=window_s),
        QuerySpec(name="m0", kind="max", feed="gaussian", rate=rate, window_s=window_s),
    )


def _config(tmp_path, **kw):
    return NodeConfig(
        queries=_queries(), trigger_s=0.5, stw_s=2.0, seed=3, checkpoint_dir=str(tmp_path), **kw
    )


def test_plan_layout_and_seeds():
    cfg = NodeConfig(queries=_queries() + (QuerySpec(name="a2", kind="avg", feed="gaussian"),))
    layout = plan_layout(cfg)
    # ONE plan whatever the windows: every query keeps its own window inside it
    assert [(p.name, p.windows, p.kinds, p.query_ids) for p in layout] == [
        ("mixed", {0: 0.5, 1: 0.5, 2: 0.5, 3: 1.0}, {"avg": (0, 1, 3), "max": (2,)}, [0, 1, 2, 3])
    ]
    assert [p.name for p in plan_layout(NodeConfig(queries=_queries()))] == ["mixed"]
    assert [p.name for p in plan_layout(NodeConfig(queries=_queries()[:2]))] == ["avg"]
    assert len({feed_seed(3, i) for i in range(100)}) == 100


def test_node_argument_errors():
    cfg = NodeConfig(queries=_queries())
    with pytest.raises(ConfigError, match="config must be a NodeConfig"):
        Node({"queries": []})
    with pytest.raises(ConfigError, match="clock must be 'wall', 'logical' or a callable"):
        Node(cfg, clock="sundial")
    with pytest.raises(ConfigError, match="capacity_tuples_per_s must be a number >= 0"):
        Node(cfg, capacity_tuples_per_s=-5)
    with pytest.raises(ConfigError, match="log_level must be a Spark log level name or None"):
        Node(cfg, log_level="")
    with pytest.raises(SpillwayError, match="the node is not started"):
        Node(cfg).history()
    with pytest.raises(ConfigError, match="keep_source_mass must be True or False, got 'yes'"):
        Node(cfg, keep_source_mass="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cost_states must map plan names to CostModelState"):
        Node(cfg, cost_states={"avg": 0.5})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="cost_states must be a mapping or None, got list"):
        Node(cfg, cost_states=[])  # type: ignore[arg-type]


def test_a_node_starts_from_the_cost_states_it_is_given():
    from spillway.control import CostModelConfig, initial_state

    state = initial_state(CostModelConfig(prior_overhead_s=0.3, prior_per_tuple_s=2e-6))
    node = Node(NodeConfig(queries=_queries()), cost_states={"avg": state})
    assert node.cost_states == {"avg": state}
    assert Node(NodeConfig(queries=_queries())).cost_states == {}


def _wait_batches(node, n, timeout_s=45.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = {p: {b for q, b in node.store.batches() if q == p} for p in node.plans}
        if all(len(v) >= n for v in done.values()):
            return
        for p in node.plans:
            assert node.query_error(p) is None
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} batches per plan within {timeout_s} s")


@pytest.mark.spark
def test_wall_clock_node_runs_sheds_and_reports(spark, tmp_path):
    node = Node(_config(tmp_path), spark=spark, capacity_tuples_per_s=1000)  # balance-sic
    node.start()  # returns once every plan's source is connected: feed time starts then
    try:
        assert node.plans == ["mixed"]  # ONE streaming query for both kinds
        assert node.controller.plans_asked() == {"mixed"}
        _wait_batches(node, 4)
        snap = node.snapshot()
        hist = node.history()
        results = node.results()
    finally:
        node.stop()
    assert [q.name for q in snap.queries] == ["a0", "a1", "m0"]
    assert snap.policy == "balance-sic"
    # 1000/s · 0.5 s per decision; a decision that covers several intervals (the node fell
    # behind during Spark's slow first batches) still gets one interval's capacity
    assert {r.capacity_tuples for r in hist} == {500.0}
    assert 0 < snap.capacity_tuples_per_s <= 1000.0 + 1e-6
    assert 0 < snap.processed_tuples_per_s <= snap.capacity_tuples_per_s + 1e-6
    assert 0 < snap.jain <= 1 + 1e-12 and snap.t > 1.0
    a0, a1, _ = snap.queries
    # arrival rates are measured per slide over the STW: a1 gets twice a0's 300 tuples/s
    assert a1.arrival_rate == pytest.approx(600, rel=0.15)
    assert a0.arrival_rate == pytest.approx(300, rel=0.15)
    # 1,200 tuples/s arrive and 1,000 fit: the node sheds, and never keeps above capacity
    assert 0 < a1.kept_fraction < 1 and a1.rows_kept <= a1.rows_in
    assert all(r.admitted_tuples <= 500 for r in hist)  # 1000/s · 0.5 s
    assert any(r.admitted_tuples < r.arrived_tuples for r in hist)
    done = [r for r in hist if r.processed_tuples > 0]
    assert done and all(r.batch_s > 0 for r in done)
    latencies = [v for r in hist for v in r.query_latency_s.values()]
    assert latencies and min(latencies) > 0  # results attributed to the interval they ended in
    # Spark processed what was admitted (decisions still in flight at stop are not counted)
    assert sum(r.processed_tuples for r in hist) <= sum(r.admitted_tuples for r in hist)
    assert node.controller.batches("mixed")  # the listener fed the cost model
    assert list(results.columns) == list(RESULT_COLUMNS)
    assert set(results["query"]) == {"a0", "a1", "m0"}
    assert results.groupby("query")["kind"].first().to_dict() == {
        "a0": "avg",
        "a1": "avg",
        "m0": "max",
    }
    # every batch evaluated both kinds: one store entry per batch of the one plan
    assert {p for p, _ in node.store.batches()} == {"mixed"}
    assert (results["latency_s"] > 0).all() and (results["sic"] > 0).all()
    assert (snap.queries[0].latency_p95_s > 0) and snap.queries[0].sic > 0


def test_run_ticks_and_always_stops(monkeypatch):
    node = Node(NodeConfig(queries=_queries()))
    calls = []
    monkeypatch.setattr(node, "start", lambda: calls.append("start"))
    monkeypatch.setattr(node, "stop", lambda: calls.append("stop"))
    monkeypatch.setattr(node, "snapshot", lambda: "snap")
    ticks = []
    node.run(0.35, on_tick=ticks.append, tick_s=0.1)
    assert calls == ["start", "stop"] and 3 <= len(ticks) <= 4 and set(ticks) == {"snap"}

    def boom(_):
        raise RuntimeError("tick failed")

    with pytest.raises(RuntimeError, match="tick failed"):
        node.run(1.0, on_tick=boom, tick_s=0.05)
    assert calls[-1] == "stop"
    with pytest.raises(ConfigError, match="duration_s and tick_s must be > 0"):
        node.run(0)
    # after-run work: once the streaming queries stopped (halt), before the channel stops
    calls.clear()
    monkeypatch.setattr(node, "halt", lambda: calls.append("halt"))
    node.run(0.1, tick_s=0.05, before_stop=lambda n: calls.append(("after", n is node)))
    assert calls == ["start", "halt", ("after", True), "stop"]


@pytest.mark.spark
def test_unshed_results_equal_the_exact_answers(spark, tmp_path):
    node = Node(
        _config(tmp_path),
        spark=spark,
        clock="logical",
        policy=RandomShare(seed=1),
        capacity_tuples_per_s=1e9,
    )
    node.start()
    try:
        _wait_batches(node, 4)
        shed = node.results()
        exact = node.exact_results(until_s=2.0)
    finally:
        node.stop()
    shed = shed[shed.window_start < shed.window_start.min() + np.timedelta64(2, "s")]
    key = ["query", "window_start", "rank"]
    shed = shed.sort_values(key).reset_index(drop=True)
    exact = exact.sort_values(key).reset_index(drop=True)
    assert len(exact) == 3 * 4  # 3 queries, four 0.5 s windows
    assert shed[key].equals(exact[key])
    assert shed["n_in"].tolist() == exact["n_in"].tolist()
    assert np.allclose(shed["value"], exact["value"])
    assert exact["latency_s"].isna().all()
    # Eq. 1 stamps: both runs give a window about 0.5 s / 2 s STW of its query's SIC
    assert np.allclose(exact["sic"], 0.25, rtol=0.1)
    assert np.allclose(shed["sic"], 0.25, rtol=0.1)


def test_calibration_rounds_measure_again_near_an_extrapolated_capacity(monkeypatch):
    from dataclasses import replace

    from spillway.control import initial_state
    from spillway.spark.controller import DEFAULT_COST_MODEL

    cfg = NodeConfig(queries=_queries(), trigger_s=1.0, overload=2.0)  # 1,200 tuples/s in all
    node = Node(cfg)
    assert node.plans == ["mixed"]
    fits = iter([(0.4, 1e-9), (0.4, 1e-5), (0.4, 2e-5), (0.4, 2e-5)])  # per round (o, k)
    scales = []

    def fake_round(phase, min_s, vary=True):
        # what the batches really cost: 0.4 s + 2e-5 s a row; two warm-up batches first; sizes
        # varied (1, 2, 1, 3 intervals of arrivals) unless told to keep one interval a batch
        scales.append(node.rate_scale)
        rate = 1200.0 * node.rate_scale
        gaps = (1, 2, 1, 3) if vary else (1, 1, 1, 1)
        rows = [1, 1] + [int(round(rate * g)) for g in gaps]
        batches = [{"rows": n, "duration_s": 0.4 + 2e-5 * n} for n in rows]
        overhead, per_tuple = next(fits)
        st = replace(initial_state(DEFAULT_COST_MODEL), overhead_s=overhead, per_tuple_s=per_tuple)
        return {"mixed": st}, batches

    monkeypatch.setattr(node, "_calibration_round", fake_round)
    node._calibrate()
    # Round 1's fit extrapolates an operating point of 0.4 s / 1e-9 s = 4e8 rows; its batches
    # (up to 3,600 rows) stayed far below, so round 2 runs 20x faster (the step limit). Round 2
    # fits 40,000 rows and its largest batch (72,000) passed it: the fit is local, so round 3
    # runs at 40,000/s with one interval a batch. Its fit says 20,000 rows and its batches are
    # 40,000: round 4 runs at 20,000/s, and its batches of 20,000 rows (0.8 s each) measure the
    # capacity itself: 25,000 rows per second of batch time.
    assert scales == pytest.approx([1.0, 20.0, 40_000 / 1200, 20_000 / 1200])
    cal = node.calibration
    rounds = cal["rounds"]
    assert [r["rate"] for r in rounds] == pytest.approx([1200.0, 24_000.0, 40_000.0, 20_000.0])
    assert rounds[0]["capacity_tuples_per_s"] == pytest.approx(3600 / 0.472)  # the best batch
    assert [r["batches_at_operating_point"] for r in rounds] == [0, 1, 0, 4]
    assert cal["capacity_tuples_per_s"] == pytest.approx(20_000 / 0.8)
    assert cal["reached_operating_point"] is True
    assert node.rate_scale == pytest.approx(2.0 * cal["capacity_tuples_per_s"] / 1200.0)

    node = Node(cfg)
    monkeypatch.setattr(
        node,
        "_calibration_round",
        lambda phase, min_s, vary=True: (
            {"mixed": replace(initial_state(DEFAULT_COST_MODEL), overhead_s=4.0)},
            [{"rows": 100, "duration_s": 4.0}] * 6,
        ),
    )
    with pytest.raises(RunFailedError, match=r"fixed cost of a micro-batch \(4.00 s\) fills"):
        node._calibrate()


@pytest.mark.spark
def test_overload_calibration_scales_rates_to_the_measured_capacity(spark, tmp_path):
    # An AVG plan processes millions of rows/s here; calibrating far below that would take
    # several rounds (see the unit test above), so the configured rate is already high. A 3 s
    # trigger keeps the fixed cost of a micro-batch well inside the budget on a loaded machine.
    T = 3.0
    queries = (
        QuerySpec(name="a0", kind="avg", feed="gaussian", rate=200_000.0, window_s=T),
        QuerySpec(name="a1", kind="avg", feed="uniform", rate=100_000.0, window_s=T),
    )
    cfg = NodeConfig(
        queries=queries,
        trigger_s=T,
        stw_s=2 * T,
        overload=3.0,
        calibrate_s=1.0,
        checkpoint_dir=str(tmp_path),
    )
    node = Node(cfg, spark=spark, policy=RandomShare(seed=2))
    node.calibration_min_batches = 4
    node.start()
    try:
        _wait_batches(node, 2)
        cal = node.calibration
        hist = node.history()
        snap = node.snapshot()
    finally:
        node.stop()
    assert all(r["batches"] >= 4 for r in cal["rounds"])  # batches of varied size each round
    assert cal["configured_rate"] == pytest.approx(300_000.0)
    last = cal["rounds"][-1]
    assert cal["reached_operating_point"] or len(cal["rounds"]) == 5
    assert last["per_tuple_s"] > 1e-8  # identified, not the floor of the cost model
    # the capacity is measured on the round's batches near the operating point (a batch filling
    # headroom x T) when two or more got there, else the fit's operating point; never above the
    # best batch the round measured
    assert cal["capacity_tuples_per_s"] <= last["best_batch_tuples_per_s"] + 1e-9
    op = (0.8 * T - last["overhead_s"]) / last["per_tuple_s"]
    assert last["operating_rows"] == pytest.approx(op)
    if last["batches_at_operating_point"] >= 2:  # measured on batches near the operating point
        assert 0 < cal["capacity_tuples_per_s"] <= last["best_batch_tuples_per_s"] + 1e-9
    else:  # else the fit's, bounded by the best batch
        assert cal["capacity_tuples_per_s"] == pytest.approx(
            min(op / (0.8 * T), last["best_batch_tuples_per_s"])
        )
    assert cal["target_rate"] == pytest.approx(3.0 * cal["capacity_tuples_per_s"])
    assert node.rate_scale == pytest.approx(cal["target_rate"] / 300_000.0)
    # 3x overload: after calibration the node runs at the scaled rates and sheds
    arrived_per_s = sum(q.arrival_rate for q in snap.queries)
    assert arrived_per_s == pytest.approx(cal["target_rate"], rel=0.1)
    assert any(r.admitted_tuples < r.arrived_tuples for r in hist)


@pytest.mark.spark
def test_a_group_avg_query_on_the_taxi_feed_gives_per_route_rows(spark, tmp_path):
    from spillway.spark.exact import error_summary

    taxi = {"n_routes": 10, "pool_routes": 20, "pool_share": 0.3}  # 30 routes
    queries = (
        QuerySpec(name="fares", kind="group_avg", feed="taxi", rate=600.0, feed_options=taxi),
        QuerySpec(name="a0", kind="avg", feed="gaussian", rate=200.0),
    )
    cfg = NodeConfig(
        queries=tuple(replace(q, window_s=0.5) for q in queries),
        trigger_s=0.5,
        stw_s=2.0,
        seed=3,
        checkpoint_dir=str(tmp_path),
    )
    # 800 tuples/s arrive, 400 fit: about half of every lane is shed
    node = Node(
        cfg, spark=spark, clock="logical", policy=RandomShare(seed=1), capacity_tuples_per_s=400
    )
    node.start()
    try:
        _wait_batches(node, 4)
        shed = node.results()
        exact = node.exact_results(until_s=2.0)
    finally:
        node.stop()
    assert list(shed.columns) == list(RESULT_COLUMNS) == list(exact.columns)
    assert node.plans == ["mixed"]
    fares, fares_exact = shed[shed["query"] == "fares"], exact[exact["query"] == "fares"]
    assert fares["kind"].eq("group_avg").all() and fares["key"].notna().all()
    assert shed.loc[shed["query"] == "a0", "key"].isna().all()
    # one row per route present in the window: 150 rides of 30 routes before shedding
    assert not fares.duplicated(["window_start", "key"]).any()
    assert fares.groupby("window_start")["key"].nunique().between(15, 30).all()
    assert fares_exact.groupby("window_start")["key"].nunique().between(25, 30).all()
    assert (fares["value"] > 0).all() and fares["rank"].eq(1).all()
    # the window's SIC (about half of 0.5 s / 2 s) is shared evenly by its route rows
    sic = fares.groupby("window_start")["sic"]
    assert (sic.nunique() == 1).all() and sic.sum().between(0.05, 0.2).all()
    assert fares_exact.groupby("window_start")["sic"].sum().to_numpy() == pytest.approx(
        0.25, rel=0.1
    )
    both = fares_exact[fares_exact["window_start"].isin(set(fares["window_start"]))]
    s = error_summary(fares.assign(query_id=0), both.assign(query_id=0), "group_avg").iloc[0]
    assert s["windows"] >= 3 and s["missing"] == 0
    assert 0 < s["error"] < 0.5 and 0 <= s["missing_groups"] < s["groups"]


@pytest.mark.spark
def test_an_unshed_query_reads_sic_1_and_never_above(spark, tmp_path):
    # One MAX query on the uniform feed with every default (1 s trigger, 10 s STW): its SIC
    # once read 1.1-1.4 (results counted by production time, a burst of windows at start).
    cfg = NodeConfig(
        queries=(QuerySpec(name="m", kind="max", feed="uniform"),), checkpoint_dir=str(tmp_path)
    )
    node = Node(cfg, spark=spark)
    node.run(16.0)
    hist = node.history()
    sic = np.array([r.query_sic["m"] for r in hist])
    assert np.nanmax(sic) <= 1.02
    assert all(r.query_admitted["m"] == r.query_arrived["m"] for r in hist)  # nothing shed
    filled = [s for r, s in zip(hist, sic, strict=True) if r.t - hist[0].t >= 10.0]
    assert filled and np.allclose(filled, 1.0, atol=0.02)


@pytest.mark.spark
def test_queries_with_half_one_and_five_second_windows_all_get_results(spark, tmp_path):
    # Once one streaming query per window length: three on two cores, the 5 s one starved.
    from spillway.run_report import summarise_run

    queries = (
        QuerySpec(name="a05", kind="avg", feed="gaussian", window_s=0.5),
        QuerySpec(name="m1", kind="max", feed="uniform", window_s=1.0),
        QuerySpec(name="a5", kind="avg", feed="gaussian", window_s=5.0),
    )
    cfg = NodeConfig(queries=queries, stw_s=10.0, checkpoint_dir=str(tmp_path))
    node = Node(cfg, spark=spark)
    assert node.plans == ["mixed"]
    node.run(17.0)
    res = node.results()
    summary = summarise_run(
        config=cfg,
        history=node.history(),
        snapshot=node.snapshot(),
        results=res,
        duration_s=17.0,
    )
    by_name = {q["name"]: q for q in summary["queries"]}
    assert by_name["a5"]["windows"] >= 2 and by_name["a05"]["windows"] >= 20
    for q in by_name.values():
        assert q["rows_in"] > 0 and q["kept_fraction"] == q["rows_kept"] / q["rows_in"]
    # every 5 s window starts on a multiple of 5 s (windows are aligned in Unix time)
    starts = res[res["query"] == "a5"]["window_start"].map(pd.Timestamp.timestamp)
    assert (starts % 5.0 == 0).all()


@pytest.mark.spark
def test_a_load_manager_decides_the_drop_from_what_spark_measured(spark, tmp_path):
    # Aurora with a headroom far below the measured load: it sheds L − H every interval
    cfg = _config(tmp_path, load_manager="aurora", load_manager_options={"capacity": 0.05})
    node = Node(cfg, spark=spark)
    node.start()
    try:
        _wait_batches(node, 4)
        recs = list(node.controller.load_control.records)
        hist = node.history()
    finally:
        node.stop()
    assert node.controller.load_control.target_s == 1.5  # 3 intervals of 0.5 s
    assert recs and all(r["load"] > 0.05 for r in recs if r["arrived"])
    shed = [r for r in recs if r["drop"] > 0]
    assert shed and all(r["drop"] == pytest.approx(1 - 0.05 / r["load"]) for r in shed)
    assert any(r.admitted_tuples < r.arrived_tuples for r in hist)
    timed = [r for r in recs if r["response_time_s"] is not None]
    assert timed and all(0 < r["response_time_s"] < 60 for r in timed)  # arrival → result
