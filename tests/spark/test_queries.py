"""The THEMIS Table 1 query kinds and GROUP-AVG on small hand-made inputs with known answers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds.base import Feed
from spillway.spark.queries import (
    QUERIES,
    RESULT_COLUMNS,
    SOURCE_COLUMNS,
    SOURCE_SCHEMA_DDL,
    query_kind,
)
from spillway.testing import ListFeed

pytestmark = pytest.mark.spark

Row = tuple[int, int, int, float, float, float]  # query, source, key, value, sic, time (s)


def frame(spark, rows: Sequence[Row]):
    """Source rows (query, source, key, value, sic, time) as a DataFrame; arrival = event."""
    from pyspark.sql import functions as F

    ddl = SOURCE_SCHEMA_DDL.replace("event_ts timestamp", "t double").replace(
        ", arrival_ts timestamp", ""
    )
    df = spark.createDataFrame([tuple(r) for r in rows], ddl)
    ts = F.timestamp_seconds("t")
    return df.withColumn("event_ts", ts).withColumn("arrival_ts", ts).select(*SOURCE_COLUMNS)


def feed_rows(
    feeds: Sequence[Feed], until_s: float, window_s: float, keep: float = 1.0
) -> list[Row]:
    """Rows of every feed (query = position) arriving before ``until_s``.

    Tuple SIC is THEMIS Eq. 1 with the STW equal to the window, ``1 / (n_s(window) * |S|)``, so
    the tuples of a window sum to 1 per query. ``keep < 1`` then keeps the first
    ``ceil(keep * n)`` tuples of each source and window (a deterministic stand-in for shedding).
    """
    rows: list[Row] = []
    for q, feed in enumerate(feeds):
        n_src = feed.n_sources
        for s in range(n_src):
            idx = np.arange(int(feed.count(until_s)[s]))
            times = feed.arrival_time(s, idx)
            pay = feed.payload(s, idx)
            win = np.floor(times / window_s)
            for w in np.unique(win):
                sel = np.flatnonzero(win == w)
                sic = 1.0 / (sel.size * n_src)
                for i in sel[: math.ceil(keep * sel.size)]:
                    rows.append(
                        (q, s, int(pay["key"][i]), float(pay["value"][i]), sic, float(times[i]))
                    )
    return rows


def results(spark, kind: str, rows: Sequence[Row], window_s: float = 1.0) -> pd.DataFrame:
    out = QUERIES[kind].apply(frame(spark, rows), window_s, micros=True)
    out["w"] = out["window_start"] // 10**6 if len(out) else []
    return out.sort_values(["query_id", "w", "key", "rank"]).reset_index(drop=True)


def test_registry_names_and_lookup():
    assert sorted(QUERIES) == ["avg", "avg_all", "count", "cov", "group_avg", "max", "top5"]
    assert query_kind("top5") is QUERIES["top5"]
    assert query_kind("group_avg").grouped and not query_kind("avg").grouped
    with pytest.raises(UnknownNameError, match="query kind must be one of .*got 'median'"):
        query_kind("median")


def test_aggregates_two_queries_multiplexed_with_one_window_shed_to_half(spark):
    # query 0: window 0 complete (4 tuples, SIC 1/4 each); window 1 had 4 tuples, 2 shed.
    # query 1: window 0 complete, 2 tuples of SIC 1/2.
    rows = [
        (0, 0, 0, 10.0, 0.25, 0.1),
        (0, 0, 0, 60.0, 0.25, 0.3),
        (0, 0, 0, 80.0, 0.25, 0.6),
        (0, 0, 0, 30.0, 0.25, 0.9),
        (0, 0, 0, 70.0, 0.25, 1.2),
        (0, 0, 0, 20.0, 0.25, 1.7),
        (1, 0, 0, 50.0, 0.5, 0.2),
        (1, 0, 0, 49.0, 0.5, 0.8),
    ]
    got = {k: results(spark, k, rows) for k in ("avg", "max", "count")}
    for out in got.values():
        assert list(out.columns[:-1]) == list(RESULT_COLUMNS)
        assert out[["query_id", "w"]].values.tolist() == [[0, 0], [0, 1], [1, 0]]
        assert out["sic"].tolist() == pytest.approx([1.0, 0.5, 1.0])
        assert out["n_in"].tolist() == [4, 2, 2]
        assert out["rank"].tolist() == [1, 1, 1]
        last = out["last_arrival_ts"] / 1e6
        assert last.tolist() == pytest.approx([0.9, 1.7, 0.8])
        assert out["key"].dtype == "Int64" and out["key"].isna().all()  # no group
    assert got["avg"]["value"].tolist() == pytest.approx([45.0, 45.0, 49.5])
    assert got["max"]["value"].tolist() == [80.0, 70.0, 50.0]
    assert got["count"]["value"].tolist() == [2.0, 1.0, 1.0]


def test_count_keeps_the_sic_of_a_window_where_no_value_passes(spark):
    rows = [(0, 0, 0, 10.0, 0.5, 0.1), (0, 0, 0, 20.0, 0.5, 0.4)]
    out = results(spark, "count", rows)
    assert out["value"].tolist() == [0.0]
    assert out["sic"].tolist() == [1.0]


def test_avg_all_averages_the_union_of_its_sources(spark):
    feed = ListFeed(
        times=[[0.1, 0.5], [0.2], [0.3, 0.4, 0.9]],
        values=[[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]],
    )
    out = results(spark, "avg_all", feed_rows([feed], 1.0, 1.0))
    assert out["value"].tolist() == pytest.approx([21.0 / 6])
    assert out["sic"].tolist() == pytest.approx([1.0])
    assert out["n_in"].tolist() == [6]


def test_cov_pairs_the_ith_tuples_in_arrival_order(spark):
    x = [1.0, 2.0, 4.0, 7.0]
    y = [2.0, 3.0, 9.0, 8.0, 100.0]  # the 5th tuple of source 1 has no partner
    rows = [(0, 0, 0, v, 1 / 8, 0.1 + 0.2 * i) for i, v in enumerate(x)]
    rows += [(0, 1, 0, v, 1 / 10, 0.15 + 0.15 * i) for i, v in enumerate(y)]
    rows += [(0, 0, 0, 5.0, 0.5, 1.5)]  # window 1: source 0 only, no pair
    rows += [(1, 0, 0, 3.0, 0.25, 0.5), (1, 1, 0, 4.0, 0.25, 0.5)]  # one pair only
    out = results(spark, "cov", list(reversed(rows)))
    assert out[["query_id", "w"]].values.tolist() == [[0, 0], [0, 1], [1, 0]]
    assert out["value"][0] == pytest.approx(np.cov(x, y[:4])[0, 1])
    assert out["value"][1:].isna().all()
    assert out["sic"].tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert out["n_in"].tolist() == [9, 1, 2]


def _cluster_rows(cpu: dict[int, list[float]], free: dict[int, list[float]], t0: float):
    rows: list[Row] = []
    n = 2 * (max([*cpu, *free]) + 1)
    for m, vs in cpu.items():
        rows += [(0, 2 * m, m, v, 1 / (len(vs) * n), t0 + 0.1 * (i + 1)) for i, v in enumerate(vs)]
    for m, vs in free.items():
        rows += [
            (0, 2 * m + 1, m, v, 1 / (len(vs) * n), t0 + 0.1 * (i + 1)) for i, v in enumerate(vs)
        ]
    return rows


def test_top5_ranks_machines_by_available_cpu_with_enough_free_memory(spark):
    # window 0: 8 machines. Machine 1 lacks free memory; machine 7 has no memory tuple at all.
    cpu = {m: [10.0 * m, 10.0 * m + 2.0] for m in range(8)}
    free = {m: [2e5, 3e5] for m in range(7)}
    free[1] = [50_000.0, 60_000.0]
    rows = _cluster_rows(cpu, free, 0.0)
    # window 1: only machines 2 and 3 qualify -> 2 rows sharing the window's SIC.
    rows += [
        r[:5] + (r[5] + 1.0,)
        for r in _cluster_rows({2: [5.0], 3: [1.0]}, {2: [2e5], 3: [2e5]}, 0.0)
    ]
    # window 2: nobody has enough memory -> one marker row (rank 0, no value) keeps the SIC.
    rows += [r[:5] + (r[5] + 2.0,) for r in _cluster_rows({0: [1.0]}, {0: [10.0]}, 0.0)]
    out = results(spark, "top5", rows)
    w0, w1, w2 = (out[out.w == w] for w in range(3))
    assert w0["rank"].tolist() == [1, 2, 3, 4, 5]
    assert w0["value"].tolist() == [0.0, 2.0, 3.0, 4.0, 5.0]
    in0 = [r for r in rows if r[5] < 1.0]
    assert w0["sic"].tolist() == pytest.approx([sum(r[4] for r in in0) / 5] * 5)
    assert w0["n_in"].tolist() == [len(in0)] * 5
    assert w1["value"].tolist() == [3.0, 2.0]
    in1 = [r for r in rows if 1.0 <= r[5] < 2.0]
    assert w1["sic"].tolist() == pytest.approx([sum(r[4] for r in in1) / 2] * 2)
    assert w2["rank"].tolist() == [0] and w2["value"].isna().all()
    assert w2["sic"].tolist() == pytest.approx([1.0]) and w2["n_in"].tolist() == [2]


def test_group_avg_gives_one_row_per_group_sharing_the_window_sic(spark):
    # query 0, window 0: routes 3 (2 rides) and 7 (1 ride), SIC 0.2 each; window 1: route 3.
    # query 1, window 0: route 3 (the same key in another query is another group).
    rows = [
        (0, 0, 7, 30.0, 0.2, 0.1),
        (0, 0, 3, 10.0, 0.2, 0.5),
        (0, 0, 3, 14.0, 0.2, 0.8),
        (0, 0, 3, 6.0, 0.4, 1.3),
        (1, 0, 3, 5.0, 0.5, 0.6),
        (1, 0, 3, 5.0, 0.5, 0.4),
    ]
    out = results(spark, "group_avg", rows)
    assert list(out.columns[:-1]) == list(RESULT_COLUMNS)
    assert out[["query_id", "w", "key"]].values.tolist() == [
        [0, 0, 3],
        [0, 0, 7],
        [0, 1, 3],
        [1, 0, 3],
    ]
    assert out["value"].tolist() == pytest.approx([12.0, 30.0, 6.0, 5.0])
    assert out["rank"].tolist() == [1, 1, 1, 1]
    # THEMIS Eq. 3 group-by rule: the window's input SIC (0.6) / its 2 groups, on each row
    assert out["sic"].tolist() == pytest.approx([0.3, 0.3, 0.4, 1.0])
    # input rows and last arrival are the window's, on every row of the window
    assert out["n_in"].tolist() == [3, 3, 1, 2]
    assert (out["last_arrival_ts"] / 1e6).tolist() == pytest.approx([0.8, 0.8, 1.3, 0.6])
    assert results(spark, "group_avg", []).empty  # no input, no window, no row


def test_every_kind_conserves_the_sic_of_its_windows(spark):
    rng = np.random.default_rng(7)
    times = [np.sort(rng.uniform(0, 3, 30)).tolist() for _ in range(20)]
    vals = [
        (rng.uniform(0, 100, 30) if s % 2 == 0 else rng.uniform(1e5, 4e5, 30)).tolist()
        for s in range(20)
    ]
    keys = [[s // 2] * 30 for s in range(20)]
    feed = ListFeed(times=times, values=vals, keys=keys)
    rows = feed_rows([feed, feed], 3.0, 1.0, keep=0.5)
    expected: dict[tuple[int, int], float] = {}
    for q, _, _, _, sic, t in rows:
        expected[(q, int(t))] = expected.get((q, int(t)), 0.0) + sic
    assert len(expected) == 6 and all(0.5 <= v < 0.7 for v in expected.values())
    for kind in QUERIES:
        out = results(spark, kind, rows)
        per_window = out.groupby(["query_id", "w"])["sic"].sum()
        assert out["rank"].between(0, QUERIES[kind].rows_per_window).all(), kind
        assert per_window.to_dict() == pytest.approx(expected), kind


def test_apply_rejects_missing_columns_and_bad_windows(spark):
    df = frame(spark, [(0, 0, 0, 1.0, 1.0, 0.5)])
    with pytest.raises(ConfigError, match="needs the source columns .* missing sic"):
        QUERIES["avg"].apply(df.drop("sic"), 1.0)
    with pytest.raises(
        ConfigError, match="window_s must be a positive whole number of microseconds"
    ):
        QUERIES["max"].apply(df, 0.0)
