"""SIC propagation rules of the DataFrame helpers, checked against spillway.quality.propagation."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.quality import propagation as prop
from spillway.spark.queries import QUERIES
from spillway.spark.sic_ops import (
    EMPTY,
    sic_filter,
    sic_group_by,
    sic_join,
    sic_sliding_agg,
    sic_top_k,
    sic_union,
    sic_window_agg,
    window_start,
)
from tests.spark.test_queries import frame

pytestmark = pytest.mark.spark

W = "query_id int, window_start int, k int, value double, sic double"


def rnd(rows):
    """Rows with floats rounded to 9 decimals, sorted (None sorts first), for exact compares."""
    out = [tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows]
    return sorted(out, key=lambda r: tuple((v is not None, v) for v in r))


def rows_of(df, *cols):
    return rnd(tuple(getattr(r, c) for c in cols) for r in df.collect())


def test_group_by_spreads_uniformly_over_the_groups_of_a_firing(spark):
    from pyspark.sql import functions as F

    data = [(0, 0, 1, 1.0, 0.1)] * 6 + [(0, 0, 2, 2.0, 0.1)] * 3 + [(1, 0, 1, 5.0, 0.5)]
    out = spark.createDataFrame(data, W).transform(sic_group_by, F.count("*").alias("n"), by="k")
    got = rows_of(out, "query_id", "k", "n", "sic")
    share = prop.group_by(0.9, 2)
    assert got == rnd([(0, 1, 6, share), (0, 2, 3, share), (1, 1, 1, 0.5)])
    assert EMPTY not in out.columns


def test_filter_marker_carries_the_sic_of_a_firing_that_keeps_nothing(spark):
    data = [(0, 0, 1, 10.0, 0.2), (0, 0, 1, 60.0, 0.2), (0, 0, 1, 70.0, 0.2), (0, 1, 1, 5.0, 0.4)]
    df = spark.createDataFrame(data, W)
    out = df.transform(sic_filter, "value >= 50")
    assert rows_of(out, "window_start", "value", "sic", EMPTY) == rnd(
        [(0, 60.0, 0.3, False), (0, 70.0, 0.3, False), (1, None, 0.4, True)]
    )
    assert rows_of(out.filter(f"{EMPTY}"), "k") == [(None,)]  # payload nulled on the marker
    dropped = df.transform(sic_filter, "value >= 50", on_empty="drop")
    assert rows_of(dropped, "window_start", "sic") == rnd([(0, 0.3), (0, 0.3)])
    assert EMPTY not in dropped.columns


def test_markers_count_in_the_total_but_are_never_outputs(spark):
    from pyspark.sql import functions as F

    data = [(0, 0, 1, 60.0, 0.25), (0, 0, 2, 10.0, 0.25), (0, 1, 1, 5.0, 0.5)]
    filtered = spark.createDataFrame(data, W).transform(sic_filter, "value >= 50")
    # window 1 holds only a marker: the group-by passes on a marker; window 0 a real group.
    grouped = filtered.transform(sic_group_by, F.count("*").alias("n"), by="k")
    assert rows_of(grouped, "window_start", "k", "n", "sic", EMPTY) == rnd(
        [(0, 1, 1, 0.5, False), (1, None, None, 0.5, True)]
    )
    top = filtered.transform(sic_top_k, 3, "value")
    assert rows_of(top, "window_start", "rank", "sic", EMPTY) == rnd(
        [(0, 1, 0.5, False), (1, None, 0.5, True)]
    )
    agg = filtered.transform(sic_group_by, F.max("value").alias("m"), on_empty="drop")
    assert rows_of(agg, "window_start", "m", "sic") == rnd([(0, 60.0, 0.5)])


def test_join_sums_both_sides_including_unmatched_rows(spark):
    left = spark.createDataFrame(
        [(0, 0, 1, 1.0, 0.1), (0, 0, 2, 2.0, 0.1), (0, 0, 3, 3.0, 0.1), (0, 1, 1, 9.0, 0.3)], W
    )
    right = spark.createDataFrame(
        [(0, 0, 1, 7.0, 0.2), (0, 0, 1, 8.0, 0.2), (0, 0, 4, 6.0, 0.2), (0, 1, 5, 4.0, 0.3)],
        W.replace("value", "other"),
    )
    out = left.transform(sic_join, right, "k")
    share = prop.join(0.3, 0.6, 2)
    assert rows_of(out, "window_start", "k", "value", "other", "sic", EMPTY) == rnd(
        [(0, 1, 1.0, 7.0, share, False), (0, 1, 1.0, 8.0, share, False)]
        + [(1, None, None, None, 0.6, True)]
    )
    full = left.transform(sic_join, right, "k", how="full", on_empty="drop")
    # window 0: 2 matches, k=2 and k=3 left only, k=4 right only; window 1: k=1 and k=5 apart
    assert rows_of(full, "window_start", "k", "sic") == rnd(
        [(0, 1, 0.18), (0, 1, 0.18), (0, 2, 0.18), (0, 3, 0.18), (0, 4, 0.18)]
        + [(1, 1, 0.3), (1, 5, 0.3)]
    )
    with pytest.raises(ConfigError, match="how must be inner, left, right or full"):
        left.transform(sic_join, right, "k", how="cross")


def test_top_k_splits_over_k_or_over_the_candidates_when_fewer(spark):
    data = [(0, 0, i, float(i), 0.1) for i in range(10)] + [
        (0, 1, 1, 1.0, 0.2),
        (0, 1, 2, 2.0, 0.2),
    ]
    out = spark.createDataFrame(data, W).transform(sic_top_k, 3, "value")
    assert rows_of(out, "window_start", "rank", "k", "sic") == rnd(
        [(0, 1, 9, prop.top_k(1.0, 3, 10)), (0, 2, 8, 1 / 3), (0, 3, 7, 1 / 3)]
        + [(1, 1, 2, prop.top_k(0.4, 3, 2)), (1, 2, 1, 0.2)]
    )
    with pytest.raises(ConfigError, match="k must be an int >= 1, got 0"):
        spark.createDataFrame(data, W).transform(sic_top_k, 0, "value")


def test_sliding_windows_split_each_tuple_over_the_windows_it_enters(spark):
    from pyspark.sql import functions as F

    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0.0, 5.0, 40))
    sic = rng.uniform(0.0, 0.05, 40)
    df = spark.createDataFrame(
        [(0, float(a), float(b)) for a, b in zip(t, sic, strict=True)],
        "query_id int, t double, sic double",
    ).withColumn("event_ts", F.timestamp_seconds("t"))
    out = df.transform(
        sic_sliding_agg, F.count("*").alias("n"), window_s=1.5, slide_s=0.5
    ).toPandas()
    assert out["n"].sum() == 3 * 40  # every tuple enters W/s = 3 windows
    assert out["sic"].sum() == pytest.approx(sic.sum())
    starts = out["window_start"].astype("int64") / 1e9
    first = np.floor(t[0] / 0.5) * 0.5 - 1.0
    assert starts.min() == pytest.approx(first)
    assert (out["window_end"] - out["window_start"]).dt.total_seconds().eq(1.5).all()
    for _, r in out.iterrows():  # each window's SIC is the share of the tuples it holds
        s = r["window_start"].timestamp()
        inside = (t >= s - 1e-9) & (t < s + 1.5 - 1e-9)
        assert r["sic"] == pytest.approx(
            prop.sliding_window_share(sic[inside].sum(), size=3, slide=1)
        )
    with pytest.raises(ConfigError, match="window_s must be a whole multiple of slide_s"):
        df.transform(sic_sliding_agg, F.count("*"), window_s=1.0, slide_s=0.3)


def test_union_passes_sic_through_and_marks_real_rows(spark):
    a = spark.createDataFrame([(0, 0, 1, 1.0, 0.5)], W)
    b = spark.createDataFrame([(0, 1, 1, 2.0, 0.5)], W).transform(sic_filter, "value > 5")
    out = a.transform(sic_union, b)
    assert rows_of(out, "window_start", "sic", EMPTY) == [(0, 0.5, False), (1, 0.5, True)]


def test_window_agg_aligns_windows_to_the_epoch_and_validates(spark):
    from pyspark.sql import functions as F

    rows = [(0, 0, 0, 1.0, 0.25, t) for t in (0.0, 0.4999995, 0.5, 1.25)]
    df = frame(spark, rows)
    out = df.transform(sic_window_agg, F.count("*").alias("n"), window_s=0.5)
    got = rows_of(out.withColumn("w", F.unix_micros("window_start")), "w", "n", "sic")
    assert got == [(0, 2, 0.5), (500000, 1, 0.25), (1000000, 1, 0.25)]
    with pytest.raises(ConfigError, match="window_s must be a finite number of seconds > 0"):
        window_start("event_ts", -1.0)
    with pytest.raises(ConfigError, match="whole number of microseconds"):
        window_start("event_ts", 1e-7)
    with pytest.raises(ConfigError, match="firing must be one or more column names"):
        df.transform(sic_filter, "value > 0", firing=[F.col("query_id")])
    with pytest.raises(ConfigError, match="on_empty must be 'marker' or 'drop'"):
        df.transform(sic_filter, "value > 0", firing="query_id", on_empty="keep")


def test_chained_helpers_give_the_top5_query_its_sic(spark):
    """TOP-5's result rows share their firing's SIC; the operator-by-operator chain must agree."""
    from pyspark.sql import functions as F

    rng = np.random.default_rng(11)
    rows = []
    for w in range(3):
        for m in range(8):
            for src, lo, hi in ((2 * m, 0.0, 100.0), (2 * m + 1, 5e4, 2.5e5)):
                for _ in range(int(rng.integers(1, 4))):
                    rows.append((0, src, m, float(rng.uniform(lo, hi)), 0.01, w + rng.uniform()))
    df = frame(spark, rows)
    # the firing rule (THEMIS Eq. 3 over the window's result rows) of the one TOP-5 statement
    top5 = QUERIES["top5"].apply(df, 1.0, micros=True).drop(columns="key")
    expected = spark.createDataFrame(top5).withColumn(
        "window_start", F.timestamp_micros("window_start")
    )
    windowed = df.withColumn("window_start", window_start("event_ts", 1.0))
    cpu = windowed.filter("source_id % 2 = 0").transform(
        sic_group_by, F.avg("value").alias("cpu"), by="key"
    )
    mem = windowed.filter("source_id % 2 = 1").transform(
        sic_group_by, F.avg("value").alias("free"), by="key"
    )
    chained = (
        cpu.transform(sic_join, mem, "key")
        .transform(sic_filter, F.col("free") >= 1e5)
        .transform(sic_top_k, 5, [F.col("cpu").asc(), F.col("key").asc()])
    )
    a = rows_of(
        expected.withColumn("m", F.col("value").cast("int")), "window_start", "rank", "m", "sic"
    )
    b = rows_of(
        chained.withColumn("m", F.col("key").cast("int")), "window_start", "rank", "m", "sic"
    )
    assert len(a) == len(b) >= 10
    for x, y in zip(a, b, strict=True):
        assert x[:3] == y[:3] and x[3] == pytest.approx(y[3])
