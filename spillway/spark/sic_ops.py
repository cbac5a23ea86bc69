"""SIC-aware DataFrame operators: every output row carries its share of the input SIC.

THEMIS Eq. 3 gives a derived tuple the SIC of the inputs its operator processed atomically (one
window *firing*), split evenly over that firing's outputs::

    t_out.sic = sum(t.sic for t in inputs of the firing) / number of outputs of the firing

These helpers apply that rule with plain DataFrame code (group-by, window functions, joins; no
Python UDF), so they run inside ``foreachBatch`` and in batch jobs alike. Every helper takes the
DataFrame first and plugs in with :meth:`pyspark.sql.DataFrame.transform`. Value, condition,
ordering, time and SIC arguments accept a name or a :class:`~pyspark.sql.Column`; the columns
that identify a firing (``firing``, ``keys``) and join keys are names.

================================  ==========================================================
helper                            SIC of each output row (per firing)
================================  ==========================================================
:func:`sic_window_agg`            tumbling window: sum(sic) / number of output rows
:func:`sic_sliding_agg`           sliding window: each tuple's sic / (W/s) enters each window
:func:`sic_group_by`              sum(sic) / number of groups (uniform, not per group)
:func:`sic_filter`                sum(sic of inputs) / number of rows kept
:func:`sic_join`                  (sum(sic) left + sum(sic) right) / number of join outputs
:func:`sic_top_k`                 sum(sic) / rows kept (k, or fewer if fewer exist)
:func:`sic_union`                 unchanged (pass-through)
================================  ==========================================================

The rules are those of :mod:`spillway.quality.propagation`. A *firing* is a group of rows
processed atomically: by default one logical query's rows of one window,
``("query_id", "window_start")``. Tumbling windows are aligned to the epoch, which the spillway
source also uses to end micro-batches, so a micro-batch holds whole firings.

Empty results (the decision of :mod:`spillway.quality.propagation`, after DISSP Assumption 6):
a firing with inputs but no output row (a filter or join that matches nothing) emits one
*marker row* carrying the firing's whole input SIC, with its firing columns set, every other
column null and :data:`EMPTY` (``sic_empty``) true; real rows have ``sic_empty`` false. An
unshed filter that empties a window is a correct answer, so it must not lower query SIC; only
shedding may. The helpers treat marker rows in their input as SIC without payload: the SIC
counts in the firing's total, the row is never an output, and a firing holding only markers
yields a marker again. Pass ``on_empty="drop"`` for the literal Eq. 3 (no marker; the SIC of an
empty firing is lost). The window aggregates take raw rows (no markers): window first, then
filter and aggregate within the firing with :func:`sic_filter` and :func:`sic_group_by`.

Examples
--------
>>> from pyspark.sql import functions as F
>>> from spillway.testing import local_spark
>>> spark = local_spark()
>>> df = spark.createDataFrame(
...     [(0, 0, 10.0, 0.5), (0, 0, 60.0, 0.5), (0, 1, 20.0, 1.0)],
...     "query_id int, window_start int, value double, sic double")
>>> out = df.transform(sic_filter, F.col("value") >= 50).orderBy("window_start")
>>> [(r.window_start, r.value, r.sic, r.sic_empty) for r in out.collect()]
[(0, 60.0, 1.0, False), (1, None, 1.0, True)]

References
----------
THEMIS (SIGMOD 2016) §4, Eq. 1-4 (with §4's remark on dividing a tuple's SIC across the
windows of a sliding window); Fiscato (DISSP) §3.2 Assumption 6 (empty results).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spillway.errors import ConfigError

#: A column given by name or as an expression.
ColumnLike = str | Column

#: Default firing of windowed data: one logical query's rows of one window.
FIRING: tuple[str, ...] = ("query_id", "window_start")
#: Boolean column flagging marker rows (an empty result carrying its firing's SIC).
EMPTY = "sic_empty"

_MASS = "__spillway_mass"
_REAL = "__spillway_real"
_TOTAL = "__spillway_total"
_N = "__spillway_n_out"
_FIRST = "__spillway_first"
_SLOT = "__spillway_slot"
_INTERNAL = (_MASS, _REAL, _TOTAL, _N, _FIRST)


def _col(c: ColumnLike) -> Column:
    return F.col(c) if isinstance(c, str) else c


def _ref(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _as_list(cs: ColumnLike | Sequence[ColumnLike]) -> list[ColumnLike]:
    return [cs] if isinstance(cs, str | Column) else list(cs)


def _names(cs: str | Sequence[str], what: str) -> list[str]:
    names = [cs] if isinstance(cs, str) else list(cs)
    bad = [c for c in names if not isinstance(c, str)]
    if bad or not names and what == "firing":
        got = bad[0] if bad else names
        raise ConfigError(f"{what} must be one or more column names (str), got {got!r}")
    return names


def _sic_name(sic_col: ColumnLike) -> str:
    return sic_col if isinstance(sic_col, str) else "sic"


def _on_empty(on_empty: str) -> bool:
    if on_empty not in ("marker", "drop"):
        raise ConfigError(f"on_empty must be 'marker' or 'drop', got {on_empty!r}")
    return on_empty == "marker"


def _is_marker(df: DataFrame) -> Column:
    return F.coalesce(F.col(EMPTY), F.lit(False)) if EMPTY in df.columns else F.lit(False)


def _micros(seconds: float, what: str) -> int:
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
    if not ok or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{what} must be a finite number of seconds > 0, got {seconds!r}")
    us = round(seconds * 1e6)
    if us < 1 or abs(us - seconds * 1e6) > 1e-3:
        raise ConfigError(f"{what} must be a whole number of microseconds, got {seconds!r}")
    return us


def _finish(rows: DataFrame, firing: list[str], sic_out: str, markers: bool) -> DataFrame:
    """Spread each firing's SIC mass (``_MASS``) evenly over its real rows (``_REAL``).

    A firing without a real row keeps one row as a marker (payload nulled) when ``markers``.
    """
    w = Window.partitionBy(*[_ref(c) for c in firing])
    x = rows.withColumn(_TOTAL, F.sum(_MASS).over(w)).withColumn(
        _N, F.sum(F.col(_REAL).cast("long")).over(w)
    )
    keep = F.col(_REAL)
    if markers:
        x = x.withColumn(_FIRST, F.row_number().over(w.orderBy(F.col(_REAL).desc())))
        keep = keep | ((F.col(_N) == 0) & (F.col(_FIRST) == 1))
    share = F.col(_TOTAL) / F.greatest(F.col(_N), F.lit(1)).cast("double")
    out: list[Column] = []
    for c in rows.columns:
        if c in _INTERNAL or c == EMPTY:
            continue
        if c == sic_out:
            out.append(share.alias(c))
        elif c in firing or not markers:
            out.append(_ref(c))
        else:
            out.append(F.when(F.col(_REAL), _ref(c)).alias(c))
    if sic_out not in rows.columns:
        out.append(share.alias(sic_out))
    if markers:
        out.append((~F.col(_REAL)).alias(EMPTY))
    return x.filter(keep).select(*out)


def _spread(
    df: DataFrame, kept: Column, firing: list[str], sic_col: ColumnLike, markers: bool
) -> DataFrame:
    """Rows of ``df`` where ``kept`` holds share their firing's input SIC (see :func:`_finish`)."""
    rows = df.withColumn(_MASS, _col(sic_col)).withColumn(_REAL, kept)
    return _finish(rows, firing, _sic_name(sic_col), markers)


