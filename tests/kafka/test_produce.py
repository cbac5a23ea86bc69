"""spillway produce: arrivals follow the profile, messages carry the feed, rates are reported."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.kafka.admin import partition_offsets
from spillway.kafka.produce import (
    SEND_EVERY_S,
    ProduceConfig,
    ProduceProgress,
    produce_feed,
    run_paced,
)
from spillway.kafka.reader import read_range
from spillway.testing import KafkaTopics, ManualClock


class Recorder:
    """A writer double that records what it is given and may cost clock time per message."""

    failed = 0

    def __init__(self, clock: ManualClock, cost_s: float = 0.0) -> None:
        self.clock, self.cost_s = clock, cost_s
        self.calls: list[dict[str, Any]] = []

    def write(self, topic: str, values: list[str], **kw: Any) -> int:
        self.calls.append({"topic": topic, "values": values, **kw})
        self.clock.advance(self.cost_s * len(values))
        return len(values)

    def flush(self) -> None:
        pass


def _run(cfg: ProduceConfig, cost_s: float = 0.0) -> tuple[Any, Recorder, list[ProduceProgress]]:
    clock = ManualClock()
    rec = Recorder(clock, cost_s)
    progress: list[ProduceProgress] = []
    summary = run_paced(
        cfg,
        cfg.make_feed(),
        rec,
        partitions=cfg.sources,
        on_progress=progress.append,
        clock=clock,
        sleep=clock.advance,
        wall=lambda: 1_800_000_000.0,
    )
    return summary, rec, progress


def test_arrivals_follow_a_step_profile() -> None:
    cfg = ProduceConfig(
        topic="t",
        rate=100.0,
        profile="step",
        profile_options=(("times", [2.0]), ("factors", [3.0])),
        duration_s=4.0,
        report_every_s=1.0,
    )
    summary, rec, progress = _run(cfg)
    per_second = [p.interval_sent / p.interval_s for p in progress]
    # tuples go out every SEND_EVERY_S, so a second's count is off by up to one send's worth
    assert per_second == pytest.approx([100, 100, 300, 300], abs=300 * SEND_EVERY_S + 1)
    # one write per source and send, not per tick (a tick is 5 ms: that was 800 writes)
    assert len(rec.calls) <= 4.0 / SEND_EVERY_S + 2
    assert [p.t_s for p in progress] == pytest.approx([1, 2, 3, 4], abs=0.01)
    assert summary.sent == summary.due == cfg.make_feed().count(4.0).sum() == 800
    assert all(p.behind == 0 for p in progress)


def test_a_slow_producer_falls_behind_and_says_so() -> None:
    """The profile, not the producer, sets arrivals: at 2x what it can send, half is behind."""
    cfg = ProduceConfig(topic="t", rate=1000.0, duration_s=5.0, report_every_s=1.0, max_batch=100)
    summary, _, progress = _run(cfg, cost_s=1 / 500)
    assert summary.due == pytest.approx(5000, abs=2)
    assert summary.achieved_rate == pytest.approx(500, rel=0.02)  # what the writer can do
    assert summary.ratio == pytest.approx(0.5, rel=0.1)
    assert progress[-1].behind == summary.due - summary.sent
    assert "behind" in progress[-1].line() and "sent/due 0.5" in summary.line()


def test_messages_carry_source_seq_key_and_event_time() -> None:
    cfg = ProduceConfig(topic="t", feed="taxi", sources=2, rate=50.0, duration_s=2.0)
    _, rec, _ = _run(cfg)
    feed = cfg.make_feed()
    for call in rec.calls:
        rows = [json.loads(v) for v in call["values"]]
        s = rows[0]["source"]
        idx = np.array([r["seq"] for r in rows])
        payload = feed.payload(s, idx)
        assert [r["key"] for r in rows] == payload["key"].tolist()
        assert [r["value"] for r in rows] == payload["value"].tolist()
        assert call["keys"] == [str(k) for k in payload["key"]]
        assert call["partitions"] == s
        event_ms = np.round((1_800_000_000.0 + feed.arrival_time(s, idx)) * 1000)
        assert np.array_equal(call["timestamps_ms"], event_ms.astype(np.int64))
        parsed = [datetime.fromisoformat(r["event_time"]).timestamp() * 1000 for r in rows]
        assert np.allclose(parsed, event_ms)


def test_csv_values_and_arrival_timestamps() -> None:
    cfg = ProduceConfig(
        topic="t",
        rate=20.0,
        duration_s=1.0,
        value_format="csv",
        time_format="millis",
        key="source",
        partition_by="key",
        timestamp="arrival",
    )
    _, rec, _ = _run(cfg)
    [row] = list(csv.reader([rec.calls[0]["values"][0]]))
    assert row[:2] == ["0", "0"] and int(row[4]) == rec.calls[0]["timestamps_ms"][0]
    assert rec.calls[0]["keys"][0] == "0" and rec.calls[0]["partitions"] is None


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"value_format": "xml"}, ConfigError, "value_format must be one of csv, json"),
        ({"key": "id"}, ConfigError, "key must be one of key, source, none"),
        ({"timestamp": "now"}, ConfigError, "timestamp must be one of event, arrival"),
        ({"partition_by": "random"}, ConfigError, "partition_by must be one of source, key"),
        ({"duration_s": 0}, ConfigError, "duration_s must be a finite number > 0"),
        ({"rate": float("inf")}, ConfigError, "rate must be a finite number > 0"),
        ({"sources": 0}, ConfigError, "sources must be an integer >= 1"),
        ({"partitions": 0}, ConfigError, "partitions must be an integer >= 1"),
        ({"topic": "a b"}, ConfigError, "topic name must be"),
    ],
)
def test_config_rules(kw: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ProduceConfig(**{"topic": "t", **kw})


def test_unknown_feed_fails_before_sending() -> None:
    with pytest.raises(UnknownNameError, match="feed must be one of"):
        ProduceConfig(topic="t", feed="nope").make_feed()


@pytest.mark.kafka
def test_produce_into_a_broker(kafka_topics: KafkaTopics) -> None:
    topic = f"produce-{id(kafka_topics)}"
    kafka_topics.created.append(topic)  # created by produce_feed, deleted after the test
    cfg = ProduceConfig(topic=topic, sources=2, rate=2000.0, duration_s=1.5, report_every_s=0.5)
    progress: list[ProduceProgress] = []
    summary = produce_feed(cfg, kafka_topics.conn, on_progress=progress.append)
    offsets = partition_offsets(kafka_topics.conn, topic)
    assert [o.partition for o in offsets] == [0, 1]
    assert sum(o.latest for o in offsets) == summary.sent == summary.delivered
    assert summary.sent == pytest.approx(6000, rel=0.05) and summary.ratio == 1.0
    assert len(progress) >= 3
    table = read_range(kafka_topics.conn, topic, 1, 0, offsets[1].latest)
    rows = [json.loads(v) for v in table.column("value").to_pylist()]
    assert {r["source"] for r in rows} == {1}
    assert [r["seq"] for r in rows] == list(range(len(rows)))
    kafka_ms = table.column("timestamp").to_numpy().astype("datetime64[ms]").astype(np.int64)
    event_ms = [datetime.fromisoformat(r["event_time"]).timestamp() * 1000 for r in rows]
    assert np.allclose(kafka_ms, event_ms)


@pytest.mark.kafka
def test_existing_topic_keeps_its_partitions(kafka_topics: KafkaTopics) -> None:
    topic = kafka_topics.new(partitions=1)
    cfg = ProduceConfig(topic=topic, sources=3, rate=100.0, duration_s=0.5)
    summary = produce_feed(cfg, kafka_topics.conn)
    assert summary.partitions == 1
    assert partition_offsets(kafka_topics.conn, topic)[0].latest == summary.sent


def test_replayed_file_keeps_its_text_keys_and_recorded_times(tmp_path: Any) -> None:
    path = tmp_path / "rides.csv"
    path.write_text(
        "when,route,fare\n"
        "2024-03-01T10:00:00Z,JFK-LAX,10.5\n"
        '2024-03-01T10:00:30Z,"SFO, T2-SEA",7.25\n'
        "2024-03-01T10:01:00Z,JFK-LAX,12.0\n"
    )
    options = (
        ("path", str(path)),
        ("time_column", "when"),
        ("value_column", "fare"),
        ("key_column", "route"),
        ("speed", 60.0),  # a recorded minute per second
    )
    cfg = ProduceConfig(topic="t", feed="replay", feed_options=options, duration_s=2.0)
    _, rec, _ = _run(cfg)
    rows = [json.loads(v) for call in rec.calls for v in call["values"]]
    assert [r["key"] for r in rows] == ["JFK-LAX", "SFO, T2-SEA", "JFK-LAX"]
    assert [r["event_time"] for r in rows] == [
        "2024-03-01T10:00:00.000Z",
        "2024-03-01T10:00:30.000Z",
        "2024-03-01T10:01:00.000Z",
    ]
    assert [k for call in rec.calls for k in call["keys"]] == ["JFK-LAX", "SFO, T2-SEA", "JFK-LAX"]
    stamps = [t for call in rec.calls for t in call["timestamps_ms"]]
    assert stamps == [1709287200000, 1709287230000, 1709287260000]
