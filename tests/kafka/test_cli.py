"""spillway kafka up|down|status|topics|fetch and spillway produce, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.kafka import admin, broker
from spillway.kafka.broker import BrokerState
from spillway.testing import KafkaTopics

pytestmark = pytest.mark.kafka


def test_up_is_idempotent_down_stops_and_data_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path / "k")
    try:
        assert main(["kafka", "up", "--dir", d]) == 0
        out, err = capsys.readouterr()
        address = out.strip()
        assert address.startswith("127.0.0.1:") and "up on" in err
        assert main(["kafka", "up", "--dir", d]) == 0  # running: same address, no new broker
        out, err = capsys.readouterr()
        assert out.strip() == address and "already running" in err
        assert main(["kafka", "status", "--dir", d]) == 0
        assert f"running on {address}" in capsys.readouterr().out
        state = broker.read_state(Path(d))
        assert state is not None
        admin.create_topic(state.connection(), "kept", partitions=2)
        assert main(["kafka", "topics", "--dir", d]) == 0
        assert capsys.readouterr().out.splitlines() == ["kept\t0\t0\t0", "kept\t1\t0\t0"]

        assert main(["kafka", "down", "--dir", d]) == 0
        assert "stopped" in capsys.readouterr().out
        assert main(["kafka", "status", "--dir", d]) == 1
        assert "not running" in capsys.readouterr().out
        assert main(["kafka", "down", "--dir", d]) == 0
        assert "no Kafka broker was running" in capsys.readouterr().out

        assert main(["kafka", "up", "--dir", d]) == 0  # again: same port, same topics
        assert capsys.readouterr().out.strip() == address
        again = broker.read_state(Path(d))
        assert again is not None and admin.list_topics(again.connection()) == {"kept": 2}
    finally:
        broker.stop(Path(d))


def test_produce_reports_its_rate(
    kafka_broker: BrokerState,
    kafka_topics: KafkaTopics,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = kafka_topics.new(partitions=2)
    summary = tmp_path / "s.json"
    argv = ["produce", topic, "--bootstrap", kafka_broker.bootstrap, "--sources", "2"]
    argv += ["--rate", "400", "--duration", "1.2", "--report-every", "0.5"]
    argv += ["--profile", "bursty", "--profile-option", "factor=10", "--summary", str(summary)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) >= 3 and all("sent" in line and "/s" in line for line in lines[:-1])
    assert "tuples/s achieved" in lines[-1] and "bursty profile asked" in lines[-1]
    figures = json.loads(summary.read_text())
    offsets = admin.partition_offsets(kafka_topics.conn, topic)
    assert figures["sent"] == figures["delivered"] == sum(o.latest for o in offsets) > 0
    assert figures["sent_over_due"] == 1.0


def test_unreachable_broker_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "t", "--bootstrap", "127.0.0.1:1", "--duration", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("spillway: error: Kafka broker 127.0.0.1:1 is unreachable")
    assert err.count("\n") == 1


def test_no_local_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "t", "--dir", str(tmp_path)]) == 2
    assert "no Kafka broker is running from" in capsys.readouterr().err
    assert main(["kafka", "status", "--dir", str(tmp_path)]) == 1


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "t", "--feed-option", "no-equals-sign"]) == 2
    assert "--feed-option" in capsys.readouterr().err
    assert main(["produce", "t", "--feed", "nope", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "feed must be one of" in capsys.readouterr().err


def test_fetch_is_a_no_op_when_cached(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kafka", "fetch"]) == 0
    out = capsys.readouterr().out
    assert "kafka-4.3.1:" in out and "spark-sql-kafka-4.2.0:" in out
