"""Spark's own Kafka source (the connector spillway fetches) reads topics of our broker."""

from __future__ import annotations

import json

import pytest

from spillway.kafka import jars
from spillway.kafka.reader import SCHEMA, read_range
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture
def topic(kafka_topics: KafkaTopics) -> str:
    name = kafka_topics.new(partitions=2)
    with KafkaWriter(kafka_topics.conn) as w:
        for p in (0, 1):
            values = [json.dumps({"p": p, "i": i, "x": i * 0.5}) for i in range(150)]
            w.write(name, values, keys=[str(i) for i in range(150)], partitions=p)
    return name


def _connector_on_classpath(spark) -> None:
    configured = spark.sparkContext.getConf().get("spark.jars", "")
    if f"spark-sql-kafka-0-10_2.13-{jars.SPARK_KAFKA_VERSION}.jar" not in configured:
        pytest.fail(
            "this SparkSession was created without Spark's Kafka source: create sessions with "
            "spillway.testing.local_spark (it adds the connector's jars)"
        )


def test_spark_reads_our_topic_as_a_batch(spark, kafka_topics: KafkaTopics, topic: str) -> None:
    _connector_on_classpath(spark)
    df = (
        spark.read.format("kafka")
        .options(**kafka_topics.conn.spark_options())
        .option("subscribe", topic)
        .load()
    )
    assert df.columns == SCHEMA.names
    rows = df.select("partition", "offset", "value").collect()
    assert len(rows) == 300
    ours = {
        (p, o): v
        for p in (0, 1)
        for o, v in zip(
            read_range(kafka_topics.conn, topic, p, 0, 150).column("offset").to_pylist(),
            read_range(kafka_topics.conn, topic, p, 0, 150).column("value").to_pylist(),
            strict=True,
        )
    }
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == ours


def test_spark_streams_our_topic(spark, kafka_topics: KafkaTopics, topic: str) -> None:
    from pyspark.sql import functions as F

    _connector_on_classpath(spark)
    stream = (
        spark.readStream.format("kafka")
        .options(**kafka_topics.conn.spark_options())
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), "p INT, i BIGINT, x DOUBLE").alias("r"))
        .select("r.*")
    )
    name = f"kafka_{topic.replace('-', '_')}"
    q = stream.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    try:
        q.awaitTermination(120)
    finally:
        q.stop()
    got = spark.sql(f"select p, count(*) n, sum(x) s from {name} group by p order by p").collect()
    assert [(r.p, r.n, r.s) for r in got] == [(0, 150, 5587.5), (1, 150, 5587.5)]
