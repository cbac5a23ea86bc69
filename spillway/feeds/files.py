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
    table, errors = parse_table(values, fmt, schema)
    raw = [
        values[i].decode("utf-8", "replace") if i in errors else None for i in range(len(values))
    ]
    return table, errors, raw


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
