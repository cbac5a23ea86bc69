from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.feeds import make_feed
from spillway.feeds.replay import ReplayFeed

MESSY = """host,ts,cpu,route
a,10.0,5,1
b,10.5,15,2
a,11.0,oops,3
b,11.5
a,12.0,35,4,extra
a,,45,5
b,13.0,55,6.5

b,12.5,65,7
a,14.0,75,8
"""


def write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_malformed_rows_are_counted_set_aside_and_the_rest_replayed(tmp_path):
    path = write(tmp_path, MESSY)
    rejects = tmp_path / "run" / "rejects.csv"
    f = make_feed(
        "replay",
        n_sources=2,
        rate=1.0,
        path=str(path),
        time_column="ts",
        value_column="cpu",
        key_column="route",
        source_column="host",
        rejects_path=str(rejects),
    )
    assert f.rejected() == 5
    assert f.rejects["line"].tolist() == [4, 5, 6, 7, 8]
    reasons = f.rejects["reason"].tolist()
    assert reasons[0] == "value column 'cpu': cannot parse 'oops'"
    assert reasons[1] == "expected 4 fields, got 2"
    assert reasons[2] == "expected 4 fields, got 5"
    assert reasons[3] == "missing 'ts'"
    assert reasons[4] == "key column 'route': not an integer '6.5'"
    written = pd.read_csv(rejects)
    assert written["line"].tolist() == [4, 5, 6, 7, 8]
    assert written["text"].iloc[2] == "a,12.0,35,4,extra"
    # Source a (sorted labels: a = 0, b = 1): rows at 10, 14; b: 10.5, 12.5 (out of file order).
    assert f.payload(0, np.arange(2))["value"].tolist() == [5.0, 75.0]
    assert f.payload(1, np.arange(2))["value"].tolist() == [15.0, 65.0]
    assert f.payload(1, np.arange(2))["key"].tolist() == [2, 7]
    assert f.arrival_time(1, np.arange(2)).tolist() == [0.5, 2.5]
    assert f.event_time(1, np.arange(2)).tolist() == [10.5, 12.5]
    assert f.count(0.5).tolist() == [1, 0]
    assert f.count(100.0).tolist() == [2, 2]  # finite without loop
    assert f.source_labels == ("a", "b")


def test_no_rejects_file_when_nothing_is_malformed(tmp_path):
    path = write(tmp_path, "ts,v\n0,1\n1,2\n")
    f = ReplayFeed(path=path, time_column="ts", value_column="v", rejects_path=tmp_path / "r.csv")
    assert f.rejected() == 0 and not (tmp_path / "r.csv").exists()
    assert f.rejects.columns.tolist() == ["line", "reason", "text"]


