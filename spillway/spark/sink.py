"""The result sink of a spillway plan: ``foreachBatch`` → result store and query coordinator.

:class:`ResultSink` is the function a plan's streaming query passes to ``foreachBatch``. A node
runs one plan per window length, and that plan carries the tuples of ALL its logical queries,
whatever their kind (THEMIS's node: one input buffer, one admission decision per interval). The
sink evaluates every query kind present on the one micro-batch, stateless (the source ends every
batch on a window boundary, so a batch holds whole windows), stamps the results with the time
they were produced and their latency (``produced_at - last_arrival_ts``: from the arrival of
the window's last input tuple to the result being available), and hands them to a
:class:`ResultStore` and a :class:`~spillway.spark.coordinator.QueryCoordinator`.

How several kinds share one micro-batch
---------------------------------------
On ``local[2]`` the fixed cost of a micro-batch, not its rows, limits the node, so the sink does
the least per batch:

1. the batch is repartitioned by ``query_id`` (the one shuffle of the batch: every later
   aggregate, window function and join groups by query id and more, so Spark plans no further
   exchange) and, when there are several parts (below), persisted once, so the spillway source,
   whose readers regenerate and sample tuples in Python, is read once;
2. ONE SQL statement (:func:`kinds_sql`, built once when the sink is made) computes every kind:
   each kind over ``query_id IN (its ids)``, the kinds whose result is one aggregate per (query,
   window) (AVG, MAX, COUNT, AVG-all) fused into one aggregation, the parts unioned (they share
   :data:`~spillway.spark.queries.RESULT_TYPES`), collected in ONE job; then the batch is
   unpersisted. GROUP-AVG is its own part: one aggregation per (query, window, key), then
   window functions over the (query, window) for the group-by SIC share and the window's
   totals (no exchange beyond the repartition by query id).
3. a plan that reads logs (Kafka topics, folders) persists the batch as read, and the same
   statement (:func:`log_sql`) also returns its malformed and late rows (the dead letters)
   and, when its keys are text, the texts of the keys it saw: still ONE job a batch. Each was
   a job of its own before; with three collects a Kafka COUNT batch cost 1.25 s fixed
   (BENCHMARKS.md §4, ``spillway bench --only kafka --quick``), with one, 0.9-1.1 s.

The SQL is the same plan as the DataFrame functions of :mod:`spillway.spark.queries` (which stay
the reference: ``node.exact_results`` uses them, and the tests check that both give the same
rows). It is SQL because a DataFrame plan built in Python costs hundreds of py4j calls and an
analysis per call on every batch. Measured on ``local[2]`` (another Spark job sharing the two
cores, load about 6) with the 15 queries of the default mix, 4,000 rows per batch, median
``addBatch``: DataFrame plans, persisted, unioned: 2.7 s; SQL, repartitioned, persisted,
unioned, one collect: 1.0-1.6 s; the same with one collect per part: 1.1-1.6 s (no measurable
difference; one collect is kept: one job to schedule); SQL without persisting: 2.1 s. TOP-5 then
lost its join (window functions over the firing instead, so no exchange at all after the
repartition): its part went from 0.38 s to 0.20 s on 8,000 cached rows.

Replays are idempotent. After a failure Spark re-runs the last micro-batch with the same batch
id and the same input (the shedding decision is in the offset log). The store keys results by
``(plan, batch_id)``, so the re-run *replaces* that batch's rows instead of adding them again,
and the coordinator is told only about a batch it has not seen, so query SIC is not counted
twice. A CSV copy is rewritten whole on such a replacement (appended otherwise).

Stored columns (:data:`STORE_COLUMNS`): ``plan``, ``batch_id``, ``kind`` (each row's query
kind) and the query result columns (:data:`spillway.spark.queries.RESULT_COLUMNS`;
``window_start`` and ``last_arrival_ts`` as UTC pandas timestamps, ``key`` as pandas' nullable
``Int64``), plus ``produced_at`` (seconds, in the clock's units: Unix seconds with the default
wall clock) and ``latency_s``. Rows are ordered by plan, batch, query, window, key and rank.

Examples
--------
>>> import pandas as pd
>>> store = ResultStore()
>>> rows = pd.DataFrame({"query_id": [0], "sic": [1.0]})
>>> store.put("avg", 3, rows), store.put("avg", 3, rows.assign(sic=0.5))
(True, False)
>>> store.to_pandas()[["plan", "batch_id", "sic"]].values.tolist()
[['avg', 3, 0.5]]
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame

from spillway.config import USER_KIND
from spillway.errors import ConfigError
from spillway.events import ResultsEvent, notify
from spillway.sinks import Sink
from spillway.spark.coordinator import QueryCoordinator
from spillway.spark.queries import (
    COUNT_THRESHOLD,
    CPU_FULL_PERCENT,
    FREE_MEMORY_MIN_KB,
    RESULT_COLUMNS,
    RESULT_TYPES,
    SOURCE_COLUMNS,
    TIME_COLUMNS,
    TOP_K,
    QueryKind,
    query_kind,
    with_key_dtype,
)
from spillway.spark.user import RECORD_ORIGIN, UserPart, evaluate, firings

#: Columns of :meth:`ResultStore.to_pandas`, in order.
STORE_COLUMNS: tuple[str, ...] = (
    "plan",
    "batch_id",
    "kind",
    *RESULT_COLUMNS,
    "produced_at",
    "latency_s",
)

#: Columns of the rows a plan reading logs sets aside (malformed or late records).
DEAD_LETTER_COLUMNS: tuple[str, ...] = ("query_id", "topic", "partition", "offset", "error", "raw")

#: Name of a plan whose queries are of several kinds.
MIXED_PLAN = "mixed"


def _seconds(t: float | datetime) -> float:
    """Clock reading as seconds: a float as is, a timezone-aware datetime as Unix seconds."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ConfigError(f"clock must return seconds or an aware datetime, got naive {t!r}")
        return t.timestamp()
    return float(t)


