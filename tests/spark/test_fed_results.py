from __future__ import annotations

from pathlib import Path

import pytest

from spillway.errors import ConfigError
from spillway.federation.client import CoordinatorClient
from spillway.federation.placement import node_links
from spillway.federation.service import CoordinatorService
from spillway.spark.fed_results import ResultReporter
from spillway.spark.links import LinkSink, link_stream
from spillway.testing import KafkaTopics
from tests.spark.test_links import _FED, _prefix, _upstream, _write_inputs


@pytest.mark.spark
@pytest.mark.kafka
def test_the_coordinator_gets_both_copies_sic_once(
    spark, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    b = node_links(_FED, "b", prefix=_prefix())
    for link in b.inputs:
        kafka_topics.new(link.partitions, name=link.topic)
    total = _write_inputs(tmp_path / "in")
    sink = LinkSink(kafka_topics.conn, node_links(_FED, "a", prefix=_prefix()).outputs)
    _upstream(spark, tmp_path / "in", tmp_path / "ckpt-a", sink)
    with CoordinatorService(
        _FED.layout(), _FED.coordinator(), clock=lambda: 1.0, origin_s=1.0 - _FED.stw_s
    ) as service:  # a whole STW: no scaling
        client = CoordinatorClient(service.address, service.authkey, node=1)
        # Results produced at 0.5 s: inside the STW the service evaluates at 1.0 s.
        reporters = [ResultReporter(client, link, clock=lambda: 0.5) for link in b.inputs]

        def run(link, reporter) -> None:
            ckpt = tmp_path / "ckpt-b" / link.fragment.replace("/", "_")
            q = (
                link_stream(spark, kafka_topics.conn, link).writeStream.foreachBatch(reporter)
                .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
            )  # fmt: skip
            q.awaitTermination(120)
            assert q.exception() is None

        for link, rep in zip(b.inputs, reporters, strict=True):
            run(link, rep)
        for rep in reporters:
            assert rep.reported_sic == pytest.approx(total / 2)  # each copy: half (replicated)
        # Spark replays the root's last batch (its commit lost): not reported a second time.
        link, rep = b.inputs[0], reporters[0]
        ckpt = tmp_path / "ckpt-b" / link.fragment.replace("/", "_") / "commits"
        last = max(int(p.name) for p in ckpt.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            (ckpt / name).unlink(missing_ok=True)
        run(link, rep)
        assert rep.reported_sic == pytest.approx(total / 2)
        update = client.update()
        client.close()
    assert update.queries.tolist() == [0]
    assert update.sic.tolist() == pytest.approx([total])  # the query's SIC: both copies, once


def test_a_reporter_needs_a_clock() -> None:
    link = node_links(_FED, "b").inputs[0]
    with pytest.raises(ConfigError, match="clock must be a callable"):
        ResultReporter(None, link, clock=1.0)  # type: ignore[arg-type]