def window_start(time_col: ColumnLike, window_s: float) -> Column:
    """Start of the tumbling window holding ``time_col``: ``floor(t / window_s) * window_s``.

    Windows are aligned to the Unix epoch, as the spillway source aligns micro-batch ends, so a
    micro-batch holds whole windows. Integer microsecond arithmetic, exact at every boundary.

    Parameters
    ----------
    time_col : a timestamp column (name or Column).
    window_s : window length in seconds (> 0, a whole number of microseconds).

    Returns
    -------
    Column
        A timestamp column (unnamed; alias it).

    Raises
    ------
    ConfigError
        ``window_s`` is not a positive whole number of microseconds.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().range(1).select(F.timestamp_seconds(F.lit(2.75)).alias("t"))
    >>> df.select(F.unix_micros(window_start("t", 0.5)).alias("w")).first().w
    2500000
    """
    us = _micros(window_s, "window_s")
    t = F.unix_micros(_col(time_col))
    return F.timestamp_micros(t - F.pmod(t, F.lit(us)))


def sic_group_by(
    df: DataFrame,
    *aggs: Column,
    by: ColumnLike | Sequence[ColumnLike] = (),
    firing: str | Sequence[str] = FIRING,
    sic_col: ColumnLike = "sic",
    on_empty: str = "marker",
) -> DataFrame:
    """Group-by aggregate over windowed rows, SIC uniform over each firing's groups.

    Groups rows by ``firing`` + ``by`` and computes ``aggs``. Each firing's output rows (one per
    ``by`` group) share the firing's input SIC evenly: ``sum(sic) / number of groups`` (the
    literal reading of THEMIS Eq. 3 (§4): *uniform across output tuples, not per group*).
    With ``by=()`` a firing has one output row, which carries ``sum(sic)``.

    Parameters
    ----------
    df : input rows with a SIC column (marker rows allowed, see the module notes).
    *aggs : aggregate Columns (alias them; e.g. ``F.avg("value").alias("value")``).
    by : the group columns within a firing.
    firing : names of the columns that identify one atomic firing (default query and window).
    sic_col : the input SIC column; the output SIC column has its name (``"sic"`` for a Column).
    on_empty : ``"marker"`` or ``"drop"``: what a firing holding only marker rows yields.

    Returns
    -------
    DataFrame
        Columns ``firing``, ``by``, the aggregates, the SIC column (and ``sic_empty`` when the
        input had marker rows).

    Raises
    ------
    ConfigError
        ``firing`` is not a list of names, or ``on_empty`` is unknown.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().createDataFrame(
    ...     [(0, 0, 1, 0.2), (0, 0, 2, 0.2), (0, 0, 2, 0.2), (0, 1, 1, 0.5)],
    ...     "query_id int, window_start int, k int, sic double")
    >>> out = df.transform(sic_group_by, F.count("*").alias("n"), by="k")
    >>> rows = out.orderBy("window_start", "k").collect()
    >>> [(r.window_start, r.k, r.n, round(r.sic, 6)) for r in rows]
    [(0, 1, 1, 0.3), (0, 2, 2, 0.3), (1, 1, 1, 0.5)]
    """
    fire = _names(firing, "firing")
    markers = _on_empty(on_empty)
    groups = [_col(c) for c in _as_list(by)]
    out = _sic_name(sic_col)
    mass = F.sum(_col(sic_col)).alias(_MASS)
    if EMPTY not in df.columns:  # no marker can appear: every firing has a group
        g = df.groupBy(*fire, *groups).agg(*aggs, mass)
        if not groups:
            return g.withColumnRenamed(_MASS, out)
        return _finish(g.withColumn(_REAL, F.lit(True)), fire, out, markers=False)
    g = df.withColumn(_REAL, ~_is_marker(df)).groupBy(*fire, *groups, _REAL).agg(*aggs, mass)
    return _finish(g, fire, out, markers)


