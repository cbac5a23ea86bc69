"""ResultSink / ResultStore: stamps, latency, CSV mirror, idempotence under a replayed batch."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.spark.coordinator import QueryCoordinator
from spillway.spark.sink import STORE_COLUMNS, ResultSink, ResultStore
from spillway.testing import ManualClock
from tests.spark.test_queries import frame

pytestmark = pytest.mark.spark

T0 = 1_700_000_000.0  # Unix seconds: arrival times are feed time + the node's start epoch
#: A taxi feed with about 40 routes (20 pool + 20 ordinary), 300 rides/s.
TAXI = dict(n_sources=1, rate=300.0, seed=5, n_routes=20, pool_routes=20, pool_share=0.3)


def batch(spark, rows):
    return frame(spark, [(q, s, k, v, sic, T0 + t) for q, s, k, v, sic, t in rows])


def test_sink_stamps_latency_and_a_replayed_batch_replaces_its_rows(spark, tmp_path):
    rows = [(0, 0, 0, 10.0, 0.5, 0.2), (0, 0, 0, 30.0, 0.5, 0.7), (1, 0, 0, 7.0, 0.5, 0.4)]
    clock = ManualClock(T0 + 1.5)
    store = ResultStore(csv_path=tmp_path / "results.csv")
    coord = QueryCoordinator(n_queries=2, stw_s=10.0, windows_s=1.0, epoch_s=T0)
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
    assert coord.account.mass("results", 0.0, 10.0).tolist() == pytest.approx([2.0, 0.5])
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
    with pytest.raises(ConfigError, match="plan 'cluster' needs the source columns .* missing sic"):
        sink(batch(spark, [(0, 0, 3, 20.0, 0.5, 0.5)]).drop("sic"), 9)


def _mix_rows(until_s=2.0, keep=0.6):
    """Rows of the default THEMIS mix (15 queries, all six kinds), a share kept per window, and
    of a GROUP-AVG query on a small taxi feed (about 40 routes)."""
    from spillway.cli import default_node_config
    from spillway.feeds import make_feed
    from spillway.spark.node import feed_settings
    from tests.spark.test_queries import feed_rows

    cfg = default_node_config(overload=None)
    feeds = [make_feed(q.feed, **feed_settings(q, 4, i, 0.1)) for i, q in enumerate(cfg.queries)]
    kinds: dict[str, list[int]] = {}
    for i, q in enumerate(cfg.queries):
        kinds.setdefault(q.kind, []).append(i)
    kinds["group_avg"] = [len(feeds)]
    feeds.append(make_feed("taxi", **TAXI))
    rows = feed_rows(feeds, until_s, 1.0, keep=keep)
    # one more TOP-5 query whose machines never have enough free memory: marker rows
    q = len(feeds)
    kinds["top5"].append(q)
    rows += [(q, src, m, 5e4, 0.1, 0.2 + 0.1 * m) for m in range(3) for src in (2 * m, 2 * m + 1)]
    # and one where 7 machines qualify: the 5 with the lowest CPU (ties by machine id) win
    kinds["top5"].append(q + 1)
    cpu = [30.0, 10.0, 50.0, 10.0, 90.0, 20.0, 70.0]
    for m, c in enumerate(cpu):
        rows += [(q + 1, 2 * m, m, c, 0.05, 0.3), (q + 1, 2 * m + 1, m, 2e5, 0.05, 0.6)]
    return [(q, s, k, v, sic, T0 + t) for q, s, k, v, sic, t in rows], kinds


def test_a_mixed_sink_gives_every_kind_the_results_of_its_dataframe_plan(spark):
    from pyspark.sql import functions as F

    from spillway.spark.queries import QUERIES

    rows, kinds = _mix_rows()
    df = batch(spark, rows)
    store = ResultStore()
    sink = ResultSink(kinds, 1.0, store, clock=ManualClock(T0 + 3.0), plan="mixed")
    # 4 single-row kinds fused into one aggregation; group_avg; cov; top5: each its firings
    assert sink.kind is None and sink.sql.count("UNION ALL") == 3
    cache = spark._jsparkSession.sharedState().cacheManager()
    cached_before = cache.isEmpty()
    sink(df, 0)
    got = store.to_pandas()
    want = pd.concat(
        [
            QUERIES[k].apply(df.filter(F.col("query_id").isin(ids)), 1.0).assign(kind=k)
            for k, ids in kinds.items()
        ],
        ignore_index=True,
    )
    key = ["query_id", "window_start", "key", "rank"]
    got = got.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    assert len(got) == len(want) > 80 and set(got["kind"]) == set(QUERIES)
    for c in ["kind", *key, "n_in", "last_arrival_ts"]:
        pd.testing.assert_series_equal(got[c], want[c], check_dtype=c != "rank", obj=c)
    for c in ("value", "sic"):
        assert got[c].to_numpy(float) == pytest.approx(want[c].to_numpy(float), nan_ok=True)
    # key: the route of a GROUP-AVG row (about 40 routes a window), null for every other kind
    grouped = got["kind"] == "group_avg"
    assert got.loc[~grouped, "key"].isna().all() and got.loc[grouped, "key"].notna().all()
    routes = got[grouped].groupby("window_start")["key"].nunique()
    assert len(routes) == 2 and routes.between(25, 40).all()
    top5 = got[got["kind"] == "top5"]
    seven = top5[top5["query_id"] == max(kinds["top5"])]
    assert seven["value"].tolist() == [1.0, 3.0, 5.0, 0.0, 2.0] and seven["rank"].tolist() == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert seven["sic"].tolist() == pytest.approx([0.7 / 5] * 5)
    marker = top5[top5["query_id"] == max(kinds["top5"]) - 1]
    assert marker["rank"].tolist() == [0] and marker["value"].isna().all()
    assert marker["sic"].tolist() == pytest.approx([0.6]) and marker["n_in"].tolist() == [6]
    assert got["latency_s"].tolist() == pytest.approx(
        (T0 + 3.0 - got["last_arrival_ts"].map(pd.Timestamp.timestamp)).tolist()
    )
    # Nothing stays cached; the batch's view is gone.
    assert not spark.catalog.tableExists(sink._raw_view)
    assert cache.isEmpty() == cached_before


def test_a_mixed_sink_reads_its_batch_once_and_leaves_adaptive_execution_as_it_was(spark):
    """The statement's five parts read the batch persisted once, so the source is read once
    a batch (each part's filter pushed below a shared exchange would scan it again); the
    statement is planned without adaptive execution and the stream's setting is put back."""
    from spillway.spark.queries import SOURCE_SCHEMA_DDL

    rows, kinds = _mix_rows()
    reads = spark.sparkContext.accumulator(0)

    def read(row):
        reads.add(1)
        return row

    ddl = SOURCE_SCHEMA_DDL.replace("event_ts timestamp", "t double").replace(
        ", arrival_ts timestamp", ""
    )
    source = spark.sparkContext.parallelize([tuple(r) for r in rows], 2).map(read)
    df = spark.createDataFrame(source, ddl).selectExpr(
        "*", "timestamp_seconds(t) AS event_ts", "timestamp_seconds(t) AS arrival_ts"
    )
    sink = ResultSink(kinds, 1.0, ResultStore(), clock=ManualClock(T0 + 3.0), plan="mixed")
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    try:
        sink(df.drop("t"), 0)
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    assert reads.value == len(rows)
    assert not spark.catalog.tableExists(sink._raw_view)


def test_a_group_avg_sink_shares_each_window_sic_over_its_groups(spark):
    from spillway.feeds import make_feed
    from tests.spark.test_queries import feed_rows

    rows = feed_rows([make_feed("taxi", **TAXI)], 3.0, 1.0, keep=0.5)  # feed times
    store = ResultStore()
    coord = QueryCoordinator(n_queries=1, stw_s=10.0, windows_s=1.0, epoch_s=T0)
    ResultSink("group_avg", 1.0, store, coord, ManualClock(T0 + 4.0))(batch(spark, rows), 0)
    out = store.to_pandas()
    assert out["plan"].eq("group_avg").all() and out["rank"].eq(1).all()
    w = out["window_start"].map(pd.Timestamp.timestamp) - T0
    for s in range(3):
        mine = [r for r in rows if s <= r[5] < s + 1]
        part = out[w == s]
        keys = sorted({r[2] for r in mine})
        assert part["key"].tolist() == keys  # ordered by key within the window
        assert part["sic"].sum() == pytest.approx(sum(r[4] for r in mine))
        assert part["sic"].nunique() == 1  # uniform over the groups (THEMIS Eq. 3)
        means = [np.mean([r[3] for r in mine if r[2] == k]) for k in keys]
        assert part["value"].to_numpy() == pytest.approx(means)
        assert part["n_in"].eq(len(mine)).all()
    # the coordinator counts every window once with its input rows, and all the rows' SIC
    assert coord.counters().windows.tolist() == [3]
    assert coord.counters().rows_in.tolist() == [len(rows)]
    assert coord.account.mass("results", 0.0, 10.0)[0] == pytest.approx(sum(r[4] for r in rows))


def test_kind_maps_and_window_errors(spark):
    from spillway.spark.sink import kind_map

    assert kind_map({"avg": [3]}) == {"avg": (3,)}
    with pytest.raises(ConfigError, match="at least one query kind"):
        kind_map({})
    with pytest.raises(ConfigError, match="every kind needs its query ids"):
        kind_map({"avg": [], "max": [1]})
    with pytest.raises(ConfigError, match="query id 1 is listed under kinds 'avg' and 'max'"):
        kind_map({"avg": [0, 1], "max": [1]})
    with pytest.raises(UnknownNameError, match="query kind must be one of"):
        kind_map({"median": [0]})
    with pytest.raises(ConfigError, match="window_s must be a positive whole number"):
        ResultSink("avg", 1e-7, ResultStore())


class _Killed(BaseException):
    """The driver dying inside a batch (not an error a listener's caller would catch)."""


def test_a_batch_whose_listeners_did_not_finish_is_handed_again_after_a_restart(tmp_path):
    """A federated node's link writes and coordinator reports are the store's listeners. A
    driver killed while they ran must find the batch missing from the CSV mirror when it
    resumes, so Spark's replay is new there and they run again (each recognises what it had
    already done). Before, the rows reached the mirror first: the replay was taken for a known
    batch, and its rows never reached the next node."""
    rows = pd.DataFrame({"query_id": [0], "value": [1.0], "sic": [0.5]})
    seen: list[int] = []

    def dies(event) -> None:
        seen.append(event.batch_id)
        raise _Killed

    store = ResultStore(tmp_path / "results.csv")
    store.listeners.append(lambda e: seen.append(e.batch_id))
    assert store.put("avg", 0, rows) is True
    assert store.put("avg", 1, rows) is True
    store.listeners[:] = [dies]
    with pytest.raises(_Killed):
        store.put("avg", 2, rows)
    resumed = ResultStore(tmp_path / "results.csv", resume=True)
    resumed.listeners.append(lambda e: seen.append(e.batch_id))
    assert resumed.put("avg", 1, rows) is False  # stored and handed on before the kill
    assert resumed.put("avg", 2, rows) is True  # handed on again
    assert seen == [0, 1, 2, 2]
    assert resumed.batches() == [("avg", 0), ("avg", 1), ("avg", 2)]
