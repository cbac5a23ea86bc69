"""The THEMIS Table 1 queries and CoD's grouped aggregate, each written once as SQL.

Every kind is one SQL text (:attr:`QueryKind.sql`) over ``{rows}``: the rows of the spillway
source of all logical queries of that kind (told apart by ``query_id``) with their tumbling
``window_start = floor(event_ts / window_s) * window_s`` (aligned with the micro-batches). It
gives the kind's result rows, ``query_id, window_start, key, rank, value``, each with its
firing's totals (``sic``, ``n_in``, ``last_arrival_ts``: the window's input SIC, input rows and
last arrival), and no SIC of its own: every kind, like a user's query
(:mod:`spillway.spark.user`), is one operator firing per (query, window), and its result rows
share the SIC of the firing's input rows equally (THEMIS Eq. 3; :mod:`spillway.spark.statement`,
which also puts all the kinds of a plan into one statement). The same statement serves a
node's sink and :meth:`QueryKind.apply` (exact answers, tests). Result columns
(:data:`RESULT_COLUMNS`, the contract every query kind keeps):

==================  =========  =============================================================
column              type       meaning
==================  =========  =============================================================
``query_id``        int        the logical query
``window_start``    timestamp  start of the tumbling window
``key``             bigint     the group key for a grouped kind (``group_avg``), null otherwise
``rank``            int        1..k for ``top5`` (0 on an empty-result marker), 1 otherwise
``value``           double     the result (avg, max, count, covariance, machine id for top5,
                               the group's mean for ``group_avg``)
``sic``             double     result-tuple SIC (THEMIS Eq. 3 propagation)
``n_in``            long       input rows of the window (what survived shedding)
``last_arrival_ts`` timestamp  latest arrival among the window's input rows
==================  =========  =============================================================

One row per (query, window) that has input rows, except ``top5`` (up to 5) and ``group_avg``
(one per group present). A window without input rows emits nothing, whatever the kind (there is
no firing); a window with inputs but no result row (TOP-5 with no qualifying machine) emits one
marker row (``rank`` 0, ``value`` null) with the window's whole SIC. So the rows of a window
always carry the SIC of all its input rows between them; the rule gives each kind what chaining
its operators' rules (:mod:`spillway.spark.sic_ops`, :mod:`spillway.quality.propagation`)
gives:

- ``avg``, ``max``, ``avg_all``: one aggregate row carrying the window's whole input SIC.
  ``avg_all`` averages the union of its sources' tuples (``Avg(t.v) from AllSrc``); the union
  is pass-through for SIC, so it is the same plan as ``avg`` over more sources.
- ``count``: number of values ``>= 50``. The predicate is folded into the aggregate (a
  conditional count), so the row is emitted even when no value passes (count 0) and carries
  the SIC of *all* the window's inputs: the HAVING does not lose SIC (DISSP §3.2, Assumption 6).
- ``cov``: sample covariance of the values of sources 0 and 1. Samples are paired by position:
  the i-th tuple of source 0 with the i-th tuple of source 1 in arrival order within the window
  (ties broken by event time, value, key); ``min(n0, n1)`` pairs. Under uniform shedding both
  sources keep a similar spread of tuples, so the pairs stay roughly aligned in time. The row
  is emitted for every window with inputs (value null with fewer than 2 pairs) and carries the
  window's whole input SIC. Rows of other sources count as inputs but not in the covariance.
  Pairing by position needs no timestamps to match; its cost is that under heavy shedding the
  i-th kept tuples of the two sources can be further apart in time than the i-th originals.
- ``top5``: cluster feed; source ``2m`` is the CPU % of machine ``m``, source ``2m+1`` its free
  memory in KB, and ``key`` the machine id. Per window: average CPU and free memory per machine
  (group-by), join on machine, keep free memory ``>= 100,000`` KB, rank machines by largest
  available CPU (``100 - CPU %``, i.e. lowest CPU first; ties by lower machine id), keep 5.
  ``value`` is the machine id, ``rank`` 1..5. Chaining the group-by, join, filter and top-k
  rules of :mod:`~spillway.spark.sic_ops` gives each row ``sum(sic of the window's inputs) /
  rows`` (``/ 5`` with 5 or more qualifying machines), the firing rule itself
  (``tests/spark/test_sic_ops.py`` checks the chain against it). A window where no machine
  qualifies emits the marker row: an empty result is an answer, not lost data (DISSP §3.2
  Assumption 6).
- ``group_avg`` (CoD's grouped aggregate: mean fare per route, mean CPU request per task class;
  ``Select key, Avg(t.v) From Src[Range 1 sec] Group By key``): per (query, window, ``key``) the
  mean of the values; one row per group present in the window (``rank`` 1, ``key`` the group,
  ``value`` its mean). SIC follows the group-by rule of :func:`~spillway.spark.sic_ops.sic_group_by`
  (:func:`spillway.quality.propagation.group_by`, THEMIS Eq. 3 read literally): each of the
  window's G group rows carries ``sum(sic of the window's inputs) / G``, uniform over the rows,
  not proportional to a group's own input, so the rows of a window carry its whole input SIC
  between them. ``n_in`` and ``last_arrival_ts`` are the window's (all its groups), as for
  ``top5``: latency and input counts are per window. A group always has input rows, so a window
  with inputs has at least one row and needs no marker.

Examples
--------
>>> from pyspark.sql import functions as F
>>> from spillway.testing import local_spark
>>> rows = [(0, 0, 0, v, 0.25, t, t) for v, t in [(40.0, 0.1), (60.0, 0.4), (70.0, 0.6), (90.0, 0.9)]]
>>> df = local_spark().createDataFrame(rows, SOURCE_SCHEMA_DDL.replace("timestamp", "double"))
>>> df = df.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
...     "arrival_ts", F.timestamp_seconds("arrival_ts"))
>>> r = QUERIES["count"].apply(df, 1.0).iloc[0]
>>> (float(r.value), float(r.sic), int(r.n_in))
(3.0, 1.0, 4)
>>> float(QUERIES["avg"].apply(df, 1.0).iloc[0].value)
65.0
>>> df = df.withColumn("key", (F.col("value") >= 50).cast("long"))
>>> QUERIES["group_avg"].apply(df, 1.0)[["key", "value", "sic", "n_in"]].values.tolist()
[[0, 40.0, 0.5, 4], [1, 73.33333333333333, 0.5, 4]]

References
----------
THEMIS (SIGMOD 2016) §4 Eq. 3, §7 Table 1 and the fragmentation of its queries; CoD §VII-B
(grouped workloads); Fiscato, PhD thesis 2012 (DISSP) §3.2 Assumption 6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spillway.errors import ConfigError, UnknownNameError
from spillway.spark.statement import (
    FIRING_SUMS,
    FIRING_TOTALS,
    FIRING_WINDOW,
    PARTIAL_SUMS,
    RESULT_COLUMNS,
    RESULT_TYPES,
    TIME_COLUMNS,
    aggregate_sql,
    grouped_sql,
    kinds_sql,
    share_firings,
)

__all__ = ["QUERIES", "RESULT_COLUMNS", "RESULT_TYPES", "TIME_COLUMNS", "QueryKind", "query_kind"]

#: Columns of the rows the spillway source emits (:data:`spillway.spark.source.SCHEMA`), as DDL.
SOURCE_SCHEMA_DDL = (
    "query_id int, source_id int, key long, value double, sic double, "
    "event_ts timestamp, arrival_ts timestamp"
)
#: Source column names, in order.
SOURCE_COLUMNS: tuple[str, ...] = tuple(c.split()[0] for c in SOURCE_SCHEMA_DDL.split(", "))

#: COUNT counts values at or above this threshold (THEMIS Table 1).
COUNT_THRESHOLD = 50.0
#: TOP-5 keeps machines with at least this much free memory, in KB (Table 1: 100 MB).
FREE_MEMORY_MIN_KB = 100_000.0
#: TOP-5 result rows per window.
TOP_K = 5
#: Available CPU of a machine is this minus its CPU usage in percent.
CPU_FULL_PERCENT = 100.0

#: The ``key`` of a kind that does not group.
_NO_KEY = "CAST(NULL AS bigint) AS key"


def _aggregate_sql(expr: str, by: str | None = None) -> str:
    """The SQL of a kind whose result is one aggregate per (query, window), or per (query,
    window, ``by``)."""
    return aggregate_sql("{rows}", expr) if by is None else grouped_sql("{rows}", expr, by)


# COV: number each source's tuples of a window in arrival order, gather the i-th tuples of
# sources 0 and 1 into one pair row, then take the pairs' sample covariance per window
# (covar_samp skips a pair with a missing side). Every row of the window is in one pair row,
# so the pair rows' partial sums add up to the firing's totals.
_COV_SQL = (
    f"SELECT query_id, window_start, {_NO_KEY}, 1 AS rank, covar_samp(x, y) AS value, "
    f"{FIRING_SUMS} FROM ("
    "SELECT query_id, window_start, pair, max(CASE WHEN source_id = 0 THEN value END) AS x, "
    f"max(CASE WHEN source_id = 1 THEN value END) AS y, {PARTIAL_SUMS} FROM ("
    "SELECT *, row_number() OVER (PARTITION BY query_id, window_start, source_id "
    "ORDER BY arrival_ts, event_ts, value, key) AS pair FROM {rows}) "
    "GROUP BY query_id, window_start, pair) GROUP BY query_id, window_start"
)

# TOP-5: per machine the average CPU and free memory (the CQL plan's two group-bys and its join
# on machine id, in one aggregation), the machines with enough free memory ranked by available
# CPU (ties by lower machine id) with a window function over the firing (no join, so no
# exchange: the batch is partitioned by query id), the first five kept. Every machine is
# ranked, the qualifying ones first, so the firing's totals come from all its rows, and a
# firing where none qualifies keeps its first row as its firing (rank null).
_TOP5_SQL = (
    f"SELECT query_id, window_start, {_NO_KEY}, CASE WHEN ok THEN pos END AS rank, "
    "CASE WHEN ok THEN CAST(machine AS double) END AS value, sic, n_in, last_arrival_ts FROM ("
    "SELECT query_id, window_start, key AS machine, ok, row_number() OVER (PARTITION BY "
    f"query_id, window_start ORDER BY ok DESC, ({CPU_FULL_PERCENT!r} - cpu) DESC, key ASC) AS "
    f"pos, {FIRING_TOTALS} FROM ("
    f"SELECT *, coalesce(cpu IS NOT NULL AND free >= {FREE_MEMORY_MIN_KB!r}, false) AS ok FROM ("
    "SELECT query_id, window_start, key, avg(CASE WHEN source_id % 2 = 0 THEN value END) AS cpu, "
    f"avg(CASE WHEN NOT (source_id % 2 = 0) THEN value END) AS free, {PARTIAL_SUMS} "
    "FROM {rows} GROUP BY query_id, window_start, key)) "
    f"{FIRING_WINDOW}) WHERE (ok AND pos <= {TOP_K}) OR pos = 1"
)


@dataclass(frozen=True, kw_only=True)
class QueryKind:
    """One query shape (THEMIS Table 1, CoD's grouped aggregate), applied to every logical query
    of that kind at once.

    Parameters
    ----------
    name : registry name (``avg``, ``max``, ``count``, ``avg_all``, ``top5``, ``cov``,
        ``group_avg``).
    title : the paper's name (``AVG``, ``TOP-5``, ``GROUP-AVG``, ...).
    cql : the paper's CQL text (Table 1), or the CQL of the grouped aggregate.
    rows_per_window : result rows per (query, window) when enough input survives; per group
        present in the window when ``grouped``.
    sql : the query, written once: SQL over ``{rows}`` (the rows of the kind's queries with the
        source columns and ``window_start``) giving :data:`RESULT_COLUMNS`, one row per result
        (``rank`` set), each carrying its firing's totals in ``sic``, ``n_in`` and
        ``last_arrival_ts`` (the window's summed input SIC, input rows and last arrival), and
        one row with ``rank`` null for a firing without a result; each result row's SIC is
        then its share of its firing's (:func:`spillway.spark.statement.share_firings`, THEMIS
        Eq. 3). Carrying the totals spares the statement an aggregation of its own for the
        firings, which would read the batch a second time (one Spark job a batch, not two).
    aggregate : for a kind whose result is one aggregate per (query, window) (or per group,
        with ``group_by``), that aggregate over the rows (``sql`` is then derived from it); a
        plan computes all the ungrouped ones in one aggregation, and such a kind's rows carry
        their firing's totals themselves (no aggregation of its own for the firings).
    group_by : the column an ``aggregate`` kind groups by (its ``key``).
    grouped : whether the result has one row per group (``key`` set) rather than per window.

    Examples
    --------
    >>> QUERIES["top5"].rows_per_window
    5
    >>> QUERIES["max"].title, QUERIES["max"].aggregate
    ('MAX', 'max(value)')
    >>> [k for k, q in QUERIES.items() if q.grouped]
    ['group_avg']
    """

    name: str
    title: str
    cql: str
    rows_per_window: int
    sql: str = ""
    aggregate: str | None = None
    group_by: str | None = None
    grouped: bool = False

    def __post_init__(self) -> None:
        if self.aggregate is not None:
            object.__setattr__(self, "sql", _aggregate_sql(self.aggregate, self.group_by))
        if "{rows}" not in self.sql:
            raise ConfigError(
                f"query kind {self.name!r}: sql must read the rows as {{rows}} (or give an "
                f"aggregate), got {self.sql!r}"
            )

    def __call__(self, rows: DataFrame) -> DataFrame:
        """The kind as a user query's function (:mod:`spillway.spark.user`): the result rows of
        its :attr:`sql` over ``rows`` (one query's rows, or several told apart by
        ``query_id``), ``query_id, window_start, key, rank, value``, without SIC; the user path
        gives them their SIC by the same firing rule.

        Examples
        --------
        >>> from spillway.spark.user import UserPart, evaluate
        >>> from spillway.testing import local_spark
        >>> ddl = SOURCE_SCHEMA_DDL.replace("timestamp", "double")
        >>> rows = local_spark().createDataFrame([(3, 0, 0, 4.0, 0.5, 0.2, 0.2),
        ...                                       (3, 0, 0, 9.0, 0.5, 0.7, 0.7)], ddl)
        >>> rows = rows.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
        ...     "arrival_ts", F.timestamp_seconds("arrival_ts"))
        >>> part = UserPart(query_id=3, name="peak", fn=QUERIES["max"], window_us=1_000_000)
        >>> res, _ = evaluate(part, rows, batch_id=0)
        >>> res[["value", "sic"]].values.tolist()
        [[9.0, 1.0]]
        """
        one = "query_id" not in rows.columns
        out = rows.sparkSession.sql(
            f"SELECT {', '.join(RESULT_COLUMNS[:5])} FROM ({self.sql}) WHERE rank IS NOT NULL",
            rows=rows.withColumn("query_id", F.lit(0)) if one else rows,
        )
        return out.drop("query_id") if one else out

    def apply(self, df: DataFrame, window_s: float, *, micros: bool = False) -> pd.DataFrame:
        """The results of every logical query in ``df``, per tumbling window of ``window_s``:
        the same statement and SIC rule a node's sink runs (:mod:`spillway.spark.statement`).

        Parameters
        ----------
        df : rows with the source columns (:data:`SOURCE_COLUMNS`), a static DataFrame.
        window_s : tumbling window length in seconds.
        micros : keep the time columns as int64 Unix microseconds (else UTC timestamps).

        Returns
        -------
        pandas.DataFrame
            The :data:`RESULT_COLUMNS` (``key`` pandas' nullable ``Int64``), ordered by query,
            window, key and rank.

        Raises
        ------
        ConfigError
            ``df`` lacks a source column, or ``window_s`` is not a positive duration.
        """
        missing = [c for c in SOURCE_COLUMNS if c not in df.columns]
        if missing:
            raise ConfigError(
                f"query {self.name!r} needs the source columns {', '.join(SOURCE_COLUMNS)}; "
                f"missing {', '.join(missing)}: read the rows from the spillway source"
            )
        sql = kinds_sql("{batch}", {self.name: ()}, window_s)
        rows = collect_pandas(df.sparkSession.sql(sql, batch=df.select(*SOURCE_COLUMNS)))
        out = share_firings(rows)
        if not micros:
            for c in TIME_COLUMNS:
                out[c] = pd.to_datetime(out[c], unit="us", utc=True)
        return out


def _avg_sql(src: str) -> str:
    return f"Select Avg(t.v) from {src}[Range 1 sec]"


#: The registry of query kinds, by name (THEMIS Table 1 and CoD's grouped aggregate).
QUERIES: dict[str, QueryKind] = {
    "avg": QueryKind(
        name="avg", title="AVG", cql=_avg_sql("Src"), rows_per_window=1, aggregate="avg(value)",
    ),
    "max": QueryKind(
        name="max", title="MAX", cql="Select Max(t.v) from Src[Range 1 sec]",
        rows_per_window=1, aggregate="max(value)",
    ),
    "count": QueryKind(
        name="count", title="COUNT",
        cql="Select Count(t.v) from Src[Range 1 sec] Having t.v >= 50", rows_per_window=1,
        aggregate=f"count(CASE WHEN value >= {COUNT_THRESHOLD!r} THEN 1 END)",
    ),
    "avg_all": QueryKind(
        name="avg_all", title="AVG-all", cql=_avg_sql("AllSrc"), rows_per_window=1,
        aggregate="avg(value)",
    ),
    "top5": QueryKind(
        name="top5", title="TOP-5",
        cql=(
            "Select Top5(AllSrcCPU.id) From AllSrcCPU[Range 1 sec], AllSrcMem[Range 1 sec] "
            "Where AllSrcMem.free >= 100,000 and AllSrcCPU.id = AllSrcMem.id"
        ),
        rows_per_window=TOP_K, sql=_TOP5_SQL,
    ),
    "cov": QueryKind(
        name="cov", title="COV",
        cql="Select Cov(SrcCPU1.value, SrcCPU2.value) SrcCPU1[Range 1 sec], SrcCPU2[Range 1 sec]",
        rows_per_window=1, sql=_COV_SQL,
    ),
    "group_avg": QueryKind(
        name="group_avg", title="GROUP-AVG",
        cql="Select key, Avg(t.v) From Src[Range 1 sec] Group By key", rows_per_window=1,
        aggregate="avg(value)", group_by="key", grouped=True,
    ),
}  # fmt: skip


def with_key_dtype(pdf: pd.DataFrame) -> pd.DataFrame:
    """Give a result table's ``key`` column (if any) pandas' nullable ``Int64`` dtype, in place.

    Arrow hands a ``bigint`` column with nulls over as float64 and one without as int64; the
    one dtype keeps tables of different kinds concatenable (:func:`collect_pandas` keeps
    64-bit keys whole on the way from Spark).

    >>> with_key_dtype(pd.DataFrame({"key": [3.0, float("nan")]}))["key"].tolist()
    [3, <NA>]
    """
    if "key" in pdf.columns:
        pdf["key"] = pdf["key"].astype("Int64")
    return pdf


def collect_pandas(df: DataFrame) -> pd.DataFrame:
    """``df`` collected to pandas through Arrow, its ``key`` column (if any) whole, as pandas'
    nullable ``Int64``.

    ``toPandas`` hands a ``bigint`` column with nulls over as float64, which rounds a 64-bit
    key (the hash of a text key, :func:`spillway.feeds.hashing.text_keys`) to 53 bits: a shed
    window's keys then differ from its exact answer's. The key column is converted on its own
    (:func:`arrow_pandas`), the others as ``toPandas`` would.

    >>> from spillway.testing import local_spark
    >>> df = local_spark().sql("SELECT * FROM VALUES (9153145295534684921L), (NULL) AS t(key)")
    >>> collect_pandas(df)["key"].tolist()
    [9153145295534684921, <NA>]
    """
    return arrow_pandas(df.toArrow())


def arrow_pandas(table: Any) -> pd.DataFrame:
    """A :class:`pyarrow.Table` as pandas, its ``key`` column (if any) as nullable ``Int64``
    (every other column converted once, as ``to_pandas`` does; the key column in its place).

    >>> import pyarrow as pa
    >>> t = pa.table({"w": [1.5, 2.5], "key": pa.array([2**62 + 1, None], pa.int64()),
    ...               "n": [3, 4]})
    >>> out = arrow_pandas(t)
    >>> list(out.columns), out["key"].tolist(), str(out["w"].dtype)
    (['w', 'key', 'n'], [4611686018427387905, <NA>], 'float64')
    """
    import pyarrow as pa

    if "key" not in table.column_names:
        return table.to_pandas()
    at = table.column_names.index("key")
    pdf = table.drop_columns(["key"]).to_pandas()
    whole = pa.table({"key": table.column("key")}).to_pandas(
        types_mapper={pa.int64(): pd.Int64Dtype()}.get
    )
    pdf.insert(at, "key", whole["key"].astype("Int64"))
    return pdf


def query_kind(name: str) -> QueryKind:
    """Look up a query kind by name.

    Raises
    ------
    UnknownNameError
        ``name`` is not in :data:`QUERIES`.

    Examples
    --------
    >>> query_kind("cov").title
    'COV'
    >>> query_kind("median")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: query kind must be one of avg, avg_all, count, cov, group_avg, max, top5; got 'median'
    """
    if name not in QUERIES:
        raise UnknownNameError(
            f"query kind must be one of {', '.join(sorted(QUERIES))}; got {name!r}"
        )
    return QUERIES[name]
