"""The driver process killed inside a micro-batch and started again from its checkpoint: the
same results (with their SIC) and the same dead letters, in the folder and in the topic, as a
driver that was never killed. Each driver is its own process (tests/kafka/restart_driver.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from spillway.kafka.dead_letter import record_key
from tests.kafka.test_kafka_restart import _fill, _topic_keys

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DRIVER = Path(__file__).with_name("restart_driver.py")
N_BATCHES = 6
COLUMNS = ["query_id", "window_start", "key", "value", "sic", "n_in"]


def _driver(conn, topic, dlq, folder, epoch_s, *extra):
    args = [
        sys.executable,
        str(DRIVER),
        conn.bootstrap_servers,
        topic,
        dlq,
        str(folder / "ckpt"),
        str(folder / "dead"),
        str(epoch_s),
        str(N_BATCHES),
        *extra,
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)  # fmt: skip


def _outcome(folder):
    res = pd.read_csv(folder / "ckpt" / "run" / "results.csv")
    res = res[res["batch_id"] < N_BATCHES].sort_values(["window_start", "key"])
    dead = sorted(
        (d["topic"], d["partition"], d["offset"], d["error"])
        for f in (folder / "dead").iterdir()
        if int(f.stem.split("-")[1]) < N_BATCHES
        for d in map(json.loads, f.read_text().splitlines())
    )
    return res[COLUMNS].reset_index(drop=True), dead


def test_a_killed_driver_restarts_from_its_checkpoint_with_the_same_output(kafka_topics, tmp_path):
    conn = kafka_topics.conn
    topic = kafka_topics.new(partitions=2)
    epoch_s = float(int(time.time()) - 3600)
    _fill(conn, topic, int(epoch_s * 1000))
    clean_dlq, crash_dlq = kafka_topics.new(partitions=1), kafka_topics.new(partitions=1)

    clean = _driver(conn, topic, clean_dlq, tmp_path / "a", epoch_s)
    assert clean.returncode == 0, clean.stderr[-2000:]
    killed = _driver(conn, topic, crash_dlq, tmp_path / "b", epoch_s, "crash")
    assert killed.returncode == 9, killed.stderr[-2000:]  # died inside batch 2
    assert (tmp_path / "b" / "ckpt" / "run" / "group_avg" / "offsets" / "2").exists()
    stored = pd.read_csv(tmp_path / "b" / "ckpt" / "run" / "results.csv")
    assert set(stored["batch_id"]) == {0, 1}  # what the killed driver had finished
    again = _driver(conn, topic, crash_dlq, tmp_path / "b", epoch_s)
    assert again.returncode == 0, again.stderr[-2000:]

    (res_a, dead_a), (res_b, dead_b) = _outcome(tmp_path / "a"), _outcome(tmp_path / "b")
    assert len(res_a) > 0 and dead_a
    pd.testing.assert_frame_equal(res_a, res_b)  # results and their SIC
    assert dead_a == dead_b
    for dlq, dead in ((clean_dlq, dead_a), (crash_dlq, dead_b)):
        keys = _topic_keys(conn, dlq)
        assert len(keys) == len(set(keys))  # exactly once, across the kill
        assert {record_key(t, p, o) for t, p, o, _ in dead} <= set(keys)
