"""Parsed rows as JSON object texts, for Spark's ``from_json`` to read back.

A log feed with ``records = true`` (:mod:`spillway.feeds.log_options`) hands every valid row's
fields to the user's query as one text column, ``raw``; the query rebuilds them with
``from_json(raw, schema_ddl)``. :func:`rows_json` writes that text from the parsed Arrow table,
column by column with Arrow's compute kernels (no Python per row, but for the rare text that
needs JSON escapes):

- texts as JSON strings; integers as integers; booleans as ``true``/``false``;
- doubles in the shortest form that reads back to the same double (``NaN``, ``Infinity`` and
  ``-Infinity`` as Python's ``json`` and Spark's JSON reader both take them);
- timestamps as ISO 8601 UTC text to the microsecond (``2026-01-02T03:04:05.250000Z``), which
  Spark's ``from_json`` reads as the same instant whatever the session's time zone;
- nulls as ``null``.

Examples
--------
>>> import datetime as dt
>>> t = pa.table({"route": ["JFK-LAX", 'say "hi"'], "fare": [12.5, None],
...               "at": pa.array([dt.datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=dt.UTC)] * 2,
...                              pa.timestamp("us", tz="UTC"))})
>>> for text in rows_json(t).to_pylist():
...     print(text)
{"route":"JFK-LAX","fare":12.5,"at":"2026-01-02T03:04:05.250000Z"}
{"route":"say \\"hi\\"","fare":null,"at":"2026-01-02T03:04:05.250000Z"}
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A text needs JSON escapes when it holds a quote, a backslash or a control character.
NEEDS_ESCAPE = r'["\\\x00-\x1f]'


def _text(col: pa.Array) -> pa.Array:
    quoted = pc.binary_join_element_wise('"', col, '"', "")
    mask = pc.fill_null(pc.match_substring_regex(col, NEEDS_ESCAPE), False)
    at = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    if at.size == 0:
        return quoted
    escaped = pa.array([json.dumps(col[int(i)].as_py(), ensure_ascii=False) for i in at])
    return pc.replace_with_mask(quoted, mask, escaped)


def _double(col: pa.Array) -> pa.Array:
    text = col.cast(pa.string())
    if not pc.any(pc.invert(pc.is_finite(col))).as_py():
        return text
    text = pc.if_else(pc.is_nan(col), "NaN", text)
    text = pc.if_else(pc.equal(col, float("inf")), "Infinity", text)
    return pc.if_else(pc.equal(col, float("-inf")), "-Infinity", text)


def _value(col: pa.Array) -> pa.Array:
    """One column as JSON value texts (null where the value is null)."""
    typ = col.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return _text(col)
    if pa.types.is_floating(typ):
        return _double(col.cast(pa.float64()))
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ):
        return col.cast(pa.string())
    if pa.types.is_timestamp(typ):
        # As UTC wall time without a zone: Arrow writes that far faster (no zone per value).
        wall = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).cast(pa.timestamp("us"))
        iso = pc.replace_substring(wall.cast(pa.string()), " ", "T", max_replacements=1)
        return pc.binary_join_element_wise('"', iso, 'Z"', "")
    return pa.array([None if v is None else json.dumps(v, default=str) for v in col.to_pylist()])


def rows_json(table: pa.Table) -> pa.Array:
    """Every row of ``table`` as the text of a JSON object of its columns, in column order.

    Parameters
    ----------
    table : parsed rows (the types of :data:`spillway.kafka.parse.TYPES`; other types are
        written by Python's ``json``, unknown values as their text).

    Returns
    -------
    pyarrow.Array
        A string array, one JSON object text a row.
    """
    if table.num_rows == 0:
        return pa.array([], pa.string())
    pieces = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        values = pc.fill_null(_value(col.combine_chunks()), "null")
        pieces.append(pc.binary_join_element_wise(json.dumps(name) + ":", values, ""))
    body = pc.binary_join_element_wise(*pieces, ",")
    return pc.binary_join_element_wise("{", body, "}", "")
