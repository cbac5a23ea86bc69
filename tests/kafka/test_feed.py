"""A Kafka topic as a feed: its options checked before Spark starts, one clear line per mistake,
and the cut of each decision read from the log's time index."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from spillway.errors import ConfigError, KafkaClientError
from spillway.feeds import make_feed
from spillway.kafka.writer import KafkaWriter

pytestmark = pytest.mark.kafka


def _feed(**options):
    return make_feed("kafka", n_sources=1, rate=1.0, **options)


@pytest.fixture
def opts(kafka_topics):
    topic = kafka_topics.new(partitions=2)
    return {**kafka_topics.conn.spark_options(), "subscribe": topic, "schema": "k string, v double",
            "value_column": "v"}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"subscribe": ""}, "'subscribe' must name a topic"),
        ({"startingOffsets": "middle"}, "'startingOffsets' must be one of earliest, latest"),
        ({"format": "xml"}, "'format' must be one of"),
        ({"schema": None}, "'schema' is required"),
        ({"value_column": None}, "'value_column' is required"),
        ({"value_column": None, "records": "false"}, "'value_column' is required"),
        ({"records": "maybe"}, "'records' must be true or false"),
        ({"value_column": "fare"}, "'value_column' names 'fare', not a field"),
        ({"key_column": "route"}, "'key_column' names 'route', not a field"),
        ({"maxOffsetsPerTrigger": 5}, "unknown kafka option.*maxOffsetsPerTrigger"),
        ({"failOnDataLoss": "maybe"}, "'failOnDataLoss' must be true or false"),
        ({"lateness_s": -1}, r"'lateness_s' must be seconds in \[0, 3600\)"),
    ],
)
def test_a_bad_option_is_one_line(opts, change, match):
    o = {k: v for k, v in {**opts, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        _feed(**o)


def test_a_missing_topic_and_an_unreachable_broker_are_one_line(opts):
    with pytest.raises(KafkaClientError, match="no-such-topic"):
        _feed(**{**opts, "subscribe": "no-such-topic"})
    with pytest.raises(KafkaClientError, match="127.0.0.1:1"):
        _feed(**{**opts, "kafka.bootstrap.servers": "127.0.0.1:1"})


def test_without_bootstrap_servers_the_local_broker_is_used_or_named(opts, tmp_path, monkeypatch):
    monkeypatch.setenv("SPILLWAY_KAFKA_DIR", str(tmp_path / "none"))
    o = {k: v for k, v in opts.items() if k != "kafka.bootstrap.servers"}
    with pytest.raises(KafkaClientError, match="no local broker runs: start one with"):
        _feed(**o)


def test_the_cut_is_read_from_the_time_index(opts, kafka_topics):
    topic = opts["subscribe"]
    with KafkaWriter(kafka_topics.conn) as w:
        vals = [json.dumps({"k": "a", "v": float(i)}) for i in range(6)]
        w.write(topic, vals, partitions=[0, 0, 0, 1, 1, 1],
                timestamps_ms=[1000, 2000, 3000, 1500, 2500, 9000])  # fmt: skip
    feed = _feed(**{**opts, "startingOffsets": "earliest", "key_column": "k"})
    feed.attach(0.0)
    assert feed.n_sources == 2 and feed.text_keys
    assert feed.count(1.0).tolist() == [0, 0]
    assert feed.count(2.2).tolist() == [2, 1]
    assert feed.count(100.0).tolist() == [3, 3]  # past every record: the log's end
    with KafkaWriter(kafka_topics.conn) as w:  # a producer appends a record stamped before it
        w.write(topic, [json.dumps({"k": "a", "v": 6.0})], partitions=[0], timestamps_ms=[4000])
    assert feed.count(100.0).tolist() == [4, 3]  # the log's end is looked up again
    assert feed.count(3.5).tolist() == [3, 2]  # found offsets: final, cached
    consumer = feed._consumer  # one consumer serves every lookup (making one costs a connect)
    assert consumer is not None and feed.count(50.0) is not None and feed._consumer is consumer
    feed.close()
    assert feed._consumer is None and feed.count(60.0).tolist() == [4, 3]  # opened anew

    class Broken:
        closed = False

        def get_watermark_offsets(self, *a, **k):
            raise RuntimeError("broker gone")

        def close(self):
            Broken.closed = True

    feed._consumer = Broken()
    with pytest.raises(KafkaClientError, match="cannot read the offsets of .*broker gone"):
        feed.count(70.0)
    assert Broken.closed and feed._consumer is None  # a failed consumer is not used again
    r = feed.records(1, np.array([0, 2]))
    assert r["value"].tolist() == [3.0, 5.0] and r["key_text"].tolist() == ["a", "a"]
    assert r["arrival_ts"].tolist() == [1.5, 9.0]
    latest = _feed(**{**opts, "startingOffsets": "latest"})
    latest.attach(0.0)
    assert latest.count(1.0).tolist() == [4, 3]  # never below where it starts


def test_overload_cannot_scale_a_topic(opts):
    from spillway.config import NodeConfig, QuerySpec

    q = QuerySpec(name="fares", kind="avg", feed="kafka", feed_options=opts)
    with pytest.raises(ConfigError, match="'fares' .*overload scales the rates of generated"):
        NodeConfig(queries=(q,), overload=3.0).check_feeds()
    NodeConfig(queries=(q,)).check_feeds()  # without overload the topic is checked and fine


#: Each format's messages: two valid (one with fields the parser coerces) and two malformed.
MESSAGES = {
    "json": [
        '{"route": "JFK-LAX", "fare": 12.5, "n": 3, "at": "2026-03-04T07:06:07.25+02:00"}',
        "not json",
        '{"route": "say \\"hi\\"", "fare": "7", "n": -4, "at": 1700000000.5, "extra": 1}',
        '{"route": null, "fare": 1.0, "n": 1, "at": 0}',
    ],
    "csv": [
        "JFK-LAX,12.5,3,2026-03-04T05:06:07.25Z",
        "A-B,x,1,2026-03-04T05:06:07Z",
        '"say ""hi""",7,-4,2023-11-14T22:13:20.5+00:00',
        ",1.0,1,2026-03-04T05:06:07Z",
    ],
}
FIELDS = [
    {"route": "JFK-LAX", "fare": 12.5, "n": 3,
     "at": dt.datetime(2026, 3, 4, 5, 6, 7, 250000, tzinfo=dt.UTC)},
    {"route": 'say "hi"', "fare": 7.0, "n": -4,
     "at": dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=dt.UTC)},
]  # fmt: skip


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_records_carry_every_valid_records_fields(opts, kafka_topics, fmt):
    topic = opts["subscribe"]
    with KafkaWriter(kafka_topics.conn) as w:
        w.write(topic, MESSAGES[fmt], partitions=0, timestamps_ms=[1000] * 4)
    o = {**opts, "startingOffsets": "earliest", "format": fmt,
         "schema": "route string, fare double, n bigint, at timestamp"}  # fmt: skip
    del o["value_column"]
    feed = _feed(**o, records=True)
    assert (feed.format, feed.schema_ddl, feed.record_fields) == (fmt, o["schema"], True)
    r = feed.records(0, np.arange(4))
    good = np.array([e is None for e in r["error"]])
    assert good.tolist() == [True, False, True, False] and r["value"].tolist() == [0.0] * 4
    back = [json.loads(t) for t in r["raw"][good]]
    for b in back:
        b["at"] = dt.datetime.fromisoformat(b["at"])
    assert back == FIELDS
    assert r["raw"][~good].tolist() == [MESSAGES[fmt][1], MESSAGES[fmt][3]]
    # without records (the built-in queries): raw only for the malformed, the value column read
    plain = _feed(**{**o, "value_column": "fare"}).records(0, np.arange(4))
    assert plain["raw"].tolist() == [None, MESSAGES[fmt][1], None, MESSAGES[fmt][3]]
    assert plain["value"].tolist() == [12.5, 0.0, 7.0, 0.0]


