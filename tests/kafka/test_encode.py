"""Encoded values read back to the same data, with json and csv from the standard library."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.kafka.encode import encode, iso_millis

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = st.integers(min_value=-(10**12), max_value=4 * 10**12)  # 1938 .. 2096


def _iso(ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(min_value=-(2**62), max_value=2**62),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=12),
            MS,
        ),
        min_size=1,
        max_size=30,
    )
)
def test_json_reads_back(rows: list[tuple[int, float, str, int]]) -> None:
    ints, floats, texts, stamps = map(list, zip(*rows, strict=True))
    values = encode(
        {
            "i": np.array(ints, dtype=np.int64),
            "f": np.array(floats),
            "s": pa.array(texts, pa.string()),
            "t": np.array(stamps, dtype="datetime64[ms]"),
        }
    )
    for v, (i, f, s, t) in zip(values, rows, strict=True):
        got = json.loads(v)
        assert got["i"] == i and got["s"] == s and got["t"] == _iso(t)
        assert got["f"] == (f if math.isfinite(f) else None)
        assert list(got) == ["i", "f", "s", "t"]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-1000, 1000),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=8),
            MS,
        ),
        min_size=1,
        max_size=20,
    )
)
def test_csv_reads_back(rows: list[tuple[int, float, str, int]]) -> None:
    ints, floats, texts, stamps = map(list, zip(*rows, strict=True))
    cols = {
        "i": np.array(ints),
        "f": np.array(floats),
        "s": pa.array(texts, pa.string()),
        "t": np.array(stamps, dtype="datetime64[ms]"),
    }
    for fmt in ("iso", "millis"):
        values = encode(cols, fmt="csv", time_format=fmt)
        for v, (i, f, s, t) in zip(values, rows, strict=True):
            [fields] = list(csv.reader([v]))
            assert int(fields[0]) == i and float(fields[1]) == f
            assert fields[2] == s
            assert fields[3] == (_iso(t) if fmt == "iso" else str(t))


@settings(max_examples=100, deadline=None)
@given(stamps=st.lists(MS, min_size=1, max_size=50))
def test_iso_millis_matches_python(stamps: list[int]) -> None:
    got = iso_millis(pa.array(np.array(stamps, dtype="datetime64[ms]"))).to_pylist()
    assert got == [_iso(t) for t in stamps]


def test_nulls_and_dates() -> None:
    cols = {
        "k": pa.array([1, None], pa.int64()),
        "d": pa.array([0, 1], pa.date32()),
        "s": pa.array(["a", None]),
    }
    assert [json.loads(v) for v in encode(cols)] == [
        {"k": 1, "d": "1970-01-01T00:00:00.000Z", "s": "a"},
        {"k": None, "d": "1970-01-02T00:00:00.000Z", "s": None},
    ]
    assert encode(cols, fmt="csv") == ["1,1970-01-01T00:00:00.000Z,a", ",1970-01-02T00:00:00.000Z,"]


@pytest.mark.parametrize(
    ("cols", "kw", "match"),
    [
        ({"a": np.arange(2)}, {"fmt": "avro"}, "value format must be one of csv, json"),
        ({"a": np.arange(2)}, {"time_format": "epoch"}, "time format must be one of iso, millis"),
        ({}, {}, "at least one column"),
        ({"a": np.arange(2), "b": np.arange(3)}, {}, "one length, got {'a': 2, 'b': 3}"),
    ],
)
def test_errors(cols: dict, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        encode(cols, **kw)
