"""Per-group admission through the runtime: controller units, merged group keeps, read()."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spillway.errors import ConfigError
from spillway.policies.cod import CoD
from spillway.policies.uniform import Uniform
from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
from spillway.spark.source import PlanOffset, plan_partitions, read_partition
from spillway.testing import ListFeed


class RecordingCoD(CoD):
    """CoD that remembers every backlog it was given and what it decided."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls = []

    def decide(self, backlog, capacity):
        adm = super().decide(backlog, capacity)
        self.calls.append((backlog, np.asarray(adm.keep).copy(), capacity))
        return adm


def _keyed_feed(n_sources=2, rates=(400.0, 300.0), seconds=6.0, n_keys=30, seed=0):
    """Steady arrivals; Zipf-like keys 0..n_keys-1 (a few big groups, a long tail)."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, n_keys + 1, dtype=float) ** -1.2
    times, values, keys = [], [], []
    for s in range(n_sources):
        t = np.arange(0.0, seconds, 1.0 / rates[s])
        times.append(t.tolist())
        keys.append(rng.choice(n_keys, size=t.size, p=w / w.sum()).tolist())
        values.append((10.0 * s + rng.normal(size=t.size)).tolist())
    return ListFeed(times=times, values=values, keys=keys)


def _plan(feed, name="avg", query_id=0, qname="q"):
    return PlanSpec(
        name=name,
        kind="avg",
        window_s=1.0,
        queries=(PlanQuery(query_id=query_id, name=qname, feed=feed),),
    )


def _controller(policy, plans, capacity=None, **kw):
    cfg = ControllerConfig(clock="logical", stw_s=2.0, capacity_tuples=capacity, seed=5, **kw)
    return NodeController(cfg, plans, policy, epoch_s=0.0)


def _group_counts(feed, source, lo, hi):
    keys = feed.keys(source, np.arange(lo, hi))
    u, c = np.unique(keys, return_counts=True)
    return dict(zip(u.tolist(), c.tolist(), strict=True))


def _rows_per_group(table):
    df = table.to_pandas()
    return df.groupby(["source_id", "key"]).size().to_dict()


def _expected_rows(feed, off_start, off_end):
    """(source, key) -> kept tuples the offset pair says (listed groups: keep, else all)."""
    out = {}
    for lane in range(off_end.n_lanes):
        lo, hi = off_start.end[lane], off_end.end[lane]
        counts = _group_counts(feed, lane, lo, hi)
        listed = dict(zip(*off_end.groups.get(lane, ((), ())), strict=True))
        if lane not in off_end.groups and off_end.keep[lane] < hi - lo:
            raise AssertionError(f"lane {lane} shed without a group map")
        for g, n in counts.items():
            k = min(listed.get(g, n), n)
            if k:
                out[(lane, g)] = k
    return out


def test_cod_grouped_units_are_the_lanes_groups_and_keeps_map_back():
    feed = _keyed_feed()
    pol = RecordingCoD(kind="grouped", b=0.8)
    c = _controller(pol, [_plan(feed)], capacity=1e9)
    start = c.initial_offset("avg")
    off = PlanOffset.from_json(c.latest_offset("avg", start))
    ((backlog, keep, _),) = pol.calls
    # one unit per (lane, distinct key) of the lane's waiting tuples, counts from the feed
    for lane in range(2):
        sel = backlog.lane_source == lane
        assert dict(
            zip(backlog.lane_group[sel].tolist(), backlog.count[sel].tolist(), strict=True)
        ) == _group_counts(feed, lane, 0, off.end[lane])
        # units inherit the lane's SIC; the lane keeps the sum of its groups' keeps
        assert np.all(backlog.tuple_sic[sel] == backlog.tuple_sic[sel][0])
        assert off.keep[lane] == int(keep[sel].sum())
        # the offset lists exactly the groups kept in part, with the policy's keep
        part = sel & (keep < backlog.count)
        assert off.groups[lane] == (
            tuple(backlog.lane_group[part].tolist()),
            tuple(keep[part].tolist()),
        )
    assert sum(off.keep) == pytest.approx(0.2 * sum(off.end), abs=2 * backlog.n_lanes)
    rec = c.history()[0]
    assert rec.query_groups == {"q": 30} and not c._overload.overloaded
    assert rec.query_groups_kept["q"] == 30 and rec.missing_groups == {"q": 0}


def test_no_group_is_missing_at_b098_when_the_budget_allows():
    feed = _keyed_feed(rates=(1500.0, 1500.0), seconds=3.0, n_keys=25)
    c = _controller(CoD(kind="grouped", b=0.98), [_plan(feed)], capacity=1e9)
    s = c.initial_offset("avg")
    for _ in range(2):
        e = c.latest_offset("avg", s)
        off = PlanOffset.from_json(e)
        assert sum(off.keep) <= int(0.02 * 3000) + 1  # ~ (1 - b) of what arrived
        kept = _rows_per_group(
            pa.Table.from_batches(
                [
                    read_partition(p)
                    for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s), off)
                ]
            )
        )
        assert {g for _, g in kept} == set(range(25))  # every group appears
        s = e
    assert all(r.missing_groups == {"q": 0} for r in c.history())


def test_read_keeps_exactly_the_per_group_counts_and_is_identical_twice():
    feed = _keyed_feed()
    c = _controller(CoD(kind="grouped", b=0.9), [_plan(feed)], capacity=1e9)
    desc = c.describe("avg")
    prev = c.initial_offset("avg")
    for _ in range(3):
        end = c.latest_offset("avg", prev)
        s, e = PlanOffset.from_json(prev), PlanOffset.from_json(end)
        assert e.groups  # b = 0.9 cuts the big groups
        parts = plan_partitions(desc, s, e, 2)
        table = pa.Table.from_batches([read_partition(p) for p in parts])
        assert table.num_rows == sum(e.keep) == sum(p.rows for p in parts)
        assert _rows_per_group(table) == _expected_rows(feed, s, e)
        again = pa.Table.from_batches([read_partition(p) for p in plan_partitions(desc, s, e, 2)])
        assert again.equals(table)
        prev = end


def test_merged_segments_sum_group_keeps_including_a_segment_kept_whole():
    # Interval 1 is light (kept whole, no group scan); intervals 2-3 are overloaded (per group).
    rng = np.random.default_rng(3)
    t = np.concatenate([np.arange(0.0, 1.0, 1 / 40), np.arange(1.0, 4.0, 1 / 400)])
    keys = rng.integers(0, 12, size=t.size)
    feed = ListFeed(times=[t.tolist()], values=[[1.0] * t.size], keys=[keys.tolist()])
    slow = PlanSpec(
        name="max",
        kind="max",
        window_s=1.0,
        queries=(PlanQuery(query_id=1, name="m", feed=_keyed_feed(1, (20.0,), 4.0, 3)),),
    )
    pol = RecordingCoD(kind="grouped")  # b from the capacity
    c = _controller(pol, [_plan(feed), slow], capacity=150, group_read=None)
    a = c.initial_offset("max")  # "avg" falls behind while "max" drives three decisions
    for _ in range(3):
        a = c.latest_offset("max", a)
    assert c.decisions == 3 and len(pol.calls) == 2  # interval 1 fitted the capacity
    segs = c._plans["avg"].pending
    assert [bool(g.groups) for g in segs] == [False, True, True]
    merged = PlanOffset.from_json(c.latest_offset("avg", c.initial_offset("avg")))
    assert merged.end == (int(feed.count(3.0)[0]),)
    # per group: segment 1 kept its tuples whole, segments 2-3 kept what the policy decided
    want = _group_counts(feed, 0, 0, segs[0].end[0])
    for g in segs[1:]:
        gk, _, gn = g.groups[0]
        for key, n in zip(gk.tolist(), gn.tolist(), strict=True):
            want[key] = want.get(key, 0) + n
    total = _group_counts(feed, 0, 0, merged.end[0])
    listed = dict(zip(*merged.groups[0], strict=True))
    assert set(listed) == {g for g in total if want[g] < total[g]}
    assert all(listed[g] == want[g] for g in listed)
    assert merged.keep[0] == sum(want.values())
    table = pa.Table.from_batches(
        [
            read_partition(p)
            for p in plan_partitions(
                c.describe("avg"), PlanOffset.from_json(c.initial_offset("avg")), merged
            )
        ]
    )
    got = {g: n for (_, g), n in _rows_per_group(table).items()}
    assert got == {g: n for g, n in want.items() if n}


def test_sheds_always_asks_the_policy_without_overload():
    feed = _keyed_feed(n_sources=1, rates=(1000.0,), seconds=3.0)
    c = _controller(Uniform(b=0.75), [_plan(feed)], capacity=1e9)
    o = c.latest_offset("avg", c.initial_offset("avg"))
    rec = c.history()[0]
    assert not c._overload.overloaded and rec.arrived_tuples == 1000
    assert 200 <= rec.admitted_tuples <= 300 and sum(o["keep"]) == rec.admitted_tuples
    assert "groups" not in o  # a per-lane policy: no group map
    # without b the same policy is asked only under overload
    pol = RecordingCoD(kind="grouped")
    c2 = _controller(pol, [_plan(feed)], capacity=1e9)
    o2 = c2.latest_offset("avg", c2.initial_offset("avg"))
    assert pol.calls == [] and o2["keep"] == [1000] and c2.history()[0].query_groups == {}
    # with b but no capacity (cost models, calibration off) it is asked with the budget
    pol3 = RecordingCoD(kind="grouped", b=0.5)
    c3 = _controller(pol3, [_plan(feed)])
    c3.latest_offset("avg", c3.initial_offset("avg"))
    assert len(pol3.calls) == 1 and pol3.calls[0][2] > 0
    # calibration admits everything, whatever the policy
    c4 = _controller(Uniform(b=0.75), [_plan(feed)], capacity=1e9)
    c4.set_calibration(lambda k_last, k: False)
    assert c4.latest_offset("avg", c4.initial_offset("avg"))["keep"] == [1000]


def test_cod_scalar_decision_receives_value_stats_per_lane():
    feed = _keyed_feed()
    pol = RecordingCoD(kind="scalar", b=0.9)
    c = _controller(pol, [_plan(feed)], capacity=1e9)
    off = c.latest_offset("avg", c.initial_offset("avg"))
    ((backlog, keep, _),) = pol.calls
    assert backlog.lane_group is None and backlog.n_lanes == 2
    for lane in range(2):
        v = feed.payload(lane, np.arange(off["end"][lane]))["value"]
        assert backlog.stats["mean"][lane] == pytest.approx(v.mean())
        assert backlog.stats["var"][lane] == pytest.approx(v.var())
    assert off["keep"] == keep.tolist() and "groups" not in off


def test_cod_join_through_the_controller_keeps_only_joinable_keys():
    t = np.arange(0.0, 2.0, 0.01)
    left = np.where(np.arange(t.size) % 2 == 0, 1, 2)  # keys 1, 2
    right = np.where(np.arange(t.size) % 2 == 0, 1, 3)  # keys 1, 3: only key 1 joins
    feed = ListFeed(
        times=[t.tolist(), t.tolist()],
        values=[[1.0] * t.size] * 2,
        keys=[left.tolist(), right.tolist()],
    )
    c = _controller(CoD(kind="join", b=0.5), [_plan(feed)], capacity=1e9)
    s = PlanOffset.from_json(c.initial_offset("avg"))
    e = PlanOffset.from_json(c.latest_offset("avg", s.to_json()))
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), s, e)]
    )
    got = _rows_per_group(table)
    assert set(got) == {(0, 1), (1, 1)}  # keys 2 and 3 cannot join: shed whole
    assert got[(0, 1)] == got[(1, 1)] == 50  # (1 - b) of each stream's 100 tuples


def test_a_policy_keeping_more_than_a_group_holds_is_refused():
    class Greedy(CoD):
        def decide(self, backlog, capacity):
            adm = super().decide(backlog, capacity)
            return type(adm)(keep=np.asarray(adm.keep) + 1)

    c = _controller(Greedy(kind="grouped", b=0.5), [_plan(_keyed_feed())], capacity=1e9)
    with pytest.raises(ConfigError, match=r"returned keep counts outside \[0, count\]"):
        c.latest_offset("avg", c.initial_offset("avg"))


@pytest.mark.spark
def test_node_with_cod_grouped_on_the_taxi_feed_sheds_b_and_results_carry_sic(spark, tmp_path):
    import time

    from spillway.config import NodeConfig, QuerySpec
    from spillway.spark.node import Node

    rate, window = 8000.0, 0.5  # per source: 2 sources, 8,000 tuples a window
    cfg = NodeConfig(
        queries=(
            QuerySpec(name="fares", kind="avg", feed="taxi", sources=2, rate=rate, window_s=window),
        ),
        trigger_s=window,
        stw_s=2.0,
        seed=7,
        checkpoint_dir=str(tmp_path),
    )
    node = Node(
        cfg,
        spark=spark,
        clock="logical",
        policy=CoD(kind="grouped", b=0.9),
        capacity_tuples_per_s=1e9,  # never overloaded: b alone makes it shed
    )
    node.start()
    try:
        deadline = time.monotonic() + 45
        while len(node.store.batches()) < 4 and time.monotonic() < deadline:
            assert node.query_error(node.plans[0]) is None
            time.sleep(0.2)
        hist = node.history()
        results = node.results()
    finally:
        node.stop()
    assert len(node.store.batches()) >= 4
    decided = [r for r in hist if r.arrived_tuples > 0]
    arrived = sum(r.arrived_tuples for r in decided)
    admitted = sum(r.admitted_tuples for r in decided)
    assert arrived >= 4 * 2 * rate * window * 0.9
    assert admitted / arrived == pytest.approx(0.1, abs=0.01)  # sheds b = 90 %
    for r in decided:  # the decision looked at the routes (groups) of every interval
        assert r.query_groups["fares"] > 100
        assert 0 < r.query_groups_kept["fares"] <= r.query_groups["fares"]
    done = results.sort_values("window_start").head(4)
    assert len(done) == 4 and (done["sic"] > 0).all()
    # each window's average is over about (1 - b) of its 8,000 rides
    assert done["n_in"].between(0.08 * 2 * rate * window, 0.12 * 2 * rate * window).all()
    assert (done["value"] > 0).all()


@pytest.mark.parametrize("scale", [1, 10**15])
def test_a_policy_needing_groups_and_stats_gets_both_per_unit(scale):
    from spillway.policies.base import Policy, admit_all

    class Both(Policy):
        needs_groups = True
        needs_stats = True

        def decide(self, backlog, capacity):
            self.seen = backlog
            return admit_all(backlog)

    t = np.arange(0.0, 2.0, 0.01)
    keys = (np.arange(t.size) % 3) * scale  # wide keys take the np.unique path
    values = np.arange(t.size, dtype=float)
    feed = ListFeed(times=[t.tolist()], values=[values.tolist()], keys=[keys.tolist()])
    pol = Both()
    c = _controller(pol, [_plan(feed)], capacity=10, group_read=None)  # overloaded, asked
    off = c.latest_offset("avg", c.initial_offset("avg"))
    bl = pol.seen
    assert bl.lane_group.tolist() == [0, scale, 2 * scale] and bl.count.tolist() == [34, 33, 33]
    for i in range(3):
        v = values[:100][np.arange(100) % 3 == i]
        assert bl.stats["mean"][i] == pytest.approx(v.mean())
        assert bl.stats["var"][i] == pytest.approx(v.var())
    assert off["keep"] == [100] and "groups" not in off


class _ScannedFeed(ListFeed):
    """A keyed feed (not a log) remembering how many keys were scanned."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.scanned = 0

    def keys(self, source, index):
        self.scanned = max(self.scanned, len(index))
        return super().keys(source, index)


