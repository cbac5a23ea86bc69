"""Turn columns (numpy or Arrow) into Kafka message values, JSON or CSV, without a Python loop.

Each row becomes one value: a JSON object ``{"name": value, ...}`` with the columns in the
given order, or a CSV line (no header, ``,`` between fields, RFC 4180 quoting). The work is
done by Arrow compute kernels over whole columns (casts to text, element-wise joins); Python
sees only the finished strings. Types:

- integers as JSON numbers; floats as the shortest text that reads back to the same double
  (NaN and infinities, which JSON has no words for, become ``null``, and empty in CSV);
- strings quoted (JSON: ``"`` and ``\\`` escaped; other control characters fall back to
  Python's :func:`json.dumps` for that column only);
- timestamps (numpy ``datetime64`` or Arrow timestamps, taken as UTC) as ISO 8601 with
  milliseconds, ``2026-11-26T07:52:02.100Z`` (``time_format="iso"``, read by Spark's
  ``from_json`` as a TIMESTAMP), or as epoch milliseconds (``time_format="millis"``).

Examples
--------
>>> cols = {"key": np.array([3, 4]), "value": np.array([1.5, np.nan]),
...         "event_time": np.array([0, 1500], dtype="datetime64[ms]")}
>>> encode(cols, fmt="json")
['{"key":3,"value":1.5,"event_time":"1970-01-01T00:00:00.000Z"}', '{"key":4,"value":null,"event_time":"1970-01-01T00:00:01.500Z"}']
>>> encode(cols, fmt="csv", time_format="millis")
['3,1.5,0', '4,,1500']
>>> encode({"route": np.array(['JFK "to" LAX', "a,b", "c"])}, fmt="csv")
['"JFK ""to"" LAX"', '"a,b"', 'c']
>>> encode({"route": np.array(['JFK "to" LAX'])})
['{"route":"JFK \\\\"to\\\\" LAX"}']
>>> encode({"k": np.array([1])}, fmt="xml")
Traceback (most recent call last):
...
spillway.errors.ConfigError: value format must be one of csv, json; got 'xml'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spillway.errors import ConfigError

#: Message value formats.
FORMATS = ("csv", "json")
#: How timestamps are written.
TIME_FORMATS = ("iso", "millis")

_NULL = pa.scalar("null", pa.string())
_EMPTY = pa.scalar("", pa.string())


def _check(fmt: str, time_format: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"value format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if time_format not in TIME_FORMATS:
        raise ConfigError(
            f"time format must be one of {', '.join(TIME_FORMATS)}; got {time_format!r}"
        )


def _arrow(col: Any) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks()
    if isinstance(col, pa.Array):
        return col
    arr = np.asarray(col)
    if arr.dtype.kind == "M":
        return pa.array(arr.astype("datetime64[ms]"))
    if arr.dtype.kind in "OU":
        return pa.array(arr.astype(object), pa.string())
    return pa.array(arr)


def _text(col: pa.Array, fmt: str, time_format: str) -> pa.Array:
    """One column as text fields (nulls already replaced), ready to be joined."""
    missing = _NULL if fmt == "json" else _EMPTY
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        ms = col.cast(pa.timestamp("ms", tz="UTC"))
        if time_format == "millis":
            out = ms.cast(pa.int64()).cast(pa.string())
        else:
            iso = iso_millis(ms)
            out = pc.binary_join_element_wise('"', iso, '"', "") if fmt == "json" else iso
    elif pa.types.is_floating(t):
        finite = pc.is_finite(col)
        out = pc.if_else(finite, col.cast(pa.string()), missing)
    elif pa.types.is_integer(t) or pa.types.is_boolean(t):
        out = col.cast(pa.string())
    else:
        out = _quoted(col.cast(pa.string()), fmt)
    return pc.fill_null(out, missing)


_FRACTIONS = pa.array([f".{i:03d}Z" for i in range(1000)], pa.string())


def iso_millis(ts: pa.Array) -> pa.Array:
    """ISO 8601 text of UTC timestamps, to the millisecond: ``2026-11-26T07:52:02.100Z``.

    Each distinct second is formatted once (a stream has far fewer distinct seconds than
    rows) and the milliseconds are looked up, which is several times faster than formatting
    every row.

    >>> iso_millis(pa.array(np.array([1500, -1, None], dtype="datetime64[ms]"))).to_pylist()
    ['1970-01-01T00:00:01.500Z', '1969-12-31T23:59:59.999Z', None]
    """
    ms = ts.cast(pa.timestamp("ms", tz="UTC"))
    valid = ms.is_valid()
    v = ms.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    sec = np.floor_divide(v, 1000)
    uniq, inverse = np.unique(sec, return_inverse=True)
    heads = pc.strftime(pa.array(uniq, pa.timestamp("s", tz="UTC")), format="%Y-%m-%dT%H:%M:%S")
    out = pc.binary_join_element_wise(
        heads.take(pa.array(inverse.ravel())), _FRACTIONS.take(pa.array(v - sec * 1000)), ""
    )
    return out if valid.false_count == 0 else pc.if_else(valid, out, pa.scalar(None, pa.string()))


def _quoted(s: pa.Array, fmt: str) -> pa.Array:
    if fmt == "csv":
        needs = pc.match_substring_regex(s, '[,"\\r\\n]')
        doubled = pc.replace_substring(s, '"', '""')
        quoted = pc.binary_join_element_wise('"', doubled, '"', "")
        return pc.if_else(needs, quoted, s)
    if pc.any(pc.match_substring_regex(s, "[\\x00-\\x1f]")).as_py():
        return pa.array([None if v is None else json.dumps(v) for v in s.to_pylist()], pa.string())
    escaped = pc.replace_substring(pc.replace_substring(s, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")


def encode(columns: Mapping[str, Any], *, fmt: str = "json", time_format: str = "iso") -> list[str]:
    """One message value per row of ``columns`` (all of one length), as Python strings.

    Parameters
    ----------
    columns : column name -> numpy array or Arrow array, in the order they are written.
    fmt : ``json`` (an object per row) or ``csv`` (a line per row, no header).
    time_format : ``iso`` (ISO 8601, milliseconds, UTC) or ``millis`` (epoch milliseconds).

    Raises
    ------
    ConfigError
        An unknown format, no columns, or columns of different lengths.
    """
    _check(fmt, time_format)
    if not columns:
        raise ConfigError("encode needs at least one column")
    arrays = {name: _arrow(col) for name, col in columns.items()}
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ConfigError(f"columns must all have one length, got {lengths}")
    parts: list[Any] = []
    for i, (name, arr) in enumerate(arrays.items()):
        field = _text(arr, fmt, time_format)
        if fmt == "json":
            parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        elif i > 0:
            parts.append(",")
        parts.append(field)
    if fmt == "json":
        parts.append("}")
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "")
    return list(joined.to_pylist())
