from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.events import ResultsEvent
from spillway.federation.client import CoordinatorClient
from spillway.federation.config import FederationConfig
from spillway.federation.placement import node_links
from spillway.federation.service import CoordinatorService
from spillway.federation.view import CoordinatorView
from spillway.quality.coordination import CoordinatorConfig
from spillway.quality.sic import StwConfig
from spillway.spark.fed_results import NodeReporter, ReportedBatches, ResultReporter
from spillway.spark.links import LINK_SCHEMA, LinkSink, link_stream
from spillway.testing import KafkaTopics, ManualClock
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
        _FED.layout(), _lagged(_FED), clock=lambda: 2.0, origin_s=2.0 - _FED.stw_s
    ) as service:  # a whole STW: no scaling
        client = CoordinatorClient(service.address, service.authkey, node=1)

        # Results of the source windows at 0 s and 1 s: inside the STW the service evaluates
        # at 2.0 s (each window counts at its source time, whenever it is reported).
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


def _lagged(fed: FederationConfig) -> CoordinatorConfig:
    """The file's coordinator with the STW ending now, no progress reports (what these tests
    check does not depend on them: results counted at their source time, replays, views)."""
    return dataclasses.replace(fed.coordinator(), progress=False)


# Two queries, each a leaf on node a and its root on node b.
_TWO = FederationConfig.from_dict(
    {
        "coordinator": {"stw_s": 4.0, "slide_s": 1.0, "timeout_s": 600.0},
        "nodes": [{"name": "a"}, {"name": "b"}],
        "queries": [
            {
                "name": name,
                "fragments": [
                    {"name": "leaf", "node": "a", "sources": 4, "to": ["root"]},
                    {"name": "root", "node": "b", "sources": 0},
                ],
            }
            for name in ("lost", "kept")
        ],
    }
)


def _event(batch: int, query, window, sic) -> ResultsEvent:
    return ResultsEvent(plan="p", batch_id=batch, query_id=np.array(query),
                        window_start_s=np.array(window, dtype=float),
                        latency_s=np.zeros(len(query)), sic=np.array(sic))  # fmt: skip