def kind_map(
    kinds: QueryKind | str | Mapping[str, Sequence[int]],
) -> dict[str, tuple[int, ...]]:
    """Normalise a sink's kinds: ``{kind name: query ids}`` (ids ``()`` = every row).

    Raises
    ------
    UnknownNameError
        A kind is not in :data:`spillway.spark.queries.QUERIES`.
    ConfigError
        No kind, a kind without query ids among several kinds, or a query id under two kinds.

    Examples
    --------
    >>> kind_map("max")
    {'max': ()}
    >>> kind_map({"avg": [0, 2], "top5": [1]})
    {'avg': (0, 2), 'top5': (1,)}
    """
    if isinstance(kinds, QueryKind):
        return {kinds.name: ()}
    if isinstance(kinds, str):
        return {query_kind(kinds).name: ()}
    out = {query_kind(k).name: tuple(int(i) for i in ids) for k, ids in kinds.items()}
    if not out:
        raise ConfigError("kinds must name at least one query kind, got an empty mapping")
    if len(out) > 1 and any(not ids for ids in out.values()):
        raise ConfigError(
            f"kinds {sorted(out)}: with several kinds every kind needs its query ids, got "
            f"{out}; pass {{kind: [query ids]}}"
        )
    seen: dict[int, str] = {}
    for k, ids in out.items():
        for i in ids:
            if i in seen:
                raise ConfigError(
                    f"query id {i} is listed under kinds {seen[i]!r} and {k!r}; a query has one kind"
                )
            seen[i] = k
    return out


# ----------------------------------------------------------------------------- batch SQL
#: Value expression of the kinds that make one row per (query, window) from one aggregate
#: (``spark.queries``: AVG, MAX, COUNT with its predicate folded in, AVG-all).
_SINGLE_VALUE: dict[str, str] = {
    "avg": "avg(value)",
    "max": "max(value)",
    "count": f"count(CASE WHEN value >= {COUNT_THRESHOLD!r} THEN 1 END)",
    "avg_all": "avg(value)",
}


#: The ``key`` of the kinds that do not group.
_NO_KEY = "CAST(NULL AS bigint) AS key"


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(int(i)) for i in ids)


def window_us_sql(ids: Sequence[int], windows_us: int | Mapping[int, int]) -> str:
    """The window length (µs) of the rows of queries ``ids`` as a SQL expression: a literal
    when they share one window, else a ``CASE`` on ``query_id``.

    >>> window_us_sql([0, 1], {0: 1_000_000, 1: 1_000_000, 2: 500_000})
    '1000000'
    >>> window_us_sql([0, 2], {0: 1_000_000, 2: 500_000})
    'CASE WHEN query_id IN (0) THEN 1000000 WHEN query_id IN (2) THEN 500000 END'
    """
    if isinstance(windows_us, int):
        return str(windows_us)
    chosen = list(ids) if ids else sorted(windows_us)
    by: dict[int, list[int]] = {}
    for i in chosen:
        by.setdefault(int(windows_us[int(i)]), []).append(int(i))
    if len(by) == 1:
        return str(next(iter(by)))
    return (
        "CASE "
        + " ".join(f"WHEN query_id IN ({_ids(v)}) THEN {us}" for us, v in by.items())
        + " END"
    )


