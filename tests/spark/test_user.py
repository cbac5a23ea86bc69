"""User queries: the user's function per batch, every result row with its SIC (THEMIS Eq. 3 with
the function as one firing per window), one bookkeeping row per window for Eq. 4."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spillway.errors import ConfigError
from spillway.spark.sink import ResultSink, ResultStore
from spillway.spark.user import UserPart, check_schema, evaluate, resolve_function

pytestmark = pytest.mark.spark

DDL = (
    "query_id int, source_id int, key long, value double, sic double, event_ts double, "
    "arrival_ts double, raw string, topic string, partition long, offset long"
)
SCHEMA = "route string, fare double, at timestamp"


def _rows(spark, rows):
    """Source rows (times in seconds) of query 0 unless given."""
    df = spark.createDataFrame(rows, DDL)
    return df.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
        "arrival_ts", F.timestamp_seconds("arrival_ts")
    )


def _generated(spark):
    # window [100, 101): values 10, 60, 70 (sic 0.1 each); [101, 102): 20 (sic 0.3)
    return _rows(
        spark,
        [
            (0, 0, 1, 10.0, 0.1, 100.1, 100.1, None, None, None, None),
            (0, 0, 2, 60.0, 0.1, 100.2, 100.2, None, None, None, None),
            (0, 0, 1, 70.0, 0.1, 100.3, 100.4, None, None, None, None),
            (0, 0, 2, 20.0, 0.3, 101.5, 101.5, None, None, None, None),
            (1, 0, 9, 99.0, 0.5, 100.5, 100.5, None, None, None, None),  # another query
        ],
    )


def _part(fn, **kw):
    return UserPart(query_id=0, name="q", fn=fn, window_us=1_000_000, **kw)


def test_a_window_aggregate_shares_its_windows_sic_over_its_rows(spark):
    def per_key(rows):
        return rows.groupBy("window_start", "key").agg(F.avg("value").alias("mean"))

    res, book = evaluate(_part(per_key), _generated(spark), batch_id=4)
    res = res.sort_values(["window_start", "key"])
    assert res["mean"].tolist() == [40.0, 60.0, 20.0]
    assert res["sic"].tolist() == pytest.approx([0.15, 0.15, 0.3])  # 0.3 over 2 rows, 0.3 over 1
    assert set(res["query"]) == {"q"} and set(res["batch_id"]) == {4}
    assert str(res["window_start"].dt.tz) == "UTC"
    assert book["sic"].tolist() == pytest.approx([0.3, 0.3])
    assert book["value"].tolist() == [2.0, 1.0] and book["n_in"].tolist() == [3, 1]
    assert book["last_arrival_ts"].tolist() == [100_400_000, 101_500_000]


def test_any_chain_of_operators_delivers_each_windows_sic_once(spark):
    routes = spark.createDataFrame([(1, "north"), (2, "south")], "key long, name string")

    def joined_top1(rows):  # a stream-static join, a filter, then the top row per window
        w = Window.partitionBy("window_start").orderBy(F.desc("value"))
        j = rows.join(routes, "key").filter("value > 15")
        return j.withColumn("pos", F.row_number().over(w)).filter("pos = 1").drop("pos")

    res, book = evaluate(_part(joined_top1), _generated(spark), batch_id=0)
    assert res["name"].tolist() == ["north", "south"]
    assert res.groupby("window_start")["sic"].sum().tolist() == pytest.approx([0.3, 0.3])
    assert book["sic"].sum() == pytest.approx(res["sic"].sum())


def test_a_window_whose_result_is_empty_keeps_its_sic_in_the_account_but_writes_no_row(spark):
    def above_65(rows):
        return rows.filter("value > 65").select("window_start", "value")

    res, book = evaluate(_part(above_65), _generated(spark), batch_id=0)
    assert res["value"].tolist() == [70.0] and res["sic"].tolist() == pytest.approx([0.3])
    assert book["value"].tolist() == [1.0, 0.0]  # result rows per window
    assert book["sic"].tolist() == pytest.approx([0.3, 0.3])  # both windows' SIC delivered


def test_records_of_a_log_come_with_their_fields_and_origin(spark):
    recs = [
        {"route": "JFK-LAX", "fare": 10.0, "at": "2026-01-01T00:00:00Z"},
        {"route": "JFK-LAX", "fare": 30.0, "at": "2026-01-01T00:00:01Z"},
        {"route": "SFO-SEA", "fare": 5.0, "at": None},
    ]
    rows = _rows(
        spark,
        [
            (0, 0, 0, 0.0, 0.2, 100.1 + i, 100.1 + i, json.dumps(r), "t", 0, 40 + i)
            for i, r in enumerate(recs)
        ],
    )

    def mean_fare(rows):
        return rows.groupBy("window_start", "route").agg(
            F.avg("fare").alias("mean_fare"), F.max("offset").alias("last_offset")
        )

    res, _ = evaluate(_part(mean_fare, record_schema=SCHEMA), rows.limit(2), batch_id=0)
    assert res["route"].tolist() == ["JFK-LAX", "JFK-LAX"]
    assert res["mean_fare"].tolist() == [10.0, 30.0] and res["last_offset"].tolist() == [40, 41]

    seen = {}

    def columns(rows):
        seen["cols"] = rows.columns
        seen["null_at"] = rows.filter("route = 'SFO-SEA'").first()["at"]
        return rows.select("window_start")

    evaluate(_part(columns, record_schema=SCHEMA), rows, batch_id=0)
    assert seen["cols"][:3] == ["route", "fare", "at"] and seen["null_at"] is None
    assert {"topic", "partition", "offset", "event_ts", "arrival_ts", "sic", "window_start"} <= set(
        seen["cols"]
    )


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda rows: rows.groupBy("key").count(), "has no window_start column"),
        (lambda rows: rows.toPandas(), "must return a DataFrame, got DataFrame"),
        (
            lambda rows: rows.select(
                F.timestamp_seconds(F.lit(5)).alias("window_start"), F.lit(1).alias("x")
            ),
            "not a window of the input rows",
        ),
    ],
)
def test_a_function_that_breaks_the_contract_is_one_clear_error(spark, fn, match):
    with pytest.raises(ConfigError, match=match):
        evaluate(_part(fn), _generated(spark), batch_id=0)


def test_a_function_is_named_by_module_or_by_file(tmp_path, monkeypatch):
    (tmp_path / "my_queries.py").write_text(
        textwrap.dedent(
            """
            def mean(rows):
                return rows
            """
        )
    )
    assert resolve_function(str(tmp_path / "my_queries.py") + ":mean").__name__ == "mean"
    monkeypatch.chdir(tmp_path)
    assert resolve_function("my_queries.py:mean").__name__ == "mean"
    assert resolve_function("json:dumps") is json.dumps
    with pytest.raises(ConfigError, match="no Python file at"):
        resolve_function("missing.py:f")
    with pytest.raises(ConfigError, match="cannot load 'no_such_module_x'"):
        resolve_function("no_such_module_x:f")
    with pytest.raises(ConfigError, match="has no function 'nope'"):
        resolve_function("json:nope")


def test_a_feed_schema_may_not_take_the_names_spillway_adds():
    check_schema("route string, fare double", query="q")
    with pytest.raises(ConfigError, match="field\\(s\\) window_start, offset clash"):
        check_schema("window_start timestamp, offset long", query="q")


def test_one_plan_carries_built_in_and_user_queries_and_the_sink_gets_each_batch(spark):
    written = []

    class Recorder:
        query = "q"

        def write(self, batch_id, rows):
            written.append((batch_id, len(rows)))
            return True

        def close(self):
            pass

    def count_rows(rows):
        return rows.groupBy("window_start").count()

    store = ResultStore()
    sink = ResultSink(
        {"avg": [1], "user": [0]},
        {0: 1.0, 1: 1.0},
        store,
        user=[_part(count_rows)],
        user_sinks={"q": Recorder()},
    )
    sink(_generated(spark), 3)
    sink(_generated(spark), 3)  # a replay replaces the batch in both stores
    got = store.to_pandas()
    assert sorted(got["kind"]) == ["avg", "user", "user"]
    assert got.loc[got["kind"] == "avg", "value"].tolist() == [99.0]
    assert got.loc[got["kind"] == "user", "sic"].sum() == pytest.approx(0.6)
    assert written == [(3, 2), (3, 2)]
    assert sink.user_store.rows_of("q")["count"].tolist() == [3, 1]
    with pytest.raises(ConfigError, match="must match"):
        ResultSink({"user": [0, 1]}, 1.0, ResultStore(), user=[_part(count_rows)])


def test_a_plan_of_user_queries_only_runs_only_their_firings(spark):
    store = ResultStore()
    sink = ResultSink({"user": [0]}, 1.0, store, user=[_part(lambda r: r.select("window_start"))])
    # the statement holds the firings (window SIC mass, rows, last arrival) and nothing else
    assert " UNION ALL " not in sink.sql and "sum(sic) AS sic" in sink.sql and sink.plan == "user"
    sink(_generated(spark), 0)
    assert pd.Series(store.to_pandas()["value"]).tolist() == [3.0, 1.0]


def test_every_built_in_kind_run_as_a_user_query_gives_its_built_in_rows(spark):
    """One implementation per kind: the kind's SQL as a user query's function, on the user path
    (its own rows, SIC by the firing rule), gives the rows and SIC of the built-in path."""
    from spillway.spark.queries import QUERIES
    from spillway.testing import ListFeed
    from tests.spark.test_queries import feed_rows, frame

    rng = np.random.default_rng(3)
    times = [np.sort(rng.uniform(0, 3, 12)).tolist() for _ in range(20)]
    vals = [
        (rng.uniform(0, 100, 12) if s % 2 == 0 else rng.uniform(5e4, 2e5, 12)).tolist()
        for s in range(20)
    ]
    feed = ListFeed(times=times, values=vals, keys=[[s // 2] * 12 for s in range(20)])
    rows = frame(spark, feed_rows([feed], 3.0, 1.0, keep=0.5))
    order = ["window_start", "key", "rank"]
    for name, kind in QUERIES.items():
        built_in = kind.apply(rows, 1.0)
        res, book = evaluate(UserPart(0, name, kind, 1_000_000), rows, batch_id=0)
        want = built_in[built_in["rank"] > 0].sort_values(order).reset_index(drop=True)
        got = res.sort_values(order).reset_index(drop=True)
        assert len(got) == len(want) > 0, name
        assert got["value"].to_numpy(float) == pytest.approx(
            want["value"].to_numpy(float), nan_ok=True
        ), name
        assert got["sic"].to_numpy() == pytest.approx(want["sic"].to_numpy()), name
        # each window's SIC mass is the same on both paths, markers included
        mass = built_in.groupby("window_start")["sic"].sum().to_numpy()
        assert book["sic"].to_numpy() == pytest.approx(mass), name
