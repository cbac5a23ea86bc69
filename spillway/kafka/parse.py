"""Parse Kafka message values (JSON or CSV) with the user's schema, row errors kept.

A value that is not JSON, not a CSV line of the right width, lacks a field of the schema or has
a field of the wrong type is *malformed*: it never stops a query and is never dropped silently.
:func:`parse_values` returns the parsed columns and, per row, the reason it was malformed
(``None`` for the good ones); the caller sends the malformed rows, with their topic, partition
and offset, to a dead-letter destination.

Speed: JSON values are parsed by Arrow's JSON reader a block at a time (C++, no Python per
row); a block that fails (some value in it is malformed) is halved until its halves parse, and
only small blocks around malformed values are parsed value by value with the standard library. CSV values
are parsed value by value (CSV topics are rare and small; JSON is the fast path).

The schema is a DDL string as Spark's ``from_json`` takes it (``"route string, fare double, ts
timestamp"``); the types known here are ``string``, ``double``/``float``, ``int``/``integer``/
``bigint``/``long``/``smallint``, ``boolean`` and ``timestamp`` (ISO 8601 text, or epoch
seconds).

Examples
--------
>>> vals = [b'{"route": "JFK-LAX", "fare": 12.5}', b'not json', b'{"route": "SFO-SEA"}',
...         b'{"route": "A-B", "fare": "n/a"}']
>>> cols, errors = parse_values(vals, "json", "route string, fare double")
>>> cols["route"], cols["fare"]
(['JFK-LAX', None, None, None], [12.5, None, None, None])
>>> errors
[None, 'not JSON: Expecting value', "missing field 'fare'", "field 'fare': not a double: 'n/a'"]
>>> parse_values([b'x,1.5', b'y'], "csv", "k string, v double")[1]
[None, 'expected 2 CSV fields, got 1']
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

from spillway.errors import ConfigError

#: DDL type names -> Arrow types.
TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "double": pa.float64(),
    "float": pa.float64(),
    "int": pa.int64(),
    "integer": pa.int64(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "smallint": pa.int64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}

#: Value formats.
FORMATS = ("json", "csv")

#: JSON values parsed by Arrow per block; a block with a malformed value is halved until the
#: halves parse or are :data:`SMALLEST_BLOCK` values, which go the slow path.
BLOCK = 8192
SMALLEST_BLOCK = 32


def parse_schema(ddl: str) -> pa.Schema:
    """An Arrow schema from a DDL string (``"name type, name type"``).

    >>> parse_schema("route string, fare DOUBLE, ts timestamp").types
    [DataType(string), DataType(double), TimestampType(timestamp[us, tz=UTC])]
    >>> parse_schema("route text")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: schema: field 'route' has type 'text'; known types: bigint, boolean, double, float, int, integer, long, smallint, string, timestamp
    """
    if not isinstance(ddl, str) or not ddl.strip():
        raise ConfigError(
            f"schema must be a DDL string like 'route string, fare double', got {ddl!r}"
        )
    fields = []
    for part in ddl.split(","):
        bits = part.split()
        if len(bits) != 2:
            raise ConfigError(f"schema: {part.strip()!r} is not 'name type'")
        name, typ = bits[0].strip("`"), bits[1].lower()
        if typ not in TYPES:
            raise ConfigError(
                f"schema: field {name!r} has type {bits[1]!r}; known types: "
                f"{', '.join(sorted(TYPES))}"
            )
        fields.append(pa.field(name, TYPES[typ]))
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise ConfigError(f"schema: field names repeat: {names}")
    return pa.schema(fields)


def _convert(name: str, typ: pa.DataType, v: Any) -> Any:
    """One JSON/CSV field as a Python value of ``typ``; ValueError names the field."""
    if v is None:
        raise ValueError(f"missing field {name!r}")
    try:
        if pa.types.is_string(typ):
            return v if isinstance(v, str) else json.dumps(v)
        if pa.types.is_floating(typ):
            if isinstance(v, bool):
                raise TypeError
            x = float(v)
            if not math.isfinite(x):
                raise TypeError
            return x
        if pa.types.is_integer(typ):
            if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
                raise TypeError
            return int(v)
        if pa.types.is_boolean(typ):
            if isinstance(v, bool):
                return v
            if str(v).lower() in ("true", "false"):
                return str(v).lower() == "true"
            raise TypeError
        if pa.types.is_timestamp(typ):
            if isinstance(v, int | float) and not isinstance(v, bool):
                return datetime.fromtimestamp(float(v), tz=UTC)
            t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
            return t if t.tzinfo else t.replace(tzinfo=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        kind = str(typ).split("[")[0].replace("float64", "double").replace("int64", "integer")
        raise ValueError(f"field {name!r}: not a {kind}: {v!r}") from None
    raise ValueError(f"field {name!r}: unsupported type {typ}")


def _rows_slow(
    values: Sequence[bytes], schema: pa.Schema, fmt: str
) -> tuple[list[list[Any]], list[str | None]]:
    cols: list[list[Any]] = [[] for _ in schema]
    errors: list[str | None] = []
    for raw in values:
        row: list[Any] = [None] * len(schema)
        why: str | None = None
        try:
            text = bytes(raw).decode("utf-8")
        except (UnicodeDecodeError, TypeError):
            text, why = "", "not UTF-8 text"
        if why is None and fmt == "json":
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                obj, why = None, f"not JSON: {e.msg}"
            if why is None and not isinstance(obj, dict):
                why = "not a JSON object"
            if why is None:
                try:
                    row = [_convert(f.name, f.type, obj.get(f.name)) for f in schema]
                except ValueError as e:
                    why = str(e)
        elif why is None:
            fields = next(csv.reader(io.StringIO(text)), [])
            if len(fields) != len(schema):
                why = f"expected {len(schema)} CSV fields, got {len(fields)}"
            else:
                try:
                    row = [
                        _convert(f.name, f.type, x if x != "" else None)
                        for f, x in zip(schema, fields, strict=True)
                    ]
                except ValueError as e:
                    why = str(e)
        if why is not None:
            row = [None] * len(schema)
        for c, v in zip(cols, row, strict=True):
            c.append(v)
        errors.append(why)
    return cols, errors


def _json_block(values: Sequence[bytes], schema: pa.Schema) -> pa.Table | None:
    """The block parsed by Arrow, or None when some value in it is malformed."""
    buf = b"\n".join(values)
    n = len(values)
    if buf.count(b"\n") != n - 1 or b"\n\n" in buf or buf[:1] == b"\n" or buf[-1:] == b"\n":
        return None  # a value with a line break in it, or an empty one: the slow path
    try:
        table = pajson.read_json(
            io.BytesIO(buf),
            read_options=pajson.ReadOptions(
                use_threads=False, block_size=max(len(buf) + 1, 1 << 16)
            ),
            parse_options=pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None
    if table.num_rows != n:
        return None
    for f in schema:  # a missing or null field is malformed: let the slow path name it
        if table.column(f.name).null_count:
            return None
    return table


def parse_table(
    values: Sequence[bytes], fmt: str, schema: str | pa.Schema
) -> tuple[pa.Table, dict[int, str]]:
    """Parse message values into an Arrow table of the schema's types (one row per value, all
    nulls for a malformed one) and the reason of every malformed row by its position.

    Raises
    ------
    ConfigError
        An unknown format or a bad schema.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    sch = schema if isinstance(schema, pa.Schema) else parse_schema(schema)
    parts: list[pa.Table] = []
    errors: dict[int, str] = {}

    def slow(block: Sequence[bytes], at: int) -> None:
        cols, why = _rows_slow(block, sch, fmt)
        parts.append(
            pa.table({f.name: pa.array(c, type=f.type) for f, c in zip(sch, cols, strict=True)})
        )
        errors.update({at + i: w for i, w in enumerate(why) if w is not None})

    def fast(block: Sequence[bytes], at: int) -> None:
        table = _json_block(block, sch)
        if table is not None:
            parts.append(table.select([f.name for f in sch]).cast(sch))
        elif len(block) > SMALLEST_BLOCK:  # halve around the malformed values
            half = len(block) // 2
            fast(block[:half], at)
            fast(block[half:], at + half)
        else:
            slow(block, at)

    if fmt == "json":
        for at in range(0, len(values), BLOCK):
            fast(values[at : at + BLOCK], at)
    else:
        slow(values, 0)
    if not parts:
        return sch.empty_table(), errors
    return pa.concat_tables(parts).combine_chunks(), errors


def parse_values(
    values: Sequence[bytes], fmt: str, schema: str | pa.Schema
) -> tuple[dict[str, list[Any]], list[str | None]]:
    """:func:`parse_table` as Python lists: the columns (``None`` for malformed rows) and the
    reason each row is malformed (``None`` when it is not)."""
    table, errors = parse_table(values, fmt, schema)
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    return cols, [errors.get(i) for i in range(table.num_rows)]