def sic_window_agg(
    df: DataFrame,
    *aggs: Column,
    window_s: float,
    keys: str | Sequence[str] = ("query_id",),
    by: ColumnLike | Sequence[ColumnLike] = (),
    time_col: ColumnLike = "event_ts",
    sic_col: ColumnLike = "sic",
) -> DataFrame:
    """Tumbling-window aggregate; each firing's outputs share its input SIC (THEMIS Eq. 3).

    The firing is ``keys`` + ``window_start`` (see :func:`window_start`); the output rows are
    the ``by`` groups of the firing (one row when ``by=()``), each with ``sum(sic) / rows``.

    Parameters
    ----------
    df : raw input rows (no marker rows) with a timestamp and a SIC column.
    *aggs : aggregate Columns (alias them).
    window_s : window length in seconds.
    keys : names of the columns that separate independent firings (default the logical query).
    by : group-by columns within a window (output rows of one firing).
    time_col : the event-time column.
    sic_col : the SIC column.

    Returns
    -------
    DataFrame
        Columns ``keys``, ``window_start``, ``by``, the aggregates, and the SIC column.

    Raises
    ------
    ConfigError
        ``window_s`` is not a positive whole number of microseconds.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().createDataFrame(
    ...     [(0, 0.1, 2.0, 0.25), (0, 0.7, 4.0, 0.25), (0, 1.2, 9.0, 0.5)],
    ...     "query_id int, t double, value double, sic double",
    ... ).withColumn("event_ts", F.timestamp_seconds("t"))
    >>> out = df.transform(sic_window_agg, F.avg("value").alias("avg"), window_s=1.0)
    >>> [(r.avg, r.sic) for r in out.orderBy("window_start").collect()]
    [(3.0, 0.5), (9.0, 0.5)]
    """
    windowed = df.withColumn("window_start", window_start(time_col, window_s))
    fire = [*_names(keys, "keys"), "window_start"]
    return sic_group_by(windowed, *aggs, by=by, firing=fire, sic_col=sic_col)


