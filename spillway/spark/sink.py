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
   exchange) and, when the statement reads it more than once (several parts, a log's
   set-aside rows, user functions), persisted once, so the spillway source, whose readers
   regenerate, sample or fetch tuples in Python, is read once (Spark pushes each part's
   filter below a shared exchange, so each part would scan the source again);
2. ONE SQL statement (:func:`~spillway.spark.statement.kinds_sql`, built once when the sink is
   made) computes every kind: each kind's SQL (:attr:`~spillway.spark.queries.QueryKind.sql`,
   the kind's one implementation) over ``query_id IN (its ids)``, the kinds whose result is one
   aggregate per (query, window) (AVG, MAX, COUNT, AVG-all) fused into one aggregation,
   TOP-5, COV and GROUP-AVG each their own SQL whose rows carry their firing's totals (input
   SIC, rows, last arrival per query and window), and one aggregation giving the firings of
   the user queries; the parts unioned, collected in ONE job; then the batch is unpersisted
   (a plan of one kind is one part: nothing to persist, one job reads the source). The
   result rows get their SIC from their firing in pandas
   (:func:`~spillway.spark.statement.share_firings`, THEMIS Eq. 3), by the same rule as a
   user query's rows.
3. a plan that reads logs (Kafka topics, folders): the same statement (:func:`log_sql`) also
   returns its malformed and late rows (the dead letters) and, when its keys are text, the
   texts of the keys it saw: still ONE job a batch. Each was a job of its own before; with
   three collects a Kafka COUNT batch cost 1.25 s fixed (BENCHMARKS.md §4, ``spillway bench
   --only kafka --quick``), with one, 0.9-1.1 s.
4. the batch is one temporary view and the rest is SQL text (each DataFrame call is a py4j
   round trip, 2-3 ms each on a loaded machine), and the statement is planned without
   adaptive execution (:data:`ADAPTIVE`; the stream's setting is put back after): with one
   exchange there is nothing to adapt, and planning stage by stage cost about 0.3 s a batch.
   The ``overload`` experiment's Kafka node (``scripts/profile_kafka_batch.py --rate 30000
   --keep-all --duration 40``, 60,000 rows a batch): ``addBatch`` 1.11 s before, 0.89 s after.

The kinds are SQL because a DataFrame plan built in Python costs hundreds of py4j calls and
an analysis per call on every batch. Measured on ``local[2]`` (another Spark job sharing the
two cores, load about 6) with the 15 queries of the default mix, 4,000 rows per batch, median
``addBatch``: DataFrame plans, persisted, unioned: 2.7 s; SQL, repartitioned, persisted,
unioned, one collect: 1.0-1.6 s; SQL without persisting: 2.1 s. TOP-5 ranks its machines with
window functions over the firing, not a join, so no exchange follows the repartition.

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
    SOURCE_COLUMNS,
    QueryKind,
    collect_pandas,
    query_kind,
    with_key_dtype,
)
from spillway.spark.statement import (
    RESULT_COLUMNS,
    RESULT_TYPES,
    TIME_COLUMNS,
    firing_rows,
    kinds_sql,
    share_firings,
)
from spillway.spark.user import RECORD_ORIGIN, UserPart, evaluate

