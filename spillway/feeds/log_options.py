"""The options every log feed shares, checked by one set of rules.

A log feed reads records someone else writes (a Kafka topic, :mod:`spillway.kafka.feed`; a
folder of arriving files, :mod:`spillway.feeds.folder`) and parses them with the user's schema.
Both take the same options for that: ``format``, ``schema`` (a DDL string), ``value_column``,
``key_column``, ``time_column``, ``dead_letter``, ``records`` and, where the feed offers it,
``lateness_s``. :func:`take_log_options` reads them out of a feed's options (the feed checks
what is left: its own options, then :func:`reject_unknown`) and returns them checked as a
:class:`LogOptions`. Every message begins with the feed's kind (``kafka option 'schema' ...``,
``folder option 'schema' ...``), names the rule and the value, and says what to do.

``records`` (default false) asks the feed for every record's fields, not only its key and
value: each valid row's ``raw`` is then a JSON object of its schema's fields
(:mod:`spillway.feeds.row_json`), and ``value_column`` may be left out (every value is 0).

Examples
--------
>>> opts = {"schema": "route string, fare double", "value_column": "fare", "path": "in"}
>>> o = take_log_options("folder", opts, formats=("json", "csv"))
>>> o.format, o.schema_ddl, o.value_column, o.text_keys, o.records
('json', 'route string, fare double', 'fare', False, False)
>>> opts  # what is left is the feed's own
{'path': 'in'}
>>> take_log_options("folder", {"schema": "route string", "value_column": "fare"},
...                  formats=("json",))
Traceback (most recent call last):
...
spillway.errors.ConfigError: folder option 'value_column' names 'fare', not a field of the schema ['route']
>>> take_log_options("kafka", {"schema": "route string", "records": "true"},
...                  formats=("json",)).value_column is None
True
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from spillway.errors import ConfigError
from spillway.kafka.parse import parse_schema

#: The options :func:`take_log_options` reads (``lateness_s`` only where a feed offers it).
SHARED = (
    "format",
    "schema",
    "value_column",
    "key_column",
    "time_column",
    "dead_letter",
    "records",
)

#: The longest ``lateness_s`` (s).
MAX_LATENESS_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class LogOptions:
    """A log feed's shared options, checked (see :func:`take_log_options`).

    Attributes
    ----------
    format : how records are written (one of the feed's formats, lower case).
    schema_ddl : the schema as the user wrote it (Spark's ``from_json`` takes it as is).
    schema : the schema as Arrow types.
    value_column, key_column, time_column : fields of the schema, or None.
    dead_letter : a folder for malformed and late records, or None.
    records : every valid row's ``raw`` carries its fields as JSON.
    lateness_s : seconds a window waits for late records (None where the feed has no such
        option).
    """

    format: str
    schema_ddl: str
    schema: pa.Schema
    value_column: str | None
    key_column: str | None
    time_column: str | None
    dead_letter: str | None
    records: bool
    lateness_s: float | None

    @property
    def text_keys(self) -> bool:
        """The key column holds texts (hashed to integer keys)."""
        return self.key_column is not None and pa.types.is_string(
            self.schema.field(self.key_column).type
        )


def flag(kind: str, name: str, value: Any) -> bool:
    """An option that is true or false (a bool, or its text as a command line gives it).

    >>> flag("folder", "header", "True"), flag("folder", "header", False)
    (True, False)
    >>> flag("kafka", "failOnDataLoss", "maybe")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: kafka option 'failOnDataLoss' must be true or false, got 'maybe'
    """
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ConfigError(f"{kind} option {name!r} must be true or false, got {value!r}")


def take_log_options(
    kind: str,
    opts: MutableMapping[str, Any],
    *,
    formats: tuple[str, ...],
    lateness_s: float | None = None,
) -> LogOptions:
    """Read the shared options out of ``opts`` (they are removed from it) and check them.

    Parameters
    ----------
    kind : the feed's name, first word of every message (``kafka``, ``folder``).
    opts : the feed's options; what is left afterwards is the feed's own.
    formats : the formats the feed reads (the first is the default).
    lateness_s : the default ``lateness_s`` where the feed offers the option; None where it
        does not (the option is then left in ``opts``, for :func:`reject_unknown`).

    Raises
    ------
    ConfigError
        A format the feed does not read; no schema or a bad one; a column option naming no
        field of the schema; no ``value_column`` without ``records``; a ``time_column`` that is
        neither a timestamp nor a number; ``records`` not true or false; ``lateness_s`` not
        seconds in [0, 3600).
    """
    given = opts.pop("format", formats[0])
    fmt = str(given).lower()
    if fmt not in formats:
        raise ConfigError(
            f"{kind} option 'format' must be one of {', '.join(formats)}, got {given!r}"
        )
    ddl = opts.pop("schema", None)
    if ddl is None:
        raise ConfigError(
            f"{kind} option 'schema' is required (a DDL string, e.g. 'route string, fare double')"
        )
    schema = parse_schema(str(ddl))
    names = schema.names
    cols = {what: opts.pop(what, None) for what in ("value_column", "key_column", "time_column")}
    for what, col in cols.items():
        if col is not None and col not in names:
            raise ConfigError(
                f"{kind} option {what!r} names {col!r}, not a field of the schema {names}"
            )
    records = flag(kind, "records", opts.pop("records", False))
    if cols["value_column"] is None and not records:
        raise ConfigError(
            f"{kind} option 'value_column' is required: one of {names} (or set records = true "
            "for queries that read every field)"
        )
    time = cols["time_column"]
    if time is not None:
        typ = schema.field(time).type
        if not (
            pa.types.is_timestamp(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ)
        ):
            raise ConfigError(
                f"{kind} option 'time_column' names {time!r} of type {typ}: it needs a "
                "timestamp or Unix seconds (a number)"
            )
    late: float | None = None
    if lateness_s is not None:
        v = opts.pop("lateness_s", lateness_s)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < MAX_LATENESS_S:
            raise ConfigError(
                f"{kind} option 'lateness_s' must be seconds in [0, {MAX_LATENESS_S:g}), got {v!r}"
            )
        late = float(v)
    dead = opts.pop("dead_letter", None)
    return LogOptions(
        format=fmt,
        schema_ddl=str(ddl),
        schema=schema,
        value_column=cols["value_column"],
        key_column=cols["key_column"],
        time_column=time,
        dead_letter=None if dead is None else str(dead),
        records=records,
        lateness_s=late,
    )


def reject_unknown(
    kind: str, opts: Iterable[str], known: Sequence[str], *, prefix: str | None = None
) -> None:
    """Raise when ``opts`` names an option that is not ``known`` (nor starts with ``prefix``).

    >>> reject_unknown("kafka", ["kafka.acks"], ["subscribe"], prefix="kafka.")
    >>> reject_unknown("folder", ["startingOffsets"], ["path", "header"])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: unknown folder option(s) startingOffsets; known: path, header
    """
    unknown = sorted(k for k in opts if k not in known and not (prefix and k.startswith(prefix)))
    if unknown:
        tail = f" and {prefix}* client settings" if prefix else ""
        raise ConfigError(
            f"unknown {kind} option(s) {', '.join(unknown)}; known: {', '.join(known)}{tail}"
        )


class LogFields:
    """The shared options as a log feed's attributes (a mixin for the feed classes).

    Attributes
    ----------
    format, schema_ddl : how records are written and their schema as the user gave it: with
        ``records``, ``from_json(raw, schema_ddl)`` rebuilds a record's fields in Spark.
    schema : the schema as Arrow types.
    value_column, key_column, time_column, dead_letter, lateness_s : as the options gave them.
    record_fields : the ``records`` option.

    Examples
    --------
    >>> class Feed(LogFields):
    ...     def __init__(self, **options):
    ...         self.take_options("folder", dict(options), formats=("json",))
    >>> f = Feed(schema="route string, fare double", key_column="route", records=True)
    >>> f.schema_ddl, f.value_column, f.record_fields, f.text_keys
    ('route string, fare double', None, True, True)
    """

    format: str
    schema_ddl: str
    schema: pa.Schema
    value_column: str | None
    key_column: str | None
    time_column: str | None
    dead_letter: str | None
    lateness_s: float
    record_fields: bool
    _text_keys: bool

    def take_options(
        self,
        kind: str,
        opts: MutableMapping[str, Any],
        *,
        formats: tuple[str, ...],
        lateness_s: float | None = None,
    ) -> None:
        """:func:`take_log_options`, kept as the feed's attributes."""
        o = take_log_options(kind, opts, formats=formats, lateness_s=lateness_s)
        self.format, self.schema_ddl, self.schema = o.format, o.schema_ddl, o.schema
        self.value_column, self.key_column = o.value_column, o.key_column
        self.time_column, self.dead_letter = o.time_column, o.dead_letter
        self.lateness_s = 0.0 if o.lateness_s is None else o.lateness_s
        self.record_fields = o.records
        self._text_keys = o.text_keys

    @property
    def text_keys(self) -> bool:
        """The key column holds texts (hashed to integer keys)."""
        return self._text_keys
