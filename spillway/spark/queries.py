"""The THEMIS Table 1 queries and CoD's grouped aggregate as multiplexed, SIC-propagating
DataFrame functions.

Every kind takes the rows of the spillway source (all logical queries of that kind in one
DataFrame, told apart by ``query_id``) and returns one result table, grouped by query and
tumbling window (``window_start = floor(event_ts / window_s) * window_s``, aligned with the
micro-batches). Result columns (:data:`RESULT_COLUMNS`, the contract every query kind keeps):

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
no firing; marker rows are only for firings that have inputs but no output). The SIC rules are
those of :mod:`spillway.spark.sic_ops` (and :mod:`spillway.quality.propagation`), so the rows
of a window always carry the SIC of all its input rows between them:

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
  rows`` (``/ 5`` with 5 or more qualifying machines); the plan computes that directly, in one
  aggregation pass. A window where no machine qualifies emits one marker row (``rank`` 0,
  ``value`` null) carrying the window's whole SIC: an empty result is an answer, not lost data
  (:mod:`spillway.quality.propagation`).
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
>>> r = QUERIES["count"].apply(df, 1.0).first()
>>> (r.value, r.sic, r.n_in)
(3.0, 1.0, 4)
>>> QUERIES["avg"].apply(df, 1.0).first().value
65.0
>>> df = df.withColumn("key", (F.col("value") >= 50).cast("long"))
>>> rows = QUERIES["group_avg"].apply(df, 1.0).orderBy("key").collect()
>>> [(r.key, r.value, r.sic, r.n_in) for r in rows]
[(0, 40.0, 0.5, 4), (1, 73.33333333333333, 0.5, 4)]

References
----------
THEMIS (SIGMOD 2016) §4 Eq. 3, §7 Table 1 and the fragmentation of its queries; CoD §VII-B
(grouped workloads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spillway.errors import ConfigError, UnknownNameError
from spillway.spark.sic_ops import FIRING, sic_window_agg, window_start

#: Columns of the rows the spillway source emits (:data:`spillway.spark.source.SCHEMA`), as DDL.
SOURCE_SCHEMA_DDL = (
    "query_id int, source_id int, key long, value double, sic double, "
    "event_ts timestamp, arrival_ts timestamp"
)
#: Source column names, in order.
SOURCE_COLUMNS: tuple[str, ...] = tuple(c.split()[0] for c in SOURCE_SCHEMA_DDL.split(", "))
#: Result columns and their Spark types, in order.
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

#: COUNT counts values at or above this threshold (THEMIS Table 1).
COUNT_THRESHOLD = 50.0
#: TOP-5 keeps machines with at least this much free memory, in KB (Table 1: 100 MB).
FREE_MEMORY_MIN_KB = 100_000.0
#: TOP-5 result rows per window.
TOP_K = 5
#: Available CPU of a machine is this minus its CPU usage in percent.
CPU_FULL_PERCENT = 100.0


def _stats() -> list[Column]:
    return [F.count(F.lit(1)).alias("n_in"), F.max("arrival_ts").alias("last_arrival_ts")]


def _no_key() -> Column:
    """The ``key`` of a kind that does not group: null."""
    return F.lit(None).cast("bigint").alias("key")


def _single(value: Callable[[], Column]) -> Callable[[DataFrame, float], DataFrame]:
    # Columns are built at apply time: building one needs an active SparkContext.
    def build(df: DataFrame, window_s: float) -> DataFrame:
        out = df.transform(sic_window_agg, value().alias("value"), *_stats(), window_s=window_s)
        return out.withColumn("rank", F.lit(1)).withColumn("key", _no_key())

    return build


def _group_avg(df: DataFrame, window_s: float) -> DataFrame:
    # The group-by rule of sic_ops (sum(sic) / groups on every group row, THEMIS Eq. 3) gives
    # value and SIC; the window's input rows and last arrival are summed over its groups.
    out = df.transform(
        sic_window_agg,
        F.avg("value").alias("value"),
        F.count(F.lit(1)).alias("n_group"),
        F.max("arrival_ts").alias("last_group"),
        window_s=window_s,
        by="key",
    )
    firing = Window.partitionBy(*FIRING)
    return (
        out.withColumn("n_in", F.sum("n_group").over(firing))
        .withColumn("last_arrival_ts", F.max("last_group").over(firing))
        .withColumn("rank", F.lit(1))
    )


def _windowed(df: DataFrame, window_s: float) -> DataFrame:
    return df.withColumn("window_start", window_start("event_ts", window_s))


def _cov(df: DataFrame, window_s: float) -> DataFrame:
    # Number each source's tuples of a window in arrival order, gather the i-th tuples of
    # sources 0 and 1 into one pair row, then aggregate the pairs per window (covar_samp skips
    # a pair with a missing side). The window's rows, SIC and last arrival ride along.
    order = Window.partitionBy(*FIRING, "source_id").orderBy(
        "arrival_ts", "event_ts", "value", "key"
    )
    src = F.col("source_id")
    pairs = (
        _windowed(df, window_s)
        .withColumn("pair", F.row_number().over(order))
        .groupBy(*FIRING, "pair")
        .agg(
            F.max(F.when(src == 0, F.col("value"))).alias("x"),
            F.max(F.when(src == 1, F.col("value"))).alias("y"),
            F.count(F.lit(1)).alias("n_in"),
            F.max("arrival_ts").alias("last_arrival_ts"),
            F.sum("sic").alias("sic"),
        )
    )
    return pairs.groupBy(*FIRING).agg(
        F.covar_samp("x", "y").alias("value"),
        F.sum("n_in").alias("n_in"),
        F.max("last_arrival_ts").alias("last_arrival_ts"),
        F.sum("sic").alias("sic"),
        F.lit(1).alias("rank"),
        _no_key(),
    )


def _top5(df: DataFrame, window_s: float) -> DataFrame:
    # One pass: per machine the average CPU and free memory (the two group-bys and the join on
    # machine id of the CQL plan), plus what the window's result needs (rows, SIC, arrival).
    is_cpu = F.col("source_id") % 2 == 0
    machines = (
        _windowed(df, window_s)
        .groupBy(*FIRING, "key")
        .agg(
            F.avg(F.when(is_cpu, F.col("value"))).alias("cpu"),
            F.avg(F.when(~is_cpu, F.col("value"))).alias("free"),
            F.count(F.lit(1)).alias("n_in"),
            F.max("arrival_ts").alias("last_arrival_ts"),
            F.sum("sic").alias("total"),
        )
    )
    stats = machines.groupBy(*FIRING).agg(
        F.sum("n_in").alias("n_in"),
        F.max("last_arrival_ts").alias("last_arrival_ts"),
        F.sum("total").alias("total"),
    )
    firing = Window.partitionBy(*FIRING)
    best = firing.orderBy((F.lit(CPU_FULL_PERCENT) - F.col("cpu")).desc(), F.col("key").asc())
    top = (
        machines.filter(F.col("cpu").isNotNull() & (F.col("free") >= F.lit(FREE_MEMORY_MIN_KB)))
        .withColumn("rank", F.row_number().over(best))
        .filter(F.col("rank") <= TOP_K)
        .withColumn("n_out", F.count(F.lit(1)).over(firing))
        .select(*FIRING, "rank", F.col("key").cast("double").alias("value"), "n_out")
    )
    out = stats.join(top, list(FIRING), "left")
    return (
        out.withColumn("rank", F.coalesce("rank", F.lit(0)))
        .withColumn("sic", F.col("total") / F.coalesce("n_out", F.lit(1)))
        .withColumn("key", _no_key())
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
    build : the plan, ``(rows, window_s) -> result`` (use :meth:`apply`).
    grouped : whether the result has one row per group (``key`` set) rather than per window.

    Examples
    --------
    >>> QUERIES["top5"].rows_per_window
    5
    >>> QUERIES["max"].title
    'MAX'
    >>> [k for k, q in QUERIES.items() if q.grouped]
    ['group_avg']
    """

    name: str
    title: str
    cql: str
    rows_per_window: int
    build: Callable[[DataFrame, float], DataFrame]
    grouped: bool = False

    def apply(self, df: DataFrame, window_s: float) -> DataFrame:
        """The results of every logical query in ``df``, per tumbling window of ``window_s``.

        Parameters
        ----------
        df : rows with the source columns (:data:`SOURCE_COLUMNS`), batch or streaming alike.
        window_s : tumbling window length in seconds.

        Returns
        -------
        DataFrame
            The :data:`RESULT_COLUMNS`, typed as in :data:`RESULT_TYPES`.

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
        out = self.build(df.select(*SOURCE_COLUMNS), window_s)
        return out.select(*[F.col(c).cast(t).alias(c) for c, t in RESULT_TYPES.items()])


def _avg_sql(src: str) -> str:
    return f"Select Avg(t.v) from {src}[Range 1 sec]"


#: The registry of query kinds, by name (THEMIS Table 1 and CoD's grouped aggregate).
QUERIES: dict[str, QueryKind] = {
    "avg": QueryKind(
        name="avg", title="AVG", cql=_avg_sql("Src"), rows_per_window=1,
        build=_single(lambda: F.avg("value")),
    ),
    "max": QueryKind(
        name="max", title="MAX", cql="Select Max(t.v) from Src[Range 1 sec]",
        rows_per_window=1, build=_single(lambda: F.max("value")),
    ),
    "count": QueryKind(
        name="count", title="COUNT",
        cql="Select Count(t.v) from Src[Range 1 sec] Having t.v >= 50", rows_per_window=1,
        build=_single(lambda: F.count(F.when(F.col("value") >= COUNT_THRESHOLD, 1))),
    ),
    "avg_all": QueryKind(
        name="avg_all", title="AVG-all", cql=_avg_sql("AllSrc"), rows_per_window=1,
        build=_single(lambda: F.avg("value")),
    ),
    "top5": QueryKind(
        name="top5", title="TOP-5",
        cql=(
            "Select Top5(AllSrcCPU.id) From AllSrcCPU[Range 1 sec], AllSrcMem[Range 1 sec] "
            "Where AllSrcMem.free >= 100,000 and AllSrcCPU.id = AllSrcMem.id"
        ),
        rows_per_window=TOP_K, build=_top5,
    ),
    "cov": QueryKind(
        name="cov", title="COV",
        cql="Select Cov(SrcCPU1.value, SrcCPU2.value) SrcCPU1[Range 1 sec], SrcCPU2[Range 1 sec]",
        rows_per_window=1, build=_cov,
    ),
    "group_avg": QueryKind(
        name="group_avg", title="GROUP-AVG",
        cql="Select key, Avg(t.v) From Src[Range 1 sec] Group By key", rows_per_window=1,
        build=_group_avg, grouped=True,
    ),
}  # fmt: skip


#: Result columns that hold timestamps (UTC pandas timestamps after :func:`results_to_pandas`).
TIME_COLUMNS: tuple[str, ...] = ("window_start", "last_arrival_ts")


def results_to_pandas(results: DataFrame, *, micros: bool = False) -> pd.DataFrame:
    """Collect a (small) result DataFrame into pandas without time-zone surprises.

    Timestamps travel as Unix microseconds and become UTC ``pandas.Timestamp`` values (or stay
    int64 microseconds with ``micros=True``), whatever the session or machine time zone. The
    ``key`` column becomes pandas' nullable ``Int64`` (null for the kinds that do not group).

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().range(1).select(F.timestamp_seconds(F.lit(1.5)).alias("window_start"))
    >>> str(results_to_pandas(df)["window_start"][0])
    '1970-01-01 00:00:01.500000+00:00'
    """
    cols = [F.unix_micros(c).alias(c) if c in TIME_COLUMNS else F.col(c) for c in results.columns]
    pdf: pd.DataFrame = results.select(*cols).toPandas()
    for c in TIME_COLUMNS:
        if c in pdf.columns:
            us = pdf[c].astype("int64")
            pdf[c] = us if micros else pd.to_datetime(us, unit="us", utc=True)
    return with_key_dtype(pdf)


def with_key_dtype(pdf: pd.DataFrame) -> pd.DataFrame:
    """Give a result table's ``key`` column (if any) pandas' nullable ``Int64`` dtype, in place.

    Arrow hands a ``bigint`` column with nulls over as float64 and one without as int64; the
    one dtype keeps keys whole and tables of different kinds concatenable.

    >>> with_key_dtype(pd.DataFrame({"key": [3.0, float("nan")]}))["key"].tolist()
    [3, <NA>]
    """
    if "key" in pdf.columns:
        pdf["key"] = pdf["key"].astype("Int64")
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
