"""Exact offset ranges: contents, consecutive ranges, gaps, and every way a range can fail."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pytest

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.admin import partition_offsets
from spillway.kafka.reader import SCHEMA, RangeReader, read_range
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics

pytestmark = pytest.mark.kafka

N = 3000


@pytest.fixture
def filled(kafka_topics: KafkaTopics) -> str:
    """A topic with 2 partitions; partition p holds N messages {"p": p, "i": i}."""
    topic = kafka_topics.new(partitions=2)
    with KafkaWriter(kafka_topics.conn) as w:
        for p in (0, 1):
            w.write(
                topic,
                [json.dumps({"p": p, "i": i}) for i in range(N)],
                keys=[str(i) for i in range(N)],
                partitions=p,
                timestamps_ms=1_700_000_000_000 + np.arange(N),
            )
    return topic


def test_range_is_exact(kafka_topics: KafkaTopics, filled: str) -> None:
    table = read_range(kafka_topics.conn, filled, 1, 100, 250)
    assert table.schema == SCHEMA
    assert table.column("offset").to_pylist() == list(range(100, 250))
    values = [json.loads(v) for v in table.column("value").to_pylist()]
    assert values == [{"p": 1, "i": i} for i in range(100, 250)]
    assert table.column("key").to_pylist()[:2] == [b"100", b"101"]
    assert set(table.column("partition").to_pylist()) == {1}
    assert set(table.column("topic").to_pylist()) == {filled}
    ts = table.column("timestamp").cast(pa.int64()).to_numpy()
    assert (ts == (1_700_000_000_000 + np.arange(100, 250)) * 1000).all()
    assert set(table.column("timestampType").to_pylist()) == {0}  # create time


def test_consecutive_ranges_add_up_to_the_whole(kafka_topics: KafkaTopics, filled: str) -> None:
    with RangeReader(kafka_topics.conn) as r:
        whole = r.read(filled, 0, 0, N)
        cuts = [0, 1, 700, 701, 2999, N]
        parts = [r.read(filled, 0, a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
        again = r.read(filled, 0, 10, 20)  # going back re-seeks
        other = r.read(filled, 1, 0, 5)
    assert pa.concat_tables(parts).equals(whole)
    assert whole.num_rows == N
    assert again.column("offset").to_pylist() == list(range(10, 20))
    assert json.loads(other.column("value")[0].as_py()) == {"p": 1, "i": 0}
    assert r.read(filled, 0, 5, 5).num_rows == 0  # empty range: nothing fetched


def test_gaps_from_transaction_markers(kafka_topics: KafkaTopics) -> None:
    """A committed transaction leaves a marker at one offset: ranges across it skip it."""
    from confluent_kafka import Producer

    topic = kafka_topics.new()
    conf = kafka_topics.conn.client_config(transactional_id=f"{topic}-tx")
    p = Producer(conf)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, str(i).encode(), partition=0)
    p.commit_transaction(30)  # records 0..4, marker at 5
    deadline = time.monotonic() + 30
    while partition_offsets(kafka_topics.conn, topic)[0].latest < 6:  # the marker is written
        assert time.monotonic() < deadline, "the commit marker was not written in 30 s"
        time.sleep(0.05)
    with KafkaWriter(kafka_topics.conn) as w:
        w.write(topic, ["6", "7"], partitions=0)  # offsets 6, 7
    with RangeReader(kafka_topics.conn, timeout_s=10) as r:
        assert r.read(topic, 0, 0, 6).column("offset").to_pylist() == [0, 1, 2, 3, 4]
        assert r.read(topic, 0, 3, 8).column("offset").to_pylist() == [3, 4, 6, 7]
        assert r.read(topic, 0, 5, 6).num_rows == 0  # only the marker


def test_range_past_the_end_fails_after_the_timeout(kafka_topics: KafkaTopics, filled: str) -> None:
    with pytest.raises(KafkaClientError, match=r"offsets \[2990, 3010\) .* stopped at offset 3000"):
        read_range(kafka_topics.conn, filled, 0, 2990, 3010, timeout_s=1.0)


def test_deleted_records_are_an_error(kafka_topics: KafkaTopics, filled: str) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient(kafka_topics.conn.client_config())
    for f in client.delete_records([TopicPartition(filled, 0, 1000)]).values():
        f.result()
    with pytest.raises(KafkaClientError, match=r"offsets \[0, 10\) .* failed .*offset"):
        read_range(kafka_topics.conn, filled, 0, 0, 10, timeout_s=10)
    assert read_range(kafka_topics.conn, filled, 0, 1000, 1002).num_rows == 2


def test_missing_topic_or_partition(kafka_topics: KafkaTopics, filled: str) -> None:
    with pytest.raises(KafkaClientError, match="topic 'nope' partition 0 does not exist"):
        read_range(kafka_topics.conn, "nope", 0, 0, 1)
    with pytest.raises(KafkaClientError, match=r"partition 5 does not exist .*partitions 0..1"):
        read_range(kafka_topics.conn, filled, 5, 0, 1)


@pytest.mark.parametrize(("start", "end"), [(5, 3), (-1, 2)])
def test_bad_range(kafka_topics: KafkaTopics, start: int, end: int) -> None:
    with pytest.raises(ConfigError, match="need 0 <= start <= end"):
        read_range(kafka_topics.conn, "t", 0, start, end)


def test_bad_timeout(kafka_topics: KafkaTopics) -> None:
    with pytest.raises(ConfigError, match="timeout_s must be > 0"):
        RangeReader(kafka_topics.conn, timeout_s=0)