def test_speed_and_round_robin_sources(tmp_path):
    rows = "\n".join(f"{t},{t * 10}" for t in range(10))
    path = write(tmp_path, "ts,v\n" + rows + "\n")
    f = ReplayFeed(path=path, time_column="ts", value_column="v", n_sources=2, speed=2.0)
    assert f.arrival_time(0, np.arange(5)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert f.payload(1, np.arange(5))["value"].tolist() == [10.0, 30.0, 50.0, 70.0, 90.0]
    assert f.count(2.25).tolist() == [3, 2]


def test_iso_timestamps(tmp_path):
    text = (
        "when,v\n2024-05-01T10:00:00Z,1\n2024-05-01T10:00:01.5Z,2\n"
        "yesterday,3\n2024-05-01T10:00:03Z,4\n"
    )
    f = ReplayFeed(path=write(tmp_path, text), time_column="when", value_column="v")
    assert f.arrival_time(0, np.arange(3)).tolist() == [0.0, 1.5, 3.0]
    assert f.event_time(0, np.arange(1))[0] == pd.Timestamp("2024-05-01T10:00:00Z").timestamp()
    assert f.rejects["reason"].tolist() == ["time column 'when': cannot parse 'yesterday'"]


def test_parquet_with_a_timestamp_column(tmp_path):
    table = pa.table(
        {
            "t": pa.array(
                pd.to_datetime(["2024-01-01 00:00:00", "2024-01-01 00:00:02", None]),
                pa.timestamp("ms"),
            ),
            "v": pa.array([1.0, None, 3.0]),
            "k": pa.array([1, 2, 3], pa.int32()),
        }
    )
    path = tmp_path / "x.parquet"
    pq.write_table(table, path)
    f = make_feed(
        "replay",
        n_sources=1,
        rate=1.0,
        path=path,
        time_column="t",
        value_column="v",
        key_column="k",
    )
    assert f.rejected() == 2
    assert f.rejects["line"].tolist() == [2, 3]
    assert f.payload(0, np.arange(1))["key"].tolist() == [1]


def test_loop_repeats_the_file(tmp_path):
    path = write(tmp_path, "ts,v\n0,1\n1,2\n2,3\n")
    f = ReplayFeed(path=path, time_column="ts", value_column="v", loop=True)
    assert f.period_s == pytest.approx(3.0)  # span 2 s + one mean gap
    t = f.arrival_time(0, np.arange(7))
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert f.payload(0, np.arange(7))["value"].tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert f.count(4.5).tolist() == [5]
    for ti, i in zip(t, range(7), strict=True):
        assert f.count(ti + 1e-9)[0] == i + 1


def test_index_past_the_end_without_loop(tmp_path):
    f = ReplayFeed(path=write(tmp_path, "ts,v\n0,1\n"), time_column="ts", value_column="v")
    with pytest.raises(
        ConfigError, match=r"source 0 of replay file .* has 1 rows, asked for tuple 3"
    ):
        f.payload(0, np.array([3]))


def test_missing_file(tmp_path):
    with pytest.raises(InputDataError, match=r"cannot read replay file '.*nope.csv': no such file"):
        ReplayFeed(path=tmp_path / "nope.csv", time_column="ts", value_column="v")


def test_missing_column(tmp_path):
    path = write(tmp_path, "time,v\n0,1\n")
    with pytest.raises(InputDataError, match=r"data.csv' has no column 'ts' \(columns: time, v\)"):
        ReplayFeed(path=path, time_column="ts", value_column="v")


def test_unsupported_type_and_garbage(tmp_path):
    with pytest.raises(InputDataError, match=r"unsupported file type .xlsx; use .csv"):
        ReplayFeed(path=write(tmp_path, "x", "a.xlsx"), time_column="ts", value_column="v")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not a parquet file at all")
    with pytest.raises(InputDataError, match=r"cannot read replay file '.*bad.parquet': "):
        ReplayFeed(path=bad, time_column="ts", value_column="v")


def test_no_valid_rows(tmp_path):
    path = write(tmp_path, "ts,v\nx,1\n2,y\n")
    with pytest.raises(InputDataError, match=r"has no valid rows \(2 malformed, e.g. line 2: "):
        ReplayFeed(path=path, time_column="ts", value_column="v")
    with pytest.raises(InputDataError, match=r"has no rows"):
        ReplayFeed(path=write(tmp_path, "ts,v\n", "empty.csv"), time_column="ts", value_column="v")


def test_source_count_must_match(tmp_path):
    path = write(tmp_path, MESSY)
    with pytest.raises(
        ConfigError, match=r"has 2 sources in column 'host' but the query has 3: set"
    ):
        ReplayFeed(
            path=path, time_column="ts", value_column="cpu", source_column="host", n_sources=3
        )


def test_profile_and_option_errors(tmp_path):
    path = write(tmp_path, "ts,v\n0,1\n")
    with pytest.raises(ConfigError, match=r"replay follows the file's timestamps: profile must be"):
        make_feed(
            "replay",
            n_sources=1,
            rate=1.0,
            profile="bursty",
            path=path,
            time_column="ts",
            value_column="v",
        )
    with pytest.raises(ConfigError, match=r"feed 'replay': missing option\(s\) path, time_column"):
        make_feed("replay", n_sources=1, rate=1.0, value_column="v")
    with pytest.raises(ConfigError, match=r"replay speed must be a finite number > 0, got 0"):
        ReplayFeed(path=path, time_column="ts", value_column="v", speed=0)