def sic_sliding_agg(
    df: DataFrame,
    *aggs: Column,
    window_s: float,
    slide_s: float,
    keys: str | Sequence[str] = ("query_id",),
    by: ColumnLike | Sequence[ColumnLike] = (),
    time_col: ColumnLike = "event_ts",
    sic_col: ColumnLike = "sic",
) -> DataFrame:
    """Sliding-window aggregate; a tuple's SIC is split evenly over the W/s windows it enters.

    A tuple at time ``t`` enters the ``n = window_s / slide_s`` windows starting at
    ``floor(t / slide_s) * slide_s - j * slide_s`` for ``j = 0 .. n - 1``. Each copy carries
    ``sic / n`` so the tuple's SIC is counted once over all windows, not ``n`` times
    (:func:`spillway.quality.propagation.sliding_window_share`; THEMIS §4 on sliding windows; the paper
    gives no formula). Within a window the rule of :func:`sic_group_by` applies. The first and
    last ``n - 1`` windows of a run hold partial data and carry the share of what they saw.

    Parameters
    ----------
    df, aggs, keys, by, time_col, sic_col : as in :func:`sic_window_agg`.
    window_s : window length W in seconds.
    slide_s : slide s in seconds; ``W / s`` must be a whole number.

    Returns
    -------
    DataFrame
        Columns ``keys``, ``window_start``, ``by``, the aggregates, the SIC column and
        ``window_end`` (``window_start + window_s``).

    Raises
    ------
    ConfigError
        A length is not positive, or ``window_s`` is not a whole multiple of ``slide_s``.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().createDataFrame(
    ...     [(0, 0.2, 1.0, 0.5), (0, 0.7, 3.0, 0.5)],
    ...     "query_id int, t double, value double, sic double",
    ... ).withColumn("event_ts", F.timestamp_seconds("t"))
    >>> out = df.transform(sic_sliding_agg, F.sum("value").alias("s"), window_s=1.0, slide_s=0.5)
    >>> [(r.s, r.sic) for r in out.orderBy("window_start").collect()]
    [(1.0, 0.25), (4.0, 0.5), (3.0, 0.25)]
    """
    w_us = _micros(window_s, "window_s")
    s_us = _micros(slide_s, "slide_s")
    if w_us % s_us:
        raise ConfigError(
            f"window_s must be a whole multiple of slide_s, got {window_s!r} and {slide_s!r}: "
            "pick a slide that divides the window"
        )
    n = w_us // s_us
    sic_name = _sic_name(sic_col)
    t = F.unix_micros(_col(time_col))
    last = t - F.pmod(t, F.lit(s_us))
    copies = (
        df.withColumn(_SLOT, F.explode(F.sequence(F.lit(0), F.lit(n - 1))))
        .withColumn("window_start", F.timestamp_micros(last - F.col(_SLOT) * F.lit(s_us)))
        .withColumn(sic_name, _col(sic_col) / F.lit(float(n)))
        .drop(_SLOT)
    )
    fire = [*_names(keys, "keys"), "window_start"]
    out = sic_group_by(copies, *aggs, by=by, firing=fire, sic_col=sic_name)
    end = F.timestamp_micros(F.unix_micros("window_start") + F.lit(w_us))
    return out.withColumn("window_end", end)