class _LogFeed(_ScannedFeed):
    """A keyed feed that says it is a log."""

    log = True


@pytest.mark.parametrize(("feed_type", "limit"),
                         [(_LogFeed, "LOG_GROUP_SAMPLE"), (_ScannedFeed, "GROUP_SAMPLE")])  # fmt: skip
def test_groups_are_counted_from_a_bounded_sample(monkeypatch, feed_type, limit):
    import spillway.spark.controller as ctl

    monkeypatch.setattr(ctl, limit, 500)
    base = _keyed_feed(rates=(2000.0, 1500.0), seconds=3.0, n_keys=5)
    feed = feed_type(times=base._t, values=base._v, keys=base._k)
    pol = RecordingCoD(kind="grouped", b=0.8)
    c = _controller(pol, [_plan(feed)], capacity=1e9)
    off = PlanOffset.from_json(c.latest_offset("avg", c.initial_offset("avg")))
    ((backlog, keep, _),) = pol.calls
    assert feed.scanned == 500  # never the whole waiting range
    for lane in range(2):
        sel = backlog.lane_source == lane
        est = dict(zip(backlog.lane_group[sel].tolist(), backlog.count[sel].tolist(), strict=True))
        true = _group_counts(feed, lane, 0, off.end[lane])
        assert sum(est.values()) == off.end[lane]  # scaled to the lane exactly
        for g, n in true.items():  # the big groups are estimated within a few percent
            if n > 0.1 * off.end[lane]:
                assert est[g] == pytest.approx(n, rel=0.2)
    assert sum(off.keep) == pytest.approx(0.2 * sum(off.end), abs=2 * backlog.n_lanes)


