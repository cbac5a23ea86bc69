from __future__ import annotations

from pathlib import Path

import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.federation.client import CoordinatorClient
from spillway.federation.placement import node_links
from spillway.federation.service import CoordinatorService
from spillway.spark.fed_results import ReportedBatches, ResultReporter
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
        def ckpt_of(link) -> Path:
            return tmp_path / "ckpt-b" / link.fragment.replace("/", "_")

        def reporter(link) -> ResultReporter:  # its record in the query's checkpoint folder
            state = ckpt_of(link) / "spillway-reported.json"
            return ResultReporter(client, link, clock=lambda: 0.5, state=state)

        reporters = [reporter(link) for link in b.inputs]

        def run(link, reporter) -> None:
            ckpt = ckpt_of(link)
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
        # The node restarts (a new reporter from its record) and Spark replays the root's last
        # batch (its commit lost): not reported a second time.
        link = b.inputs[0]
        ckpt = ckpt_of(link) / "commits"
        last = max(int(p.name) for p in ckpt.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            (ckpt / name).unlink(missing_ok=True)
        rep = reporter(link)
        assert rep.reported_sic == pytest.approx(total / 2)  # restored from the record
        run(link, rep)
        assert rep.update is None  # nothing reported: the replay was recognised
        assert rep.reported_sic == pytest.approx(total / 2)
        update = client.update()
        client.close()
    assert update.queries.tolist() == [0]
    assert update.sic.tolist() == pytest.approx([total])  # the query's SIC: both copies, once


def test_a_reporter_needs_a_clock() -> None:
    link = node_links(_FED, "b").inputs[0]
    with pytest.raises(ConfigError, match="clock must be a callable"):
        ResultReporter(None, link, clock=1.0)  # type: ignore[arg-type]


def test_a_restarted_reporter_skips_the_batches_its_record_holds(tmp_path: Path) -> None:
    link = node_links(_FED, "b").inputs[0]
    state = tmp_path / "ckpt" / "spillway-reported.json"
    state.parent.mkdir()
    ReportedBatches(batch=3, reported_sic=0.5).save(state)
    rep = ResultReporter(None, link, clock=lambda: 0.0, state=state)  # type: ignore[arg-type]
    assert rep.reported_sic == 0.5
    for batch in (0, 3):  # replays: neither the frame nor the client is touched
        rep(None, batch)
    assert rep.update is None
    with pytest.raises(AttributeError):  # a new batch is reported (and needs a frame)
        rep(None, 4)


def test_reported_batches_round_trip_and_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert ReportedBatches.load(path) == ReportedBatches()
    ReportedBatches(batch=7, reported_sic=1.25).save(path)
    assert ReportedBatches.load(path) == ReportedBatches(batch=7, reported_sic=1.25)
    assert not (tmp_path / "r.json.tmp").exists()


@pytest.mark.parametrize("text", ["not json", '{"batch": 2}', '{"batch": "x", "reported_sic": 0}'])
def test_an_unreadable_record_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(InputDataError, match="reported-batches file .* must hold the JSON"):
        ReportedBatches.load(path)


def test_a_record_is_validated() -> None:
    with pytest.raises(ConfigError, match="batch must be a batch id >= -1"):
        ReportedBatches(batch=-2)
    with pytest.raises(ConfigError, match="reported_sic must be a finite SIC >= 0"):
        ReportedBatches(reported_sic=-1.0)
