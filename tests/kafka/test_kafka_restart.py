"""A node shedding a Kafka topic, its query killed inside a micro-batch and restarted from the
checkpoint, gives the same results, SIC and dead letters (folder and topic) as an uninterrupted
run; the dead-letter topic holds each malformed record exactly once.

The topic is filled before either run, with record timestamps over 3 s from a fixed epoch, and
both nodes run on the logical clock from that epoch with a fixed capacity: the cuts (Kafka's
time index) and the shedding are the same in both, so any difference is the restart's.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.kafka.dead_letter import DeadLetterTopic, record_key
from spillway.kafka.reader import RangeReader
from spillway.kafka.writer import KafkaWriter

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROUTES = ("JFK-LAX", "SFO-SEA", "ORD-MIA", "BOS-DCA")
N_BATCHES = 6
RATE = 800  # records/s over both partitions; 1 in 50 is not JSON
COLUMNS = ["query", "window_start", "key_text", "value", "sic", "n_in"]


def _fill(conn, topic, epoch_ms):
    rng = np.random.default_rng(11)
    n = int(RATE * N_BATCHES * 0.5) + RATE  # one more second than the runs read
    values = [
        "{broken " + str(i)
        if i % 50 == 49
        else json.dumps({"route": ROUTES[i % 4], "fare": round(float(rng.gamma(4, 10)), 2)})
        for i in range(n)
    ]
    ts = epoch_ms + (np.arange(n) * 1000) // RATE
    with KafkaWriter(conn) as w:
        w.write(topic, values, partitions=[i % 2 for i in range(n)], timestamps_ms=ts)


def _wait(node, predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate() or node.query_error("group_avg") is not None:
            return
        time.sleep(0.1)
    raise AssertionError("the streaming query did not get there in time")


def _run(spark, conn, topic, dlq, tmp, epoch_s, on_batch=None, restart=False):
    from spillway.spark.node import Node

    opts = {**conn.spark_options(), "subscribe": topic, "startingOffsets": "earliest",
            "format": "json", "schema": "route string, fare double", "key_column": "route",
            "value_column": "fare", "dead_letter": str(tmp / "dead"),
            "dead_letter_topic": dlq, "lateness_s": 0}  # fmt: skip
    q = QuerySpec(name="fares", kind="group_avg", feed="kafka", feed_options=opts, window_s=0.5)
    cfg = NodeConfig(queries=(q,), trigger_s=0.5, stw_s=2.0, seed=3, policy="random",
                     checkpoint_dir=str(tmp / "ckpt"))  # fmt: skip
    node = Node(cfg, spark=spark, clock="logical", epoch_s=epoch_s, capacity_tuples_per_s=500,
                on_batch=on_batch)  # fmt: skip

    def done():
        return {b for p, b in node.store.batches() if p == "group_avg"} >= set(range(N_BATCHES))

    node.start()
    try:
        if restart:
            _wait(node, lambda: node.query_error("group_avg") is not None)
            assert "injected failure in batch 2" in node.query_error("group_avg")
            node.restart_plan("group_avg")
        _wait(node, done)
        assert node.query_error("group_avg") is None
        results = node.results()
        history = node.history()[:N_BATCHES]
    finally:
        node.stop()
    ids = node.store.to_pandas()[["batch_id"]]
    results = results.merge(ids, left_index=True, right_index=True)
    results = results[results.batch_id < N_BATCHES]
    dead = sorted(
        (d["topic"], d["partition"], d["offset"], d["error"])
        for f in (tmp / "dead").iterdir()
        if int(f.stem.split("-")[1]) < N_BATCHES
        for d in map(json.loads, f.read_text().splitlines())
    )
    return results.sort_values(["window_start", "key_text"]).reset_index(drop=True), history, dead


def _topic_keys(conn, topic):
    from spillway.kafka.admin import partition_offsets

    (po,) = partition_offsets(conn, topic)
    with RangeReader(conn) as r:
        table = r.read(topic, 0, 0, po.latest)
    return [k.decode() for k in table.column("key").to_pylist()]


def test_a_restart_inside_a_batch_replays_results_sic_and_dead_letters(
    spark, kafka_topics, tmp_path
):
    conn = kafka_topics.conn
    topic = kafka_topics.new(partitions=2)
    epoch_s = float(int(time.time()) - 3600)
    _fill(conn, topic, int(epoch_s * 1000))
    clean_dlq, crash_dlq = kafka_topics.new(partitions=1), kafka_topics.new(partitions=1)

    clean, clean_hist, clean_dead = _run(spark, conn, topic, clean_dlq, tmp_path / "a", epoch_s)
    failed = []

    def fail_once(plan, batch_id):
        if batch_id == 2 and not failed:
            failed.append(batch_id)
            raise RuntimeError("injected failure in batch 2")

    crash, crash_hist, crash_dead = _run(
        spark, conn, topic, crash_dlq, tmp_path / "b", epoch_s, fail_once, restart=True
    )
    assert failed == [2]
    assert set(clean["key_text"]) == set(ROUTES)
    pd.testing.assert_frame_equal(clean[COLUMNS], crash[COLUMNS])
    assert [r.admitted_tuples for r in clean_hist] == [r.admitted_tuples for r in crash_hist]
    # shedding really happened: 800 records/s arrive, 500/s fit
    assert all(r.admitted_tuples < r.arrived_tuples for r in clean_hist[1:])
    sic = [r.query_sic["fares"] for r in clean_hist]
    np.testing.assert_array_equal(sic, [r.query_sic["fares"] for r in crash_hist])
    # dead letters: the same records in both runs, each once, in the folder and in the topic
    assert clean_dead and clean_dead == crash_dead
    assert all(e.startswith("not JSON") for *_, e in clean_dead)
    for dlq, dead in ((clean_dlq, clean_dead), (crash_dlq, crash_dead)):
        keys = _topic_keys(conn, dlq)
        assert len(keys) == len(set(keys))  # exactly once, the replayed batch included
        assert {record_key(t, p, o) for t, p, o, _ in dead} <= set(keys)


def test_the_dead_letter_topic_writes_a_record_once_across_writers(kafka_topics):
    conn = kafka_topics.conn
    dlq = kafka_topics.new(partitions=1)
    rows = pd.DataFrame({"topic": ["t", "t"], "partition": [0, 1], "offset": [7, 3],
                         "error": ["not JSON: x", "late"], "raw": ["{", None]})  # fmt: skip
    first = DeadLetterTopic(conn, dlq)
    assert first.write(rows) == 2
    assert first.write(rows) == 0  # a retried batch
    again = DeadLetterTopic(conn, dlq)  # a restarted driver: reads what the topic holds
    assert again.write(rows.iloc[[1]]) == 0
    assert again.write(rows.assign(offset=[8, 3])) == 1
    keys = _topic_keys(conn, dlq)
    assert sorted(keys) == ["t/0/7", "t/0/8", "t/1/3"]
    assert again.keys() == set(keys)