def sic_filter(
    df: DataFrame,
    condition: ColumnLike,
    *,
    firing: str | Sequence[str] = FIRING,
    sic_col: ColumnLike = "sic",
    on_empty: str = "marker",
) -> DataFrame:
    """Filter rows; the rows kept from a firing share that firing's whole input SIC.

    Each kept row gets ``sum(sic of the firing's inputs) / rows kept``
    (:func:`spillway.quality.propagation.filter_or_map`). A firing with no row kept yields a
    marker row carrying that SIC (or nothing with ``on_empty="drop"``).

    Parameters
    ----------
    df : input rows.
    condition : boolean Column (or SQL expression string) selecting the rows kept; null drops.
    firing : names of the columns that identify one firing.
    sic_col : the SIC column (the output SIC column has its name).
    on_empty : ``"marker"`` (default) or ``"drop"``.

    Returns
    -------
    DataFrame
        The kept rows (and markers) with the SIC column replaced, plus ``sic_empty`` when
        ``on_empty="marker"``.

    Raises
    ------
    ConfigError
        ``firing`` is not a list of names, or ``on_empty`` is unknown.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.testing import local_spark
    >>> df = local_spark().createDataFrame(
    ...     [(0, 0, 10.0, 0.25), (0, 0, 60.0, 0.25), (0, 0, 70.0, 0.5)],
    ...     "query_id int, window_start int, value double, sic double")
    >>> out = df.transform(sic_filter, F.col("value") >= 50, on_empty="drop")
    >>> sorted((r.value, r.sic) for r in out.collect())
    [(60.0, 0.5), (70.0, 0.5)]
    """
    fire = _names(firing, "firing")
    markers = _on_empty(on_empty)
    cond = F.expr(condition) if isinstance(condition, str) else condition
    return _spread(df, F.coalesce(cond, F.lit(False)) & ~_is_marker(df), fire, sic_col, markers)


def sic_join(
    df: DataFrame,
    other: DataFrame,
    on: str | Sequence[str],
    *,
    firing: str | Sequence[str] = FIRING,
    how: str = "inner",
    sic_col: str = "sic",
    on_empty: str = "marker",
) -> DataFrame:
    """Window equi-join; the join outputs of a firing share both sides' firing SIC evenly.

    The inputs of a firing are both sides' rows of that firing (THEMIS §4, Eq. 3), so every output row
    gets ``(sum(sic) left + sum(sic) right) / join outputs of the firing``
    (:func:`spillway.quality.propagation.join`), whether or not an input row found a match. A
    firing with no output (no match, or a side missing) yields a marker row carrying that SIC.
    Both sides need the ``firing``, ``on`` and ``sic_col`` columns and no other common names.

    Parameters
    ----------
    df, other : the left and right inputs (marker rows allowed).
    on : join key column names (besides the firing columns, which are always join keys).
    firing : names of the columns that identify one firing on both sides.
    how : ``inner``, ``left``, ``right`` or ``full`` (outer joins also output unmatched rows).
    sic_col : name of the SIC column on both sides and in the output.
    on_empty : ``"marker"`` (default) or ``"drop"``.

    Returns
    -------
    DataFrame
        The joined rows with one SIC column (plus ``sic_empty`` with markers).

    Raises
    ------
    ConfigError
        ``on``/``firing`` are not names, or ``how``/``on_empty`` is unknown.

    Examples
    --------
    >>> from spillway.testing import local_spark
    >>> spark = local_spark()
    >>> cpu = spark.createDataFrame([(0, 0, 1, 20.0, 0.25), (0, 0, 2, 30.0, 0.25)],
    ...                             "query_id int, window_start int, k int, cpu double, sic double")
    >>> mem = spark.createDataFrame([(0, 0, 2, 5e5, 0.5)],
    ...                             "query_id int, window_start int, k int, free double, sic double")
    >>> [(r.k, r.cpu, r.sic) for r in cpu.transform(sic_join, mem, "k").collect()]
    [(2, 30.0, 1.0)]
    """
    if how not in ("inner", "left", "right", "full"):
        raise ConfigError(f"how must be inner, left, right or full, got {how!r}")
    fire = _names(firing, "firing")
    keys = fire + _names(on, "on")
    markers = _on_empty(on_empty)

    def real(side: DataFrame) -> DataFrame:
        return side.filter(~_is_marker(side)).drop(sic_col, EMPTY)

    def mass(side: DataFrame) -> DataFrame:
        total = side.groupBy(*fire).agg(F.sum(sic_col).alias(_MASS))
        return total.withColumn(_REAL, F.lit(False))

    joined = (
        real(df)
        .join(real(other), on=keys, how=how)
        .withColumn(_MASS, F.lit(0.0))
        .withColumn(_REAL, F.lit(True))
    )
    rows = joined.unionByName(mass(df), allowMissingColumns=True).unionByName(
        mass(other), allowMissingColumns=True
    )
    return _finish(rows, fire, sic_col, markers)