def test_a_bounded_group_read_decides_on_exact_counts_of_what_executors_read():
    from spillway.spark.source import lane_key, read_index

    base = _keyed_feed(rates=(2000.0, 1000.0), seconds=3.0, n_keys=40)
    feed = _ScannedFeed(times=base._t, values=base._v, keys=base._k)
    pol = RecordingCoD(kind="grouped")  # b from the capacity
    c = _controller(pol, [_plan(feed)], capacity=300, group_read=2.0)
    s = c.initial_offset("avg")
    e = c.latest_offset("avg", s)
    off = PlanOffset.from_json(e)
    ((backlog, keep, _),) = pol.calls
    # 3,000 arrived, 2 x 300 read: shared by backlog (2:1), each lane's one range
    assert {j: [t[2] for t in r] for j, r in off.read.items()} == {0: [400], 1: [200]}
    assert feed.scanned == 400  # the driver never derives a key outside the read
    for lane in range(2):
        ((lo, hi, m),) = off.read[lane]
        assert (lo, hi) == (0, off.end[lane])
        idx = read_index(off.read[lane], lane_key(5, "avg", 0, lane))
        u, n = np.unique(feed.keys(lane, idx), return_counts=True)
        sel = backlog.lane_source == lane  # exact counts of the read, not scaled to the lane
        assert dict(zip(backlog.lane_group[sel].tolist(), backlog.count[sel].tolist(),
                        strict=True)) == dict(zip(u.tolist(), n.tolist(), strict=True))  # fmt: skip
    assert sum(off.keep) == 300
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s),
                                                     off)])  # fmt: skip
    assert table.num_rows == 300
    # per group: what the policy decided, exactly
    want = {}
    for lane in range(2):
        sel = backlog.lane_source == lane
        for g, k in zip(backlog.lane_group[sel].tolist(), keep[sel].tolist(), strict=True):
            if k:
                want[(lane, g)] = k
    assert _rows_per_group(table) == want
    assert c.history()[0].missing_groups == {"q": 0}