#: Spark's adaptive query execution: off for the sink's statement (planning its stages one by
#: one cost about 0.3 s of a Kafka batch of 60,000 rows; the statement has one exchange).
ADAPTIVE = "spark.sql.adaptive.enabled"

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
    results = rows.loc[part == RESULT_PART, list(RESULT_TYPES)]
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

        The rows get ``plan`` and ``batch_id`` columns (first) from the key. A new batch's
        listeners run before its rows reach the CSV mirror: a driver killed in between finds
        the batch missing from the mirror when it resumes, so the batch Spark runs again is
        new there and its listeners run again (a federated node's link writes and reports
        recognise a batch they already handled), where the other order would leave a batch
        stored whose listeners never ran (its rows never sent on to the next node).
        """
        key = (str(plan), int(batch_id))
        frame = rows.drop(columns=["plan", "batch_id"], errors="ignore")
        frame.insert(0, "plan", key[0])
        frame.insert(1, "batch_id", key[1])
        with self._lock:
            new = key not in self._batches
            self._batches[key] = frame
        if new and self.listeners:
            event = ResultsEvent.from_frame(key[0], key[1], frame)
            self.listener_errors += notify(self.listeners, event)
        if self.csv_path is not None:
            with self._lock:
                if new:
                    header = not self.csv_path.exists()
                    frame.to_csv(self.csv_path, mode="a", header=header, index=False)
                else:
                    self._frame().to_csv(self.csv_path, index=False)
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
        #: The statement run on every batch (:func:`~spillway.spark.statement.kinds_sql` over
        #: the batch's view): the built-in kinds' results and the firings of every query.
        self.sql = kinds_sql(self._view, self.kinds, window_s, firing_ids=user_ids)
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
        self._all_view = f"spillway_all_{id(self):x}"
        records = any(p.record_schema is not None for p in self.user)
        names = (*SOURCE_COLUMNS, *(("raw", *RECORD_ORIGIN) if records else ()))
        cols = ", ".join(names)
        #: The batch's rows, the columns the statement reads (a log's also those of its
        #: set-aside rows), repartitioned by query id: the one exchange of a batch (every later
        #: aggregate groups by query id and more).
        if logs:
            names += ("key_text", *DEAD_LETTER_COLUMNS)
        kept = ", ".join(dict.fromkeys(names))
        self._all_sql = f"SELECT {kept} FROM {self._raw_view} DISTRIBUTE BY query_id"
        #: The rows the queries read (of a log, the valid ones; its malformed and late rows are
        #: set aside, and its keys' texts learnt, by the same statement: :func:`log_sql`).
        self._rows_sql = f"SELECT {cols} FROM {self._all_view}" + (
            " WHERE error IS NULL" if logs else ""
        )
        self._statement = (
            log_sql(self.sql, self._all_view, texts=key_texts is not None) if logs else self.sql
        )
        #: Whether the batch is read more than once a batch (several parts, a log's set-aside
        #: rows, user functions), and so persisted.
        self._persist = bool(self.user) or " UNION ALL " in self._statement

    def _collect(self, batch_df: DataFrame, batch_id: int = -1) -> pd.DataFrame:
        """Run :attr:`sql` over the batch in one Spark job, and each user query's function;
        time columns as int64 µs."""
        missing = [c for c in SOURCE_COLUMNS if c not in batch_df.columns]
        if missing:
            raise ConfigError(
                f"plan {self.plan!r} needs the source columns {', '.join(SOURCE_COLUMNS)}; "
                f"missing {', '.join(missing)}: read the rows from the spillway source"
            )
        session = batch_df.sparkSession
        books = []
        rows = whole = None
        batch_df.createOrReplaceTempView(self._raw_view)
        try:
            if self._persist:
                # The statement's parts (and each user function) read the batch: persisted,
                # so the source is read once (Spark pushes each part's filters below a shared
                # exchange, so without it each part would scan the source again).
                whole = session.sql(self._all_sql).persist()
                whole.createOrReplaceTempView(self._all_view)
                statement = f"WITH {self._view} AS ({self._rows_sql}) {self._statement}"
            else:
                statement = (
                    f"WITH {self._all_view} AS ({self._all_sql}), "
                    f"{self._view} AS ({self._rows_sql}) {self._statement}"
                )
            if self.user:
                rows = session.sql(self._rows_sql)
            stmt = self._run(session, statement)
            if self.logs:
                stmt, self._bad, self._texts = split_log_rows(stmt)
            if self.user:
                users = stmt["query_id"].isin([p.query_id for p in self.user])
                pdf = share_firings(stmt[~users])
                fired = firing_rows(stmt[users]).sort_values(["query_id", "window_start"])
                for part in self.user:
                    assert rows is not None
                    self._user_rows[part.name], book = evaluate(part, rows, batch_id, fired)
                    books.append(book)
            else:
                pdf = share_firings(stmt)
        finally:
            session.catalog.dropTempView(self._raw_view)
            if whole is not None:
                session.catalog.dropTempView(self._all_view)
                whole.unpersist()
        if books:
            pdf = pd.concat([f for f in (pdf, *books) if len(f)] or [pdf], ignore_index=True)
        for c in TIME_COLUMNS:
            pdf[c] = pdf[c].astype("int64")
        return with_key_dtype(pdf)

    @staticmethod
    def _run(session: Any, statement: str) -> pd.DataFrame:
        """``statement`` collected to pandas, planned without adaptive execution (the setting
        of the stream's own session is put back after)."""
        conf = session.conf
        adaptive = conf.get(ADAPTIVE, None)
        conf.set(ADAPTIVE, "false")
        try:
            return collect_pandas(session.sql(statement))
        finally:
            if adaptive is None:
                conf.unset(ADAPTIVE)
            else:
                conf.set(ADAPTIVE, adaptive)

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