_LINK_SCHEMA = "query_id bigint, window_start double, sic double"


@pytest.mark.parametrize(
    ("column", "match"),
    [("weight", "'sic_column' names 'weight', not a field"),
     ("k", "'sic_column' names 'k' of type string: the SIC a record carries must be a number")],
)  # fmt: skip
def test_a_bad_sic_column_is_one_line(opts, column, match):
    with pytest.raises(ConfigError, match=match):
        _feed(**opts, sic_column=column)


def test_a_link_lane_keeps_the_sic_its_rows_carry(kafka_topics, monkeypatch):
    """An upstream node's shed output (each row with its SIC, written by a LinkWriter) read as
    a downstream lane that sheds again: the kept rows carry their own SIC, so the lane's SIC is
    the upstream SIC times the downstream keep ratio (THEMIS Eq. 3 across nodes)."""
    import pandas as pd
    import pyarrow as pa

    from spillway.federation.link import LinkWriter
    from spillway.spark.source import FeedSpec, SpillwayPartition, read_batches

    topic = kafka_topics.new(partitions=2)
    # Upstream: 40 rows of one window kept out of 100 (keep ratio 0.4), the window's SIC 0.5
    # over them: evenly in partition 0, unevenly in partition 1 (a row's SIC is what its inputs
    # carried, Eq. 3).
    uneven = np.linspace(1.0, 3.0, 40)
    carried = [np.full(40, 0.5 * 0.4 / 40), uneven * 0.5 * 0.4 / uneven.sum()]
    for p, sic in enumerate(carried):
        rows = pd.DataFrame({"query_id": 0, "window_start": 0.0, "sic": sic})
        with LinkWriter(kafka_topics.conn, topic, fragment=f"q/leaf{p}", partition=p) as w:
            assert w.write(0, rows)
            assert not w.write(0, rows)  # a replayed batch: nothing written, no SIC twice
    feed = _feed(**kafka_topics.conn.spark_options(), subscribe=topic,
                 startingOffsets="earliest", schema=_LINK_SCHEMA, value_column="sic",
                 sic_column="sic")  # fmt: skip
    for p in (0, 1):
        np.testing.assert_allclose(feed.records(p, np.arange(40))["sic"], carried[p])
    # what the node's controller prices a link lane with: the SIC its waiting rows carry
    assert feed.carries_sic
    assert feed.carried_sic(1, 5, 25) == pytest.approx(carried[1][5:25].sum())
    assert feed.carried_sic(0, 7, 7) == 0.0
    # offset 40 is the transaction's commit marker: a range of markers only holds no record
    # (it raised IndexError on the node once link records carried their source time)
    assert feed.records(0, np.array([40]))["sic"].size == 0
    assert feed.carried_sic(0, 40, 41) == 0.0
    import spillway.kafka.feed as kafka_feed

    monkeypatch.setattr(kafka_feed, "CARRIED_SAMPLE", 8)  # a long range: an even sample, scaled
    assert feed.carried_sic(0, 0, 40) == pytest.approx(0.5 * 0.4)
    # Downstream: each lane keeps 10 of its 40 rows (ratio 0.25).
    part = SpillwayPartition(plan="q", seed=3, epoch_us=0, feeds=(FeedSpec.of(feed).dump(),),
        query_id=np.array([0, 0], np.int32), source_id=np.array([0, 1], np.int32),
        feed=np.array([0, 0]), lo=np.array([0, 0]), hi=np.array([40, 40]),
        keep=np.array([10, 10]), sic=np.array([99.0, 99.0]))  # fmt: skip
    out = pa.Table.from_batches(list(read_batches(part))).to_pandas()
    for p in (0, 1):
        lane = out[out["source_id"] == p]
        off = lane["offset"].to_numpy()
        assert off.size == 10 and len(set(off.tolist())) == 10
        # each kept row: its own SIC, not the lane's per-tuple share
        np.testing.assert_allclose(lane["sic"].to_numpy(), carried[p][off])
    # The product rule on the even lane: upstream 0.4 x downstream 0.25 of the window's 0.5.
    assert out[out["source_id"] == 0]["sic"].sum() == pytest.approx(0.5 * 0.4 * 0.25)
    # A link lane's records are never late: read after the cut of a time past their stamps
    # (an upstream batch that arrives after the window of its source time was decided), they
    # are kept with their SIC, not set aside (main marked them late: their SIC was lost).
    import time

    after = int((time.time() + 3600) * 1e6)
    part = SpillwayPartition(plan="q", seed=3, epoch_us=0, feeds=(FeedSpec.of(feed).dump(),),
        query_id=np.array([0], np.int32), source_id=np.array([0], np.int32),
        feed=np.array([0]), lo=np.array([0]), hi=np.array([40]), keep=np.array([40]),
        sic=np.array([99.0]), since_us=np.array([after]))  # fmt: skip
    late = pa.Table.from_batches(list(read_batches(part))).to_pandas()
    assert len(late) == 40 and late["error"].isna().all()
    assert late["sic"].sum() == pytest.approx(0.5 * 0.4)


