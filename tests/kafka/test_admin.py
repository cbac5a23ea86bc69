"""Topics and partition offsets against the session broker."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka import admin
from spillway.kafka.connection import KafkaConnection
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics

pytestmark = pytest.mark.kafka


def test_partition_offsets_follow_the_log(kafka_topics: KafkaTopics) -> None:
    conn = kafka_topics.conn
    topic = kafka_topics.new(partitions=3)
    assert admin.partitions_of(conn, topic) == [0, 1, 2]
    with KafkaWriter(conn) as w:
        w.write(topic, ["a"] * 5, partitions=0)
        w.write(topic, ["b"] * 2, partitions=2)
    got = [(p.partition, p.earliest, p.latest) for p in admin.partition_offsets(conn, topic)]
    assert got == [(0, 0, 5), (1, 0, 0), (2, 0, 2)]
    assert admin.list_topics(conn)[topic] == 3


def test_create_existing_topic(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new()
    with pytest.raises(KafkaClientError, match=f"creating topic '{topic}' .* failed: .*exists"):
        admin.create_topic(kafka_topics.conn, topic)
    admin.create_topic(kafka_topics.conn, topic, exist_ok=True)  # no error


def test_delete_topics(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new()
    admin.delete_topics(kafka_topics.conn, [topic, "never-was"])
    assert topic not in admin.list_topics(kafka_topics.conn)
    with pytest.raises(KafkaClientError, match="deleting topic 'never-was'"):
        admin.delete_topics(kafka_topics.conn, ["never-was"], missing_ok=False)


def test_missing_topic_is_one_clear_line(kafka_topics: KafkaTopics) -> None:
    with pytest.raises(KafkaClientError, match="topic 'nope' does not exist on 127.0.0.1:"):
        admin.partition_offsets(kafka_topics.conn, "nope")


@pytest.mark.parametrize(
    ("name", "partitions", "match"),
    [
        ("ok", 0, "partitions must be an integer >= 1"),
        ("bad name", 1, "topic name must be 1-249 characters"),
        ("", 1, "topic name must be"),
    ],
)
def test_create_rules(kafka_topics: KafkaTopics, name: str, partitions: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        admin.create_topic(kafka_topics.conn, name, partitions=partitions)


def test_unreachable_cluster() -> None:
    with pytest.raises(KafkaClientError, match="127.0.0.1:1 is unreachable"):
        admin.list_topics(KafkaConnection(bootstrap_servers="127.0.0.1:1"))


def test_a_new_partitions_leader_epoch_errors_are_retried_not_raised():
    from confluent_kafka import KafkaError

    from spillway.kafka.admin import _transient

    assert _transient(KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH))
    assert _transient(KafkaError(KafkaError.FENCED_LEADER_EPOCH))
    assert not _transient(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert not _transient(None)