def sic_top_k(
    df: DataFrame,
    k: int,
    order_by: ColumnLike | Sequence[ColumnLike],
    *,
    firing: str | Sequence[str] = FIRING,
    sic_col: ColumnLike = "sic",
    rank_col: str = "rank",
    on_empty: str = "marker",
) -> DataFrame:
    """Top-k rows of each firing; the kept rows share the firing's input SIC.

    Rows are ranked within each firing by ``order_by`` (best first) and the first ``k`` are
    kept with ranks ``1..k``; each gets ``sum(sic of the firing's rows) / min(k, candidates)``
    (:func:`spillway.quality.propagation.top_k`; THEMIS §4, Eq. 3). Ties keep the order of later
    ``order_by`` columns: add a unique tie-breaker for a deterministic rank. Marker rows are
    never candidates; a firing holding only markers yields a marker.

    Parameters
    ----------
    df : input rows (one candidate per row).
    k : number of rows kept per firing (>= 1).
    order_by : ranking, best first: a column name sorts descending (largest first); a Column is
        used as given (``F.col("x").asc()`` for smallest first).
    firing : names of the columns that identify one firing.
    sic_col : the SIC column (the output SIC column has its name).
    rank_col : name of the output rank column (int, 1 = best; null on a marker).
    on_empty : ``"marker"`` (default) or ``"drop"``.

    Returns
    -------
    DataFrame
        At most ``k`` rows per firing, with the rank and SIC columns.

    Raises
    ------
    ConfigError
        ``k`` is not a positive int, ``firing`` is not names, or ``on_empty`` is unknown.

    Examples
    --------
    >>> from spillway.testing import local_spark
    >>> df = local_spark().createDataFrame(
    ...     [(0, 0, 5.0, 0.25), (0, 0, 9.0, 0.25), (0, 0, 7.0, 0.5)],
    ...     "query_id int, window_start int, value double, sic double")
    >>> out = df.transform(sic_top_k, 2, "value").orderBy("rank")
    >>> [(r.rank, r.value, r.sic) for r in out.collect()]
    [(1, 9.0, 0.5), (2, 7.0, 0.5)]
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be an int >= 1, got {k!r}")
    fire = _names(firing, "firing")
    with_markers = EMPTY in df.columns and _on_empty(on_empty)
    marker = _is_marker(df)
    order = [marker.asc()] + [
        F.col(c).desc() if isinstance(c, str) else c for c in _as_list(order_by)
    ]
    w = Window.partitionBy(*[_ref(c) for c in fire]).orderBy(*order)
    ranked = df.withColumn(rank_col, F.row_number().over(w))
    return _spread(ranked, ~marker & (F.col(rank_col) <= k), fire, sic_col, with_markers)


def sic_union(df: DataFrame, *others: DataFrame) -> DataFrame:
    """Union of streams by column name; SIC passes through unchanged (THEMIS AllSrc, A1.6).

    When some inputs carry marker rows (``sic_empty``) the others get ``sic_empty = false``.

    Examples
    --------
    >>> from spillway.testing import local_spark
    >>> spark = local_spark()
    >>> a = spark.createDataFrame([(1.0, 0.5)], "value double, sic double")
    >>> b = spark.createDataFrame([(0.25, 2.0)], "sic double, value double")
    >>> sorted(tuple(r) for r in a.transform(sic_union, b).collect())
    [(1.0, 0.5), (2.0, 0.25)]
    """
    frames = [df, *others]
    if any(EMPTY in f.columns for f in frames):
        frames = [f if EMPTY in f.columns else f.withColumn(EMPTY, F.lit(False)) for f in frames]
    return reduce(lambda a, b: a.unionByName(b), frames)