def _windowed(view: str, ids: Sequence[int], us: str) -> str:
    where = f" WHERE query_id IN ({_ids(ids)})" if ids else ""
    t = "unix_micros(event_ts)"
    return f"(SELECT *, timestamp_micros({t} - pmod({t}, {us})) AS window_start FROM {view}{where})"


def _single_sql(view: str, kinds: Mapping[str, Sequence[int]], us: str) -> str:
    if len(kinds) == 1:
        value = _SINGLE_VALUE[next(iter(kinds))]
    else:
        cases = " ".join(
            f"WHEN query_id IN ({_ids(ids)}) THEN CAST({_SINGLE_VALUE[k]} AS double)"
            for k, ids in kinds.items()
        )
        value = f"CASE {cases} END"
    ids = [i for v in kinds.values() for i in v]
    return (
        f"SELECT query_id, window_start, {_NO_KEY}, 1 AS rank, {value} AS value, "
        "sum(sic) AS sic, count(1) AS n_in, max(arrival_ts) AS last_arrival_ts "
        f"FROM {_windowed(view, ids, us)} GROUP BY query_id, window_start"
    )


def _single_kind_sql(kind: str, view: str, ids: Sequence[int], us: str) -> str:
    return _single_sql(view, {kind: ids}, us)


def _cov_sql(view: str, ids: Sequence[int], us: str) -> str:
    paired = (
        "(SELECT *, row_number() OVER (PARTITION BY query_id, window_start, source_id "
        f"ORDER BY arrival_ts, event_ts, value, key) AS pair FROM {_windowed(view, ids, us)})"
    )
    pairs = (
        "(SELECT query_id, window_start, pair, max(CASE WHEN source_id = 0 THEN value END) AS x, "
        "max(CASE WHEN source_id = 1 THEN value END) AS y, count(1) AS n_in, "
        f"max(arrival_ts) AS last_arrival_ts, sum(sic) AS sic FROM {paired} "
        "GROUP BY query_id, window_start, pair)"
    )
    return (
        f"SELECT query_id, window_start, {_NO_KEY}, 1 AS rank, covar_samp(x, y) AS value, "
        "sum(sic) AS sic, sum(n_in) AS n_in, max(last_arrival_ts) AS last_arrival_ts "
        f"FROM {pairs} GROUP BY query_id, window_start"
    )


def _top5_sql(view: str, ids: Sequence[int], us: str) -> str:
    # Per machine the average CPU and free memory (the CQL plan's two group-bys and its join on
    # machine id) and what the window's result needs. Then, with window functions over the
    # firing only (no join, so no exchange: the batch is partitioned by query id), the
    # qualifying machines first by available CPU, the firing's totals and the number that
    # qualify: the top 5 rows share the firing's SIC; no qualifying machine leaves one marker
    # row (rank 0, value null) with all of it.
    machines = (
        "(SELECT query_id, window_start, key, "
        "avg(CASE WHEN source_id % 2 = 0 THEN value END) AS cpu, "
        "avg(CASE WHEN NOT (source_id % 2 = 0) THEN value END) AS free, count(1) AS n_in, "
        f"max(arrival_ts) AS last_arrival_ts, sum(sic) AS total FROM {_windowed(view, ids, us)} "
        "GROUP BY query_id, window_start, key)"
    )
    ok = f"cpu IS NOT NULL AND free >= {FREE_MEMORY_MIN_KB!r}"
    ranked = (
        "(SELECT query_id, window_start, key, "
        f"sum(CASE WHEN {ok} THEN 1 ELSE 0 END) OVER f AS n_ok, sum(n_in) OVER f AS n_all, "
        "max(last_arrival_ts) OVER f AS last_all, sum(total) OVER f AS total_all, "
        "row_number() OVER (PARTITION BY query_id, window_start ORDER BY "
        f"CASE WHEN {ok} THEN 0 ELSE 1 END, ({CPU_FULL_PERCENT!r} - cpu) DESC, key ASC) AS pos "
        f"FROM {machines} WINDOW f AS (PARTITION BY query_id, window_start))"
    )
    return (
        f"SELECT query_id, window_start, {_NO_KEY}, "
        "CASE WHEN n_ok > 0 THEN pos ELSE 0 END AS rank, "
        "CASE WHEN n_ok > 0 THEN CAST(key AS double) END AS value, "
        f"total_all / greatest(least(n_ok, {TOP_K}), 1) AS sic, n_all AS n_in, "
        f"last_all AS last_arrival_ts FROM {ranked} "
        f"WHERE pos <= least(greatest(n_ok, 1), {TOP_K})"
    )


