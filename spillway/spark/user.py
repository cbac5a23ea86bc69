"""User queries: the user's own PySpark function over a query's rows, results with their SIC.

A query of kind ``user`` names a function ``f(rows) -> DataFrame``. In every micro-batch the
node's sink calls it with the query's rows of that batch as an ordinary (static) DataFrame and
the user writes plain PySpark or SQL over it: filters, group-bys, joins with static tables or
between the query's topics, top-k, several steps. The rows hold whole tumbling windows of the
query's ``window_s`` (the source ends every batch on a window boundary), each row with its
``window_start``, so grouping by ``window_start`` gives one result per window, with no watermark
and no state store: the window fires when its batch runs.

The rows' columns (:func:`input_rows`):

- from a Kafka topic or a folder: the fields of the feed's ``schema``, and ``topic``,
  ``partition``, ``offset`` (where the record came from);
- from a generated or replayed feed: ``source_id``, ``key``, ``value``;
- always ``event_ts``, ``arrival_ts``, ``sic`` (the row's source information content, THEMIS
  Eq. 1) and ``window_start``.

**SIC whatever the user chains.** The function is one operator firing per window (THEMIS Eq. 3:
the outputs of a firing share the SIC of its inputs equally), so no helper needs to be called:
each result row of window ``w`` gets ``sic = sum(sic of w's input rows) / (result rows of w)``
(:func:`share_sic`). A result must therefore keep ``window_start`` (group by it, or select
it); a ``sic`` column of the function's own is replaced. A window whose result is empty (a
filter that matched nothing) still delivers its SIC to the query's account (DISSP Assumption
6: an empty answer is an answer), but writes no row to the sink. The query's SIC over the STW
(THEMIS Eq. 4) is accounted from one bookkeeping row per window (:func:`firings`), which is
what drives the policy.

Examples
--------
>>> import pandas as pd
>>> out = pd.DataFrame({"window_start": [10, 10, 11], "mean": [1.0, 2.0, 3.0]})
>>> fired = pd.DataFrame({"window_start": [10, 11, 12], "sic_in": [0.8, 0.3, 0.5]})
>>> share_sic(out, fired, query="q")["sic"].tolist()
[0.4, 0.4, 0.3]
>>> resolve_function("spillway.spark.user:share_sic") is share_sic
True

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §4, Eq. 1, 3, 4; Fiscato, PhD thesis 2012 (DISSP)
§3.2 Assumption 6.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spillway.errors import ConfigError
from spillway.spark.statement import firing_rows, kinds_sql
from spillway.spark.statement import share_sic as shared_sic

#: Columns spillway adds to every user query's rows (a feed schema may not use these names).
RESERVED: tuple[str, ...] = ("window_start", "sic", "event_ts", "arrival_ts")
#: Where a record of a log came from (rows of Kafka topics and folders).
RECORD_ORIGIN: tuple[str, ...] = ("topic", "partition", "offset")
#: The columns of a generated or replayed feed's rows.
FEED_COLUMNS: tuple[str, ...] = ("source_id", "key", "value")
#: Columns spillway adds to each result row handed to a sink.
RESULT_EXTRA: tuple[str, ...] = ("sic", "query", "batch_id")


def resolve_function(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    """The function a query names: a callable as is, ``"module:attr"`` imported,
    ``"path/file.py:attr"`` loaded from that file (relative to the working directory).

    Raises
    ------
    ConfigError
        The module or file cannot be loaded, or has no such attribute, or it is not callable.
    """
    if callable(ref):
        return ref
    where, _, attr = str(ref).rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where).expanduser().resolve()
            name = f"spillway_user_{abs(hash(str(path))):x}"
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None or not path.is_file():
                    raise ConfigError(f"function {ref!r}: no Python file at {str(path)!r}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ConfigError:
        raise
    except Exception as e:  # the user's module failed to import: say which and why
        raise ConfigError(f"function {ref!r}: cannot load {where!r}: {e}") from None
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise ConfigError(f"function {ref!r}: {where!r} has no function {attr!r}")
    return fn


@dataclass(frozen=True)
class UserPart:
    """One user query of a plan: its id and name, its function, its window (µs) and, for a log
    read as whole records, the records' schema (DDL) (None for a generated feed's rows)."""

    query_id: int
    name: str
    fn: Callable[[DataFrame], DataFrame]
    window_us: int
    record_schema: str | None = None


def check_schema(ddl: str, *, query: str) -> None:
    """Refuse a record schema that uses a column name spillway adds (:data:`RESERVED`).

    >>> check_schema("route string, sic double", query="q")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: query 'q': the feed schema's field(s) sic clash with the columns spillway adds to a user query's rows (window_start, sic, event_ts, arrival_ts); rename them in the schema
    """
    names = [f.strip().split()[0].strip("`").lower() for f in ddl.split(",") if f.strip()]
    clash = [n for n in names if n in RESERVED + RECORD_ORIGIN]
    if clash:
        raise ConfigError(
            f"query {query!r}: the feed schema's field(s) {', '.join(clash)} clash with the "
            f"columns spillway adds to a user query's rows ({', '.join(RESERVED)}); rename "
            "them in the schema"
        )


def _window_start(window_us: int) -> Column:
    t = F.unix_micros("event_ts")
    return F.timestamp_micros(t - F.pmod(t, F.lit(int(window_us)))).alias("window_start")


def input_rows(rows: DataFrame, part: UserPart) -> DataFrame:
    """The DataFrame a user query's function gets: its rows of the batch (see the module
    docstring for the columns). ``rows`` are the plan's source rows (with ``raw``, ``topic``,
    ``partition``, ``offset`` when ``part.record_schema`` is set)."""
    mine = rows.filter(F.col("query_id") == part.query_id)
    common = [F.col("event_ts"), F.col("arrival_ts"), F.col("sic"), _window_start(part.window_us)]
    if part.record_schema is None:
        return mine.select(*FEED_COLUMNS, *common)
    fields = F.from_json("raw", part.record_schema).alias("_record")
    return mine.select(fields, *RECORD_ORIGIN, *common).select("_record.*", "*").drop("_record")


def firings(rows: DataFrame, parts: Sequence[UserPart]) -> pd.DataFrame:
    """Per user query and window of its rows: ``query_id``, ``window_start`` (µs), ``sic_in``
    (the window's SIC mass), ``n_in`` and ``last_arrival_ts`` (µs); ONE small Spark job for
    every user query of the batch, the firing part of the statement a sink runs
    (:func:`spillway.spark.statement.kinds_sql`)."""
    windows = {p.query_id: p.window_us / 1e6 for p in parts}
    sql = kinds_sql("{batch}", {}, windows, firing_ids=list(windows))
    fired = firing_rows(rows.sparkSession.sql(sql, batch=rows).toPandas())
    return fired.sort_values(["query_id", "window_start"]).reset_index(drop=True)


def share_sic(out: pd.DataFrame, fired: pd.DataFrame, *, query: str) -> pd.DataFrame:
    """Each result row's SIC: its window's input SIC mass over the window's result rows (THEMIS
    Eq. 3 with the user's function as one firing per window; the rule every built-in kind
    follows too, :func:`spillway.spark.statement.share_sic`).

    Raises
    ------
    ConfigError
        A result row's ``window_start`` is not a window of the input (the function re-windowed
        the rows: group by the given ``window_start`` instead).
    """
    return shared_sic(out, fired, by=["window_start"], what=f"query {query!r}", carry=())


def evaluate(
    part: UserPart, rows: DataFrame, batch_id: int, fired: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run one user query on one batch (``fired``: the batch's :func:`firings`, computed here
    when not given).

    Returns
    -------
    (results, book)
        ``results``: the function's rows with ``window_start`` (UTC), ``sic``, ``query`` and
        ``batch_id``; ``book``: one row per window of the input in the sink's result columns
        (times in µs; ``value`` the number of result rows, ``sic`` the window's SIC mass) for
        the query's SIC account (THEMIS Eq. 4).

    Raises
    ------
    ConfigError
        The function does not return a DataFrame or drops ``window_start``.
    """
    inp = input_rows(rows, part)
    out = part.fn(inp)
    if not isinstance(out, DataFrame):
        raise ConfigError(
            f"query {part.name!r}: the function must return a DataFrame, got {type(out).__name__}"
        )
    if "window_start" not in out.columns:
        raise ConfigError(
            f"query {part.name!r}: the function's result has no window_start column (it has "
            f"{', '.join(out.columns)}); group by window_start or select it, so each result "
            "row belongs to its window"
        )
    fired = firings(rows, [part]) if fired is None else fired
    fired = fired[fired["query_id"] == part.query_id].reset_index(drop=True)
    out = out.drop("sic") if "sic" in out.columns else out
    res = out.withColumn("window_start", F.unix_micros("window_start")).toPandas()
    res = share_sic(res, fired, query=part.name)
    res = res.sort_values("window_start", kind="stable")
    counts = res["window_start"].value_counts()
    res["window_start"] = pd.to_datetime(res["window_start"].astype("int64"), unit="us", utc=True)
    res["query"] = part.name
    res["batch_id"] = int(batch_id)
    book = pd.DataFrame(
        {
            "query_id": np.full(len(fired), part.query_id, dtype=np.int32),
            "window_start": fired["window_start"].to_numpy(),
            "key": pd.array([None] * len(fired), dtype="Int64"),
            "rank": np.ones(len(fired), dtype=np.int32),
            "value": fired["window_start"].map(counts).fillna(0).to_numpy(dtype=np.float64),
            "sic": fired["sic_in"].to_numpy(dtype=np.float64),
            "n_in": fired["n_in"].to_numpy(dtype=np.int64),
            "last_arrival_ts": fired["last_arrival_ts"].to_numpy(),
        }
    )
    return res.reset_index(drop=True), book
