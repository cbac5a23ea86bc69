from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.federation.link import LinkWriter, parse_key, read_link
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics, settled_end


def _batch(b: int, n: int = 3) -> pd.DataFrame:
    """Batch ``b``: ``n`` window results of query 0 with SIC 0.01 * (b + 1) each."""
    return pd.DataFrame(
        {"query_id": [0] * n, "window_start": [float(b)] * n, "sic": [0.01 * (b + 1)] * n}
    )


def _latest(topics: KafkaTopics, topic: str, partition: int = 0) -> int:
    return settled_end(topics.conn, topic, partition)


@pytest.mark.kafka
def test_a_replayed_batch_is_not_written_twice(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new(partitions=2)
    with LinkWriter(kafka_topics.conn, topic, fragment="avg/leaf", partition=1) as w:
        assert w.last_batch == -1
        assert [w.write(b, _batch(b)) for b in (0, 1, 2)] == [True, True, True]
        end = _latest(kafka_topics, topic, 1)
        assert w.write(1, _batch(1)) is False  # Spark replays batch 1
        assert w.write(2, _batch(2)) is False
        assert _latest(kafka_topics, topic, 1) == end
    # A new writer (a restarted node) finds where its predecessor stopped.
    with LinkWriter(kafka_topics.conn, topic, fragment="avg/leaf", partition=1) as w:
        assert w.last_batch == 2
        assert w.write(2, _batch(2)) is False
        assert w.write(3, _batch(3)) is True
    rows = read_link(kafka_topics.conn, topic, 1, 0, _latest(kafka_topics, topic, 1))
    assert rows.groupby("batch").size().to_dict() == {0: 3, 1: 3, 2: 3, 3: 3}
    assert rows["sic"].sum() == pytest.approx(3 * (0.01 + 0.02 + 0.03 + 0.04))
    assert set(rows["fragment"]) == {"avg/leaf"}
    assert list(rows.columns[:3]) == ["query_id", "window_start", "sic"]


@pytest.mark.kafka
def test_a_rows_record_carries_its_windows_source_time(kafka_topics: KafkaTopics) -> None:
    """A batch spanning three windows is written at once; each record's timestamp is its
    window's start, so the consumer windows it by source time, not by the time of writing."""
    from spillway.kafka.reader import RangeReader

    topic = kafka_topics.new(partitions=1)
    starts = [1795773416.0, 1795773417.0, 1795773418.5]
    rows = pd.DataFrame({"query_id": [0, 0, 0], "window_start": starts, "sic": [0.1] * 3})
    with LinkWriter(kafka_topics.conn, topic, fragment="avg/leaf") as w:
        assert w.write(0, rows)
        with pytest.raises(ConfigError, match="window_start must be finite Unix seconds"):
            w.write(1, rows.assign(window_start=[-1.0, 0.0, 1.0]))
    with RangeReader(kafka_topics.conn) as reader:
        table = reader.read(topic, 0, 0, _latest(kafka_topics, topic))
    got = table.column("timestamp").cast("int64").to_numpy() / 1e6
    assert got.tolist() == pytest.approx(starts)


_CRASH = textwrap.dedent(
    """
    import sys, time
    import pandas as pd
    from spillway.federation.link import LinkWriter
    from spillway.kafka.connection import KafkaConnection
    conn = KafkaConnection(bootstrap_servers=sys.argv[1])
    w = LinkWriter(conn, sys.argv[2], fragment="top/first")
    w.write(0, pd.DataFrame({"query_id": [1], "window_start": [0.0], "sic": [0.5]}))
    p = w._producer  # batch 1: rows sent, never committed (the node dies mid-batch)
    p.begin_transaction()
    for _ in range(4):
        p.produce(sys.argv[2], value='{"query_id":1,"window_start":1.0,"sic":0.25}',
                  key="top/first:1", partition=0)
    p.flush(30)
    print("sent", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.kafka
def test_a_batch_cut_by_a_crash_is_delivered_once_after_the_restart(
    kafka_topics: KafkaTopics,
) -> None:
    """A node killed mid-batch leaves its rows in the log uncommitted; the restarted node's
    writer aborts them, then writes the replayed batch: downstream sees its SIC once."""
    topic = kafka_topics.new()
    crash = subprocess.Popen(
        [sys.executable, "-c", _CRASH, kafka_topics.conn.bootstrap_servers, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert crash.stdout is not None
        assert crash.stdout.readline().strip() == "sent"
    finally:
        crash.kill()
        crash.wait(timeout=30)
    with LinkWriter(kafka_topics.conn, topic, fragment="top/first", timeout_s=60) as w:
        assert w.last_batch == 0  # the open batch 1 was aborted, not committed
        replay = pd.DataFrame({"query_id": [1] * 4, "window_start": [1.0] * 4, "sic": [0.25] * 4})
        assert w.write(1, replay) is True
    end = _latest(kafka_topics, topic)
    committed = read_link(kafka_topics.conn, topic, 0, 0, end)
    assert committed.groupby("batch")["sic"].sum().to_dict() == {0: 0.5, 1: 1.0}
    # The aborted rows are in the log: a read_uncommitted reader sees batch 1 twice.
    dirty = read_link(kafka_topics.conn, topic, 0, 0, end, isolation_level="read_uncommitted")
    assert dirty.groupby("batch").size().to_dict() == {0: 1, 1: 8}


@pytest.mark.kafka
def test_a_partition_written_by_another_fragment_is_refused(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new()
    with LinkWriter(kafka_topics.conn, topic, fragment="a") as w:
        w.write(0, _batch(0))
        with pytest.raises(ConfigError, match="batch_id must be an int >= 0, got -1"):
            w.write(-1, _batch(0))
        with pytest.raises(ConfigError, match=r"missing \['sic'\]"):
            w.write(1, _batch(1).drop(columns="sic"))
        with pytest.raises(ConfigError, match="sic must be finite and >= 0"):
            w.write(1, _batch(1).assign(sic=-1.0))
        with pytest.raises(ConfigError, match="rows must be a pandas DataFrame"):
            w.write(1, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InputDataError, match="was last written by fragment 'a', not 'b'"):
        LinkWriter(kafka_topics.conn, topic, fragment="b")
    with pytest.raises(ConfigError, match="has no partition 3"):
        LinkWriter(kafka_topics.conn, topic, fragment="a", partition=3)
    other = kafka_topics.new()
    with KafkaWriter(kafka_topics.conn) as kw:
        kw.write(other, ["{}"], keys=["no-batch"], partitions=0)
    with pytest.raises(InputDataError, match="is not '<fragment>:<batch>'"):
        LinkWriter(kafka_topics.conn, other, fragment="a")


def test_names_and_keys_are_checked() -> None:
    assert parse_key(b"q/f:12") == ("q/f", 12)
    assert parse_key(b"a:b:3") == ("a:b", 3)
    with pytest.raises(InputDataError, match="is not '<fragment>:<batch>'"):
        parse_key(b"f:x")
    with pytest.raises(InputDataError, match="is not '<fragment>:<batch>'"):
        parse_key(None)
