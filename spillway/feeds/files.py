"""Rows of one data file (JSON lines, CSV or Parquet), parsed with the user's schema, row errors kept.

The folder source (:mod:`spillway.feeds.folder`) numbers the rows of every file it admits and
reads any subset of them again on an executor. This module does the per-file part:

- :func:`count_records` is how many records a file holds (non-blank lines of a text file,
  rows of a Parquet file), read on the driver when the file is first seen;
- :func:`read_records` returns the records themselves (the lines, header dropped, or the
  Parquet table), and :func:`parse_records` parses a subset of them with the schema: the parsed
  columns (nulls for a malformed row), the reason each malformed row is malformed and its text.

Text rows are parsed by :func:`spillway.kafka.parse.parse_table` (Arrow's JSON reader a block at
a time, malformed lines isolated and named; CSV line by line), so a line of a file and a Kafka
message value are judged by the same rules. A blank line is no record (as Spark skips it); a
CSV field holding a line break is not supported (each line is one record). A Parquet file is
read with Arrow: a column the schema needs that the file lacks, or cannot hold as the schema's
type, makes every row of the file malformed with that reason; a null field makes its row
malformed (``missing field``).

Examples
--------
>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl"
>>> _ = p.write_text('{"route": "JFK-LAX", "fare": 12.5}\\n\\nnot json\\n')
>>> count_records(p, "json")
2
>>> table, errors, raw = parse_records(read_records(p, "json"), [0, 1], "json",
...                                    parse_schema("route string, fare double"))
>>> table.column("route").to_pylist(), errors, raw
(['JFK-LAX', None], {1: 'not JSON: Expecting value'}, [None, 'not json'])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from spillway.errors import InputDataError
from spillway.kafka.parse import parse_schema, parse_table

#: File formats, by Spark's names (``spark.readStream.format(...)``).
FORMATS = ("json", "csv", "parquet")

#: A file's records: its lines (text formats, header dropped) or its table (Parquet).
Records: TypeAlias = list[bytes] | pa.Table

__all__ = ["FORMATS", "Records", "count_records", "parse_records", "parse_schema", "read_records"]


def _lines(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputDataError(f"cannot read {str(path)!r}: {e.strerror or e}") from None
    return [line.rstrip(b"\r") for line in data.split(b"\n") if line.strip()]


def _parquet(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise InputDataError(f"cannot read the Parquet file {str(path)!r}: {e}") from None


def count_records(path: str | Path, fmt: str) -> int:
    """Records in the file: non-blank lines (a CSV header included) or Parquet rows."""
    p = Path(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(p).metadata.num_rows)
        except (OSError, pa.ArrowException) as e:
            raise InputDataError(f"cannot read the Parquet file {str(p)!r}: {e}") from None
    return len(_lines(p))


def read_records(path: str | Path, fmt: str, header: bool = False) -> Records:
    """The file's records: lines (without a CSV ``header`` line) or the Parquet table."""
    p = Path(path)
    if fmt == "parquet":
        return _parquet(p)
    lines = _lines(p)
    return lines[1:] if header and fmt == "csv" else lines


def parse_records(
    records: Records, rows: Sequence[int] | np.ndarray, fmt: str, schema: pa.Schema
) -> tuple[pa.Table, dict[int, str], list[str | None]]:
    """Parse the records at positions ``rows``: a table of the schema's types (one row per
    position, nulls for a malformed one), the reason of each malformed row by its position in
    ``rows``, and the text of each malformed row (None for the good ones)."""
    idx = np.asarray(rows, dtype=np.int64)
    if isinstance(records, pa.Table):
        return _parse_parquet(records.take(pa.array(idx)), schema)
    values = [records[int(i)] for i in idx]
    table, errors = parse_lines(values, fmt, schema)
    raw = [
        values[i].decode("utf-8", "replace") if i in errors else None for i in range(len(values))
    ]
    return table, errors, raw