def test_merged_segments_with_bounded_reads_keep_each_segments_decision():
    rng = np.random.default_rng(3)
    t = np.concatenate([np.arange(0.0, 1.0, 1 / 40), np.arange(1.0, 4.0, 1 / 400)])
    keys = rng.integers(0, 12, size=t.size)
    feed = ListFeed(times=[t.tolist()], values=[[1.0] * t.size], keys=[keys.tolist()])
    slow = PlanSpec(name="max", kind="max", window_s=1.0,
                    queries=(PlanQuery(query_id=1, name="m", feed=_keyed_feed(1, (20.0,), 4.0,
                                                                               3)),))  # fmt: skip
    pol = RecordingCoD(kind="grouped")
    c = _controller(pol, [_plan(feed), slow], capacity=150, group_read=2.0)
    a = c.initial_offset("max")
    for _ in range(3):
        a = c.latest_offset("max", a)
    segs = c._plans["avg"].pending
    assert [g.read is not None for g in segs] == [False, True, True]
    merged = PlanOffset.from_json(c.latest_offset("avg", c.initial_offset("avg")))
    # the light segment is read whole, the overloaded ones in part
    assert merged.read[0][0] == (0, int(segs[0].end[0]), int(segs[0].end[0]))
    assert [r[2] for r in merged.read[0][1:]] == [int(g.read[0]) for g in segs[1:]]
    want = _group_counts(feed, 0, 0, segs[0].end[0])
    for g in segs[1:]:
        gk, _, gn = g.groups[0]
        for key, n in zip(gk.tolist(), gn.tolist(), strict=True):
            want[key] = want.get(key, 0) + n
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(
            c.describe("avg"), PlanOffset.from_json(c.initial_offset("avg")), merged)])  # fmt: skip
    got = {g: n for (_, g), n in _rows_per_group(table).items()}
    assert got == {g: n for g, n in want.items() if n}
    assert merged.keep[0] == sum(want.values()) == table.num_rows


