"""The Kafka sink: one transaction per batch, a replayed batch not written again, even by a
sink started afresh (a restarted driver)."""

from __future__ import annotations

import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.federation.link import read_link
from spillway.sinks import KafkaSink, make_sink
from spillway.testing import KafkaTopics, settled_end
from tests.sinks.test_sinks import _rows

pytestmark = pytest.mark.kafka


def _written(conn, topic):
    end = settled_end(conn, topic)
    return read_link(conn, topic, 0, 0, end)


def test_each_batch_reaches_the_topic_once_across_a_restart(kafka_topics: KafkaTopics):
    conn = kafka_topics.conn
    topic = kafka_topics.new()
    opts = {"kind": "kafka", "topic": topic, **conn.spark_options()}
    sink = make_sink(opts, query="fares", lineage="a")
    assert isinstance(sink, KafkaSink) and sink.last_batch == -1
    assert sink.write(0, _rows([1.0, 2.0])) and sink.write(1, _rows([3.0], t0=101.0))
    assert not sink.write(1, _rows([3.0], t0=101.0))  # Spark ran batch 1 again
    sink.close()
    again = make_sink(opts, query="fares", lineage="a")  # restarted from its checkpoint
    assert again.last_batch == 1
    assert not again.write(1, _rows([3.0], t0=101.0))
    assert again.write(2, _rows([4.0], t0=102.0))
    again.close()
    got = _written(conn, topic)
    assert got["mean"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert got["batch"].tolist() == [0, 0, 1, 2] and set(got["fragment"]) == {"fares@a"}
    assert got["window_start"].iloc[0] == "1970-01-01T00:01:40.000000Z"
    assert got["sic"].sum() == pytest.approx(2.0)  # each row's SIC counted once


def test_a_run_from_a_fresh_checkpoint_writes_beside_the_earlier_run(kafka_topics):
    conn = kafka_topics.conn
    topic = kafka_topics.new()
    opts = {"kind": "kafka", "topic": topic, **conn.spark_options()}
    first = make_sink(opts, query="fares", lineage="first")
    assert first.write(0, _rows([1.0])) and first.write(1, _rows([2.0]))
    first.close()
    fresh = make_sink(opts, query="fares", lineage="second")  # batch ids start at 0 again
    assert fresh.last_batch == -1 and fresh.write(0, _rows([3.0]))
    fresh.close()
    assert _written(conn, topic)["mean"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ConfigError, match="need a finite sic >= 0"):
        make_sink(opts, query="fares", lineage="third").write(0, _rows([1.0]).assign(sic=-1.0))


def test_the_sink_creates_a_missing_topic_and_spark_parses_its_rows(spark, kafka_topics):
    from pyspark.sql import functions as F

    conn = kafka_topics.conn
    topic = f"{kafka_topics.prefix}-sink-created-{id(kafka_topics):x}"
    kafka_topics.created.append(topic)
    sink = KafkaSink(query="q", topic=topic, lineage="x", **conn.spark_options())
    sink.write(5, _rows([7.0]))
    sink.close()
    df = (
        spark.read.format("kafka")
        .options(**conn.spark_options(), subscribe=topic, startingOffsets="earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select(
            F.from_json(
                F.col("value").cast("string"),
                "route string, mean double, window_start timestamp, sic double",
            ).alias("r")
        )
        .select("r.*")
    )
    row = df.collect()[0]
    assert (row["route"], row["mean"], row["sic"]) == ("r0", 7.0, 0.5)
    assert row["window_start"] == pd.Timestamp(100.0, unit="s").to_pydatetime()