def _group_avg_sql(view: str, ids: Sequence[int], us: str) -> str:
    # One row per (query, window, key) with the group's mean; window functions over the firing
    # give every group row the firing's SIC / number of groups (the group-by rule, THEMIS Eq. 3)
    # and the firing's input rows and last arrival.
    groups = (
        "(SELECT query_id, window_start, key, avg(value) AS value, count(1) AS n_group, "
        f"max(arrival_ts) AS last_group, sum(sic) AS total FROM {_windowed(view, ids, us)} "
        "GROUP BY query_id, window_start, key)"
    )
    return (
        "SELECT query_id, window_start, key, 1 AS rank, value, "
        "sum(total) OVER f / count(1) OVER f AS sic, sum(n_group) OVER f AS n_in, "
        f"max(last_group) OVER f AS last_arrival_ts FROM {groups} "
        "WINDOW f AS (PARTITION BY query_id, window_start)"
    )


#: The SQL form of each query kind that has one: ``(view, query ids, window µs expression) ->
#: SQL`` (:func:`window_us_sql`). The single-row kinds are evaluated together by one aggregation
#: (see :func:`kinds_sql`).
SQL_KINDS: dict[str, Callable[[str, Sequence[int], str], str]] = {
    **{k: functools.partial(_single_kind_sql, k) for k in _SINGLE_VALUE},
    "cov": _cov_sql,
    "top5": _top5_sql,
    "group_avg": _group_avg_sql,
}


def _result_select(body: str) -> str:
    cols = ", ".join(
        f"unix_micros({c}) AS {c}" if c in TIME_COLUMNS else f"CAST({c} AS {t}) AS {c}"
        for c, t in RESULT_TYPES.items()
    )
    return f"SELECT {cols} FROM ({body})"


def _window_us(window_s: Any) -> int:
    ok = isinstance(window_s, int | float) and not isinstance(window_s, bool)
    us = int(round(window_s * 1e6)) if ok and window_s > 0 else 0
    if us < 1 or abs(us - window_s * 1e6) > 1e-3:
        raise ConfigError(
            f"window_s must be a positive whole number of microseconds, got {window_s!r}"
        )
    return us


def kinds_sql(
    view: str, kinds: Mapping[str, Sequence[int]], window_s: float | Mapping[int, float]
) -> str:
    """One SQL statement computing every kind of ``kinds`` over the rows of the view ``view``.

    The statement returns :data:`~spillway.spark.queries.RESULT_COLUMNS` typed as
    :data:`~spillway.spark.queries.RESULT_TYPES`, except the time columns, which come as Unix
    microseconds (``bigint``). Each kind's part is the SQL form of its
    :class:`~spillway.spark.queries.QueryKind` plan (same rules, same SIC propagation, the same
    results: ``tests/spark/test_sink.py`` checks them against ``QueryKind.apply``); the kinds
    whose result is one aggregate per (query, window) (AVG, MAX, COUNT, AVG-all) share ONE
    aggregation that picks the aggregate by query id. Ids ``()`` mean every row of the view
    (one kind only). ``window_s`` is one window for every query or one per query id.

    Raises
    ------
    ConfigError
        A window is not a positive whole number of microseconds, a query has no window, or a
        kind has no SQL form (:data:`SQL_KINDS`).

    Examples
    --------
    >>> sql = kinds_sql("batch", {"avg": [0, 2], "max": [1]}, 1.0)
    >>> "WHEN query_id IN (0, 2) THEN CAST(avg(value) AS double)" in sql
    True
    >>> "pmod(unix_micros(event_ts), CASE WHEN query_id IN (0, 2) THEN 1000000" in kinds_sql(
    ...     "batch", {"avg": [0, 2], "max": [1]}, {0: 1.0, 1: 5.0, 2: 1.0})
    True
    """
    if isinstance(window_s, Mapping):
        per_query = {int(i): _window_us(w) for i, w in window_s.items()}
        ids = [i for v in kinds.values() for i in v]
        lacking = sorted(set(ids) - set(per_query))
        if lacking or not ids:
            raise ConfigError(
                f"window_s per query needs every query id of the kinds (and ids for every "
                f"kind); missing {lacking}"
            )
        windows: int | dict[int, int] = per_query
    else:
        windows = _window_us(window_s)
    missing = [k for k in kinds if k not in SQL_KINDS]
    if missing:
        raise ConfigError(f"query kinds {missing} have no SQL form; known: {sorted(SQL_KINDS)}")
    single = {k: ids for k, ids in kinds.items() if k in _SINGLE_VALUE}
    parts = []
    if single:
        all_single = [i for v in single.values() for i in v]
        parts.append(_single_sql(view, single, window_us_sql(all_single, windows)))
    parts += [
        SQL_KINDS[k](view, ids, window_us_sql(ids, windows))
        for k, ids in kinds.items()
        if k not in _SINGLE_VALUE
    ]
    return " UNION ALL ".join(_result_select(p) for p in parts)


