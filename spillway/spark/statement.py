"""The one SQL statement a batch runs for its built-in queries, and how its firings share SIC.

Every built-in query kind is written once, as SQL over the rows of its queries
(:attr:`spillway.spark.queries.QueryKind.sql`, with ``{rows}`` standing for them: the source
columns plus ``window_start``). :func:`kinds_sql` puts the kinds of a plan into ONE statement
(one parse, one analysis and one Spark job a batch, whatever the number of queries):

- the kinds whose result is one aggregate per (query, window) (AVG, MAX, COUNT, AVG-all: a
  :attr:`~spillway.spark.queries.QueryKind.aggregate`) share ONE aggregation that picks the
  aggregate by query id; each of its rows is a result and its window's firing at once;
- every other kind's SQL (:attr:`~spillway.spark.queries.QueryKind.sql`: TOP-5, COV, the
  grouped aggregate GROUP-AVG) gives its result rows, each carrying its firing's totals (the
  window's summed input SIC, input rows and last arrival: partial sums per group of the
  kind's own grouping, added up over the firing), and a row with ``rank`` null for a firing
  without a result; so a plan of one kind is one part, one read of the batch;
- one aggregation over the rows of ``firing_ids`` (the plan's user queries, whose results
  come from their own functions) gives one firing row per (query, window).

A statement row is a result when its ``rank`` is set and a firing when its ``n_in`` is set.
:func:`share_firings` then gives every result row its SIC by the one rule of THEMIS Eq. 3 for a
firing (an operator firing per window: its outputs share the SIC of its inputs equally,
``sum(sic of w's inputs) / (result rows of w)``) and leaves a marker row (``rank`` 0, ``value``
null) with the whole SIC of a window that has inputs but no result (DISSP §3.2 Assumption 6: an
empty answer is an answer). The user queries' results get their SIC from the same function
(:func:`spillway.spark.user.share_sic`). For the seven built-in kinds this rule gives what
chaining the operator rules of :mod:`spillway.spark.sic_ops` gives: the aggregate, COV and
GROUP-AVG rows ``sum / rows`` of the window, TOP-5's group-bys, join, filter and top-k
``sum / min(qualifying machines, 5)``.

Examples
--------
>>> sql = kinds_sql("batch", {"avg": [0, 2], "max": [1]}, 1.0)
>>> "WHEN query_id IN (0, 2) THEN CAST(avg(value) AS double)" in sql
True
>>> rows = pd.DataFrame({"query_id": [0, 0, 0, 1], "window_start": [5, 5, 5, 5],
...     "key": [None, 3, 4, None], "rank": [None, 1, 1, None], "value": [None, 1.0, 2.0, None],
...     "sic": [0.8, None, None, 0.3], "n_in": [6, None, None, 2],
...     "last_arrival_ts": [9, None, None, 7]})
>>> share_firings(rows)[["query_id", "key", "rank", "sic", "n_in"]].values.tolist()
[[0, 3, 1, 0.4, 6], [0, 4, 1, 0.4, 6], [1, <NA>, 0, 0.3, 2]]

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §4, Eq. 3; Fiscato, PhD thesis 2012 (DISSP) §3.2
Assumption 6.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import ConfigError

#: Result columns and their Spark types, in order (the contract every query kind keeps).
RESULT_TYPES: dict[str, str] = {
    "query_id": "int",
    "window_start": "timestamp",
    "key": "bigint",
    "rank": "int",
    "value": "double",
    "sic": "double",
    "n_in": "bigint",
    "last_arrival_ts": "timestamp",
}
#: Result column names, in order.
RESULT_COLUMNS: tuple[str, ...] = tuple(RESULT_TYPES)
#: Result columns that hold timestamps.
TIME_COLUMNS: tuple[str, ...] = ("window_start", "last_arrival_ts")
#: The columns that identify a firing (one logical query's tumbling window).
FIRING: tuple[str, ...] = ("query_id", "window_start")


def window_us(window_s: Any) -> int:
    """A window length in whole microseconds.

    Raises
    ------
    ConfigError
        ``window_s`` is not a positive whole number of microseconds.

    >>> window_us(0.5)
    500000
    """
    ok = isinstance(window_s, int | float) and not isinstance(window_s, bool)
    us = int(round(window_s * 1e6)) if ok and window_s > 0 else 0
    if us < 1 or abs(us - window_s * 1e6) > 1e-3:
        raise ConfigError(
            f"window_s must be a positive whole number of microseconds, got {window_s!r}"
        )
    return us


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


def windowed(view: str, ids: Sequence[int], us: str) -> str:
    """The rows of queries ``ids`` of ``view`` (every row for ``()``) with their
    ``window_start`` (``floor(event_ts / window) * window``), as a SQL subquery."""
    where = f" WHERE query_id IN ({_ids(ids)})" if ids else ""
    t = "unix_micros(event_ts)"
    return f"(SELECT *, timestamp_micros({t} - pmod({t}, {us})) AS window_start FROM {view}{where})"


#: A firing's totals over its input rows: summed input SIC, input rows, last arrival.
FIRING_STATS = "sum(sic) AS sic, count(1) AS n_in, max(arrival_ts) AS last_arrival_ts"


def _aggregates_sql(view: str, aggregates: Mapping[str, Sequence[int]], us: str) -> str:
    if len(aggregates) == 1:
        value = next(iter(aggregates))
    else:
        value = (
            "CASE "
            + " ".join(
                f"WHEN query_id IN ({_ids(ids)}) THEN CAST({expr} AS double)"
                for expr, ids in aggregates.items()
            )
            + " END"
        )
    ids = [i for v in aggregates.values() for i in v]
    return aggregate_sql(windowed(view, ids, us), value)


def aggregate_sql(rows: str, value: str) -> str:
    """The SQL of one aggregate ``value`` per (query, window) over ``rows``: each row a result
    and its firing at once.

    >>> "GROUP BY query_id, window_start" in aggregate_sql("{rows}", "max(value)")
    True
    """
    return (
        "SELECT query_id, window_start, CAST(NULL AS bigint) AS key, 1 AS rank, "
        f"{value} AS value, {FIRING_STATS} FROM {rows} GROUP BY query_id, window_start"
    )


#: A group of a firing's input rows, summed so that its firing's totals can be added up from
#: its groups (a query kind's SQL groups its rows once, then adds the groups up: by
#: :data:`FIRING_SUMS` in an aggregation over the firing, by :data:`FIRING_TOTALS` on every row).
PARTIAL_SUMS = "sum(sic) AS s, count(1) AS n, max(arrival_ts) AS l"
#: A firing's totals from its groups' :data:`PARTIAL_SUMS`, grouped by query and window.
FIRING_SUMS = "sum(s) AS sic, sum(n) AS n_in, max(l) AS last_arrival_ts"
#: The same on every group row, by window functions over the firing :data:`FIRING_WINDOW`.
FIRING_TOTALS = "sum(s) OVER f AS sic, sum(n) OVER f AS n_in, max(l) OVER f AS last_arrival_ts"
#: The window ``f`` of :data:`FIRING_TOTALS`: one firing (query, window).
FIRING_WINDOW = "WINDOW f AS (PARTITION BY query_id, window_start)"


def grouped_sql(rows: str, expr: str, by: str) -> str:
    """The SQL of an aggregate ``expr`` per (query, window, ``by``) over ``rows``: one row per
    group with the group's totals, then the firing's totals on every group row by window
    functions over (query, window): no aggregation of its own for the firings, no exchange
    beyond the batch's repartition by query id.

    >>> "GROUP BY query_id, window_start, key" in grouped_sql("{rows}", "avg(value)", "key")
    True
    """
    groups = (
        f"(SELECT query_id, window_start, {by} AS key, {expr} AS value, {PARTIAL_SUMS} "
        f"FROM {rows} GROUP BY query_id, window_start, {by})"
    )
    return (
        f"SELECT query_id, window_start, key, 1 AS rank, value, {FIRING_TOTALS} FROM {groups} "
        f"{FIRING_WINDOW}"
    )


def _firings_sql(rows: str) -> str:
    return (
        "SELECT query_id, window_start, CAST(NULL AS bigint) AS key, CAST(NULL AS int) AS rank, "
        f"CAST(NULL AS double) AS value, {FIRING_STATS} FROM {rows} "
        "GROUP BY query_id, window_start"
    )


def _typed(body: str) -> str:
    cols = ", ".join(
        f"unix_micros({c}) AS {c}" if c in TIME_COLUMNS else f"CAST({c} AS {t}) AS {c}"
        for c, t in RESULT_TYPES.items()
    )
    return f"SELECT {cols} FROM ({body})"


def kinds_sql(
    view: str,
    kinds: Mapping[str, Sequence[int]],
    window_s: float | Mapping[int, float],
    *,
    firing_ids: Sequence[int] = (),
) -> str:
    """One SQL statement computing every kind of ``kinds`` over the rows of the view ``view``,
    with the firing rows :func:`share_firings` needs.

    Parameters
    ----------
    view : the view holding the batch's source rows.
    kinds : ``{kind name: query ids}`` (ids ``()``: every row of the view, one kind only).
    window_s : one window for every query, or one per query id (every id of ``kinds`` and
        ``firing_ids``).
    firing_ids : more queries (the plan's user queries) whose firing rows the statement gives.

    Returns
    -------
    str
        A statement giving :data:`RESULT_COLUMNS` typed as :data:`RESULT_TYPES`, except the time
        columns, which come as Unix microseconds (``bigint``); ``sic`` of a result row is left
        to :func:`share_firings` unless the row is also its firing.

    Raises
    ------
    ConfigError
        A window is not a positive whole number of microseconds, or a query has no window.
    UnknownNameError
        A kind is not in :data:`spillway.spark.queries.QUERIES`.

    Examples
    --------
    >>> "pmod(unix_micros(event_ts), CASE WHEN query_id IN (0, 2) THEN 1000000" in kinds_sql(
    ...     "batch", {"avg": [0, 2], "max": [1]}, {0: 1.0, 1: 5.0, 2: 1.0})
    True
    >>> kinds_sql("batch", {"top5": [0]}, 1.0, firing_ids=[1]).count(" UNION ALL ")
    1
    """
    from spillway.spark.queries import query_kind

    ids_all = [i for v in kinds.values() for i in v] + [int(i) for i in firing_ids]
    if isinstance(window_s, Mapping):
        per_query = {int(i): window_us(w) for i, w in window_s.items()}
        lacking = sorted(set(ids_all) - set(per_query))
        if lacking or not ids_all:
            raise ConfigError(
                f"window_s per query needs every query id of the kinds (and ids for every "
                f"kind); missing {lacking}"
            )
        windows: int | dict[int, int] = per_query
    else:
        windows = window_us(window_s)
    aggregates: dict[str, list[int]] = {}
    parts, fired = [], [int(i) for i in firing_ids]
    for name, ids in kinds.items():
        kind = query_kind(name)
        if kind.aggregate is not None and kind.group_by is None:
            aggregates.setdefault(kind.aggregate, []).extend(ids)
        else:  # its rows carry their firing's totals (QueryKind.sql)
            parts.append(kind.sql.format(rows=windowed(view, ids, window_us_sql(ids, windows))))
    if aggregates:
        agg_ids = [i for v in aggregates.values() for i in v]
        parts.insert(0, _aggregates_sql(view, aggregates, window_us_sql(agg_ids, windows)))
    if fired:
        parts.append(_firings_sql(windowed(view, fired, window_us_sql(fired, windows))))
    return " UNION ALL ".join(_typed(p) for p in parts)


def share_firings(rows: pd.DataFrame) -> pd.DataFrame:
    """The result rows of a :func:`kinds_sql` collect, each with its SIC (THEMIS Eq. 3), its
    window's input rows and last arrival; a marker row for a window without a result.

    Parameters
    ----------
    rows : the statement's rows (time columns as int64 µs): results (``rank`` set) and firings
        (``n_in`` set); a row may be both.

    Returns
    -------
    pandas.DataFrame
        :data:`RESULT_COLUMNS` (``key`` pandas' nullable ``Int64``, time columns int64 µs),
        ordered by query, window, key and rank.

    Raises
    ------
    ConfigError
        A result row belongs to no firing (a kind's SQL re-windowed its rows).
    """
    # In numpy, not pandas: this runs on the driver in every micro-batch of a plan, and the
    # same steps as pandas merges, reindexes and casts of a few dozen rows cost ten times more.
    q = rows["query_id"].to_numpy(dtype=np.int64)
    w = rows["window_start"].to_numpy(dtype=np.int64)
    pairs, firing = np.unique(np.stack([q, w], axis=1), axis=0, return_inverse=True)
    firing = firing.reshape(-1)  # each row's (query, window)
    first = np.full(len(pairs), -1, dtype=np.int64)  # the row that carries each firing's totals
    carries = np.flatnonzero(rows["n_in"].notna().to_numpy())
    seen, at = np.unique(firing[carries], return_index=True)
    first[seen] = carries[at]
    res = np.flatnonzero(rows["rank"].notna().to_numpy())
    unknown = int((first[firing[res]] < 0).sum())
    if unknown:
        raise _rewindowed("a built-in query", unknown)
    n_out = np.bincount(firing[res], minlength=len(pairs))
    empty = np.flatnonzero((first >= 0) & (n_out == 0))  # a marker row each
    by = np.concatenate([first[firing[res]], first[empty]])  # each output row's firing row
    n_m = len(empty)

    def column(values: pd.Series, dtype: Any, na: Any) -> np.ndarray:
        """The result rows' ``values``, then ``na`` for every marker."""
        got = values.to_numpy(dtype=dtype, na_value=na)[res]
        return np.concatenate([got, np.full(n_m, na, dtype=dtype)])

    key = rows["key"].astype("Int64")
    out = pd.DataFrame(
        {
            "query_id": np.concatenate([q[res], pairs[empty, 0]]).astype(np.int32),
            "window_start": np.concatenate([w[res], pairs[empty, 1]]),
            "key": pd.arrays.IntegerArray(
                column(key, np.int64, 0),
                np.concatenate([key.isna().to_numpy()[res], np.ones(n_m, bool)]),
            ),
            "rank": column(rows["rank"], np.int64, 0).astype(np.int32),
            "value": column(rows["value"], np.float64, np.nan),
            "sic": rows["sic"].to_numpy(dtype=np.float64, na_value=np.nan)[by]
            / np.concatenate([n_out[firing[res]], np.ones(n_m, np.int64)]),
            "n_in": rows["n_in"].to_numpy(dtype=np.int64, na_value=0)[by],
            "last_arrival_ts": rows["last_arrival_ts"].to_numpy(dtype=np.int64, na_value=0)[by],
        }
    )
    k = out["key"]
    order = np.lexsort(
        (out["rank"].to_numpy(), k.to_numpy(dtype=np.int64, na_value=0), k.notna().to_numpy(),
         out["window_start"].to_numpy(), out["query_id"].to_numpy())
    )  # fmt: skip
    return out.take(order).reset_index(drop=True)


def _rewindowed(what: str, n: int) -> ConfigError:
    """The error for ``n`` result rows of ``what`` whose window is none of the input's."""
    return ConfigError(
        f"{what}: {n} result row(s) have a window_start that is not a window of the input "
        "rows; keep the rows' window_start (group by it) so each result row's SIC comes from "
        "its own window"
    )


def firing_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The firings among a :func:`kinds_sql` collect's rows: ``query_id``, ``window_start``
    (µs), ``sic_in`` (the window's input SIC mass), ``n_in`` and ``last_arrival_ts`` (µs).

    >>> rows = pd.DataFrame({"query_id": [0, 0], "window_start": [5, 5], "rank": [1, None],
    ...     "sic": [None, 0.5], "n_in": [None, 3.0], "last_arrival_ts": [None, 9.0]})
    >>> firing_rows(rows).to_dict("records")
    [{'query_id': 0, 'window_start': 5, 'sic_in': 0.5, 'n_in': 3, 'last_arrival_ts': 9}]
    """
    fired = rows.loc[rows["n_in"].notna(), [*FIRING, "sic", "n_in", "last_arrival_ts"]]
    fired = fired.drop_duplicates(list(FIRING))  # a grouped aggregate's rows carry it each
    types = {"query_id": "int32", "window_start": "int64", "n_in": "int64"}
    fired = fired.rename(columns={"sic": "sic_in"}).astype({**types, "last_arrival_ts": "int64"})
    return fired.reset_index(drop=True)


def share_sic(
    out: pd.DataFrame,
    fired: pd.DataFrame,
    *,
    by: Sequence[str],
    what: str,
    carry: Sequence[str] = ("n_in", "last_arrival_ts"),
) -> pd.DataFrame:
    """Each result row's SIC: its firing's input SIC mass over the firing's result rows (THEMIS
    Eq. 3 with one firing per window and query), with the firing's ``carry`` columns.

    Parameters
    ----------
    out : result rows, with the columns ``by``.
    fired : one row per firing: the columns ``by``, ``sic_in``, ``n_in``, ``last_arrival_ts``.
    by : the columns naming a firing.
    what : the query, for the error message.
    carry : the columns of ``fired`` each result row gets from its firing.

    Raises
    ------
    ConfigError
        A result row's firing is not among ``fired`` (its ``window_start`` is not a window of
        the input: the rows were re-windowed).

    Examples
    --------
    >>> out = pd.DataFrame({"window_start": [10, 10, 11], "mean": [1.0, 2.0, 3.0]})
    >>> fired = pd.DataFrame({"window_start": [10, 11, 12], "sic_in": [0.8, 0.3, 0.5],
    ...                       "n_in": [4, 1, 2], "last_arrival_ts": [1, 2, 3]})
    >>> share_sic(out, fired, by=["window_start"], what="q")["sic"].tolist()
    [0.4, 0.4, 0.3]
    """
    keys = list(by)
    stats = fired.set_index(keys)[["sic_in", *carry]]
    idx = pd.MultiIndex.from_frame(out[keys]) if len(keys) > 1 else pd.Index(out[keys[0]])
    unknown = ~idx.isin(stats.index)
    if unknown.any():
        raise _rewindowed(what, int(unknown.sum()))
    n_out = out.groupby(keys, sort=False)[keys[0]].transform("size").to_numpy()
    got = stats.reindex(idx)
    shared = {"sic": got["sic_in"].to_numpy(dtype=np.float64) / n_out}
    shared |= {c: got[c].to_numpy() for c in carry}
    return out.drop(columns=["sic"], errors="ignore").assign(**shared)