def test_group_read_is_validated():
    with pytest.raises(ConfigError, match="group_read must be a number >= 1 or None, got 0.5"):
        ControllerConfig(group_read=0.5)


class _CountingLog(ListFeed):
    """A keyed log remembering every payload it was asked for (driver and executor copies
    alike: the record is kept on the class)."""

    log = True
    asked: list = []

    def payload(self, source, index):
        _CountingLog.asked.append((int(source), np.asarray(index, dtype=np.int64).copy()))
        return super().payload(source, index)


def _counting_log(**kw):
    base = _keyed_feed(**kw)
    _CountingLog.asked = []
    return _CountingLog(times=base._t, values=base._v, keys=base._k)


def test_an_overloaded_log_lane_is_read_in_part_each_record_fetched_once(monkeypatch):
    import spillway.spark.controller as ctl
    from spillway.spark.source import lane_key, read_index

    monkeypatch.setattr(ctl, "LOG_GROUP_SAMPLE", 150)
    feed = _counting_log(rates=(2000.0, 1000.0), seconds=3.0, n_keys=40)
    pol = RecordingCoD(kind="grouped")
    c = _controller(pol, [_plan(feed)], capacity=300, group_read=2.0)
    s = c.initial_offset("avg")
    off = PlanOffset.from_json(c.latest_offset("avg", s))
    # 3,000 arrived, 2 x 300 read, shared by backlog (2:1): a log is bounded like any lane
    assert {j: [t[2] for t in r] for j, r in off.read.items()} == {0: [400], 1: [200]}
    reads = {j: read_index(off.read[j], lane_key(5, "avg", 0, j), log=True) for j in range(2)}
    assert all(int((np.diff(r) > 1).sum()) < 16 for r in reads.values())  # 16 runs: 16 seeks
    # the driver fetched a sample of the read (at most LOG_GROUP_SAMPLE), never outside it
    driver = {}
    for lane, idx in _CountingLog.asked:
        assert np.isin(idx, reads[lane]).all()
        driver[lane] = driver.get(lane, 0) + idx.size
    assert driver == {0: 150, 1: 150}
    ((backlog, keep, _),) = pol.calls
    sel = backlog.lane_source == 0  # lane 0's counts: its sample scaled to the read
    assert int(backlog.count[sel].sum()) == 400
    # the executors fetch each lane's read once, and nothing else
    _CountingLog.asked = []
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s),
                                                     off)])  # fmt: skip
    assert sorted((lane, idx.tolist()) for lane, idx in _CountingLog.asked) == sorted(
        (lane, r.tolist()) for lane, r in reads.items()
    )
    got = _rows_per_group(table)
    for lane in range(2):  # a group the offset lists keeps its count of the read, others all
        listed = dict(zip(*off.groups.get(lane, ((), ())), strict=True))
        for g, n in _group_counts_at(feed, lane, reads[lane]).items():
            assert got.get((lane, g), 0) == min(listed.get(g, n), n)
    # on estimated counts, the rows kept are the budget within the sample's error
    assert sum(keep) == 300 and abs(table.num_rows - 300) <= 60


