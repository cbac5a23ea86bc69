"""A streaming query killed inside a micro-batch and restarted replays exactly the same shedding;
the restart helpers (:mod:`spillway.spark.restart`) stop what they start.

Logical clock, one plan, a fixed capacity (so shedding happens and does not depend on measured
batch times) and the registered ``random`` policy: an uninterrupted run and a run whose query dies inside
micro-batch 2 (after Spark logged its offset) and restarts from the same checkpoint must give
identical results, SIC and decisions.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import SpillwayError
from spillway.spark.node import Node
from spillway.spark.restart import run_fresh, run_until

N_BATCHES = 6
COLUMNS = ["query", "window_start", "rank", "value", "sic", "n_in", "latency_s", "produced_at"]


def _config(checkpoint_dir):
    queries = tuple(
        QuerySpec(name=f"q{i}", kind="avg", feed="gaussian", rate=200.0 * (i + 1), window_s=0.5)
        for i in range(3)
    )
    return NodeConfig(
        queries=queries,
        trigger_s=0.5,
        stw_s=2.0,
        seed=5,
        policy="random",
        checkpoint_dir=str(checkpoint_dir),
    )


def _wait(node, plan, predicate, timeout_s=50.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if node.query_error(plan) is not None:
            return
        time.sleep(0.1)
    raise AssertionError("the streaming query did not get there in time")


def _done(node):
    return {b for p, b in node.store.batches() if p == "avg"} >= set(range(N_BATCHES))


def _node(spark, checkpoint_dir, on_batch=None):
    return Node(
        _config(checkpoint_dir),
        spark=spark,
        clock="logical",
        capacity_tuples_per_s=400,
        on_batch=on_batch,
    )


def _run(spark, checkpoint_dir, on_batch=None, restart=False):
    node = _node(spark, checkpoint_dir, on_batch)
    node.start()
    try:
        if restart:
            _wait(node, "avg", lambda: node.query_error("avg") is not None)
            assert "injected failure in batch 2" in node.query_error("avg")
            assert {b for _, b in node.store.batches()} == {0, 1}
            node.restart_plan("avg")
        _wait(node, "avg", lambda: _done(node))
        assert node.query_error("avg") is None
        results = node.results()
        history = node.history()[:N_BATCHES]
    finally:
        node.stop()
    batches = results.merge(node.store.to_pandas()[["batch_id"]], left_index=True, right_index=True)
    batches = batches[batches.batch_id < N_BATCHES]
    return batches.sort_values(["window_start", "query"]).reset_index(drop=True), history


@pytest.mark.spark
def test_restart_inside_batch_2_replays_identical_results_and_sic(spark, tmp_path):
    clean, clean_hist = _run(spark, tmp_path / "clean")

    failed = []

    def fail_once(plan, batch_id):
        if batch_id == 2 and not failed:
            failed.append(batch_id)
            raise RuntimeError("injected failure in batch 2")

    replayed, replayed_hist = _run(spark, tmp_path / "crash", on_batch=fail_once, restart=True)
    assert failed == [2]
    # The offset of batch 2 was logged before the failure, and the replay used it.
    assert (tmp_path / "crash" / "run" / "avg" / "offsets" / "2").exists()

    assert len(clean) == 3 * N_BATCHES  # one result per query and window
    # Every window kept at most the fixed capacity (400 tuples/s · 0.5 s) over its 3 queries.
    assert clean.groupby("window_start")["n_in"].sum().le(200).all()
    pd.testing.assert_frame_equal(clean[COLUMNS], replayed[COLUMNS])
    assert [r.admitted_tuples for r in clean_hist] == [r.admitted_tuples for r in replayed_hist]
    sic = [[r.query_sic[q] for q in sorted(r.query_sic)] for r in clean_hist]
    sic_replayed = [[r.query_sic[q] for q in sorted(r.query_sic)] for r in replayed_hist]
    np.testing.assert_array_equal(sic, sic_replayed)  # NaN (nothing processed yet) included
    # Shedding really happened: 600 tuples arrive per 0.5 s interval, 200 fit.
    assert all(r.admitted_tuples <= 200 < r.arrived_tuples for r in clean_hist)


@pytest.mark.spark
def test_a_query_stopped_inside_a_spark_job_stops_cleanly_and_replays_the_batch(spark, tmp_path):
    """Stopping a query while its batch runs a Spark job cancels the job. Spark must see that as
    the stop (status "Stopped", no exception), not die of a StackOverflowError in its check of
    the batch's long error text (docs/design.md, Known limits), and the restarted query replays
    the batch exactly once."""
    running = threading.Event()

    def slow_once(plan, batch_id):
        if batch_id == 2 and not running.is_set():
            running.set()  # a job of minutes, in the stream thread's job group: the stop cancels it
            spark.range(0, 1 << 40, numPartitions=2).selectExpr("max(id)").collect()

    node = _node(spark, tmp_path, slow_once)
    node.start()
    try:
        assert running.wait(60)
        time.sleep(1.0)  # the job's tasks run
        (q,) = [q for q in spark.streams.active if q.name.endswith(f"-{id(node):x}")]
        node.restart_plan("avg")
        assert (q.isActive, q.exception(), q.status["message"]) == (False, None, "Stopped")
        _wait(node, "avg", lambda: _done(node))
        assert node.query_error("avg") is None
        results = node.results()
    finally:
        node.stop()
    batches = results.merge(node.store.to_pandas()[["batch_id"]], left_index=True, right_index=True)
    batches = batches[batches.batch_id < N_BATCHES]
    assert len(batches) == 3 * N_BATCHES  # batch 2 replayed once: one result per query and window
    assert not batches.duplicated(["query", "window_start"]).any()


class _Node:
    """Just what :func:`run_until` touches of a node: start, stop, plans, query errors."""

    plans = ("user",)

    def __init__(self, error=None):
        self.error, self.started, self.stopped = error, False, False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True

    def query_error(self, plan):
        return self.error


def test_run_until_stops_the_node_once_done_and_on_every_failure():
    node = _Node()
    run_until(node, lambda: True, timeout_s=1)
    assert node.started and node.stopped
    node = _Node(error="boom")
    with pytest.raises(SpillwayError, match="plan 'user' failed: boom"):
        run_until(node, lambda: False, timeout_s=5)
    assert node.stopped
    node = _Node()
    with pytest.raises(SpillwayError, match="did not finish its work within 0.2 s"):
        run_until(node, lambda: False, timeout_s=0.2, poll_s=0.05)
    assert node.stopped


def test_run_fresh_kills_a_process_past_its_time():
    with pytest.raises(SpillwayError, match="did not end within 0.5 s"):
        run_fresh(["-c", "import time; time.sleep(30)"], timeout_s=0.5)
