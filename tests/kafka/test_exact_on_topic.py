"""The exact answer of a user query over a topic: the same function over a keep-all batch read
of the same offsets. With nothing shed it equals what the streaming node produced."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from pyspark.sql import functions as F

from spillway.config import NodeConfig, QuerySpec
from tests.kafka.test_kafka_restart import _fill, _wait

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def mean_fare(rows):
    return rows.groupBy("window_start", "route").agg(
        F.avg("fare").alias("mean_fare"), F.count(F.lit(1)).alias("rides")
    )


def test_the_exact_answer_of_an_unshed_user_query_is_its_result(spark, kafka_topics):
    from spillway.spark.node import Node

    conn = kafka_topics.conn
    topic = kafka_topics.new(partitions=2)
    epoch_s = float(int(time.time()) - 3600)
    _fill(conn, topic, int(epoch_s * 1000))
    opts = {**conn.spark_options(), "subscribe": topic, "startingOffsets": "earliest",
            "format": "json", "schema": "route string, fare double", "lateness_s": 0}  # fmt: skip
    q = QuerySpec(name="fares", kind="user", feed="kafka", feed_options=opts, window_s=0.5,
                  function=mean_fare)  # fmt: skip
    cfg = NodeConfig(queries=(q,), trigger_s=0.5, stw_s=2.0, seed=3)
    node = Node(cfg, spark=spark, clock="logical", epoch_s=epoch_s,
                capacity_tuples_per_s=1e7)  # fmt: skip
    node.start()
    try:
        _wait(node, lambda: len({b for _, b in node.store.batches()}) >= 5)
        streamed = node.user_results("fares")
        exact = node.exact_user_results("fares", 2.0)
    finally:
        node.stop()
    assert sum(r.arrived_tuples - r.admitted_tuples for r in node.history()) == 0
    cols = ["window_start", "route", "mean_fare", "rides", "sic"]
    s = streamed[streamed["window_start"] < pd.Timestamp(epoch_s + 2.0, unit="s", tz="UTC")]
    s = s[cols].sort_values(["window_start", "route"]).reset_index(drop=True)
    e = exact[cols].sort_values(["window_start", "route"]).reset_index(drop=True)
    assert len(e) == 4 * 4  # four windows of 0.5 s, four routes each
    pd.testing.assert_frame_equal(s.drop(columns="sic"), e.drop(columns="sic"))
    # the keep-all read spreads each lane's SIC evenly: the window's mass, not each row's
    assert e.groupby("window_start")["sic"].sum().tolist() == pytest.approx(
        s.groupby("window_start")["sic"].sum().tolist(), rel=0.05
    )
