"""Parsed rows as JSON texts: every type of the schema, nulls and escapes read back exactly."""

from __future__ import annotations

import datetime as dt
import json
import math

import pyarrow as pa

from spillway.feeds.row_json import rows_json
from spillway.kafka.parse import parse_schema

T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)


def _back(text: str) -> dict:
    out = json.loads(text)
    if isinstance(out.get("at"), str):
        out["at"] = dt.datetime.fromisoformat(out["at"])
    return out


def test_every_type_and_null_reads_back() -> None:
    schema = parse_schema("route string, fare double, n bigint, ok boolean, at timestamp")
    rows = [
        {"route": "JFK-LAX", "fare": 12.5, "n": 2**60, "ok": True, "at": T0},
        {
            "route": 'a "quote", \\ \n\t\x01 ünï',
            "fare": 1e-300,
            "n": -3,
            "ok": False,
            "at": dt.datetime(1, 1, 1, tzinfo=dt.UTC),
        },
        {"route": None, "fare": None, "n": None, "ok": None, "at": None},
        {"route": "", "fare": 0.1 + 0.2, "n": 0, "ok": True, "at": T0},
    ]
    texts = rows_json(pa.Table.from_pylist(rows, schema=schema)).to_pylist()
    assert [_back(t) for t in texts] == rows
    assert texts[2] == '{"route":null,"fare":null,"n":null,"ok":null,"at":null}'
    assert '"at":"2026-03-04T05:06:07.890123Z"' in texts[0]


def test_non_finite_doubles_and_other_timestamp_units() -> None:
    t = pa.table({
        "x": [math.nan, math.inf, -math.inf],
        "at": pa.array([0, 1500, -1], pa.timestamp("ms")),  # no zone: read as UTC
    })  # fmt: skip
    texts = rows_json(t).to_pylist()
    assert texts[1] == '{"x":Infinity,"at":"1970-01-01T00:00:01.500000Z"}'
    back = [json.loads(s) for s in texts]
    assert math.isnan(back[0]["x"]) and back[2]["x"] == -math.inf
    assert back[2]["at"] == "1969-12-31T23:59:59.999000Z"


def test_an_empty_table_and_a_type_outside_the_schemas() -> None:
    assert rows_json(parse_schema("a bigint").empty_table()).to_pylist() == []
    t = pa.table({"d": pa.array([dt.date(2026, 1, 2), None])})
    assert rows_json(t).to_pylist() == ['{"d":"2026-01-02"}', '{"d":null}']