#: Columns a log plan's rows carry beside the results' (set aside or learnt), with their types.
LOG_TYPES: dict[str, str] = {
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
    "error": "string",
    "raw": "string",
    "key_text": "string",
}
#: What a row of :func:`log_sql` is: a result, a malformed or late record, a key's text.
RESULT_PART, DEAD_LETTER_PART, KEY_TEXT_PART = 0, 1, 2


def log_sql(results: str, view: str, *, texts: bool) -> str:
    """The results of a log plan, its malformed and late rows, and (with ``texts``) its keys'
    texts, in ONE statement: one Spark job a batch instead of three.

    ``results`` is :func:`kinds_sql` over the batch's valid rows; ``view`` holds every row of
    the batch (valid or not). Each row gets the result columns, then :data:`LOG_TYPES`, then
    ``part`` (:data:`RESULT_PART`, :data:`DEAD_LETTER_PART` or :data:`KEY_TEXT_PART`), null
    where its part has no value; :func:`split_log_rows` takes them apart.

    Examples
    --------
    >>> sql = log_sql("SELECT ...", "batch", texts=False)
    >>> sql.count(" UNION ALL "), "WHERE error IS NOT NULL" in sql
    (1, True)
    >>> "SELECT DISTINCT" in log_sql("SELECT ...", "batch", texts=True)
    True
    """

    def cols(given: Mapping[str, str], part: int) -> str:
        out = [
            given.get(c, f"CAST(NULL AS {'bigint' if c in TIME_COLUMNS else t})")
            for c, t in (*RESULT_TYPES.items(), *LOG_TYPES.items())
        ]
        names = (*RESULT_TYPES, *LOG_TYPES)
        return (
            ", ".join(f"{e} AS {n}" for e, n in zip(out, names, strict=True)) + f", {part} AS part"
        )

    def same(names: Sequence[str]) -> dict[str, str]:
        return {c: c for c in names}

    statement = (
        f"SELECT {cols(same(tuple(RESULT_TYPES)), RESULT_PART)} FROM ({results}) UNION ALL "
        f"SELECT {cols(same(DEAD_LETTER_COLUMNS), DEAD_LETTER_PART)} FROM {view} "
        "WHERE error IS NOT NULL"
    )
    if texts:
        text = same(("query_id", "key", "key_text"))
        statement += (
            f" UNION ALL SELECT DISTINCT {cols(text, KEY_TEXT_PART)} FROM {view}"
            " WHERE error IS NULL AND key_text IS NOT NULL"
        )
    return statement