def parse_lines(
    values: Sequence[bytes], fmt: str, schema: pa.Schema
) -> tuple[pa.Table, dict[int, str]]:
    """Parse text lines as :func:`spillway.kafka.parse.parse_table` does, faster on files:
    lines that cannot be right (a JSON line not ``{...}``, a CSV line with too few commas) are
    parsed line by line at once, not in Arrow's blocks (a block fails on them and is halved
    around them); CSV lines go through Arrow's CSV reader a block at a time (a block holding a
    malformed line is halved until its halves parse; the smallest are parsed line by line).

    >>> t, errors = parse_lines([b'{"v": 1.5}', b'{oops', b'{"v": 2}'], "json",
    ...                         parse_schema("v double"))
    >>> t.column("v").to_pylist(), errors
    ([1.5, None, 2.0], {1: 'not JSON: Expecting property name enclosed in double quotes'})
    >>> parse_lines([b'a,1', b'b,x'], "csv", parse_schema("k string, v double"))[1]
    {1: "field 'v': not a double: 'x'"}
    """
    n = len(values)
    if fmt == "csv":
        width = len(schema) - 1  # separators a line needs at least (quoted commas add more)
        good = np.fromiter((v.count(b",") >= width for v in values), dtype=bool, count=n)
    else:
        good = np.fromiter(
            (v[:1] == b"{" and v.rstrip()[-1:] == b"}" for v in values), dtype=bool, count=n
        )
    if good.all():
        return _parse_good(values, fmt, schema)
    at_good, at_bad = np.flatnonzero(good), np.flatnonzero(~good)
    t_good, e_good = _parse_good([values[i] for i in at_good.tolist()], fmt, schema)
    t_bad, e_bad = parse_table([values[i] for i in at_bad.tolist()], fmt, schema)
    order = np.argsort(np.concatenate([at_good, at_bad]), kind="stable")
    table = pa.concat_tables([t_good, t_bad]).take(pa.array(order)).combine_chunks()
    errors = {int(at_good[i]): w for i, w in e_good.items()}
    errors.update({int(at_bad[i]): w for i, w in e_bad.items()})
    return table, errors


def _parse_good(
    values: Sequence[bytes], fmt: str, schema: pa.Schema
) -> tuple[pa.Table, dict[int, str]]:
    if fmt != "csv":
        return parse_table(values, fmt, schema)
    parts: list[pa.Table] = []
    errors: dict[int, str] = {}
    _csv_blocks(values, 0, schema, parts, errors)
    table = pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()
    return table, errors


#: CSV lines parsed by Arrow per block; blocks with a malformed line are halved down to this.
SMALLEST_BLOCK = 32
BLOCK = 8192


def _csv_fast(values: Sequence[bytes], schema: pa.Schema) -> pa.Table | None:
    import io

    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            io.BytesIO(b"\n".join(values) + b"\n"),
            read_options=pacsv.ReadOptions(column_names=schema.names, use_threads=False),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types=schema,
                true_values=["true", "True", "TRUE"],
                false_values=["false", "False", "FALSE"],
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(values):
        return None
    for f in schema:  # an empty or null field is malformed: let the line-by-line path name it
        col = table.column(f.name)
        if col.null_count or (pa.types.is_string(f.type) and pc.any(pc.equal(col, "")).as_py()):
            return None
    return table.cast(schema)


def _csv_blocks(
    values: Sequence[bytes],
    at: int,
    schema: pa.Schema,
    parts: list[pa.Table],
    errors: dict[int, str],
) -> None:
    for lo in range(0, len(values), BLOCK):
        block = values[lo : lo + BLOCK]
        table = _csv_fast(block, schema)
        if table is not None:
            parts.append(table)
        elif len(block) > SMALLEST_BLOCK:
            half = len(block) // 2
            _csv_blocks(block[:half], at + lo, schema, parts, errors)
            _csv_blocks(block[half:], at + lo + half, schema, parts, errors)
        else:
            table, why = parse_table(block, "csv", schema)
            parts.append(table)
            errors.update({at + lo + i: w for i, w in why.items()})


def _parse_parquet(
    part: pa.Table, schema: pa.Schema
) -> tuple[pa.Table, dict[int, str], list[str | None]]:
    n = part.num_rows
    cols: list[pa.Array] = []
    whole: str | None = None
    bad = np.zeros(n, dtype=bool)
    why: list[str | None] = [None] * n
    for f in schema:
        if f.name not in part.column_names:
            whole = whole or f"missing field {f.name!r}"
            cols.append(pa.nulls(n, f.type))
            continue
        col = part.column(f.name)
        try:
            col = col.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            whole = whole or f"field {f.name!r}: not a {f.type} ({col.type} in the file)"
            cols.append(pa.nulls(n, f.type))
            continue
        nulls = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        for i in np.flatnonzero(nulls & ~bad).tolist():
            why[i] = f"missing field {f.name!r}"
        bad |= nulls
        cols.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    if whole is not None:
        bad[:] = True
        why = [whole] * n
    table = pa.table({f.name: c for f, c in zip(schema, cols, strict=True)})
    if bad.any():
        table = pa.table(
            {
                f.name: pa.array(
                    [None if b else v for v, b in zip(c.to_pylist(), bad, strict=True)],
                    type=f.type,
                )
                for f, c in zip(schema, table.columns, strict=True)
            }
        )
    errors = {i: w for i, w in enumerate(why) if w is not None}
    raw: list[str | None] = [None] * n
    if errors:
        raw = [
            json.dumps(r, default=str) if i in errors else None
            for i, r in enumerate(part.to_pylist())
        ]
    return table, errors, raw
