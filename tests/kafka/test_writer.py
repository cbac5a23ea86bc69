"""KafkaWriter: what is written is what is read, and failures are never silent."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.reader import read_range
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics

pytestmark = pytest.mark.kafka


def test_keys_partition_like_the_java_client(kafka_topics: KafkaTopics) -> None:
    """murmur2 of the key, as Java's default partitioner: the same key, the same partition."""
    topic = kafka_topics.new(partitions=4)
    keys = [f"k{i % 10}" for i in range(200)]
    with KafkaWriter(kafka_topics.conn) as w:
        assert w.write(topic, [f"v{i}" for i in range(200)], keys=keys) == 200
    where: dict[bytes, set[int]] = {}
    total = 0
    for p in range(4):
        t = read_range(kafka_topics.conn, topic, p, 0, _latest(kafka_topics, topic, p))
        total += t.num_rows
        for k in t.column("key").to_pylist():
            where.setdefault(k, set()).add(p)
    assert total == 200
    assert all(len(ps) == 1 for ps in where.values())
    assert len({p for ps in where.values() for p in ps}) > 1


def _latest(kafka_topics: KafkaTopics, topic: str, partition: int) -> int:
    from spillway.kafka.admin import partition_offsets

    return partition_offsets(kafka_topics.conn, topic)[partition].latest


def test_per_message_partitions_and_timestamps(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new(partitions=2)
    with KafkaWriter(kafka_topics.conn) as w:
        w.write(topic, ["a", "b", "c"], partitions=np.array([1, 0, 1]), timestamps_ms=[7, 8, 9])
    t1 = read_range(kafka_topics.conn, topic, 1, 0, 2)
    assert t1.column("value").to_pylist() == [b"a", b"c"]
    assert t1.column("timestamp").cast(pa.int64()).to_pylist() == [7000, 9000]


def test_lengths_must_match(kafka_topics: KafkaTopics) -> None:
    w = KafkaWriter(kafka_topics.conn)
    with pytest.raises(ConfigError, match=r"keys needs one entry per value \(2\), got 1"):
        w.write("t", ["a", "b"], keys=["k"])
    with pytest.raises(ConfigError, match="timestamps_ms needs one entry per value"):
        w.write("t", ["a"], timestamps_ms=[1, 2])


def test_failed_delivery_is_raised_at_flush(kafka_topics: KafkaTopics) -> None:
    w = KafkaWriter(kafka_topics.conn, message_timeout_ms=1500)
    w.write("no-such-topic", ["a", "b"], partitions=0)
    with pytest.raises(KafkaClientError, match=r"2 of 2 messages .* failed; first: no-such-topic"):
        w.flush(timeout_s=20)


def test_message_too_large_is_refused(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new()
    w = KafkaWriter(kafka_topics.conn)
    with pytest.raises(KafkaClientError, match=f"producing to '{topic}' .* failed: .*too large"):
        w.write(topic, [b"x" * (3 << 20)], partitions=0)
