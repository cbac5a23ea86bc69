"""The README's Kafka example as shipped: `spillway produce` sends to a topic while
`spillway run --config spillway/examples/kafka.toml` sheds it (shortened)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

EXAMPLE = Path(str(files("spillway") / "examples" / "kafka.toml"))
CLI = "import sys; from spillway.cli import main; sys.exit(main())"


def _wait_for_topic(broker, topic, timeout_s=30.0):
    from spillway.kafka.admin import list_topics

    deadline = time.monotonic() + timeout_s
    while topic not in list_topics(broker.connection()):
        assert time.monotonic() < deadline, f"{topic} was not created"
        time.sleep(0.2)


def test_the_kafka_example_runs_as_shipped(kafka_broker, tmp_path, monkeypatch):
    monkeypatch.setenv("SPILLWAY_KAFKA_DIR", kafka_broker.data_dir)  # the broker `kafka up` runs
    monkeypatch.chdir(tmp_path)  # the example's dead-letter folder is relative
    # the producer in its own process, as `spillway produce ... &` runs it
    producer = subprocess.Popen(
        [sys.executable, "-c", CLI, "produce", "clicks", "--sources", "4", "--rate", "500", "--duration", "120"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_for_topic(kafka_broker, "clicks")  # `spillway produce` creates it
        # its own process too: the run owns (and stops) its SparkSession, which must not be
        # the test session the other Spark tests share
        code = subprocess.run(
            [sys.executable, "-c", CLI, "run", "--config", str(EXAMPLE), "--duration", "25",
             "--no-live", "--out", str(tmp_path / "out")],
            cwd=tmp_path, timeout=600,
        ).returncode  # fmt: skip
        still_sending = producer.poll() is None
    finally:
        producer.kill()
        producer.wait(timeout=60)
    assert code == 0 and still_sending
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (q,) = summary["queries"]
    assert q["name"] == "clicks" and q["windows"] > 0, q
    arrived = sum(
        int(float(line.split(",")[3]))
        for line in (tmp_path / "out" / "intervals.csv").read_text().splitlines()[1:]
    )
    assert arrived > 0 and q["malformed"] == 0
    assert q["late"] <= 0.01 * arrived  # a producer on time: records within lateness_s
    # consumer lag per partition at the end: the producer ran on after the node stopped
    assert set(q["lag_at_end"]) == {f"clicks/{p}" for p in range(4)}
    assert all(v >= 0 for v in q["lag_at_end"].values()) and sum(q["lag_at_end"].values()) > 0
    assert q["sic_mean"] is None or 0 < q["sic_mean"] <= 1.05
    results = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert len(results) > 1 and "key_text" in results[0]
    assert (tmp_path / "runs" / "dead-letters" / "clicks").is_dir()
