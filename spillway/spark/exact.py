"""Exact answers and the error of shed results against them (THEMIS §7.1; CoD §VII-C3).

Every feed is deterministic, so the exact answer of a query is the same query kind applied to
the same input with nothing shed: a batch Spark job over keep-all rows (for instance
``spark.read.format("spillway")`` with ``from_s``/``until_s``, see
:mod:`spillway.spark.source`). :func:`exact_results` runs it; :func:`window_errors` and
:func:`error_summary` pair shed results with exact ones by ``(query_id, window_start)`` (and
``key`` for the grouped kind) and measure the error with :mod:`spillway.quality.metrics` and
:mod:`spillway.quality.concept`:

=================================  ============================================================
kind                               metric
=================================  ============================================================
avg, max, count, avg_all           mean absolute relative error (``mare``): exact 0 and a
                                   window with no shed result are guarded as in
                                   :func:`~spillway.quality.metrics.mean_absolute_relative_error`
top5                               normalised Kendall distance ``K^(1/2)`` between the ranked
                                   machine lists (``topk_distance``); a marker row (rank 0) or
                                   a missing window is the empty list
cov                                ``sqrt(mean((cov~ - cov)^2))`` around the exact covariance
                                   (``cov_error``); windows whose shed covariance is undefined
                                   are skipped
group_avg                          CoD's grouped error (``grouped_error``, CoD §VII-C3): per
                                   window the mean over the EXACT groups of ``|shed - exact| /
                                   |exact|``, a group missing from the shed result counting 1
                                   (100 %); every per-group error clipped to [0, 1] (CoD Eq. 1's
                                   codomain; :func:`spillway.quality.concept.grouped_error`).
                                   Shed and exact rows pair by ``(query_id, window_start,
                                   key)``; a window with no shed result misses all its groups
=================================  ============================================================

Exact windows whose own value is undefined (a covariance of fewer than 2 pairs, an average of
nothing) have no ground truth and are left out. Per window the table also gives the shed
result's SIC (the sum over its rows), so error can be set against SIC (THEMIS Fig. 8).

Examples
--------
>>> import pandas as pd
>>> t = pd.to_datetime([0, 1], unit="s", utc=True)
>>> exact = pd.DataFrame({"query_id": [0, 0], "window_start": t, "rank": [1, 1],
...                       "value": [10.0, 20.0], "sic": [1.0, 1.0]})
>>> shed = exact.assign(value=[9.0, 20.0], sic=[0.5, 1.0])
>>> s = error_summary(shed, exact, "avg")
>>> (s.metric[0], float(s.error[0]), int(s.windows[0]), float(s.mean_sic[0]))
('mare', 0.05, 2, 0.75)

The grouped kind: window 0 has routes 3 and 7, the shed result lost route 7.

>>> exact = pd.DataFrame({"query_id": 0, "window_start": t[[0, 0, 1]], "key": [3, 7, 3],
...                       "rank": 1, "value": [10.0, 20.0, 30.0], "sic": 0.5})
>>> shed = exact.iloc[[0, 2]].assign(value=[11.0, 30.0], sic=0.25)
>>> w = window_errors(shed, exact, "group_avg")
>>> w[["error", "groups", "missing_groups"]].values.tolist()
[[0.55, 2.0, 1.0], [0.0, 1.0, 0.0]]
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame

from spillway.errors import ConfigError
from spillway.quality.concept import group_stats, grouped_error
from spillway.quality.metrics import (
    covariance_error,
    mean_absolute_relative_error,
    topk_distance,
)
from spillway.spark.queries import QueryKind, query_kind

#: Error metric per query kind.
METRICS: dict[str, str] = {
    "avg": "mare",
    "max": "mare",
    "count": "mare",
    "avg_all": "mare",
    "top5": "topk_distance",
    "cov": "cov_error",
    "group_avg": "grouped_error",
}

_KEY = ["query_id", "window_start"]
_NEEDED = ("query_id", "window_start", "rank", "value", "sic")
#: Columns :func:`window_errors` returns for every kind; the grouped kind adds :data:`_GROUPS`.
_WINDOW = ["query_id", "window_start", "exact", "shed", "sic", "error"]
_GROUPS = ["groups", "missing_groups"]


def exact_results(kind: QueryKind | str, rows: DataFrame, window_s: float) -> pd.DataFrame:
    """Apply ``kind`` to keep-all ``rows`` (a batch DataFrame) and collect the results.

    Parameters
    ----------
    kind : query kind or its name.
    rows : source rows with nothing shed (:data:`spillway.spark.queries.SOURCE_COLUMNS`).
    window_s : tumbling window length in seconds (the same as the shed run's).

    Returns
    -------
    pandas.DataFrame
        The result columns, timestamps as UTC pandas timestamps.

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> from spillway.spark.queries import SOURCE_SCHEMA_DDL
    >>> from spillway.testing import local_spark
    >>> ddl = SOURCE_SCHEMA_DDL.replace("timestamp", "double")
    >>> rows = local_spark().createDataFrame([(0, 0, 0, 3.0, 0.5, 0.1, 0.1),
    ...                                       (0, 0, 0, 5.0, 0.5, 0.6, 0.6)], ddl)
    >>> rows = rows.withColumn("event_ts", F.timestamp_seconds("event_ts")).withColumn(
    ...     "arrival_ts", F.timestamp_seconds("arrival_ts"))
    >>> exact_results("avg", rows, 1.0)[["value", "sic", "n_in"]].values.tolist()
    [[4.0, 1.0, 2.0]]
    """
    k = query_kind(kind) if isinstance(kind, str) else kind
    out = k.apply(rows, window_s)
    return out.sort_values([*_KEY, "key", "rank"], kind="stable").reset_index(drop=True)


def _check(df: pd.DataFrame, name: str, grouped: bool = False) -> pd.DataFrame:
    needed = (*_NEEDED, "key") if grouped else _NEEDED
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ConfigError(
            f"{name} results need the columns {', '.join(needed)}; missing {', '.join(missing)}"
        )
    return df


def _groups(df: pd.DataFrame) -> pd.Series:
    """Per (query, window): ``{key: value}`` of the rows with a key and a defined value."""
    real = df[df["key"].notna() & df["value"].notna()]
    windows, groups = [], []
    for w, g in real.groupby(_KEY, sort=True):
        windows.append(w)
        groups.append(dict(zip(g["key"].astype("int64"), g["value"].astype(float), strict=True)))
    index = pd.MultiIndex.from_tuples(windows, names=_KEY)
    return pd.Series(groups, index=index, dtype=object)


def _grouped_errors(shed: pd.DataFrame, exact: pd.DataFrame) -> pd.DataFrame:
    """CoD's grouped error per exact (query, window), pairing rows by key within the window."""
    e = _groups(exact).rename("exact")
    s = _groups(shed).reindex(e.index).rename("shed")
    s = s.apply(lambda v: v if isinstance(v, dict) else {})
    out = pd.concat([e, s], axis=1)
    err, groups, missing = [], [], []
    for ex, sh in zip(out["exact"], out["shed"], strict=True):
        truth = group_stats(np.fromiter(ex, np.int64, len(ex)), np.fromiter(ex.values(), float))
        got = grouped_error(
            truth, np.fromiter(sh, np.int64, len(sh)), np.fromiter(sh.values(), float)
        )
        err.append(got.mean)
        groups.append(got.n_groups)
        missing.append(got.missing)
    out["error"] = err
    out["groups"] = np.asarray(groups, dtype=np.int64)
    out["missing_groups"] = np.asarray(missing, dtype=np.int64)
    return out


def _ranked(df: pd.DataFrame) -> pd.Series:
    """Per (query, window): the list of values (machine ids) by rank, markers excluded."""
    real = df[df["rank"] >= 1].sort_values([*_KEY, "rank"], kind="stable")
    lists = real.groupby(_KEY, sort=True)["value"].agg(list)
    windows = df[_KEY].drop_duplicates().set_index(_KEY).index
    return lists.reindex(windows).apply(lambda v: v if isinstance(v, list) else [])


def window_errors(shed: pd.DataFrame, exact: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Shed vs exact, one row per exact (query, window) with a defined exact answer.

    Parameters
    ----------
    shed, exact : result tables (columns ``query_id, window_start, rank, value, sic``), e.g.
        :meth:`spillway.spark.sink.ResultStore.to_pandas` filtered to one kind, and
        :func:`exact_results`.
    kind : the query kind (chooses the metric, :data:`METRICS`).

    Returns
    -------
    pandas.DataFrame
        ``query_id, window_start, exact, shed, sic, error``: ``exact``/``shed`` are the values
        (lists of machine ids for top5, ``{key: mean}`` dicts for group_avg; ``shed`` NaN or
        empty when the window has no shed result), ``sic`` the shed window's summed SIC (0 when
        missing) and ``error`` the window's error (relative error, top-k distance, signed
        covariance difference, or CoD's grouped error). For group_avg also ``groups`` (the
        exact result's groups) and ``missing_groups`` (those absent from the shed result).

    Raises
    ------
    ConfigError
        A table lacks a column (group_avg also needs ``key``); the kind is unknown.
    """
    metric = METRICS[query_kind(kind).name]
    grouped = metric == "grouped_error"
    _check(shed, "shed", grouped)
    _check(exact, "exact", grouped)
    sic = shed.groupby(_KEY)["sic"].sum().rename("sic")
    if grouped:
        out = _grouped_errors(shed, exact)
        out["sic"] = sic.reindex(out.index).fillna(0.0)
        return out.reset_index()[_WINDOW + _GROUPS]
    if metric == "topk_distance":
        e = _ranked(exact).rename("exact")
        s = _ranked(shed).rename("shed")
        out = pd.concat([e, s.reindex(e.index), sic.reindex(e.index)], axis=1)
        out["shed"] = out["shed"].apply(lambda v: v if isinstance(v, list) else [])
        out["error"] = [topk_distance(a, b) for a, b in zip(out["shed"], out["exact"], strict=True)]
    else:
        e = exact.groupby(_KEY)["value"].first().rename("exact").dropna()
        s = shed.groupby(_KEY)["value"].first().rename("shed")
        out = pd.concat([e, s.reindex(e.index), sic.reindex(e.index)], axis=1)
        if metric == "mare":
            out["error"] = [
                mean_absolute_relative_error([a], [b])
                for a, b in zip(out["shed"], out["exact"], strict=True)
            ]
        else:
            out["error"] = out["shed"] - out["exact"]
    out["sic"] = out["sic"].fillna(0.0)
    return out.reset_index()[_WINDOW]


def error_summary(shed: pd.DataFrame, exact: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Error of shed results per query, with the metric of the kind (THEMIS §7.1).

    Returns
    -------
    pandas.DataFrame
        One row per query: ``query_id, kind, metric, error, windows, missing, mean_sic``:
        ``windows`` exact windows compared, ``missing`` those with no shed result, ``mean_sic``
        the mean shed window SIC over them (0 for missing ones). ``error`` is the MARE, the
        mean top-k distance, the covariance error, or the mean grouped error over the windows
        (NaN if none). For group_avg also ``groups`` and ``missing_groups``: exact groups over
        the windows and those absent from the shed result (CoD §VII-C3's missing groups).

    Raises
    ------
    ConfigError
        A table lacks a column; the kind is unknown.
    """
    name = query_kind(kind).name
    metric = METRICS[name]
    per = window_errors(shed, exact, name)
    has = set(map(tuple, shed[_KEY].drop_duplicates().itertuples(index=False)))
    rows = []
    for q, g in per.groupby("query_id", sort=True):
        present = np.array([(q, w) in has for w in g["window_start"]], dtype=bool)
        if metric == "mare":
            err = mean_absolute_relative_error(
                g["shed"].to_numpy(float), g["exact"].to_numpy(float)
            )
        elif metric == "cov_error":
            err = covariance_error(g["shed"].to_numpy(float), g["exact"].to_numpy(float))
        else:
            err = float(g["error"].mean()) if len(g) else math.nan
        row = {
            "query_id": int(q),
            "kind": name,
            "metric": metric,
            "error": err,
            "windows": len(g),
            "missing": int((~present).sum()),
            "mean_sic": float(g["sic"].mean()),
        }
        if metric == "grouped_error":
            row.update({c: int(g[c].sum()) for c in _GROUPS})
        rows.append(row)
    cols = ["query_id", "kind", "metric", "error", "windows", "missing", "mean_sic"]
    if metric == "grouped_error":
        cols += _GROUPS
    return pd.DataFrame(rows, columns=cols)
