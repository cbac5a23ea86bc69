"""A driver running a user query into a Kafka sink, killed right after the sink committed a
batch and before Spark recorded it, then started again from its checkpoint: the sink topic
holds every batch once, with the same rows and SIC as a driver that was never killed. Each
driver is its own process (tests/kafka/user_restart_driver.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from spillway.federation.link import read_link
from spillway.spark.restart import run_fresh
from spillway.testing import settled_end
from tests.kafka.test_kafka_restart import _fill

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DRIVER = Path(__file__).with_name("user_restart_driver.py")
N_BATCHES = 6
COLUMNS = ["batch", "window_start", "route", "mean_fare", "rides", "sic"]


def _driver(conn, topic, sink_topic, folder, epoch_s, *extra):
    args = [str(DRIVER), conn.bootstrap_servers, topic, sink_topic, str(folder / "ckpt"),
            str(epoch_s), str(N_BATCHES), *extra]  # fmt: skip
    return run_fresh(args, timeout_s=300)


def _sunk(conn, topic):
    rows = read_link(conn, topic, 0, 0, settled_end(conn, topic))
    rows = rows[rows["batch"] < N_BATCHES]
    return rows[COLUMNS].sort_values(["batch", "window_start", "route"]).reset_index(drop=True)


def test_a_driver_killed_after_its_sink_wrote_restarts_without_writing_twice(
    kafka_topics, tmp_path
):
    conn = kafka_topics.conn
    topic = kafka_topics.new(partitions=2)
    epoch_s = float(int(time.time()) - 3600)
    _fill(conn, topic, int(epoch_s * 1000))
    clean_sink, crash_sink = kafka_topics.new(), kafka_topics.new()

    clean = _driver(conn, topic, clean_sink, tmp_path / "a", epoch_s)
    assert clean.returncode == 0, clean.stderr[-2000:]
    killed = _driver(conn, topic, crash_sink, tmp_path / "b", epoch_s, "crash")
    assert killed.returncode == 9, killed.stderr[-2000:]
    assert set(_sunk(conn, crash_sink)["batch"]) == {0, 1, 2}  # batch 2 is in the topic
    again = _driver(conn, topic, crash_sink, tmp_path / "b", epoch_s)
    assert again.returncode == 0, again.stderr[-2000:]

    a, b = _sunk(conn, clean_sink), _sunk(conn, crash_sink)
    assert len(a) > 0 and set(a["batch"]) == set(range(N_BATCHES))
    pd.testing.assert_frame_equal(a, b)  # every result once, same values and SIC
    assert not b.duplicated(["window_start", "route"]).any()
