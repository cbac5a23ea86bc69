"""The spillway data source: offsets, partition planning, keep selection, rows (mostly no JVM)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.spark.source import (
    ARROW_SCHEMA,
    FeedSpec,
    PlanDescription,
    PlanOffset,
    SourceOptions,
    SpillwayPartition,
    balance,
    cached_feed,
    lane_key,
    plan_batch_partitions,
    plan_partitions,
    read_index,
    read_partition,
    select_kept,
    select_kept_groups,
    source_options,
)
from spillway.testing import ListFeed


def _feed(n_sources=3, rate=100.0, seconds=4.0):
    times = [list(np.arange(0.0, seconds, 1.0 / (rate * (s + 1)))) for s in range(n_sources)]
    values = [list(np.arange(len(t), dtype=float) + 1000 * s) for s, t in enumerate(times)]
    keys = [[s] * len(t) for s, t in enumerate(times)]
    return ListFeed(times=times, values=values, keys=keys)


def _desc(feed, plan="avg", seed=3, epoch_us=1_000_000):
    n = feed.n_sources
    return PlanDescription(
        plan=plan,
        seed=seed,
        epoch_us=epoch_us,
        stw_s=2.0,
        lane_query=(0,) * n,
        lane_source=tuple(range(n)),
        lane_feed=(0,) * n,
        lane_n_sources=(n,) * n,
        feeds=(FeedSpec.of(feed).dump(),),
    )


def _offset(desc, b, end, keep, sic):
    return PlanOffset(
        plan=desc.plan,
        epoch_us=desc.epoch_us,
        boundary=b,
        t_us=b * 10**6,
        end=end,
        keep=keep,
        sic=sic,
    )


# -- offsets ---------------------------------------------------------------------------------


def test_offset_json_round_trip_through_text():
    off = PlanOffset(
        plan="top5",
        epoch_us=1_764_000_000_123_456,
        boundary=17,
        t_us=17_000_000,
        end=(10, 0, 123456789),
        keep=(3, 0, 99),
        sic=(1 / 3, 0.0, 1e-7 / 7),
    )
    text = json.dumps(off.to_json())  # what Spark writes in its offset log
    back = PlanOffset.from_json(text)
    assert back == off
    assert back.sic[2] == 1e-7 / 7  # floats survive exactly
    assert PlanOffset.from_json(json.loads(text)) == off


def test_offset_rejects_foreign_or_broken_offsets():
    with pytest.raises(InputDataError, match="not a spillway offset of version 1"):
        PlanOffset.from_json({"v": 99, "plan": "avg"})
    with pytest.raises(InputDataError, match="not a spillway offset"):
        PlanOffset.from_json('{"index": 3}')
    with pytest.raises(InputDataError, match="must be JSON"):
        PlanOffset.from_json("{nope")
    good = PlanOffset.initial("avg", n_lanes=2, epoch_us=0).to_json()
    del good["keep"]
    with pytest.raises(InputDataError, match="lacks the field 'keep'"):
        PlanOffset.from_json(good)
    with pytest.raises(InputDataError, match="one entry per lane"):
        PlanOffset(plan="a", epoch_us=0, boundary=1, t_us=0, end=(1, 2), keep=(1,), sic=(0, 0))
    with pytest.raises(InputDataError, match="'end' must hold values >= 0"):
        PlanOffset(plan="a", epoch_us=0, boundary=1, t_us=0, end=(-1,), keep=(0,), sic=(0,))


def test_offset_with_groups_round_trips_and_without_omits_the_field():
    off = PlanOffset(
        plan="avg",
        epoch_us=5,
        boundary=3,
        t_us=3_000_000,
        end=(100, 50, 7),
        keep=(20, 50, 0),
        sic=(0.01, 0.02, 0.0),
        groups={2: ((4,), (0,)), 0: ((-3, 9, 1), (2, 0, 5))},
    )
    assert list(off.groups) == [0, 2] and off.groups[0] == ((-3, 1, 9), (2, 5, 0))
    data = off.to_json()
    assert data["groups"] == {"0": [[-3, 1, 9], [2, 5, 0]], "2": [[4], [0]]}
    assert PlanOffset.from_json(json.dumps(data)) == off
    plain = PlanOffset(**{**off.__dict__, "groups": {}})
    assert "groups" not in plain.to_json() and PlanOffset.from_json(plain.to_json()) == plain
    assert plain != off


def test_an_offset_written_before_groups_existed_still_parses():
    old = {
        "v": 1,
        "plan": "avg",
        "epoch_us": 1_700_000_000_000_000,
        "b": 4,
        "t_us": 4_000_000,
        "end": [10, 20],
        "keep": [5, 20],
        "sic": [0.1, 0.05],
    }
    off = PlanOffset.from_json(json.dumps(old))
    assert off.groups == {} and off.keep == (5, 20) and off.to_json() == old


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        ([1, 2], "must map lane indices to \\[group keys, keep counts\\], got list"),
        ({"x": [[1], [1]]}, "'x' is not a lane index"),
        ({"2": [[1], [1]]}, "lane 2 is outside 0..1"),
        ({"0": [[1], [1], [1]]}, "lane 0: needs \\[group keys, keep counts\\], two lists of ints"),
        ({"0": "ab"}, "lane 0: needs \\[group keys, keep counts\\]"),
        ({"0": [["a"], [1]]}, "lane 0: needs \\[group keys, keep counts\\]"),
        ({"0": [[1, 2], [1]]}, "lane 0: needs as many keep counts as group keys"),
        ({"0": [[], []]}, "at least one"),
        ({"0": [[1, 1], [1, 1]]}, "lane 0: group keys repeat"),
        ({"1": [[1], [-1]]}, "lane 1: keep counts must be >= 0"),
        ({"0": [[1, 2], [3, 3]]}, "the groups keep 6 tuples, more than the lane's keep 5"),
    ],
)
def test_offset_rejects_a_malformed_group_map(groups, match):
    data = PlanOffset(
        plan="avg", epoch_us=0, boundary=1, t_us=0, end=(9, 9), keep=(5, 5), sic=(0.1, 0.1)
    ).to_json()
    data["groups"] = groups
    with pytest.raises(InputDataError, match=match):
        PlanOffset.from_json(data)


def test_offset_with_reads_round_trips_and_without_omits_the_field():
    off = PlanOffset(plan="avg", epoch_us=0, boundary=2, t_us=2_000_000, end=(900, 50),
                     keep=(30, 50), sic=(0.1, 0.1), groups={0: ((1,), (3,))},
                     read={0: ((0, 400, 40), (400, 900, 60))})  # fmt: skip
    data = off.to_json()
    assert data["read"] == {"0": [[0, 400, 40], [400, 900, 60]]}
    assert PlanOffset.from_json(json.dumps(data)) == off
    plain = PlanOffset(**{**off.__dict__, "read": {}})
    assert "read" not in plain.to_json() and plain != off


@pytest.mark.parametrize(
    ("read", "match"),
    [
        ([1], "must map lane indices to lists of \\[lo, hi, m\\], got list"),
        ({"0": [[1, 2]]}, "lane '0': needs a lane index and a list of \\[lo, hi, m\\]"),
        ({"x": [[0, 9, 5]]}, "lane 'x': needs a lane index"),
        ({"2": [[0, 9, 5]]}, "lane 2 must be in 0..1 with at least one"),
        ({"0": []}, "lane 0 must be in 0..1 with at least one"),
        ({"0": [[0, 10, 5]]}, "ending by the lane's end 9"),
        ({"0": [[4, 9, 5], [0, 4, 1]]}, "ranges ascending, disjoint"),
        ({"0": [[0, 9, 10]]}, "0 <= m <= hi - lo"),
        ({"0": [[0, 9, 4]]}, "keeps 5 tuples, more than the 4 it reads"),
    ],
)
def test_offset_rejects_a_malformed_read_map(read, match):
    data = PlanOffset(
        plan="avg", epoch_us=0, boundary=1, t_us=0, end=(9, 9), keep=(5, 5), sic=(0.1, 0.1)
    ).to_json()
    data["read"] = read
    with pytest.raises(InputDataError, match=match):
        PlanOffset.from_json(data)


def test_a_bounded_read_keeps_per_group_counts_among_its_tuples_only():
    times = [list(np.arange(0.0, 4.0, 0.002))]
    keys = [[i % 7 for i in range(len(times[0]))]]
    feed = ListFeed(times=times, values=[[1.0] * len(times[0])], keys=keys)
    desc = _desc(feed)
    start = _offset(desc, 1, (500,), (500,), (0.1,))
    reads = ((500, 2000, 300),)
    idx = read_index(reads, lane_key(desc.seed, "avg", 0, 0))
    assert idx.size == 300 and idx.min() >= 500 and idx.max() < 2000
    in_read = np.bincount(np.array(keys[0])[idx], minlength=7)
    end = PlanOffset(**{**_offset(desc, 2, (2000,), (int(in_read.sum()) - in_read[3] + 5,),
                                  (0.1,)).__dict__,
                        "groups": {0: ((3,), (5,))}, "read": {0: reads}})  # fmt: skip
    (part,) = plan_partitions(desc, start, end, 2)
    df = read_partition(part).to_pandas()
    # only the tuples read are kept: every group whole among them, group 3 its 5
    assert df.groupby("key").size().to_dict() == {
        g: (5 if g == 3 else int(in_read[g])) for g in range(7) if in_read[g]
    }
    assert len(df) == sum(end.keep)
    outside = PlanOffset(**{**end.__dict__, "read": {0: ((0, 2000, 300),)}})
    with pytest.raises(InputDataError, match="the ranges read .* are not within"):
        plan_partitions(desc, start, outside, 2)
    ungrouped = PlanOffset(**{**end.__dict__, "groups": {}})
    with pytest.raises(InputDataError, match="lists no group kept in part"):
        plan_partitions(desc, start, ungrouped, 2)


def test_grouped_keep_over_given_indices_needs_one_key_per_index():
    with pytest.raises(InputDataError, match="need one key per tuple of the 4 indices, got 3"):
        select_kept_groups(0, 0, 1, np.zeros(3), [0], [1], index=np.arange(4))


# -- keep selection --------------------------------------------------------------------------


def test_grouped_keep_selection_keeps_exactly_each_groups_count():
    rng = np.random.default_rng(4)
    lo, hi = 500, 8500
    keys = rng.integers(0, 40, size=hi - lo)
    counts = np.bincount(keys, minlength=40)
    listed = np.arange(0, 40, 2)  # even groups cut, odd groups whole
    keep = np.minimum(counts[listed], rng.integers(0, 30, size=listed.size))
    keep[0] = counts[listed[0]] + 7  # more than the group holds: all of it
    key = lane_key(2, "avg", 0, 1)
    idx = select_kept_groups(lo, hi, key, keys, listed, keep)
    assert np.all(np.diff(idx) > 0) and idx.min() >= lo and idx.max() < hi
    got = np.bincount(keys[idx - lo], minlength=40)
    assert got[1::2].tolist() == counts[1::2].tolist()
    assert got[listed].tolist() == np.minimum(keep, counts[listed]).tolist()
    # the kept tuples of a group are its smallest hashes, and the order of listing is irrelevant
    g = listed[3]
    members = np.flatnonzero(keys == g) + lo
    from spillway.spark.source import tuple_hashes

    smallest = np.sort(members[np.argsort(tuple_hashes(key, members))[: keep[3]]])
    assert np.array_equal(idx[keys[idx - lo] == g], smallest)
    perm = rng.permutation(listed.size)
    again = select_kept_groups(lo, hi, key, keys, listed[perm], keep[perm])
    assert np.array_equal(idx, again)
    assert select_kept_groups(lo, hi, key, keys, [], []).size == hi - lo
    assert select_kept_groups(3, 3, key, np.zeros(0), [1], [0]).size == 0
    with pytest.raises(InputDataError, match=r"need one key per tuple of \[500, 8500\), got 3"):
        select_kept_groups(lo, hi, key, keys[:3], listed, keep)


@pytest.mark.parametrize(("n_groups", "scale"), [(50, 1), (50, 10**12), (300_000, 1)])
def test_grouped_keep_selection_equals_a_lexsort_reference(n_groups, scale):
    # small key range (lookup table) or huge (binary search); few groups (16-bit radix sort)
    # or more than 65,536 (a stable sort of int64 positions): the same tuples as a reference
    rng = np.random.default_rng(n_groups + scale % 7)
    n = 120_000
    keys = rng.integers(0, n_groups, size=n) * scale - 5
    distinct = np.unique(keys)
    listed = distinct if distinct.size > 1 << 16 else rng.choice(distinct, distinct.size // 2)
    listed = np.unique(listed)
    keep = rng.integers(0, 4, size=listed.size)
    key = lane_key(1, "avg", 3, 0)
    idx = np.arange(n) + 10
    from spillway.spark.source import tuple_hashes

    h = tuple_hashes(key, idx)
    pos = {int(g): i for i, g in enumerate(listed)}
    g = np.array([pos.get(int(x), -1) for x in keys])
    on = g >= 0
    o = np.lexsort((h[on], g[on]))
    gs = g[on][o]
    rank = np.arange(gs.size) - np.searchsorted(gs, gs)
    want = np.sort(np.concatenate([idx[~on], idx[on][o[rank < keep[gs]]]]))
    assert np.array_equal(select_kept_groups(10, 10 + n, key, keys, listed, keep), want)


def test_read_of_a_grouped_lane_keeps_its_per_group_counts():
    times = [list(np.arange(0.0, 4.0, 0.002)), list(np.arange(0.0, 4.0, 0.004))]
    keys = [[i % 7 for i in range(len(times[0]))], [i % 3 for i in range(len(times[1]))]]
    feed = ListFeed(times=times, values=[[1.0] * len(t) for t in times], keys=keys)
    desc = _desc(feed)
    o1 = _offset(desc, 1, (500, 250), (500, 250), (0.1, 0.1))
    # lane 0: 1500 tuples, groups of ~214; group 2 keeps 10, group 5 none; lane 1 per lane
    o2 = PlanOffset(
        **{
            **_offset(desc, 2, (2000, 1000), (1500 - 214 - 214 + 10, 300), (0.1, 0.2)).__dict__,
            "groups": {0: ((2, 5), (10, 0))},
        }
    )
    parts = plan_partitions(desc, o1, o2, 2)
    table = pa.Table.from_batches([read_partition(p) for p in parts])
    df = table.to_pandas()
    per = df[df.source_id == 0].groupby("key").size().to_dict()
    full = np.bincount(np.array(keys[0][500:2000]), minlength=7)
    assert full[2] == full[5] == 214
    assert per == {g: (10 if g == 2 else int(full[g])) for g in range(7) if g != 5}
    assert (df.source_id == 1).sum() == 300 and table.num_rows == sum(o2.keep)
    again = pa.Table.from_batches([read_partition(p) for p in plan_partitions(desc, o1, o2, 2)])
    assert again.equals(table)


def test_a_grouped_lane_weighs_its_key_scan_when_partitions_are_planned():
    feed = _feed(n_sources=2, rate=100.0)
    desc = _desc(feed)
    start = PlanOffset.initial("avg", n_lanes=2, epoch_us=desc.epoch_us)
    same = _offset(desc, 1, (300, 300), (100, 110), (0.1, 0.1))
    # equal ranges: the lane keeping more rows goes to the first (empty) bin first
    first = plan_partitions(desc, start, same, 2)[0]
    assert first.source_id.tolist() == [1] and first.groups is None
    grouped = PlanOffset(**{**same.__dict__, "groups": {0: ((0,), (100,))}})
    parts = plan_partitions(desc, start, grouped, 2)
    # lane 0's key scan (300 · GROUP_SCAN_WEIGHT) makes it the heavier one now
    assert parts[0].source_id.tolist() == [0]
    assert parts[0].groups[0][0].tolist() == [0] and parts[0].groups[0][1].tolist() == [100]
    assert parts[1].groups is None


# -- keep selection (per lane) ---------------------------------------------------------------


def test_keep_selection_is_deterministic_sorted_and_of_size_k():
    key = lane_key(5, "avg", 2, 1)
    a = select_kept(100, 1100, 250, key)
    b = select_kept(100, 1100, 250, key)
    assert np.array_equal(a, b)
    assert a.size == 250 and len(set(a.tolist())) == 250
    assert a.min() >= 100 and a.max() < 1100 and np.all(np.diff(a) > 0)
    # Edge cases: all and nothing.
    assert select_kept(5, 9, 4, key).tolist() == [5, 6, 7, 8]
    assert select_kept(5, 9, 0, key).size == 0
    assert select_kept(5, 5, 3, key).size == 0


def test_keep_selection_depends_on_lane_seed_and_plan():
    base = select_kept(0, 1000, 100, lane_key(1, "avg", 0, 0))
    for other in (
        lane_key(2, "avg", 0, 0),
        lane_key(1, "max", 0, 0),
        lane_key(1, "avg", 1, 0),
        lane_key(1, "avg", 0, 1),
    ):
        assert not np.array_equal(base, select_kept(0, 1000, 100, other))


def test_keep_selection_is_spread_uniformly_over_the_range():
    # The kept tuples are a uniform sample: not the first k, and evenly spread over time.
    n, k = 20_000, 2_000
    kept = select_kept(0, n, k, lane_key(0, "avg", 0, 0))
    counts = np.bincount(kept * 10 // n, minlength=10)
    assert counts.min() > 0.8 * k / 10 and counts.max() < 1.2 * k / 10
    assert kept.max() > 0.95 * n and kept.min() < 0.05 * n


# -- partitions ------------------------------------------------------------------------------


def test_partitions_are_balanced_and_skip_lanes_that_keep_nothing():
    feed = _feed(n_sources=3)
    desc = _desc(feed)
    start = PlanOffset.initial("avg", n_lanes=3, epoch_us=desc.epoch_us)
    end = _offset(desc, 1, (100, 200, 300), (100, 0, 150), (0.01, 0.02, 0.03))
    parts = plan_partitions(desc, start, end, 2)
    assert sorted(p.rows for p in parts) == [100, 150]
    lanes = sorted(int(s) for p in parts for s in p.source_id)
    assert lanes == [0, 2]
    assert plan_partitions(desc, start, end, 5) and len(plan_partitions(desc, start, end, 5)) == 2
    nothing = _offset(desc, 1, (100, 200, 300), (0, 0, 0), (0.01, 0.02, 0.03))
    assert plan_partitions(desc, start, nothing) == []
    assert plan_partitions(desc, start, start) == []


def test_partition_ranges_follow_consecutive_offsets():
    feed = _feed(n_sources=2)
    desc = _desc(feed)
    o1 = _offset(desc, 1, (100, 200), (10, 20), (0.1, 0.1))
    o2 = _offset(desc, 2, (250, 260), (150, 60), (0.1, 0.1))
    parts = plan_partitions(desc, o1, o2, 1)
    (p,) = parts
    assert p.lo.tolist() == [100, 200] and p.hi.tolist() == [250, 260]
    assert p.keep.tolist() == [150, 60]
    keep_too_many = _offset(desc, 2, (250, 260), (999, 999), (0.1, 0.1))
    assert plan_partitions(desc, o1, keep_too_many, 1)[0].rows == 150 + 60


def test_partitions_refuse_offsets_of_another_plan_or_going_back():
    desc = _desc(_feed(n_sources=2))
    start = PlanOffset.initial("avg", n_lanes=2, epoch_us=0)
    with pytest.raises(InputDataError, match="belongs to another node config"):
        plan_partitions(desc, PlanOffset.initial("max", n_lanes=2, epoch_us=0), start)
    with pytest.raises(InputDataError, match="with 3 lanes"):
        plan_partitions(desc, PlanOffset.initial("avg", n_lanes=3, epoch_us=0), start)
    later = _offset(desc, 2, (10, 10), (1, 1), (0.1, 0.1))
    with pytest.raises(InputDataError, match="lane 0: end offset 5 is before start 10"):
        plan_partitions(desc, later, _offset(desc, 3, (5, 12), (1, 1), (0.1, 0.1)))


def test_balance_is_greedy_longest_first():
    bins = balance(np.array([10.0, 9.0, 2.0, 2.0, 1.0]), 2)
    loads = sorted(float(np.array([10.0, 9.0, 2.0, 2.0, 1.0])[b].sum()) for b in bins)
    assert loads == [12.0, 12.0]
    assert [b.tolist() for b in balance(np.array([1.0]), 4)] == [[0]]


def test_partitions_pickle_small():
    desc = _desc(_feed(n_sources=3))
    start = PlanOffset.initial("avg", n_lanes=3, epoch_us=0)
    end = _offset(desc, 1, (100, 200, 300), (50, 50, 50), (0.1, 0.1, 0.1))
    for p in plan_partitions(desc, start, end):
        assert isinstance(p, SpillwayPartition)
        assert len(pickle.dumps(p)) < 20_000 + len(desc.feeds[0])


# -- rows ------------------------------------------------------------------------------------


def test_read_regenerates_exactly_the_kept_tuples_with_schema():
    feed = _feed(n_sources=2, rate=50.0)
    desc = _desc(feed, epoch_us=1_700_000_000_000_000)
    o1 = _offset(desc, 1, (40, 70), (40, 70), (0.1, 0.1))
    o2 = _offset(desc, 2, (90, 170), (10, 100), (0.25, 0.5))
    batches = [read_partition(p) for p in plan_partitions(desc, o1, o2, 2)]
    table = pa.Table.from_batches(batches)
    assert table.schema.equals(ARROW_SCHEMA)
    assert table.num_rows == 110
    df = table.to_pandas()
    for sid, (lo, hi, k, sic) in {0: (40, 90, 10, 0.25), 1: (70, 170, 100, 0.5)}.items():
        rows = df[df.source_id == sid]
        idx = select_kept(lo, hi, k, lane_key(desc.seed, "avg", 0, sid))
        assert rows.value.tolist() == feed.payload(sid, idx)["value"].tolist()
        assert (rows.key == sid).all() and (rows.sic == sic).all() and (rows.query_id == 0).all()
        expected_us = np.rint(feed.arrival_time(sid, idx) * 1e6).astype(np.int64) + desc.epoch_us
        got_us = rows.arrival_ts.dt.as_unit("us").astype("int64").to_numpy()
        assert got_us.tolist() == expected_us.tolist()
        assert rows.event_ts.equals(rows.arrival_ts)
    # Reading the same partitions again gives identical rows (what a replay relies on).
    again = pa.Table.from_batches([read_partition(p) for p in plan_partitions(desc, o1, o2, 2)])
    assert again.equals(table)


def test_read_of_an_empty_lane_yields_an_empty_batch_with_schema():
    feed = _feed(n_sources=1)
    p = SpillwayPartition(
        plan="avg",
        seed=0,
        epoch_us=0,
        feeds=(FeedSpec.of(feed).dump(),),
        query_id=np.array([0], np.int32),
        source_id=np.array([0], np.int32),
        feed=np.array([0]),
        lo=np.array([5]),
        hi=np.array([5]),
        keep=np.array([0]),
        sic=np.array([0.0]),
    )
    batch = read_partition(p)
    assert batch.num_rows == 0 and batch.schema.equals(ARROW_SCHEMA)


def test_registered_feed_spec_rebuilds_the_same_feed():
    from spillway.feeds import make_feed

    settings = dict(n_sources=2, rate=300.0, seed=11)
    spec = FeedSpec.registered("gaussian", **settings)
    a, b = make_feed("gaussian", **settings), cached_feed(spec.dump())
    idx = np.arange(50)
    assert np.array_equal(a.payload(1, idx)["value"], b.payload(1, idx)["value"])
    assert np.array_equal(a.count(3.0), b.count(3.0))
    assert cached_feed(spec.dump()) is b  # built once per process
    with pytest.raises(ConfigError, match="needs a feed name or a pickled feed"):
        FeedSpec().build()
    with pytest.raises(InputDataError, match="expected a FeedSpec"):
        FeedSpec.load(pickle.dumps({"not": "a spec"}))


def test_batch_partitions_keep_everything_in_the_range_in_chunks():
    feed = _feed(n_sources=2, rate=100.0, seconds=4.0)  # 100/s and 200/s
    desc = _desc(feed)
    parts = plan_batch_partitions(desc, from_s=1.0, until_s=3.0, n_partitions=2, chunk_rows=150)
    table = pa.Table.from_batches([read_partition(p) for p in parts])
    df = table.to_pandas()
    expected = {s: int(feed.count(3.0)[s] - feed.count(1.0)[s]) for s in range(2)}
    assert df.groupby("source_id").size().to_dict() == expected
    assert max(p.rows for p in parts) - min(p.rows for p in parts) <= 150
    # Eq. 1 from the lane's mean rate: each source's tuples of one STW sum to 1/|S|.
    per_source_stw = df.groupby("source_id").sic.sum() * desc.stw_s / 2.0
    assert np.allclose(per_source_stw.to_numpy(), 1 / 2)
    with pytest.raises(ConfigError, match="0 <= from_s < until_s"):
        plan_batch_partitions(desc, from_s=3.0, until_s=1.0)
    with pytest.raises(ConfigError, match="chunk_rows must be >= 1"):
        plan_batch_partitions(desc, from_s=0.0, until_s=1.0, chunk_rows=0)


def test_source_options():
    opts = source_options("127.0.0.1:4000", b"\x01\x02", "avg", partitions=3, from_s=1.5)
    parsed = SourceOptions.parse({k.upper(): v for k, v in opts.items()})  # case-insensitive
    assert (parsed.plan, parsed.partitions, parsed.from_s, parsed.authkey) == (
        "avg",
        3,
        1.5,
        "0102",
    )
    with pytest.raises(ConfigError, match="needs the option 'plan'"):
        SourceOptions.parse({"address": "127.0.0.1:1", "authkey": "00"})
    with pytest.raises(ConfigError, match="control address must be 127.0.0.1"):
        SourceOptions.parse({"address": "10.1.1.1:1", "authkey": "00", "plan": "a"})
    with pytest.raises(ConfigError, match="'authkey' must be hex"):
        SourceOptions.parse({"address": "127.0.0.1:1", "authkey": "xyz", "plan": "a"})
    with pytest.raises(ConfigError, match="'partitions' must be a int"):
        SourceOptions.parse({**opts, "partitions": "two"})
    with pytest.raises(ConfigError, match="'partitions' must be >= 1"):
        SourceOptions.parse({**opts, "partitions": "0"})


# -- through Spark ---------------------------------------------------------------------------


@pytest.mark.spark
def test_streaming_run_through_the_source_sheds_exactly_what_the_offsets_say(spark, tmp_path):
    import time

    from spillway.spark.channel import ControlServer
    from spillway.spark.controller import ControllerConfig, NodeController, PlanQuery, PlanSpec
    from spillway.spark.source import register_source
    from tests.spark.test_controller import RandomShare

    feed = _feed(n_sources=2, rate=60.0, seconds=20.0)  # 60/s and 120/s
    plan = PlanSpec(
        name="avg", kind="avg", window_s=0.5, queries=(PlanQuery(query_id=0, name="q", feed=feed),)
    )
    cfg = ControllerConfig(clock="logical", trigger_s=0.5, stw_s=2.0, capacity_tuples=50, seed=4)
    controller = NodeController(cfg, [plan], RandomShare(), epoch_s=1_700_000_000.0)
    batches = {}

    def collect(df, batch_id):
        batches[batch_id] = df.toPandas()

    register_source(spark)
    with ControlServer(controller.handle) as server:
        opts = source_options(server.address_text, server.authkey, "avg")
        q = (
            spark.readStream.format("spillway")
            .options(**opts)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="0.25 seconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 45
            while len(batches) < 4 and time.monotonic() < deadline and q.isActive:
                time.sleep(0.2)
        finally:
            q.stop()
    assert q.exception() is None
    assert len(batches) >= 4
    desc = controller.describe("avg")
    offsets = {}
    for b in range(4):
        lines = (tmp_path / "ckpt" / "offsets" / str(b)).read_text().splitlines()
        offsets[b] = PlanOffset.from_json(lines[-1])
    prev = PlanOffset.initial("avg", n_lanes=2, epoch_us=desc.epoch_us)
    for b in range(4):
        got = batches[b].sort_values(["source_id", "arrival_ts", "value"]).reset_index(drop=True)
        end = offsets[b]
        assert end.t_us == (b + 1) * 500_000  # one 0.5 s window per batch, window-aligned
        assert len(got) == sum(end.keep) <= 50  # the fixed capacity
        expected = (
            pa.Table.from_batches([read_partition(p) for p in plan_partitions(desc, prev, end)])
            .to_pandas()
            .sort_values(["source_id", "arrival_ts", "value"])
            .reset_index(drop=True)
        )
        assert got["value"].tolist() == expected["value"].tolist()
        assert got["sic"].tolist() == expected["sic"].tolist()
        # toPandas gives naive UTC timestamps (session time zone UTC); compare in microseconds
        got_us = got["arrival_ts"].dt.as_unit("us").astype("int64")
        exp_us = expected["arrival_ts"].dt.tz_convert(None).dt.as_unit("us").astype("int64")
        assert got_us.tolist() == exp_us.tolist()
        t0_us = desc.epoch_us + b * 500_000
        assert ((got_us >= t0_us) & (got_us < t0_us + 500_000)).all()  # one whole window
        prev = end


def test_read_hands_spark_bounded_chunks_with_the_same_rows():
    from spillway.spark.source import read_batches
    from spillway.testing import ListFeed

    times = [[0.001 * i for i in range(1, 1001)], [0.002 * i for i in range(1, 301)]]
    feed = FeedSpec.of(
        ListFeed(times=times, values=[[float(i) for i in range(len(t))] for t in times])
    )
    p = SpillwayPartition(
        plan="avg", seed=3, epoch_us=0, feeds=(feed.dump(),),
        query_id=np.array([0, 0], np.int32), source_id=np.array([0, 1], np.int32),
        feed=np.array([0, 0]), lo=np.array([0, 0]), hi=np.array([1000, 300]),
        keep=np.array([700, 300]), sic=np.array([0.1, 0.2]),
    )  # fmt: skip
    chunks = list(read_batches(p, max_rows=256))
    assert [b.num_rows for b in chunks] == [256, 256, 256, 232]
    whole = read_partition(p)
    assert pa.Table.from_batches(chunks).equals(pa.Table.from_batches([whole]))
    assert list(read_batches(p, max_rows=10_000))[0].equals(whole)
    empty = SpillwayPartition(
        plan="avg", seed=3, epoch_us=0, feeds=(feed.dump(),),
        query_id=np.array([0], np.int32), source_id=np.array([0], np.int32),
        feed=np.array([0]), lo=np.array([0]), hi=np.array([1000]), keep=np.array([0]),
        sic=np.array([0.1]),
    )  # fmt: skip
    assert list(read_batches(empty)) == [] and read_partition(empty).num_rows == 0
    with pytest.raises(ConfigError, match="max_rows must be an int >= 1"):
        next(read_batches(p, max_rows=0))


@pytest.mark.parametrize(("lo", "hi", "keep"), [(0, 10, 3), (5, 1005, 999), (0, 10**6, 12345),
                                                (100, 117, 16), (0, 33, 32)])  # fmt: skip
def test_a_logs_kept_records_are_few_runs_spread_over_the_range(lo, hi, keep):
    from spillway.spark.source import LOG_RUNS, select_kept_runs

    a = select_kept_runs(lo, hi, keep, 77)
    assert a.size == keep and np.unique(a).size == keep
    assert a.min() >= lo and a.max() < hi and (np.diff(a) > 0).all()
    assert int((np.diff(a) > 1).sum()) < LOG_RUNS  # at most LOG_RUNS contiguous runs
    np.testing.assert_array_equal(a, select_kept_runs(lo, hi, keep, 77))  # a replay
    r = min(LOG_RUNS, keep)
    edges = lo + (np.arange(r + 1) * (hi - lo)) // r
    per_block = np.histogram(a, bins=edges)[0]
    assert per_block.max() - per_block.min() <= 1  # every part of the batch keeps its share


def test_a_logs_kept_runs_leave_little_to_read_through():
    # A Kafka reader reads through a gap of fewer than 2,048 shed records between two kept
    # runs. With 16 runs always, a lane of 9,500 records keeping a third had every shed
    # record read (node c of spark-federation); log_runs takes as few runs as keep them
    # 4,096 apart on average, so little of the shed is read, whatever the lane's size.
    from spillway.spark.source import LOG_RUNS, log_runs, select_kept_runs, shed_read

    shed = through = 0
    for n in (2_000, 9_500, 20_000, 66_000, 200_000, 1_000_000):
        for share in (0.05, 0.2, 0.35, 0.6, 0.9):
            for key in range(4):
                keep = int(n * share)
                r = log_runs(n, keep, 2048)
                a = select_kept_runs(0, n, keep, key, r)
                assert a.size == keep and int((np.diff(a) > 1).sum()) < r <= LOG_RUNS
                one = shed_read(0, n, keep, key, 2048)
                assert one <= 0.25 * (n - keep), (n, share, key, one)
                shed, through = shed + n - keep, through + one
    assert through <= 0.06 * shed, through / shed
    assert shed_read(0, 9_500, 3_300, 1, 2048, runs=LOG_RUNS) > 0.8 * 6_200  # 16 runs: all read


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_keep_candidates_give_the_same_tuples_as_sorting_all(seed):
    # groups of 1 to thousands of tuples, keeps from 0 to all: the candidate path (hashes below
    # a per-group quantile) keeps exactly the k_g smallest hashes per group, as the full sort
    rng = np.random.default_rng(seed)
    n = 60_000
    keys = (rng.zipf(1.3, size=n) % 500).astype(np.int64)
    distinct, counts = np.unique(keys, return_counts=True)
    keep = np.floor(counts * rng.choice([0.0, 0.01, 0.3, 0.97, 1.0], size=counts.size))
    keep = keep.astype(np.int64)
    key = lane_key(seed, "avg", 0, 0)
    new = select_kept_groups(7, 7 + n, key, keys, distinct, keep)
    old = select_kept_groups(7, 7 + n, key, keys, distinct, keep, candidates=False)
    assert np.array_equal(new, old)
    assert np.bincount(keys[new - 7], minlength=500)[distinct].tolist() == keep.tolist()


def test_grouped_keep_sorts_a_whole_group_that_has_too_few_candidates(monkeypatch):
    # with every quantile at 0 no group has its k_g candidates: each falls back to all of its
    # tuples, and the kept set is still the exact one
    import spillway.spark.source as source

    keys = np.arange(3000) % 5
    old = select_kept_groups(0, 3000, 9, keys, [1, 2], [40, 300], candidates=False)
    monkeypatch.setattr(
        source, "_quantile_hashes", lambda want, size: np.zeros(want.shape, np.uint64)
    )
    assert np.array_equal(select_kept_groups(0, 3000, 9, keys, [1, 2], [40, 300]), old)