def _view() -> CoordinatorView:
    return CoordinatorView([0, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0)


def test_a_nodes_results_reach_the_coordinator_and_its_update_the_view() -> None:
    clock = ManualClock(10.0)
    with CoordinatorService(_TWO.layout(), _lagged(_TWO), clock=clock, origin_s=0.0) as svc:
        view = _view()
        rep = NodeReporter(CoordinatorClient(svc.address, svc.authkey, node=1), view, clock=clock)
        # a TOP-5-like window of query 0 (two rows, one window) and one of query 1
        rep(_event(0, [0, 0, 1], [9.0, 9.0, 9.0], [0.05, 0.05, 0.4]))
        # Eq. 4 covers [now - STW, now) of source time: the window of 9 s counts at once
        assert view.update is not None and view.update.sic.tolist() == pytest.approx([0.1, 0.4])
        clock.advance(1.0)
        rep(_event(1, [], [], []))  # a batch without results: a heartbeat
        rep.client.close()
    assert rep.reports == 2 and rep.reported_sic == pytest.approx(0.5)
    assert view.update.as_of == 11.0
    assert view.update.sic.tolist() == pytest.approx([0.1, 0.4])
    got = view.base(11.5)
    assert got is not None and got.base.tolist() == pytest.approx([0.1, 0.4])


def test_a_batch_spanning_more_than_an_stw_never_gives_a_query_sic_above_1() -> None:
    """A node catching up (its first micro-batch, or one after a stall) produces the results of
    many windows at once: a query whose 21 windows of source time each carry 1/10 of its SIC
    (a full rate over a 10 s STW) is reported in one batch. Counted when produced (the old
    reporter) the STW held 2.1; counted at their source time, the STW's 10 windows: 1.0."""
    fed = FederationConfig.from_dict({
        "coordinator": {"stw_s": 10.0, "slide_s": 1.0, "timeout_s": 600.0},
        "nodes": [{"name": "a"}],
        "queries": [{"name": "q", "fragments": [{"name": "root", "node": "a", "sources": 2}]}],
    })  # fmt: skip
    clock = ManualClock(121.5)
    windows = np.arange(100.0, 121.0)  # source windows [100, 101) .. [120, 121)
    with CoordinatorService(fed.layout(), _lagged(fed), clock=clock, origin_s=0.0) as svc:
        view = CoordinatorView([0], StwConfig(stw_s=10.0, slide_s=1.0), stale_s=2.0)
        rep = NodeReporter(CoordinatorClient(svc.address, svc.authkey, node=0), view, clock=clock)
        rep(_event(7, [0] * windows.size, windows, [0.1] * windows.size))
        clock.advance(0.5)  # at 122: the STW [112, 122)
        got = svc.federation().sic
        rep.client.close()
    assert rep.reported_sic == pytest.approx(2.1)
    assert got.tolist() == pytest.approx([0.9])  # the windows 112..120 of [112, 122)
    # independently: Eq. 4 over the reported windows' source times
    assert got[0] == pytest.approx(0.1 * ((windows >= 112.0) & (windows < 122.0)).sum())


def test_a_restarted_node_reporter_does_not_report_a_replayed_batch_again(tmp_path) -> None:
    """A node killed after its last batch reached the coordinator, before Spark recorded the
    batch's commit: the restarted driver runs the batch again. Its reporter, resumed from the
    record beside the checkpoint, skips it; the coordinator holds the batch's SIC once. Without
    the record (the reporter before keep_record) the query's SIC came out 0.8, twice 0.4."""
    clock = ManualClock(10.0)
    state = tmp_path / "reported.json"
    with CoordinatorService(_TWO.layout(), _lagged(_TWO), clock=clock, origin_s=0.0) as svc:
        client = CoordinatorClient(svc.address, svc.authkey, node=1)
        first = NodeReporter(client, _view(), clock=clock)
        first.keep_record(state)
        first(_event(0, [1], [8.0], [0.3]))
        first(_event(1, [1], [9.0], [0.4]))  # reported; then the driver dies
        again = NodeReporter(client, _view(), clock=clock)
        again.keep_record(state)
        assert again.reported_sic == pytest.approx(0.7)  # restored from the record
        again(_event(1, [1], [9.0], [0.4]))  # Spark's replay of batch 1
        again(_event(2, [1], [9.5], [0.1]))  # the next batch: reported
        got = svc.federation().sic
        client.close()
    assert again.reports == 1 and again.reported_sic == pytest.approx(0.8)
    assert got.tolist() == pytest.approx([0.0, 0.8])  # 0.3 + 0.4 + 0.1, each once
    record = ReportedBatches.load(state)
    assert record.batch == 2 and record.reported_sic == pytest.approx(0.8)


def test_an_unreachable_coordinator_keeps_the_results_for_the_next_report(caplog) -> None:
    clock = ManualClock(10.0)
    with CoordinatorService(_TWO.layout(), _lagged(_TWO), clock=clock, origin_s=0.0) as svc:
        address, key = svc.address, svc.authkey
    view = _view()
    rep = NodeReporter(CoordinatorClient(address, key, node=1, timeout_s=1.0), view, clock=clock)
    with caplog.at_level(logging.WARNING, logger="spillway.federation"):
        rep(_event(0, [1], [9.0], [0.25]))
        rep(_event(1, [0], [9.0], [0.5]))
    assert view.failures == 2 and rep.reports == 0
    assert rep.waiting_sic == pytest.approx(0.75)
    assert sum("unreachable" in r.getMessage() for r in caplog.records) == 1
    assert view.base(11.0) is None and view.fallbacks == 1  # no update: the local view


def test_a_node_reporter_refuses_what_it_cannot_report() -> None:
    view = _view()
    with pytest.raises(ConfigError, match="view must be a CoordinatorView"):
        NodeReporter(None, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="clock must be a callable"):
        NodeReporter(None, view, clock=3.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the reporter has no clock yet"):
        NodeReporter(None, view)(_event(0, [0], [1.0], [0.1]))  # type: ignore[arg-type]
    rep = NodeReporter(None, view, clock=lambda: 1.0)  # type: ignore[arg-type]
    with pytest.raises(InputDataError, match="results without a sic column"):
        rep(ResultsEvent(plan="p", batch_id=0, query_id=np.array([0]),
                         window_start_s=np.zeros(1), latency_s=np.zeros(1)))  # fmt: skip
    with pytest.raises(InputDataError, match=r"has query ids \[2\], the view maps 2 queries"):
        rep(_event(0, [2], [1.0], [0.1]))


_WINDOWS = 6  # upstream windows (one file, one upstream batch, one second apart)
_ROWS = 20  # link rows per query and window
# What each query's leaf on node a kept of its window's SIC (0.25 a window: STW 4 s, 1 s
# windows): "lost" kept a fifth, "kept" nine tenths.
_UPSTREAM_KEPT = (0.2, 0.9)


def _node_a(spark, kafka_topics: KafkaTopics, tmp_path: Path) -> list[float]:
    """Node a: the two leaves' window results (already shed upstream) written through their
    links, one upstream batch a second, each just after a whole second so that both queries'
    rows of a batch fall in one window of node b. Returns the times the batches were written."""
    import json
    import time

    src = tmp_path / "a-in"
    src.mkdir()
    for w in range(_WINDOWS):
        rows = [{"query_id": q, "window_start": float(w), "sic": kept * 0.25 / _ROWS}
                for q, kept in enumerate(_UPSTREAM_KEPT) for _ in range(_ROWS)]  # fmt: skip
        (src / f"part-{w:02d}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a = node_links(_TWO, "a", prefix=_prefix())
    sinks = {o.query_id: LinkSink(kafka_topics.conn, (o,)) for o in a.outputs}
    stamps: list[float] = []

    def run(df, batch_id: int) -> None:
        rows = df.toPandas()  # read before waiting for the next second
        time.sleep(math.ceil(time.time()) - time.time() + 0.05)
        stamps.append(time.time())
        for q, sink in sinks.items():
            sink(spark.createDataFrame(rows[rows["query_id"] == q]), batch_id)

    df = (
        spark.readStream.schema("query_id BIGINT, window_start DOUBLE, sic DOUBLE")
        .option("maxFilesPerTrigger", 1).json(str(src))
    )  # fmt: skip
    q = (
        df.writeStream.foreachBatch(run).option("checkpointLocation", str(tmp_path / "ckpt-a"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(300)
    assert q.exception() is None
    for sink in sinks.values():
        sink.close()
    return stamps


def _node_b(
    spark, kafka_topics, tmp_path: Path, epoch_s: float, until_s: float, service=None, cell=None
):
    """Node b: the two roots, each a spillway query over its link topic (``sic_column``),
    capacity half of what arrives, BALANCE-SIC, a logical clock from ``epoch_s``; reporting
    to ``service`` when given (its reporter put in ``cell``). Returns (results, history, view
    or None)."""
    import time

    from spillway.config import NodeConfig, QuerySpec
    from spillway.spark.node import Node

    b = node_links(_TWO, "b", prefix=_prefix())
    queries = tuple(
        QuerySpec(name=link.fragment.split("/")[0], kind="avg", feed="kafka", window_s=1.0,
                  feed_options={**kafka_topics.conn.spark_options(), "subscribe": link.topic,
                                "startingOffsets": "earliest", "schema": LINK_SCHEMA,
                                "value_column": "sic", "sic_column": "sic"})
        for link in b.inputs
    )  # fmt: skip
    run = "coordinated" if service is not None else "local"
    cfg = NodeConfig(queries=queries, trigger_s=1.0, stw_s=4.0, seed=0,
                     checkpoint_dir=str(tmp_path / f"ckpt-b-{run}"))  # fmt: skip
    view = reporter = None
    if service is not None:
        view = CoordinatorView([link.query_id for link in b.inputs],
                               StwConfig(stw_s=4.0, slide_s=1.0), stale_s=3.0)  # fmt: skip
        reporter = NodeReporter(CoordinatorClient(service.address, service.authkey, node=1), view)
        cell["reporter"] = reporter
    node = Node(cfg, spark=spark, clock="logical", epoch_s=epoch_s,
                capacity_tuples_per_s=float(_ROWS), federation=reporter)  # fmt: skip
    node.start()
    try:
        # Done when every link row has arrived, the clock has passed ``until_s`` and two more
        # decisions were made (a decision waits for the batch before it, so the last window's
        # results are in). Not "6 windows per query": the rows of two upstream batches can
        # share a window of this node (a slow write), and the wait then never ended (180 s).
        deadline = time.monotonic() + 180.0
        ready_t = math.inf
        while time.monotonic() < deadline:
            hist = node.history()
            arrived = sum(sum(r.query_arrived.values()) for r in hist)
            if (
                hist
                and hist[-1].t >= until_s - epoch_s
                and arrived >= _WINDOWS * _ROWS * len(_UPSTREAM_KEPT)
            ):
                ready_t = min(ready_t, hist[-1].t)
                if hist[-1].t >= ready_t + 2 * cfg.trigger_s:
                    break
            assert node.failure is None, node.failure
            time.sleep(0.5)
        else:
            pytest.fail(f"node b ({run}) did not decide every link row by {until_s - epoch_s} s")
    finally:
        node.stop()
        if reporter is not None:
            reporter.client.close()
    return node.results(), node.history(), view


@pytest.mark.spark
@pytest.mark.kafka
def test_the_downstream_node_keeps_more_of_the_query_that_lost_more_upstream(
    spark, kafka_topics: KafkaTopics, tmp_path: Path
) -> None:
    """Two nodes and a link per query: node a's leaves kept 0.2 and 0.9 of their queries' SIC;
    node b, with capacity for half of what arrives, balances each query's global SIC from the
    coordinator service (on loopback, HMAC key) projected over its own shedding. Its local view
    (each query's kept share of what reached it) keeps both alike; the coordinator's values
    make it keep more of the query that lost more upstream, and the queries' SIC closer."""
    from spillway.quality import jain_index

    b = node_links(_TWO, "b", prefix=_prefix())
    for link in b.inputs:
        kafka_topics.new(link.partitions, name=link.topic)
    stamps = _node_a(spark, kafka_topics, tmp_path)
    epoch = float(math.floor(stamps[0])) - 1.0
    until = stamps[-1] + 3.0  # the last window, decided a second (lateness) after it ends
    local, hist_local, _ = _node_b(spark, kafka_topics, tmp_path, epoch, until)

    cell: dict = {}

    def service_clock() -> float:  # node b's logical clock (one machine, one timeline)
        rep = cell.get("reporter")
        return float(rep.clock()) if rep is not None and rep.clock is not None else epoch

    with CoordinatorService(_TWO.layout(), _lagged(_TWO), clock=service_clock,
                            origin_s=epoch) as service:  # fmt: skip
        with CoordinatorClient(service.address, service.authkey, node=0) as a:
            a.report(sent=epoch)  # node a: a heartbeat (it hosts no root)
        coordinated, hist_fed, view = _node_b(
            spark, kafka_topics, tmp_path, epoch, until, service, cell
        )
    assert view is not None

    def summary(results, hist) -> tuple[list[float], list[float]]:
        sic = results.groupby("query")["sic"].sum()
        arrived = [sum(r.query_arrived[n] for r in hist) for n in ("lost", "kept")]
        admitted = [sum(r.query_admitted[n] for r in hist) for n in ("lost", "kept")]
        kept = [a / n for a, n in zip(admitted, arrived, strict=True)]
        full = _WINDOWS * 0.25  # the SIC of every window, had nothing been shed anywhere
        return [float(sic.get(n, 0.0)) / full for n in ("lost", "kept")], kept

    sic_local, kept_local = summary(local, hist_local)
    sic_fed, kept_fed = summary(coordinated, hist_fed)
    print(
        f"\nlocal view:  kept {kept_local[0]:.3f} / {kept_local[1]:.3f} of the rows, query SIC "
        f"{sic_local[0]:.3f} / {sic_local[1]:.3f}, Jain {jain_index(sic_local):.3f}"
        f"\ncoordinated: kept {kept_fed[0]:.3f} / {kept_fed[1]:.3f} of the rows, query SIC "
        f"{sic_fed[0]:.3f} / {sic_fed[1]:.3f}, Jain {jain_index(sic_fed):.3f}"
        f"\nview: {view.counters()}"
    )
    # the local view keeps both queries' rows alike
    assert abs(kept_local[0] - kept_local[1]) < 0.1
    # the coordinator's values: more of the query that lost more upstream, fairer SIC
    assert view.counters()["used"] > 0
    assert kept_fed[0] > kept_fed[1] + 0.2
    assert jain_index(sic_fed) > jain_index(sic_local) + 0.05


def test_a_reporter_view_and_a_nodes_federation_are_checked() -> None:
    from spillway.config import NodeConfig, QuerySpec
    from spillway.spark.node import Node

    link = node_links(_FED, "b").inputs[0]
    with pytest.raises(ConfigError, match="view must be a CoordinatorView or None"):
        ResultReporter(None, link, clock=lambda: 0.0, view=object())  # type: ignore[arg-type]
    cfg = NodeConfig(queries=(QuerySpec(name="q", kind="avg", feed="synthetic"),))
    with pytest.raises(ConfigError, match="federation must be a NodeReporter or None"):
        Node(cfg, federation=_view())  # type: ignore[arg-type]


def test_a_report_carries_the_nodes_progress_held_below_results_still_waiting() -> None:
    """The root node b (fragments 1 and 3) reports how far its controller processed each
    fragment; results a failed report left behind hold their query's progress back, so the
    coordinator never ends an STW past a result it has not received."""
    clock = ManualClock(17.0)
    svc = CoordinatorService(_TWO.layout(), _TWO.coordinator(), clock=clock, origin_s=0.0)
    address, key = svc.address, svc.authkey
    view = CoordinatorView([0, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0,
                           fragment_ids=[1, 3])  # fmt: skip
    rep = NodeReporter(CoordinatorClient(address, key, node=1, timeout_s=1.0), view, clock=clock)
    rep.progress = lambda: (np.array([16.0, 17.0]), np.array([18.0, 18.0]))
    leaf = CoordinatorClient(address, key, node=0)
    leaf.report(sent=17.0, fragment=[0, 2], done=[17.0, 17.0], decided=[17.0, 17.0])
    clock.advance(3.0)  # b's input was cut at 18, after the leaf's report arrived
    rep(_event(4, [0, 1], [15.0, 15.0], [0.25, 0.5]))
    assert view.update is not None and view.update.ends([0, 1]).tolist() == [16.0, 17.0]
    assert view.update.sic.tolist() == pytest.approx([0.25, 0.5])
    svc.close()
    rep(_event(5, [1], [14.5], [0.25]))  # unreachable: waits, and holds query 1 at 14.5
    assert rep.progress_report() == {"fragment": [1, 3], "done": [16.0, 14.5],
                                     "decided": [18.0, 18.0]}  # fmt: skip
    leaf.close()
    rep.client.close()
