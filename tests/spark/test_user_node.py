"""A node running a user's own PySpark function beside a built-in query: results with their SIC
in the sink the user named, and the query's SIC over the STW from them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from spillway.config import NodeConfig, QuerySpec
from spillway.sinks import read_parquet_sink

pytestmark = pytest.mark.spark


def high_values(rows):
    """Per window: how many values exceed 50 and their mean (a filter, then an aggregate)."""
    return (
        rows.filter(F.col("value") > 50)
        .groupBy("window_start")
        .agg(F.count(F.lit(1)).alias("n"), F.avg("value").alias("mean"))
    )


def test_a_user_query_beside_a_built_in_one_writes_each_window_once_with_its_sic(spark, tmp_path):
    from spillway.spark.node import Node

    out = tmp_path / "high"
    user = QuerySpec(
        name="high",
        kind="user",
        feed="uniform",
        rate=300.0,
        window_s=1.0,
        function=high_values,
        sink={"kind": "parquet", "path": str(out)},
    )
    avg = QuerySpec(name="avg", kind="avg", feed="gaussian", rate=300.0, window_s=0.5)
    cfg = NodeConfig(queries=(user, avg), trigger_s=1.0, stw_s=3.0, seed=2,
                     checkpoint_dir=str(tmp_path / "ckpt"))  # fmt: skip
    node = Node(cfg, spark=spark, capacity_tuples_per_s=100_000.0)
    node.run(9.0)
    got = node.user_results("high")
    sunk = read_parquet_sink(out)
    assert len(got) >= 4 and got["window_start"].is_unique  # one row per window
    cols = ["window_start", "n", "mean", "sic"]
    pd.testing.assert_frame_equal(sunk[cols], got[cols], check_dtype=False)
    # uniform values in [0, 100): about half exceed 50, and their mean is about 75
    assert 0.3 < (got["n"] / 300).median() < 0.7 and 65 < got["mean"].median() < 85
    # nothing shed: each window's result carries its window's whole SIC (rate x window / STW
    # of rate: 1 s of a 3 s window = 1/3), and the query's SIC reads 1 once its STW has filled
    assert np.allclose(got["sic"].iloc[1:-1], 1 / 3, atol=0.02)
    sic = [r.query_sic["high"] for r in node.history() if np.isfinite(r.query_sic["high"])]
    assert sic and abs(sic[-1] - 1.0) < 0.02
    book = node.results().query("query == 'high'")
    assert len(book) >= len(got) and set(book["kind"]) == {"user"}
    with pytest.raises(Exception, match="not a user query of this node"):
        node.user_results("avg")
