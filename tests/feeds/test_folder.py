"""The folder feed: options, lanes, cuts by file time or event time, exact reads, restarts."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.feeds import make_feed
from spillway.feeds.folder import FolderFeed, lane_of
from spillway.feeds.hashing import text_keys

EPOCH = 1_000_000.0
OPTS = {"format": "json", "schema": "route string, fare double", "value_column": "fare"}


def _jsonl(path, rows, mtime: float) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    os.utime(path, (mtime, mtime))


def _feed(folder, n_sources: int = 1, **opts) -> FolderFeed:
    f = FolderFeed(n_sources=n_sources, path=str(folder), **{**OPTS, **opts})
    f.attach(EPOCH)
    return f


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"path": None}, "folder option 'path' is required"),
        ({"path": "/nonexistent/spillway"}, "'/nonexistent/spillway' is not a folder; create it"),
        ({"format": "xml"}, "'format' must be one of json, csv, parquet, got 'xml'"),
        ({"schema": None}, "'schema' is required"),
        ({"schema": "route text"}, "field 'route' has type 'text'"),
        ({"schema": "route"}, "'route' is not 'name type'"),
        ({"value_column": None}, "'value_column' is required: one of"),
        ({"key_column": "city"}, "'key_column' names 'city', not a field of the schema"),
        ({"time_column": "route"}, "'time_column' names 'route' of type string"),
        ({"header": "yes"}, "'header' must be true or false, got 'yes'"),
        ({"startingOffsets": "earliest"}, "unknown folder option.*startingOffsets; known: path"),
    ],
)
def test_every_bad_option_is_one_line(tmp_path, opts, match) -> None:
    given = {"path": str(tmp_path), **OPTS, **opts}
    with pytest.raises(ConfigError, match=match):
        FolderFeed(n_sources=1, **{k: v for k, v in given.items() if v is not None})


def test_bad_lane_count_and_counting_before_the_epoch(tmp_path) -> None:
    with pytest.raises(ConfigError, match="sources must be >= 1, got 0"):
        FolderFeed(n_sources=0, path=str(tmp_path), **OPTS)
    f = FolderFeed(n_sources=1, path=str(tmp_path), **OPTS)
    with pytest.raises(ConfigError, match="needs the node's epoch"):
        f.count(1.0)


def test_the_registry_builds_it(tmp_path) -> None:
    f = make_feed("folder", n_sources=2, rate=1.0, path=str(tmp_path), **OPTS)
    assert isinstance(f, FolderFeed) and f.n_sources == 2 and f.log and f.portable


def test_files_are_cut_by_modification_time_and_lanes_by_name(tmp_path) -> None:
    names = [f"part-{i}.jsonl" for i in range(6)]
    for i, n in enumerate(names):
        _jsonl(tmp_path / n, [{"route": n, "fare": float(i)}] * (i + 1), EPOCH + 1 + i)
    _jsonl(tmp_path / ".part-9.jsonl", [{"route": "x", "fare": 1.0}], EPOCH)  # being written
    f = _feed(tmp_path, n_sources=2)
    lanes = [lane_of(n, 2) for n in names]
    for t in (0.5, 2.5, 4.0, 100.0):
        want = [
            sum(i + 1 for i in range(6) if lanes[i] == ln and EPOCH + 1 + i < EPOCH + t)
            for ln in (0, 1)
        ]
        assert f.count(t).tolist() == want
    # every row of a lane, read back in order: the files laid end to end
    for ln in (0, 1):
        r = f.records(ln, np.arange(int(f.count(100.0)[ln])), EPOCH)
        expect = [n for i, n in enumerate(names) if lanes[i] == ln for _ in range(i + 1)]
        assert r["topic"].tolist() == expect
        assert r["partition"] == ln and r["offset"].tolist() == list(range(len(expect)))
        assert (r["arrival_ts"] == r["event_ts"]).all()


def test_files_already_there_arrive_at_the_start(tmp_path) -> None:
    _jsonl(tmp_path / "old.jsonl", [{"route": "a", "fare": 1.0}] * 3, EPOCH - 3600)
    f = _feed(tmp_path)
    assert f.count(0.0).tolist() == [0]
    assert f.count(1e-3).tolist() == [3]
    assert f.records(0, np.arange(3), EPOCH)["arrival_ts"].tolist() == [EPOCH] * 3


def test_a_time_column_cuts_inside_a_file(tmp_path) -> None:
    rows = [{"route": "a", "fare": 1.0, "ts": EPOCH + s} for s in (0.5, 1.5, 1.2, 2.5, 3.5)]
    rows.insert(2, "not json")
    _jsonl(tmp_path / "a.jsonl", rows, EPOCH + 4)
    f = _feed(tmp_path, schema="route string, fare double, ts double", time_column="ts")
    # running largest time by row: .5, 1.5, (bad), 1.5, 2.5, 3.5
    assert [int(f.count(t)[0]) for t in (0.5, 1.0, 2.0, 3.0, 4.0)] == [0, 1, 4, 5, 6]
    r = f.records(0, np.arange(6), EPOCH)
    assert r["event_ts"].tolist() == [EPOCH + s for s in (0.5, 1.5, 4, 1.2, 2.5, 3.5)]
    assert r["error"][2] == "row 2: not JSON: Expecting value" and r["raw"][2] == "not json"


def test_iso_date_times_in_the_time_column(tmp_path) -> None:
    _jsonl(tmp_path / "a.jsonl", [{"route": "a", "fare": 1.0, "ts": "1970-01-12T13:46:41Z"}], 1.0)
    f = _feed(tmp_path, schema="route string, fare double, ts timestamp", time_column="ts")
    assert f.count(2.0).tolist() == [1]
    assert f.records(0, np.arange(1), EPOCH)["event_ts"].tolist() == [EPOCH + 1]


def test_text_keys_and_malformed_rows_with_their_file_and_row(tmp_path) -> None:
    _jsonl(
        tmp_path / "a.jsonl",
        [
            {"route": "JFK-LAX", "fare": 10.0},
            '{"route": "SFO-SEA"',
            {"route": "SFO-SEA", "fare": 3},
        ],
        EPOCH + 1,
    )
    f = _feed(tmp_path, key_column="route")
    assert f.text_keys and f.count(2.0).tolist() == [3]
    r = f.records(0, np.array([2, 0, 1]), EPOCH)  # any order: rows come back in that order
    assert r["key_text"].tolist() == ["SFO-SEA", "JFK-LAX", None]
    assert r["key"].tolist() == [*text_keys(["SFO-SEA", "JFK-LAX"]).tolist(), 0]
    assert r["value"].tolist() == [3.0, 10.0, 0.0]
    assert r["error"][2].startswith("row 1: not JSON") and r["topic"].tolist() == ["a.jsonl"] * 3
    assert f.payload(0, np.array([0]))["key_text"].tolist() == ["JFK-LAX"]
    assert f.arrival_time(0, np.array([0])).tolist() == [1.0]


def test_integer_keys(tmp_path) -> None:
    _jsonl(tmp_path / "a.jsonl", [{"k": 7, "v": 1.5}], EPOCH + 1)
    f = _feed(tmp_path, schema="k bigint, v double", key_column="k", value_column="v")
    assert not f.text_keys and f.count(2.0).tolist() == [1]
    assert f.keys(0, np.array([0])).tolist() == [7]


def test_csv_with_a_header_and_parquet(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text("route,fare\nJFK-LAX,2.5\nSFO-SEA,x\n")
    os.utime(tmp_path / "c" / "a.csv", (EPOCH, EPOCH))
    f = FolderFeed(
        n_sources=1,
        path=str(tmp_path / "c"),
        format="csv",
        header="true",
        schema="route string, fare double",
        value_column="fare",
        key_column="route",
    )
    f.attach(EPOCH)
    r = f.records(0, np.arange(int(f.count(1.0)[0])), EPOCH)
    assert r["key_text"].tolist() == ["JFK-LAX", None]
    assert r["error"].tolist() == [None, "row 1: field 'fare': not a double: 'x'"]
    (tmp_path / "p").mkdir()
    pq.write_table(
        pa.table({"route": ["A-B", "C-D"], "fare": [1.0, 2.0]}), tmp_path / "p" / "a.parquet"
    )
    os.utime(tmp_path / "p" / "a.parquet", (EPOCH, EPOCH))
    g = FolderFeed(
        n_sources=1,
        path=str(tmp_path / "p"),
        format="parquet",
        schema="route string, fare double",
        value_column="fare",
    )
    g.attach(EPOCH)
    assert g.records(0, np.arange(int(g.count(1.0)[0])), EPOCH)["value"].tolist() == [1.0, 2.0]


def test_a_restart_and_an_executor_copy_see_the_same_rows(tmp_path) -> None:
    for i in range(3):
        _jsonl(
            tmp_path / f"{i}.jsonl",
            [{"route": str(i), "fare": float(j)} for j in range(4)],
            EPOCH + i + 1,
        )
    f = _feed(tmp_path, n_sources=2)
    cut = f.count(10.0)
    executor = pickle.loads(pickle.dumps(f))  # made now, before more files arrive
    _jsonl(tmp_path / "3.jsonl", [{"route": "3", "fare": 9.0}], EPOCH + 2.5)  # after the cut
    cut2 = f.count(11.0)
    assert (cut2 >= cut).all() and cut2.sum() == cut.sum() + 1
    restarted = _feed(tmp_path, n_sources=2)
    assert [e.file for e in restarted.files()] == ["0.jsonl", "1.jsonl", "2.jsonl", "3.jsonl"]
    for ln in (0, 1):
        idx = np.arange(int(cut2[ln]))
        a, b, c = (x.records(ln, idx, EPOCH) for x in (f, restarted, executor))
        for col in ("topic", "value", "offset", "event_ts"):
            assert a[col].tolist() == b[col].tolist() == c[col].tolist()


def test_offsets_past_the_manifest_are_an_input_error(tmp_path) -> None:
    _jsonl(tmp_path / "a.jsonl", [{"route": "a", "fare": 1.0}], EPOCH + 1)
    f = _feed(tmp_path)
    assert f.count(2.0).tolist() == [1]
    with pytest.raises(InputDataError, match="offset 5 is past the 1 rows its manifest"):
        f.records(0, np.array([5]), EPOCH)
    assert f.records(0, np.zeros(0, np.int64), EPOCH)["key"].size == 0


def test_the_manifest_can_live_elsewhere(tmp_path) -> None:
    (tmp_path / "in").mkdir()
    _jsonl(tmp_path / "in" / "a.jsonl", [{"route": "a", "fare": 1.0}], EPOCH + 1)
    f = _feed(tmp_path / "in", manifest=str(tmp_path / "state" / "m.jsonl"))
    assert f.count(5.0).tolist() == [1]
    assert (tmp_path / "state" / "m.jsonl").exists()
    assert not (tmp_path / "in" / "_spillway").exists()
    assert "files=1" in repr(f) and [e.file for e in f.files()] == ["a.jsonl"]