def split_log_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The results, the dead letters (:data:`DEAD_LETTER_COLUMNS`) and the key texts
    (``query_id, key, key_text``) of a :func:`log_sql` collect, each with its own types.

    >>> rows = pd.DataFrame({**{c: [None, None] for c in (*RESULT_TYPES, *LOG_TYPES)},
    ...                      "part": [DEAD_LETTER_PART, KEY_TEXT_PART]})
    >>> [len(x) for x in split_log_rows(rows)]
    [0, 1, 1]
    """
    part = rows["part"]
    types = {c: t for c, t in _empty_results().dtypes.items() if c != "key"}  # key: nullable
    results = rows.loc[part == RESULT_PART, list(RESULT_TYPES)].astype(types)
    bad = rows.loc[part == DEAD_LETTER_PART, list(DEAD_LETTER_COLUMNS)]
    texts = rows.loc[part == KEY_TEXT_PART, ["query_id", "key", "key_text"]]
    return (
        results.reset_index(drop=True),
        bad.reset_index(drop=True),
        texts.reset_index(drop=True),
    )


def _user_ids(kind: Any, user: Sequence[UserPart]) -> tuple[int, ...]:
    """The query ids listed under the ``user`` kind, checked against the user parts."""
    ids = tuple(int(i) for i in kind.get(USER_KIND, ())) if isinstance(kind, Mapping) else ()
    given = sorted(p.query_id for p in user)
    if sorted(ids) != given:
        raise ConfigError(
            f"the user queries {sorted(ids)} of kinds and the user parts {given} must match: "
            "give one UserPart per query id listed under 'user'"
        )
    return ids


def _empty_results() -> pd.DataFrame:
    """No rows, with the result columns (time columns as µs)."""
    types = {"int": "int32", "bigint": "int64", "double": "float64", "timestamp": "int64"}
    return pd.DataFrame({c: pd.Series(dtype=types[t]) for c, t in RESULT_TYPES.items()})


class ResultStore:
    """Thread-safe table of result rows, keyed by ``(plan, batch_id)``.

    Parameters
    ----------
    csv_path : optional CSV file that mirrors the store (header written once, rows appended
        per batch; rewritten whole when a replayed batch replaces its rows).
    resume : keep what ``csv_path`` already holds (a driver restarted from its checkpoint: a
        batch Spark runs again replaces its rows, so none is there twice); else start afresh.

    Examples
    --------
    >>> store = ResultStore()
    >>> len(store), store.to_pandas().empty
    (0, True)
    """

    def __init__(self, csv_path: str | Path | None = None, *, resume: bool = False) -> None:
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, int], pd.DataFrame] = {}
        self.csv_path = Path(csv_path) if csv_path is not None else None
        #: Called with a :class:`~spillway.events.ResultsEvent` after a batch's rows are first
        #: stored (not when a replayed batch replaces them); errors go to
        #: :attr:`listener_errors`.
        self.listeners: list[Callable[[Any], None]] = []
        self.listener_errors: list[str] = []
        if self.csv_path is not None:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            if resume and self.csv_path.exists() and self.csv_path.stat().st_size > 0:
                self._load(self.csv_path)
            else:
                self.csv_path.unlink(missing_ok=True)

    def _load(self, path: Path) -> None:
        """The batches a previous driver stored (same columns; times back to UTC)."""
        df = pd.read_csv(path)
        for c in ("window_start",):
            if c in df.columns:
                df[c] = pd.to_datetime(df[c], utc=True, format="ISO8601")
        df = with_key_dtype(df)
        for (plan, batch_id), part in df.groupby(["plan", "batch_id"], sort=False):
            self._batches[(str(plan), int(batch_id))] = part.reset_index(drop=True)

    def put(self, plan: str, batch_id: int, rows: pd.DataFrame) -> bool:
        """Store one batch's rows; True when new, False when they replace a replayed batch.

        The rows get ``plan`` and ``batch_id`` columns (first) from the key.
        """
        key = (str(plan), int(batch_id))
        frame = rows.drop(columns=["plan", "batch_id"], errors="ignore")
        frame.insert(0, "plan", key[0])
        frame.insert(1, "batch_id", key[1])
        with self._lock:
            new = key not in self._batches
            self._batches[key] = frame
            if self.csv_path is not None:
                if new:
                    header = not self.csv_path.exists()
                    frame.to_csv(self.csv_path, mode="a", header=header, index=False)
                else:
                    self._frame().to_csv(self.csv_path, index=False)
        if new and self.listeners:
            event = ResultsEvent.from_frame(key[0], key[1], frame)
            self.listener_errors += notify(self.listeners, event)
        return new

    def _frame(self) -> pd.DataFrame:
        frames = [f for f in self._batches.values() if not f.empty]
        if not frames:
            return pd.DataFrame(columns=list(STORE_COLUMNS))
        out = pd.concat(frames, ignore_index=True)
        keys = ("plan", "batch_id", "query_id", "window_start", "key", "rank")
        order = [c for c in keys if c in out]
        return out.sort_values(order, kind="stable").reset_index(drop=True)

    def to_pandas(self) -> pd.DataFrame:
        """Every stored row, sorted by plan, batch, query, window, key and rank (a copy)."""
        with self._lock:
            return self._frame()

    def rows_of(self, plan: str) -> pd.DataFrame:
        """The rows of ``plan``'s batches only (their own columns), in batch order.

        >>> store = ResultStore()
        >>> _ = store.put("a", 1, pd.DataFrame({"x": [2]})), store.put("b", 0, pd.DataFrame({"y": [1]}))
        >>> list(store.rows_of("a").columns), len(store.rows_of("c"))
        (['plan', 'batch_id', 'x'], 0)
        """
        with self._lock:
            frames = [f for (p, b), f in sorted(self._batches.items()) if p == plan]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def batches(self) -> list[tuple[str, int]]:
        """The ``(plan, batch_id)`` keys stored, in the order first seen."""
        with self._lock:
            return list(self._batches)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(f) for f in self._batches.values())


class ResultSink:
    """The ``foreachBatch`` function of one plan: results, latency, store and coordinator.

    Parameters
    ----------
    kind : what the plan evaluates: a :class:`QueryKind` or its registry name (every row of a
        batch belongs to a query of that kind), or ``{kind name: query ids}`` for a plan that
        carries queries of several kinds (:func:`kind_map`).
    window_s : tumbling window length in seconds, or one per query id (``{id: seconds}``).
    store : where result rows go.
    coordinator : optional; told about every new batch's results (Eq. 4 accounting).
    clock : returns now, as seconds (float) or an aware datetime, in the same clock as the
        rows' ``arrival_ts`` (Unix time); default :func:`time.time`.
    plan : name keying the store (default the kind's name, :data:`MIXED_PLAN` for several).
    logs : the plan reads external logs (Kafka, folders): rows with an ``error`` (malformed or
        late) are kept out of the results and handed to ``dead_letters``.
    dead_letters : ``dead_letters(batch_id, rows)`` for each batch of a plan with ``logs``.
    user : the plan's user queries (:class:`~spillway.spark.user.UserPart`), listed under the
        kind ``user`` in ``kind``; each runs the user's function on its rows of every batch
        (:func:`spillway.spark.user.evaluate`), its rows go to ``user_sinks[name]`` (if any)
        and to :attr:`user_store`, one bookkeeping row per window to ``store``.
    user_sinks : ``{query name: sink}`` (:mod:`spillway.sinks`), written before the batch's
        results are stored, so a batch whose sink write failed is run again by Spark.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.spark.queries import SOURCE_SCHEMA_DDL
    >>> from spillway.testing import ManualClock, local_spark
    >>> ddl = SOURCE_SCHEMA_DDL.replace("timestamp", "double")
    >>> df = local_spark().createDataFrame([(0, 0, 0, 4.0, 1.0, 100.2, 100.2)], ddl)
    >>> df = df.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
    ...     "arrival_ts", F.timestamp_seconds("arrival_ts"))
    >>> store = ResultStore()
    >>> sink = ResultSink("max", 1.0, store, clock=ManualClock(101.5))
    >>> sink(df, 0)
    >>> r = store.to_pandas().iloc[0]
    >>> (float(r["value"]), float(r["sic"]), round(float(r["latency_s"]), 6), str(r["window_start"]))
    (4.0, 1.0, 1.3, '1970-01-01 00:01:40+00:00')
    >>> ResultSink({"max": [0], "avg": [1]}, 1.0, store).plan
    'mixed'
    """

    def __init__(
        self,
        kind: QueryKind | str | Mapping[str, Sequence[int]],
        window_s: float | Mapping[int, float],
        store: ResultStore,
        coordinator: QueryCoordinator | None = None,
        clock: Callable[[], Any] | None = None,
        *,
        plan: str | None = None,
        logs: bool = False,
        dead_letters: Callable[[int, pd.DataFrame], None] | None = None,
        key_texts: Callable[[pd.DataFrame], None] | None = None,
        user: Sequence[UserPart] = (),
        user_sinks: Mapping[str, Sink] | None = None,
    ) -> None:
        self.user = tuple(user)
        user_ids = _user_ids(kind, self.user)
        built_in = (
            {k: v for k, v in kind.items() if k != USER_KIND} if isinstance(kind, Mapping) else kind
        )
        self.kinds = kind_map(built_in) if built_in or not user_ids else {}
        single = len(self.kinds) == 1 and not user_ids
        #: The plan's query kind when it has one built-in kind (None for several, or users').
        self.kind: QueryKind | None = (
            (kind if isinstance(kind, QueryKind) else query_kind(next(iter(self.kinds))))
            if single
            else None
        )
        self._kind_of = {i: k for k, ids in self.kinds.items() for i in ids}
        self._kind_of.update({i: USER_KIND for i in user_ids})
        self._view = f"spillway_batch_{id(self):x}"
        self._raw_view = f"spillway_raw_{id(self):x}"
        #: The statement run on every batch (:func:`kinds_sql` over the batch's view); None
        #: when the plan carries only user queries.
        self.sql = kinds_sql(self._view, self.kinds, window_s) if self.kinds else None
        self._parts = (self.sql.count(" UNION ALL ") + 1 if self.sql else 0) + len(self.user)
        self.window_s = window_s
        self.store = store
        self.coordinator = coordinator
        self.clock = clock or time.time
        if plan is None and not self.kinds:
            plan = USER_KIND
        self.plan = plan or (next(iter(self.kinds)) if single else MIXED_PLAN)
        #: Where each user query's sink writes, by query name.
        self.user_sinks: dict[str, Sink] = dict(user_sinks or {})
        #: Every user query's result rows, keyed by ``(query name, batch_id)`` (a replayed
        #: batch replaces its rows).
        self.user_store = ResultStore()
        self._user_rows: dict[str, pd.DataFrame] = {}
        #: Whether the plan reads external logs (their malformed and late rows are set aside).
        self.logs = logs
        #: Called as ``dead_letters(batch_id, rows)`` with the batch's malformed and late rows
        #: (:data:`DEAD_LETTER_COLUMNS`), before the results are stored.
        self.dead_letters = dead_letters
        self._bad = pd.DataFrame(columns=list(DEAD_LETTER_COLUMNS))
        #: Called with the batch's distinct ``query_id, key, key_text`` of a log plan (texts are
        #: only known once read: a topic's keys arrive with its records).
        self.key_texts = key_texts
        self._texts = pd.DataFrame(columns=["query_id", "key", "key_text"])

    def _collect(self, batch_df: DataFrame, batch_id: int = -1) -> pd.DataFrame:
        """Run :attr:`sql` over the batch in one Spark job, and each user query's function;
        time columns as int64 µs."""
        missing = [c for c in SOURCE_COLUMNS if c not in batch_df.columns]
        if missing:
            raise ConfigError(
                f"plan {self.plan!r} needs the source columns {', '.join(SOURCE_COLUMNS)}; "
                f"missing {', '.join(missing)}: read the rows from the spillway source"
            )
        raw = batch_df
        # Rows of logs may be malformed or late: they are set aside, and the keys' texts
        # learnt, in the results' own job (log_sql) when the plan has built-in kinds.
        fused = self.logs and self.sql is not None
        if self.logs:
            raw = batch_df.persist()  # read the log once, whatever reads the batch after
            if fused:
                raw.createOrReplaceTempView(self._raw_view)
            else:
                self._bad = raw.filter("error IS NOT NULL").select(*DEAD_LETTER_COLUMNS).toPandas()
                if self.key_texts is not None:
                    self._texts = self._text_rows(raw).toPandas()
            raw = raw.filter("error IS NULL")
        records = any(p.record_schema is not None for p in self.user)
        cols = (*SOURCE_COLUMNS, *(("raw", *RECORD_ORIGIN) if records else ()))
        rows = raw.select(*cols).repartition("query_id")
        if self._parts > 1:
            rows = rows.persist()
        session = rows.sparkSession
        books = []
        try:
            if self.sql is not None:
                rows.createOrReplaceTempView(self._view)
                if fused:
                    texts = self.key_texts is not None
                    whole = session.sql(log_sql(self.sql, self._raw_view, texts=texts)).toPandas()
                    pdf, self._bad, self._texts = split_log_rows(whole)
                else:
                    pdf = session.sql(self.sql).toPandas()
            else:
                pdf = _empty_results()
            fired = firings(rows, self.user) if self.user else None
            for part in self.user:
                self._user_rows[part.name], book = evaluate(part, rows, batch_id, fired)
                books.append(book)
        finally:
            if self.sql is not None:
                session.catalog.dropTempView(self._view)
            if fused:
                session.catalog.dropTempView(self._raw_view)
            if self._parts > 1:
                rows.unpersist()
            if self.logs:
                batch_df.unpersist()
        if books:
            pdf = pd.concat([f for f in (pdf, *books) if len(f)] or [pdf], ignore_index=True)
        for c in TIME_COLUMNS:
            pdf[c] = pdf[c].astype("int64")
        return with_key_dtype(pdf)

    @staticmethod
    def _text_rows(raw: DataFrame) -> DataFrame:
        return (
            raw.filter("error IS NULL AND key_text IS NOT NULL")
            .select("query_id", "key", "key_text")
            .distinct()
        )

    def _kinds_of(self, query_ids: pd.Series) -> pd.Series | str:
        if self.kind is not None:
            return self.kind.name
        return query_ids.astype("int64").map(self._kind_of)

    def results(self, batch_df: DataFrame) -> pd.DataFrame:
        """Every kind's results of one batch as pandas with a ``kind`` column, without stamps."""
        pdf = self._collect(batch_df)
        for c in TIME_COLUMNS:
            pdf[c] = pd.to_datetime(pdf[c], unit="us", utc=True)
        pdf.insert(0, "kind", self._kinds_of(pdf["query_id"]))
        return pdf

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Process one micro-batch (the ``foreachBatch`` signature)."""
        pdf = self._collect(batch_df, batch_id)
        produced_at = _seconds(self.clock())
        pdf["produced_at"] = produced_at
        pdf["latency_s"] = produced_at - pdf["last_arrival_ts"] / 1e6
        for c in TIME_COLUMNS:
            pdf[c] = pd.to_datetime(pdf[c], unit="us", utc=True)
        pdf.insert(0, "kind", self._kinds_of(pdf["query_id"]))
        if self.logs and self.dead_letters is not None:
            self.dead_letters(batch_id, self._bad)  # idempotent per batch id (the node's)
        if self.logs and self.key_texts is not None and len(self._texts):
            self.key_texts(self._texts)
        for name, rows in self._user_rows.items():
            sink = self.user_sinks.get(name)
            if sink is not None:
                sink.write(batch_id, rows)
            self.user_store.put(name, batch_id, rows)
        self._user_rows = {}
        if self.store.put(self.plan, batch_id, pdf) and self.coordinator is not None:
            self.coordinator.record(pdf)
