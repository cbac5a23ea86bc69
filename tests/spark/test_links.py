from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.federation.config import FederationConfig
from spillway.federation.placement import LinkOut, node_links
from spillway.spark.links import LinkSink, link_stream, start_relay
from spillway.testing import KafkaTopics

# Node a hosts avg/leaf, whose output is replicated to avg/root and avg/copy on node b.
_FED = FederationConfig.from_dict(
    {
        "nodes": [{"name": "a"}, {"name": "b"}],
        "queries": [
            {
                "name": "avg",
                "fragments": [
                    {"name": "leaf", "node": "a", "sources": 4, "to": ["root", "copy"]},
                    {"name": "root", "node": "b", "sources": 4},
                    {"name": "copy", "node": "b", "sources": 0},
                ],
            }
        ],
    }
)


def _write_inputs(folder: Path) -> float:
    """Two files (two upstream batches) of window results; returns their total SIC."""
    folder.mkdir()
    total = 0.0
    for b in range(2):
        rows = [{"query_id": 0, "window_start": float(b), "sic": 0.125 * (i + 1)} for i in range(3)]
        total += sum(r["sic"] for r in rows)
        (folder / f"part-{b}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return total


def _upstream(spark, src: Path, ckpt: Path, sink: LinkSink) -> None:
    df = (
        spark.readStream.schema("query_id BIGINT, window_start DOUBLE, sic DOUBLE")
        .option("maxFilesPerTrigger", 1).json(str(src))
    )  # fmt: skip
    q = (
        df.writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(120)
    assert q.exception() is None


def _downstream(
    spark, kafka_topics: KafkaTopics, ckpt: Path, fed: FederationConfig = _FED, node: str = "b"
) -> pd.DataFrame:
    frames = []
    for link in node_links(fed, node, prefix=_prefix()).inputs:
        got: list[pd.DataFrame] = []
        q = (
            link_stream(spark, kafka_topics.conn, link).writeStream
            .foreachBatch(lambda df, _b, got=got: got.append(df.toPandas()))
            .option("checkpointLocation", str(ckpt / link.fragment.replace("/", "_")))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        q.awaitTermination(120)
        assert q.exception() is None
        part = pd.concat(got) if got else pd.DataFrame()
        part["consumer"] = link.fragment
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def _prefix() -> str:
    return f"linktest-{os.getpid()}"


@pytest.mark.spark
@pytest.mark.kafka
def test_sic_crosses_two_nodes_once_even_after_a_replayed_batch(
    spark, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    for link in node_links(_FED, "b", prefix=_prefix()).inputs:
        kafka_topics.new(link.partitions, name=link.topic)
    total = _write_inputs(tmp_path / "in")
    ckpt = tmp_path / "ckpt-a"
    sink = LinkSink(kafka_topics.conn, node_links(_FED, "a", prefix=_prefix()).outputs)
    _upstream(spark, tmp_path / "in", ckpt, sink)
    assert sink.written == [0, 1] and sink.replayed == []

    # Node a dies after batch 1 reached Kafka but before Spark recorded its commit: its
    # restart re-runs batch 1 from the checkpoint with the same id.
    for name in ("1", ".1.crc"):  # the commit and its checksum
        (ckpt / "commits" / name).unlink(missing_ok=True)
    sink = LinkSink(kafka_topics.conn, node_links(_FED, "a", prefix=_prefix()).outputs)
    _upstream(spark, tmp_path / "in", ckpt, sink)
    assert sink.replayed == [1] and sink.written == []
    sink.close()

    rows = _downstream(spark, kafka_topics, tmp_path / "ckpt-b")
    # Every row of both batches arrives once at each consumer, with half its SIC (replicated).
    per = rows.groupby(["consumer", "batch"]).size().to_dict()
    assert per == {("avg/copy", 0): 3, ("avg/copy", 1): 3, ("avg/root", 0): 3, ("avg/root", 1): 3}
    sic = rows.groupby("consumer")["sic"].sum()
    assert sic["avg/root"] == pytest.approx(total / 2)
    assert sic["avg/copy"] == pytest.approx(total / 2)
    assert sic.sum() == pytest.approx(total)  # replication divides SIC, never adds any
    assert set(rows["fragment"]) == {"avg/leaf"}
    assert rows.groupby("consumer")["offset"].apply(lambda o: o.is_unique).all()


# COV's chain over three nodes: first (a) -> middle (b) -> last (c).
_CHAIN = FederationConfig.from_dict(
    {
        "nodes": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
        "queries": [
            {
                "name": "cov",
                "fragments": [
                    {"name": "first", "node": "a", "sources": 2, "to": ["middle"]},
                    {"name": "middle", "node": "b", "sources": 2, "to": ["last"]},
                    {"name": "last", "node": "c", "sources": 2},
                ],
            }
        ],
    }
)


@pytest.mark.spark
@pytest.mark.kafka
def test_a_relay_keeps_sic_across_two_hops_and_a_replay(
    spark, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    for link in (i for n in _CHAIN.nodes for i in node_links(_CHAIN, n, prefix=_prefix()).inputs):
        kafka_topics.new(link.partitions, name=link.topic)
    total = _write_inputs(tmp_path / "in")
    first = LinkSink(kafka_topics.conn, node_links(_CHAIN, "a", prefix=_prefix()).outputs)
    _upstream(spark, tmp_path / "in", tmp_path / "ckpt-a", first)
    b = node_links(_CHAIN, "b", prefix=_prefix())

    def relay() -> LinkSink:
        sink = LinkSink(kafka_topics.conn, b.outputs)
        q = start_relay(spark, kafka_topics.conn, b.inputs[0], sink,
                        checkpoint=str(tmp_path / "ckpt-b"), trigger={"availableNow": True})  # fmt: skip
        q.awaitTermination(120)
        assert q.exception() is None
        return sink

    done = relay()
    last = max(done.written)
    for name in (str(last), f".{last}.crc"):  # node b dies before Spark records its batch
        (tmp_path / "ckpt-b" / "commits" / name).unlink(missing_ok=True)
    assert relay().replayed == [last]
    rows = _downstream(spark, kafka_topics, tmp_path / "ckpt-c", _CHAIN, "c")
    # One merged row per window reaches the last fragment, its SIC the sum of the window's rows.
    assert rows.groupby("window_start").size().to_dict() == {0.0: 1, 1.0: 1}
    assert rows["sic"].sum() == pytest.approx(total)
    assert set(rows["fragment"]) == {"cov/middle"}


def test_a_relay_writes_its_own_fragments_links() -> None:
    a, b = (node_links(_CHAIN, n) for n in ("a", "b"))
    sink = LinkSink.__new__(LinkSink)
    sink.fragment = a.fragments[0]
    with pytest.raises(ConfigError, match="must write that fragment's links"):
        start_relay(None, None, b.inputs[0], sink, checkpoint="x", trigger={})  # type: ignore[arg-type]


def test_a_sink_takes_the_links_of_one_fragment() -> None:
    outs = tuple(
        LinkOut(fragment=f, query_id=0, topic="t", partition=0, share=1.0) for f in ("x", "y")
    )
    with pytest.raises(ConfigError, match="exactly one fragment"):
        LinkSink(None, outs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="exactly one fragment"):
        LinkSink(None, ())  # type: ignore[arg-type]
