"""The folder feed with ``records``: every valid row's fields in ``raw`` as JSON, read back
exactly by ``json.loads`` and by Spark's ``from_json(raw, schema_ddl)``."""

from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spillway.errors import ConfigError
from spillway.feeds.folder import FolderFeed

EPOCH = 1_000_000.0
SCHEMA = "route string, fare double, n bigint, at timestamp"
UTC = dt.UTC
ROWS = [
    {"route": "JFK-LAX", "fare": 12.5, "n": 3,
     "at": dt.datetime(2026, 3, 4, 5, 6, 7, 250000, tzinfo=UTC)},
    {"route": 'say "hi"', "fare": 7.0, "n": -4,
     "at": dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)},
]  # fmt: skip
JSON_LINES = [
    '{"route": "JFK-LAX", "fare": 12.5, "n": 3, "at": "2026-03-04T07:06:07.25+02:00"}',
    '{"route": "not closed"',
    # coerced by the parser: a double as text, a timestamp as Unix seconds, an extra field
    '{"route": "say \\"hi\\"", "fare": "7", "n": -4, "at": 1700000000.5, "x": 1}',
    '{"route": null, "fare": 1.0, "n": 1, "at": 0}',  # a null field: malformed
]
CSV_LINES = [
    "JFK-LAX,12.5,3,2026-03-04T05:06:07.25Z",
    "A-B,x,1,2026-03-04T05:06:07Z",
    '"say ""hi""",7,-4,2023-11-14T22:13:20.5+00:00',
    ",1.0,1,2026-03-04T05:06:07Z",
]


def _folder(tmp_path, name: str, lines: list[str]):
    d = tmp_path / name
    d.mkdir()
    (d / f"a.{name}").write_text("\n".join(lines) + "\n")
    os.utime(d / f"a.{name}", (EPOCH, EPOCH))
    return d


def _read(folder, **opts) -> dict:
    f = FolderFeed(n_sources=1, path=str(folder), schema=SCHEMA, **opts)
    f.attach(EPOCH)
    return f.records(0, np.arange(int(f.count(1.0)[0])), EPOCH)


def _fields(raw: str) -> dict:
    out = json.loads(raw)
    out["at"] = dt.datetime.fromisoformat(out["at"])
    return out


@pytest.mark.parametrize(("fmt", "lines"), [("json", JSON_LINES), ("csv", CSV_LINES)])
def test_records_carry_every_valid_rows_fields(tmp_path, fmt, lines) -> None:
    r = _read(_folder(tmp_path, fmt, lines), format=fmt, records="true")
    assert r["value"].tolist() == [0.0] * 4  # no value_column: every value is 0
    good = r["error"] == None  # noqa: E711 (elementwise)
    assert good.tolist() == [True, False, True, False]
    assert [_fields(t) for t in r["raw"][good]] == ROWS
    assert r["raw"][~good].tolist() == [lines[1], lines[3]]  # malformed: their own text


def test_parquet_records_and_a_value_column(tmp_path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    table = pa.table({
        "route": [r["route"] for r in ROWS], "fare": [r["fare"] for r in ROWS],
        "n": pa.array([r["n"] for r in ROWS], pa.int32()),  # cast to the schema's bigint
        "at": pa.array([r["at"] for r in ROWS], pa.timestamp("ms", tz="UTC")),
    })  # fmt: skip
    pq.write_table(table, d / "a.parquet")
    os.utime(d / "a.parquet", (EPOCH, EPOCH))
    r = _read(d, format="parquet", records=True, value_column="fare")
    assert r["value"].tolist() == [12.5, 7.0]
    assert [_fields(t) for t in r["raw"]] == ROWS


def test_without_records_raw_stays_for_malformed_rows(tmp_path) -> None:
    d = _folder(tmp_path, "json", JSON_LINES)
    r = _read(d, format="json", value_column="fare")
    assert r["value"].tolist() == [12.5, 0.0, 7.0, 0.0]
    assert r["raw"].tolist() == [None, JSON_LINES[1], None, JSON_LINES[3]]
    with pytest.raises(ConfigError, match="folder option 'value_column' is required: one of"):
        _read(d, format="json", records=False)


@pytest.mark.spark
def test_spark_from_json_reads_the_same_fields(tmp_path, spark) -> None:
    from pyspark.sql import functions as F

    texts = []
    for fmt, lines in (("json", JSON_LINES), ("csv", CSV_LINES)):
        r = _read(_folder(tmp_path, fmt, lines), format=fmt, records=True)
        texts += r["raw"][r["error"] == None].tolist()  # noqa: E711
    df = spark.createDataFrame([(t,) for t in texts], "raw string")
    got = (
        df.select(F.from_json("raw", SCHEMA).alias("r"))
        .select("r.route", "r.fare", "r.n", F.unix_micros("r.at").alias("us"))
        .collect()
    )
    want = [(r["route"], r["fare"], r["n"], round(r["at"].timestamp() * 1e6)) for r in ROWS] * 2
    assert [tuple(g) for g in got] == want
