"""Rows of one data file: counts, header, Parquet with the schema's rules, unreadable files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spillway.errors import InputDataError
from spillway.feeds.files import count_records, parse_records, read_records
from spillway.kafka.parse import parse_schema

SCHEMA = parse_schema("route string, fare double")


def test_text_records_skip_blank_lines_and_a_csv_header(tmp_path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("route,fare\r\nJFK-LAX,12.5\r\n\r\nSFO-SEA,n/a\r\n")
    assert count_records(p, "csv") == 3
    recs = read_records(p, "csv", header=True)
    assert recs == [b"JFK-LAX,12.5", b"SFO-SEA,n/a"]
    table, errors, raw = parse_records(recs, [1, 0], "csv", SCHEMA)
    assert table.column("route").to_pylist() == [None, "JFK-LAX"]
    assert errors == {0: "field 'fare': not a double: 'n/a'"}
    assert raw == ["SFO-SEA,n/a", None]


def test_parquet_rows_with_nulls_are_malformed_one_by_one(tmp_path) -> None:
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"route": ["A-B", None, "C-D"], "fare": [1.0, 2.0, None]}), p)
    assert count_records(p, "parquet") == 3
    table, errors, raw = parse_records(read_records(p, "parquet"), [0, 1, 2], "parquet", SCHEMA)
    assert table.column("fare").to_pylist() == [1.0, None, None]
    assert errors == {1: "missing field 'route'", 2: "missing field 'fare'"}
    assert raw[0] is None and '"route": null' in raw[1]


def test_a_parquet_file_without_a_column_makes_every_row_malformed(tmp_path) -> None:
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"route": ["A-B", "C-D"]}), p)
    _, errors, _ = parse_records(read_records(p, "parquet"), [0, 1], "parquet", SCHEMA)
    assert errors == {0: "missing field 'fare'", 1: "missing field 'fare'"}


def test_a_parquet_column_of_another_type_makes_every_row_malformed(tmp_path) -> None:
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"route": ["A-B"], "fare": ["cheap"]}), p)
    _, errors, _ = parse_records(read_records(p, "parquet"), [0], "parquet", SCHEMA)
    assert errors[0].startswith("field 'fare': not a double")


def test_an_unreadable_file_is_an_input_error(tmp_path) -> None:
    with pytest.raises(InputDataError, match="cannot read .*missing.jsonl"):
        read_records(tmp_path / "missing.jsonl", "json")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputDataError, match="cannot read the Parquet file .*bad.parquet"):
        count_records(bad, "parquet")
    with pytest.raises(InputDataError, match="cannot read the Parquet file .*bad.parquet"):
        read_records(bad, "parquet")


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_fast_paths_agree_with_the_kafka_parser_line_by_line(fmt) -> None:
    from spillway.feeds.files import parse_lines
    from spillway.kafka.parse import parse_table

    schema = parse_schema("route string, fare double, n bigint, ok boolean")
    good = (
        '{"route": "R%d", "fare": %d.5, "n": %d, "ok": true}'
        if fmt == "json"
        else "R%d,%d.5,%d,true"
    )
    bad = (
        ["{oops", '{"route": "x"}', '{"route": "x", "fare": "y", "n": 1, "ok": true}', "[1]", ""]
        if fmt == "json"
        else ["x,1.5", "x,y,1,true", ",1.5,1,true", "x,1.5,1.5,true", "x,1.5,1,maybe"]
    )
    lines = [(good % (i, i, i)).encode() for i in range(300)]
    for j, b in enumerate(bad):
        lines[40 * j + 7] = b.encode()
    table, errors = parse_lines(lines, fmt, schema)
    ref, ref_errors = parse_table(lines, fmt, schema)
    assert errors == ref_errors and len(errors) == len(bad)
    assert table.equals(ref)
