"""ResultSink / ResultStore: stamps, latency, CSV mirror, idempotence under a replayed batch."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.spark.coordinator import QueryCoordinator
from spillway.spark.sink import STORE_COLUMNS, ResultSink, ResultStore
from spillway.testing import ManualClock
from tests.spark.test_queries import frame

pytestmark = pytest.mark.spark

T0 = 1_700_000_000.0  # Unix seconds: arrival times are feed time + the node's start epoch


def batch(spark, rows):
    return frame(spark, [(q, s, k, v, sic, T0 + t) for q, s, k, v, sic, t in rows])


def test_sink_stamps_latency_and_a_replayed_batch_replaces_its_rows(spark, tmp_path):
    rows = [(0, 0, 0, 10.0, 0.5, 0.2), (0, 0, 0, 30.0, 0.5, 0.7), (1, 0, 0, 7.0, 0.5, 0.4)]
    clock = ManualClock(T0 + 1.5)
    store = ResultStore(csv_path=tmp_path / "results.csv")
    coord = QueryCoordinator(n_queries=2, stw_s=10.0, slide_s=1.0)
    sink = ResultSink("avg", 1.0, store, coord, clock)
    sink(batch(spark, rows), 0)
    clock.advance(5.0)
    sink(batch(spark, rows), 0)  # the same batch again, as after a restart
    sink(batch(spark, [(0, 0, 0, 1.0, 1.0, 1.1)]), 1)
    out = store.to_pandas()
    assert list(out.columns) == list(STORE_COLUMNS)
    assert out[["batch_id", "query_id", "value", "sic"]].values.tolist() == [
        [0, 0, 20.0, 1.0],
        [0, 1, 7.0, 0.5],
        [1, 0, 1.0, 1.0],
    ]
    assert out["latency_s"].tolist() == pytest.approx([6.5 - 0.7, 6.5 - 0.4, 6.5 - 1.1])
    assert (out["produced_at"] == T0 + 6.5).all() and out["kind"].eq("avg").all()
    assert out["window_start"].tolist() == [pd.Timestamp(T0, unit="s", tz="UTC")] * 2 + [
        pd.Timestamp(T0 + 1, unit="s", tz="UTC")
    ]
    assert store.batches() == [("avg", 0), ("avg", 1)] and len(store) == 3
    csv = pd.read_csv(tmp_path / "results.csv")
    assert csv[["batch_id", "query_id", "value"]].values.tolist() == [
        [0, 0, 20.0],
        [0, 1, 7.0],
        [1, 0, 1.0],
    ]
    # The coordinator counted batch 0 once: q0 = 1.0 (batch 0) + 1.0 (batch 1), q1 = 0.5.
    assert coord.query_sic(now=T0 + 10.0).tolist() == pytest.approx([2.0, 0.5])
    assert coord.counters().windows.tolist() == [2, 1]


def test_sink_accepts_an_aware_datetime_clock_and_an_empty_batch(spark):
    store = ResultStore()
    when = dt.datetime.fromtimestamp(T0 + 2.0, tz=dt.UTC)
    sink = ResultSink("top5", 1.0, store, clock=lambda: when, plan="cluster")
    sink(batch(spark, []), 7)
    assert store.batches() == [("cluster", 7)] and len(store) == 0
    sink(batch(spark, [(0, 0, 3, 20.0, 0.5, 0.5), (0, 1, 3, 2e5, 0.5, 0.5)]), 8)
    out = store.to_pandas()
    assert out[["plan", "rank", "value", "sic"]].values.tolist() == [["cluster", 1, 3.0, 1.0]]
    assert out["latency_s"].tolist() == pytest.approx([1.5])
    naive = ResultSink("avg", 1.0, ResultStore(), clock=lambda: dt.datetime(2026, 1, 1))
    with pytest.raises(ConfigError, match="clock must return seconds or an aware datetime"):
        naive(batch(spark, [(0, 0, 0, 1.0, 1.0, 0.1)]), 0)
    with pytest.raises(UnknownNameError, match="query kind must be one of"):
        ResultSink("median", 1.0, store)