def test_the_drivers_sample_of_a_log_read_is_small_and_fetched_in_a_few_runs():
    # The driver counts a log's groups inside the batch's planning: 20,000 records a lane, one
    # run inside each of the read's 16 runs (a seek each), took 0.84-1.24 s a decision over
    # four Kafka partitions, CoD at 3x (scripts/profile_kafka_cod.py): half a 2 s trigger.
    import spillway.spark.controller as ctl
    from spillway.spark.source import read_index

    c = _controller(CoD(kind="grouped"), [_plan(_counting_log())], capacity=300, group_read=2.0)
    idx = read_index(((0, 1_000_000, 140_000),), 11, log=True)  # a 3x read: 16 runs
    got = c._log_sample(0, idx)
    assert got.size == ctl.LOG_GROUP_SAMPLE <= 5_000 and np.isin(got, idx).all()
    pieces = int((np.diff(got) > 1).sum()) + 1  # contiguous offset ranges: seeks
    assert pieces <= 2 * ctl.LOG_SAMPLE_RUNS < 16, pieces
    # spread over the read: every quarter of it is sampled
    assert len(np.unique(np.searchsorted(np.quantile(idx, [0.25, 0.5, 0.75]), got))) == 4
    assert np.array_equal(got, c._log_sample(0, idx))  # the same read, the same sample


def test_a_log_lane_decided_per_group_is_fetched_once_without_a_bound():
    feed = _counting_log()
    c = _controller(CoD(kind="grouped", b=0.9), [_plan(feed)], capacity=1e9)
    s = c.initial_offset("avg")
    e = PlanOffset.from_json(c.latest_offset("avg", s))
    assert e.groups and not e.read  # per group, whole ranges
    _CountingLog.asked = []
    table = pa.Table.from_batches(
        [read_partition(p) for p in plan_partitions(c.describe("avg"), PlanOffset.from_json(s),
                                                     e)])  # fmt: skip
    # one fetch a lane, of its whole range (the old read fetched the kept records again)
    assert sorted((lane, idx.tolist()) for lane, idx in _CountingLog.asked) == [
        (lane, list(range(e.end[lane]))) for lane in range(2)
    ]
    assert _rows_per_group(table) == _expected_rows(feed, PlanOffset.from_json(s), e)


def _group_counts_at(feed, source, idx):
    u, c = np.unique(feed.keys(source, idx), return_counts=True)
    return dict(zip(u.tolist(), c.tolist(), strict=True))
