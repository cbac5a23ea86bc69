"""A node's observers and Spark's progress: every decision, batch and result is seen, and
spillway's figures are in each micro-batch's StreamingQueryProgress."""

from __future__ import annotations

import time

import pytest

from spillway.events import BatchEvent, DecisionEvent, ResultsEvent
from spillway.spark.node import Node
from spillway.spark.observed import OBSERVATION, metric_names
from spillway.telemetry import NodeBoard
from tests.spark.test_node import _config, _wait_batches


@pytest.mark.spark
def test_observers_see_the_run_and_progress_carries_spillways_figures(spark, tmp_path):
    cfg = _config(tmp_path)
    names = tuple(q.name for q in cfg.queries)
    events: list[tuple[str, object]] = []
    board = NodeBoard("node", queries=names, stw_s=cfg.stw_s)
    node = Node(cfg, spark=spark, capacity_tuples_per_s=600)  # overloaded: it sheds
    node.observers += [lambda phase, ev: events.append((phase, ev)), board.observe]
    node.start()
    try:
        _wait_batches(node, 4)
        (query,) = [q for q in spark.streams.active if q.name and q.name.startswith("spillway-")]
        deadline = time.monotonic() + 30
        progress = query.lastProgress
        while not (progress is not None and progress.numInputRows > 0):
            assert time.monotonic() < deadline, "no micro-batch with rows in 30 s"
            time.sleep(0.2)
            progress = query.lastProgress
    finally:
        node.stop()
    hist = node.controller.history()  # every decision, now that the node has stopped

    observed = progress.observedMetrics[OBSERVATION]
    assert list(observed.asDict()) == metric_names(names)
    assert observed["admitted_rows"] == progress.numInputRows
    assert sum(observed[f"rows:{n}"] for n in names) == progress.numInputRows
    assert 0 < observed["admitted_sic"] <= len(names)
    assert observed["oldest_event_ts"] <= observed["newest_arrival_ts"]

    assert {phase for phase, _ in events} == {"run"}
    decisions = [ev for _, ev in events if isinstance(ev, DecisionEvent)]
    assert len(decisions) == len(hist) > 0
    assert any(isinstance(ev, BatchEvent) and ev.rows > 0 for _, ev in events)
    results = [ev for _, ev in events if isinstance(ev, ResultsEvent)]
    assert results and all((ev.latency_s > 0).all() for ev in results)

    # the board's per-source counts add up to the controller's per-query records
    state = board.state()
    recorded = {n: sum(r.query_arrived[n] for r in hist) for n in names}
    counted = {n: sum(c.arrived for c in state.counts if c.query == n) for n in names}
    kept = {n: sum(r.query_admitted[n] for r in hist) for n in names}
    counted_kept = {n: sum(c.kept for c in state.counts if c.query == n) for n in names}
    assert counted == recorded and counted_kept == kept
    assert sum(c.shed for c in state.counts) > 0  # 600 t/s for 1,200 arriving
    assert {c.source for c in state.counts} == {0}