def test_cod_over_a_topic_reads_a_bounded_sample_once_and_replays_it(opts, kafka_topics):
    """CoD under overload on a real topic: the executors fetch only the bounded read (its 16
    runs a lane), keep per group from what they fetched, and a replay keeps the same rows."""
    import pyarrow as pa

    from spillway.policies.cod import CoD
    from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
    from spillway.spark.source import (
        PlanOffset,
        lane_key,
        plan_partitions,
        read_index,
        read_partition,
    )

    rng = np.random.default_rng(4)
    n = 6000
    keys = rng.choice(30, size=n, p=(w := np.arange(1, 31) ** -1.2) / w.sum())
    parts = np.arange(n) % 2
    with KafkaWriter(kafka_topics.conn) as w:
        w.write(opts["subscribe"], [json.dumps({"k": f"g{k}", "v": float(i)}) for i, k in
                                    enumerate(keys)],
                partitions=parts.tolist(), timestamps_ms=(1 + np.arange(n) // 2).tolist())  # fmt: skip
    feed = _feed(**{**opts, "startingOffsets": "earliest", "key_column": "k"})
    feed.attach(0.0)
    plan = PlanSpec(name="avg", kind="avg", window_s=1.0,
                    queries=(PlanQuery(query_id=0, name="q", feed=feed),))  # fmt: skip
    cfg = ControllerConfig(clock="logical", stw_s=2.0, capacity_tuples=300, seed=5, group_read=2.0)
    c = NodeController(cfg, [plan], CoD(kind="grouped"), epoch_s=0.0)
    s = c.initial_offset("avg")
    e = s
    for _ in range(5):  # a log's windows close a lateness later: a few decisions
        if e["end"] != s["end"]:
            break
        e = c.latest_offset("avg", s)
    off = PlanOffset.from_json(e)
    assert set(off.read) == {0, 1}
    for lane in range(2):  # each lane read in part
        read = sum(t[2] for t in off.read[lane])
        assert 0 < read < off.end[lane]
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s),
                                                     off)])  # fmt: skip
    again = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s),
                                                     off)])  # fmt: skip
    assert table.equals(again) and 0 < table.num_rows <= 1.2 * sum(off.keep)
    for lane in range(2):
        mine = table.filter(pa.compute.equal(table["source_id"], lane))
        got = np.asarray(mine["offset"].to_pylist())
        read = read_index(off.read[lane], lane_key(5, "avg", 0, lane), log=True, gap=feed.read_gap)
        assert np.isin(got, read).all()  # nothing outside the bounded read
        listed = dict(zip(*off.groups.get(lane, ((), ())), strict=True))
        in_read = feed.records(lane, read)["key"]
        for g in np.unique(in_read).tolist():
            kept = int((np.asarray(mine["key"].to_pylist()) == g).sum())
            assert kept == min(listed.get(g, int((in_read == g).sum())), int((in_read == g).sum()))
    feed.close()
