"""A node reading a Kafka topic: results with their SIC, malformed records set aside exactly
once, every valid record accounted for."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.kafka.writer import KafkaWriter
from spillway.testing import KafkaTopics

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROUTES = ("JFK-LAX", "SFO-SEA", "ORD-MIA")


def _produce(conn, topic, seconds, rate, malformed_every, stop, sent):
    """Records at ``rate`` per second for ``seconds``, one in ``malformed_every`` not JSON."""
    rng = np.random.default_rng(3)
    with KafkaWriter(conn) as w:
        t0 = time.time()
        i = 0
        while time.time() < t0 + seconds and not stop.is_set():
            due = int((time.time() - t0) * rate)
            values = []
            while i < due:
                if i % malformed_every == malformed_every - 1:
                    values.append("{not json " + str(i))
                else:
                    values.append(
                        json.dumps(
                            {"route": ROUTES[i % 3], "fare": round(float(rng.gamma(4, 10)), 2)}
                        )
                    )
                i += 1
            if values:
                w.write(topic, values, partitions=[j % 2 for j in range(len(values))])
                sent.extend(values)
            time.sleep(0.02)
        w.flush()


def test_a_node_reads_a_topic_and_sets_malformed_records_aside(
    spark, kafka_topics: KafkaTopics, tmp_path
):
    from spillway.spark.node import Node

    topic = kafka_topics.new(partitions=2)
    opts = {
        **kafka_topics.conn.spark_options(),
        "subscribe": topic,
        "startingOffsets": "earliest",
        "format": "json",
        "schema": "route string, fare double",
        "key_column": "route",
        "value_column": "fare",
        "dead_letter": str(tmp_path / "dead"),
    }
    q = QuerySpec(name="fares", kind="group_avg", feed="kafka", feed_options=opts)
    cfg = NodeConfig(queries=(q,), trigger_s=1.0, stw_s=4.0, checkpoint_dir=str(tmp_path / "c"))
    node = Node(cfg, spark=spark)
    stop, sent = threading.Event(), []
    producer = threading.Thread(
        target=_produce, args=(kafka_topics.conn, topic, 9.0, 300, 50, stop, sent)
    )
    node.start()
    producer.start()
    try:
        producer.join()
        # every record sent is decided, and every admitted one processed (a loaded machine may
        # take a while)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            hist = node.history()
            decided = sum(r.arrived_tuples for r in hist)
            busy = any(r.admitted_tuples > r.processed_tuples for r in hist)
            if (decided >= len(sent) and not busy) or node.query_error("group_avg") is not None:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        node.stop()
    res = node.results()
    hist = node.history()
    assert node.query_error("group_avg") is None
    got = [(r.t, r.arrived_tuples, r.admitted_tuples, r.processed_tuples) for r in hist]
    # every record is decided once, and every admitted one processed; the node may shed some
    # when a batch runs slow on a loaded machine (the cost model sees an overload), so the
    # accounting below holds over what was admitted
    assert sum(r.arrived_tuples for r in hist) == len(sent), got
    assert all(r.admitted_tuples == r.processed_tuples for r in hist), got
    assert set(res["key_text"].dropna()) == set(ROUTES)
    bad = [v for v in sent if v.startswith("{not json")]
    counts = node.dead_letters.counts()["fares"]
    # every malformed record that was decided is set aside once, with its reason
    dead = node.dead_letters.to_pandas()
    assert dead["offset"].is_unique or dead.duplicated(["partition", "offset"]).sum() == 0
    assert counts["malformed"] == len(dead[dead["error"].str.startswith("not JSON")])
    assert 0 < counts["malformed"] <= len(bad)
    files = list((tmp_path / "dead").iterdir())
    lines = [json.loads(x) for f in files for x in f.read_text().splitlines()]
    assert len(lines) == counts["malformed"] + counts["late"]
    assert {(d["partition"], d["offset"]) for d in lines} == set(
        zip(dead["partition"], dead["offset"], strict=True)
    )
    # every record admitted is in a result window's input or set aside
    admitted = sum(r.query_admitted["fares"] for r in hist)
    windows = res.drop_duplicates("window_start")
    assert windows["n_in"].sum() + counts["malformed"] + counts["late"] == admitted, got
    sic = [r.query_sic["fares"] for r in hist if np.isfinite(r.query_sic["fares"])]
    assert sic and max(sic) <= 1.02
