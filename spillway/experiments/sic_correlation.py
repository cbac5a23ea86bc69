"""SIC vs result error on one Spark node under random shedding (THEMIS §7.1 Figs. 6-7; DISSP §6.2).

The paper overloads one node step by step by adding queries, sheds tuples at random and sets
the error of every result against the perfect answer beside the result's SIC. Here every load
step is one :class:`~spillway.spark.node.Node` run on Spark that hosts ``n`` queries of every
case (AVG, MAX and COUNT over the gaussian, uniform, exponential, mixed and cluster feeds;
TOP-5; COV), all shed by the random policy (THEMIS's baseline). The exact answers are the
node's batch Spark job over the same feeds with nothing shed.

Load. The node's capacity for this query mix is measured once, with nothing shed (the node's
calibration, :func:`~spillway.experiments._spark_runs.measure_capacity`), and step ``n``
arrives at ``n / capacity_queries`` times it (rates scaled, their ratios kept); each step's
node budgets with its own cost models, and each step reports the overload its own batches
measured. ``fixed_capacity=True`` is the labelled alternative: the node's budget typed in as
``capacity_queries`` load units at the paper's rates (then the SIC of each step is arithmetic of
that budget). The exact job re-reads every tuple that arrived, shed or not, so it covers the
last ``exact_span_s`` seconds of each step (``None``: the whole step).

Every result window of every query is compared with its exact answer (windows.csv). A
*point* of the study is one case at one load step: the SIC of its results (the mean window
result SIC times ``stw_s / window_s``, i.e. THEMIS Eq. 4 over one STW of such windows; 1 means
perfect) and the error of all its results at that step: mean absolute relative error (AVG,
MAX, COUNT; THEMIS §7.1 "for all result tuples"), mean normalised Kendall distance (TOP-5), or
the spread of the shed covariances around the exact ones relative to the exact covariances'
spread (COV). Per case the experiment reports Spearman's rho of SIC against error over its
points (one per step, as THEMIS plots error against the SIC of each degree of overload), and
also over per-query points (one per query and step, noisier: each rests on one query's windows).

Examples
--------
>>> cfg = make_config(quick=True, seed=0)
>>> [c.label for c in cases(cfg)][:3]
['avg/gaussian', 'avg/uniform', 'avg/exponential']
>>> len(level_config(cfg, 2)[0].queries) == 2 * sum(c.replicas for c in cases(cfg))
True

References
----------
THEMIS (SIGMOD 2016) §7.1, Figs. 6-7; Fiscato, PhD thesis, 2012, §6.2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments._spark_runs import (
    LevelRun,
    at_rate,
    check_levels,
    check_positive,
    experiment_spark,
    input_rate,
    measure_capacity,
    measured_overload,
    run_level,
)
from spillway.experiments.checks import Check, compare, every
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.quality.metrics import spearman_rho
from spillway.reporting import markdown_table, num

#: Feeds of the aggregate queries (THEMIS §7: synthetic, mixed and a real-world stand-in).
DATASETS: tuple[str, ...] = ("gaussian", "uniform", "exponential", "mixed", "cluster")
#: The aggregate workload (THEMIS Table 1).
AGGREGATES: tuple[str, ...] = ("avg", "max", "count")
#: Paper names of the query kinds.
TITLES: dict[str, str] = {"avg": "AVG", "max": "MAX", "count": "COUNT", "top5": "TOP-5",
                          "cov": "COV"}  # fmt: skip
#: Error metric per kind, as reported.
ERROR_NAMES: dict[str, str] = {
    "avg": "mean absolute relative error",
    "max": "mean absolute relative error",
    "count": "mean absolute relative error",
    "top5": "normalised Kendall distance",
    "cov": "RMS of covariance error / RMS of exact covariance",
}
#: Spearman's rho of SIC against error must be at most this (THEMIS §7.1: "significant
#: correlation", strongest for COUNT).
RHO_LIMITS: dict[str, float] = {"count": -0.8, "top5": -0.7, "cov": -0.7}
#: AVG error must be below COUNT error at every SIC up to this value (THEMIS §7.1: AVG's error
#: changes little, COUNT's grows with shedding).
AVG_BELOW_COUNT_UP_TO = 0.8

#: One line for ``spillway experiment --help``.
DESCRIPTION = (
    "THEMIS Figs. 6-7 / DISSP §6: SIC against result error as load rises (random shedder, Spark)"
)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One (query kind, dataset) of the study and how its queries are fed.

    >>> Case(kind="cov", dataset="cluster", sources=2, rate=400.0).feed_options
    {'layout': 'cpu'}
    """

    kind: str
    dataset: str
    sources: int
    rate: float
    replicas: int = 1

    @property
    def label(self) -> str:
        """``kind/dataset``."""
        return f"{self.kind}/{self.dataset}"

    @property
    def feed_options(self) -> dict[str, Any]:
        """Cluster feed: CPU % per source, except TOP-5's CPU + memory pairs."""
        return {"layout": "cpu"} if self.dataset == "cluster" and self.kind != "top5" else {}

    @property
    def tuples_per_s(self) -> float:
        """Arrival rate of one load unit of this case (``replicas`` queries)."""
        return self.rate * self.sources * self.replicas


@dataclass(frozen=True, kw_only=True)
class SicCorrelationConfig:
    """Settings of the SIC-correlation study.

    Parameters
    ----------
    levels : queries per case at each load step (strictly increasing).
    capacity_queries : node capacity, as the load of this many queries of every case; the
        overload of step ``n`` is ``n / capacity_queries`` (SIC about ``capacity_queries / n``).
    rate : tuples/s per source of the aggregate and COV queries (THEMIS: 400).
    top5_rate : tuples/s per source of TOP-5 (THEMIS: 20; 20 sources = 10 machines).
    datasets : feeds of the aggregate queries.
    cov_datasets : feeds of the COV queries (2 sources each).
    top5 : include TOP-5 (cluster feed: machine CPU and free memory).
    spread_replicas : queries per load unit of TOP-5 and COV (1 for the aggregates). Their
        error is a spread estimated over result windows (a mean rank distance, an RMS of
        covariance differences), so each step pools this many queries' windows.
    duration_s : streaming time per step (THEMIS: 5 minutes).
    warmup_s : windows within this long after the node is warm (every plan finished its
        first micro-batches) are not compared.
    stw_s, trigger_s : source time window and shedding interval (= trigger).
    fixed_capacity : the labelled option: fix the node's budget at ``capacity_queries`` load
        units of the configured rates instead of measuring the capacity (False).
    calibrate_s : length of the capacity measurement (measured capacity only).
    exact_span_s : the exact answers cover the last this many seconds of each step (None: all).
    seed : seed of feeds and shedder.
    master : Spark master URL.
    """

    levels: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)
    capacity_queries: float = 1.6
    rate: float = 400.0
    top5_rate: float = 20.0
    datasets: tuple[str, ...] = DATASETS
    cov_datasets: tuple[str, ...] = ("gaussian", "cluster")
    top5: bool = True
    spread_replicas: int = 3
    duration_s: float = 300.0
    warmup_s: float = 10.0
    stw_s: float = 10.0
    trigger_s: float = 2.0
    fixed_capacity: bool = False
    calibrate_s: float = 30.0
    exact_span_s: float | None = 40.0
    seed: int = 0
    master: str = "local[2]"

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", check_levels("levels", self.levels))
        for name in ("capacity_queries", "rate", "top5_rate", "duration_s", "stw_s", "trigger_s",
                     "calibrate_s"):  # fmt: skip
            check_positive(name, getattr(self, name))
        if self.exact_span_s is not None:
            check_positive("exact_span_s", self.exact_span_s)
        if not isinstance(self.fixed_capacity, bool):
            raise ConfigError(f"fixed_capacity must be True or False, got {self.fixed_capacity!r}")
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        if self.warmup_s >= self.duration_s:
            raise ConfigError(
                f"warmup_s must be below duration_s (windows after it are compared), got "
                f"warmup_s={self.warmup_s} and duration_s={self.duration_s}"
            )
        for name in ("datasets", "cov_datasets"):
            vals = tuple(getattr(self, name))
            object.__setattr__(self, name, vals)
            bad = [d for d in vals if d not in DATASETS]
            if bad:
                raise UnknownNameError(
                    f"{name} must name feeds among {', '.join(DATASETS)}; got {', '.join(bad)}"
                )
        r = self.spread_replicas
        if not isinstance(r, int) or isinstance(r, bool) or r < 1:
            raise ConfigError(f"spread_replicas must be an int >= 1, got {r!r}")
        if not self.datasets and not self.cov_datasets and not self.top5:
            raise ConfigError(
                "the study needs at least one case: set datasets, cov_datasets or top5"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")

    @property
    def window_s(self) -> float:
        """Result window of every query (THEMIS Table 1: 1 s)."""
        return 1.0


def make_config(quick: bool = False, seed: int = 0) -> SicCorrelationConfig:
    """The paper-shaped study (8 steps of 5 min), or a quick one (4 steps of 20 s, a shorter
    capacity measurement, exact answers of the last 8 s of each step).

    >>> make_config(quick=True, seed=3).levels
    (1, 2, 4, 8)
    """
    if quick:
        return SicCorrelationConfig(
            levels=(1, 2, 4, 8), duration_s=20.0, warmup_s=6.0, calibrate_s=16.0,
            exact_span_s=8.0, seed=seed,
        )  # fmt: skip
    return SicCorrelationConfig(seed=seed)


def cases(config: SicCorrelationConfig) -> list[Case]:
    """Every (kind, dataset) case in report order: aggregates, then TOP-5, then COV."""
    out = [
        Case(kind=k, dataset=d, sources=1, rate=config.rate)
        for k in AGGREGATES
        for d in config.datasets
    ]
    r = config.spread_replicas
    if config.top5:
        out.append(
            Case(kind="top5", dataset="cluster", sources=20, rate=config.top5_rate, replicas=r)
        )
    out += [
        Case(kind="cov", dataset=d, sources=2, rate=config.rate, replicas=r)
        for d in config.cov_datasets
    ]
    return out


def capacity_tuples_per_s(config: SicCorrelationConfig) -> float:
    """The fixed node capacity (``fixed_capacity=True``): ``capacity_queries`` load units of
    every case at the configured rates.

    >>> cfg = make_config(quick=True, seed=0)
    >>> capacity_tuples_per_s(cfg) == 1.6 * sum(c.tuples_per_s for c in cases(cfg))
    True
    """
    return config.capacity_queries * sum(c.tuples_per_s for c in cases(config))


def level_config(config: SicCorrelationConfig, n: int) -> tuple[NodeConfig, list[Case]]:
    """The node of load step ``n`` (``n`` load units per case) and the case of every query."""
    queries, of = [], []
    for case in cases(config):
        for i in range(n * case.replicas):
            queries.append(
                QuerySpec(
                    name=f"{case.label}/{i}",
                    kind=case.kind,
                    feed=case.dataset,
                    feed_options=case.feed_options,
                    sources=case.sources,
                    rate=case.rate,
                    window_s=config.window_s,
                )
            )
            of.append(case)
    node = NodeConfig(
        queries=tuple(queries),
        policy="random",
        seed=config.seed,
        trigger_s=config.trigger_s,
        stw_s=config.stw_s,
        master=config.master,
    )
    return node, of


def compared_windows(
    run_results: pd.DataFrame, run_exact: pd.DataFrame, kind: str, *, warmup_s: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Shed and exact rows of ``kind`` of the windows from ``warmup_s`` (feed seconds, column
    ``t``) on.

    The exact answers hold only the windows the streaming run had closed when it stopped
    (:func:`~spillway.experiments._spark_runs.run_level`), so an exact window with no shed row
    lost every tuple to shedding, and its error counts, up to the last one (before, the last
    shed window cut the comparison short, and a tail of windows shed whole went unseen).

    >>> shed = pd.DataFrame({"kind": ["avg"] * 3, "t": [0.0, 1.0, 2.0]})
    >>> exact = pd.DataFrame({"kind": ["avg"] * 4, "t": [0.0, 1.0, 2.0, 3.0]})
    >>> [len(x) for x in compared_windows(shed, exact, "avg", warmup_s=1.0)]
    [2, 3]
    """
    shed = run_results[run_results["kind"] == kind]
    exact = run_exact[run_exact["kind"] == kind]
    return shed[shed["t"] >= warmup_s], exact[exact["t"] >= warmup_s]


def level_windows(
    run_results: pd.DataFrame,
    run_exact: pd.DataFrame,
    query_cases: Sequence[Case],
    *,
    level: int,
    stw_s: float,
    window_s: float,
    warmup_s: float,
) -> pd.DataFrame:
    """Every compared result window of a load step, with its SIC and error.

    ``run_results`` / ``run_exact`` have the columns of :attr:`LevelRun.results` (``query_id``,
    ``kind``, ``window_start``, ``rank``, ``value``, ``sic``, feed-time ``t``); ``query_cases``
    gives the case of every query id. Per window (:func:`spillway.spark.exact.window_errors`):
    ``sic`` is the window's result SIC times ``stw_s / window_s`` (0 when every tuple was
    shed), ``error`` the relative error (AVG, MAX, COUNT), the normalised Kendall distance
    (TOP-5) or the signed covariance difference (COV), and ``used`` whether the window enters
    its query's error: not for a relative error whose exact answer is 0 (undefined; a COUNT
    over a machine whose CPU never reaches 50 % has no usable window), not for a covariance
    the shed window could not compute (fewer than 2 pairs).

    Examples
    --------
    >>> t = pd.to_datetime([5.0, 6.0, 7.0], unit="s", utc=True)
    >>> exact = pd.DataFrame({"query_id": [0, 0, 0], "kind": "count", "window_start": t,
    ...     "rank": 1, "value": [200.0, 180.0, 0.0], "sic": [0.1] * 3, "t": [5.0, 6.0, 7.0]})
    >>> shed = exact.assign(value=[100.0, 90.0, 0.0], sic=[0.05, 0.05, 0.05])
    >>> case = Case(kind="count", dataset="gaussian", sources=1, rate=400.0)
    >>> w = level_windows(shed, exact, [case], level=2, stw_s=10.0, window_s=1.0, warmup_s=0.0)
    >>> w[["case", "sic", "error", "used"]].values.tolist()
    [['count/gaussian', 0.5, 0.5, True], ['count/gaussian', 0.5, 0.5, True], ['count/gaussian', 0.5, 0.0, False]]
    """
    from spillway.spark.exact import METRICS, window_errors

    frames = []
    for kind in dict.fromkeys(c.kind for c in query_cases):
        shed, exact = compared_windows(run_results, run_exact, kind, warmup_s=warmup_s)
        if exact.empty:
            continue
        per = window_errors(shed, exact, kind)
        metric = METRICS[kind]
        if metric == "mare":
            used = per["exact"].astype(float) != 0
        elif metric == "cov_error":
            used = per["shed"].notna()
        else:
            used = pd.Series(True, index=per.index)
        ids = per["query_id"].astype(int)
        frames.append(
            pd.DataFrame(
                {
                    "level": level,
                    "query_id": ids,
                    "case": [query_cases[i].label for i in ids],
                    "query": kind,
                    "dataset": [query_cases[i].dataset for i in ids],
                    "window_start": per["window_start"],
                    "sic": per["sic"].astype(float) * stw_s / window_s,
                    "exact": per["exact"],
                    "shed": per["shed"],
                    "error": per["error"],
                    "metric": metric,
                    "used": used.to_numpy(dtype=bool),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=list(WINDOW_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(WINDOW_COLUMNS)]


#: Columns of :func:`level_windows`.
WINDOW_COLUMNS = ("level", "query_id", "case", "query", "dataset", "window_start", "sic",
                  "exact", "shed", "error", "metric", "used")  # fmt: skip


def group_error(g: pd.DataFrame) -> float:
    """The error of a set of result windows of one kind (only the ``used`` ones).

    AVG, MAX, COUNT: mean relative error. TOP-5: mean Kendall distance. COV:
    ``sqrt(mean((cov~ - cov)^2)) / sqrt(mean(cov^2))``: the spread of the shed covariances
    around the exact ones (THEMIS: their "standard deviation" around the perfect value)
    relative to the spread of the exact covariances (DISSP §6.2 compares the two), which makes
    sources of different scales comparable (gaussian feeds: covariances of about 5; two
    machines' CPU: about 1).

    >>> g = pd.DataFrame({"metric": "cov_error", "used": True, "exact": [2.0, -2.0],
    ...                   "error": [-1.0, -1.0]})
    >>> group_error(g)
    0.5
    """
    u = g[g["used"].astype(bool)]
    if u.empty:
        return math.nan
    if u["metric"].iloc[0] == "cov_error":
        scale = float(np.sqrt(np.mean(u["exact"].astype(float) ** 2)))
        rms = float(np.sqrt(np.mean(u["error"].astype(float) ** 2)))
        return rms / scale if scale > 0 else math.nan
    return float(u["error"].astype(float).mean())


def aggregate(windows: pd.DataFrame, *, per_query: bool = False) -> list[dict[str, Any]]:
    """Points from result windows: one per (step, case), or per (step, case, query).

    A point's SIC is the mean SIC of its used windows; its error is :func:`group_error`.

    >>> w = pd.DataFrame({"level": 1, "query_id": [0, 1], "case": "avg/uniform",
    ...     "query": "avg", "dataset": "uniform", "sic": [0.4, 0.6], "error": [0.1, 0.3],
    ...     "exact": [1.0, 1.0], "shed": [0.9, 1.3], "metric": "mare", "used": True})
    >>> [(p["sic"], round(p["error"], 3), p["queries"]) for p in aggregate(w)]
    [(0.5, 0.2, 2)]
    >>> len(aggregate(w, per_query=True))
    2
    """
    keys = ["level", "case", "query", "dataset"] + (["query_id"] if per_query else [])
    out: list[dict[str, Any]] = []
    if windows.empty:
        return out
    for k, g in windows.groupby(keys, sort=False):
        used = g["used"].astype(bool)
        if not used.any():
            continue
        row = dict(zip(keys, k, strict=True))
        shed = g["shed"][used]
        missing = shed.apply(lambda v: isinstance(v, list) and not v) | shed.isna()
        row.update(
            {
                "sic": float(g["sic"][used].mean()),
                "error": group_error(g),
                "metric": str(g["metric"].iloc[0]),
                "windows": int(used.sum()),
                "missing": int(missing.sum()),
                "queries": int(g["query_id"][used].nunique()),
            }
        )
        out.append(row)
    return out


def _finite(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in points if math.isfinite(p["sic"]) and math.isfinite(p["error"])]


def _rho(points: Sequence[Mapping[str, Any]]) -> float:
    pts = _finite(points)
    if len(pts) < 2:
        return math.nan
    return spearman_rho([p["sic"] for p in pts], [p["error"] for p in pts])


def case_summaries(
    points: Sequence[Mapping[str, Any]],
    case_list: Sequence[Case],
    query_points: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Per case: Spearman's rho of SIC against error over its points (one per step), the
    same over its per-query points, and the points as ``[sic, error]`` pairs.

    >>> pts = [{"case": "count/uniform", "sic": s, "error": 1 - s} for s in (0.2, 0.5, 0.9)]
    >>> c = Case(kind="count", dataset="uniform", sources=1, rate=400.0)
    >>> s = case_summaries(pts, [c])[0]
    >>> s["query"], s["dataset"], s["spearman_rho"], s["limit"], s["ok"]
    ('count', 'uniform', -1.0, -0.8, True)
    """
    out = []
    for case in case_list:
        pts = [p for p in _finite(points) if p["case"] == case.label]
        per_q = [p for p in _finite(query_points) if p["case"] == case.label]
        rho = _rho(pts)
        limit = RHO_LIMITS.get(case.kind)
        out.append(
            {
                "query": case.kind,
                "dataset": case.dataset,
                "metric": ERROR_NAMES[case.kind],
                "spearman_rho": rho,
                "limit": limit,
                "ok": None if limit is None else bool(math.isfinite(rho) and rho <= limit),
                "n_points": len(pts),
                "points": [[float(p["sic"]), float(p["error"])] for p in pts],
                "spearman_rho_per_query": _rho(per_q),
                "n_query_points": len(per_q),
            }
        )
    return out


def avg_vs_count(
    points: Sequence[Mapping[str, Any]], *, up_to: float = AVG_BELOW_COUNT_UP_TO
) -> list[dict[str, Any]]:
    """Per dataset and load step with COUNT SIC ``<= up_to``: AVG vs COUNT error.

    AVG and COUNT queries of one step run on one node and are shed alike, so they share a SIC.

    >>> pts = [{"case": f"{q}/uniform", "query": q, "dataset": "uniform", "level": 2,
    ...         "sic": 0.5, "error": e} for q, e in [("avg", 0.02), ("count", 0.5)]]
    >>> r = avg_vs_count(pts)[0]
    >>> r["dataset"], r["avg_error"], r["count_error"], r["ok"]
    ('uniform', 0.02, 0.5, True)
    """
    means = pd.DataFrame(list(_finite(points)))
    rows: list[dict[str, Any]] = []
    if means.empty:
        return rows
    for (dataset, level), g in means.groupby(["dataset", "level"], sort=False):
        by = g.set_index("query")
        if "avg" not in by.index or "count" not in by.index:
            continue
        sic = float(by.loc["count", "sic"])
        if sic > up_to:
            continue
        a, c = float(by.loc["avg", "error"]), float(by.loc["count", "error"])
        rows.append(
            {
                "dataset": dataset,
                "level": int(level),
                "sic": sic,
                "avg_error": a,
                "count_error": c,
                "ok": bool(a < c),
            }
        )
    return rows


def count_vs_one_minus_sic(points: Sequence[Mapping[str, Any]]) -> float:
    """Largest ``|COUNT error − (1 − SIC)|`` over the points (about 0.07 is expected: a COUNT
    over a random share of the tuples misses the rest).

    >>> count_vs_one_minus_sic([{"case": "count/x", "query": "count", "dataset": "x",
    ...                          "level": 1, "sic": 0.4, "error": 0.62}])
    0.02
    """
    m = pd.DataFrame(list(_finite(points)))
    if m.empty or not (m["query"] == "count").any():
        return math.nan
    m = m[m["query"] == "count"]
    return round(float((m["error"] - (1.0 - m["sic"])).abs().max()), 12)


# ------------------------------------------------------------------------------ the Spark part


def run_levels(config: SicCorrelationConfig, spark: Any = None) -> tuple[pd.DataFrame, list]:
    """Run every load step on Spark; returns (every compared result window, per-step records).

    The capacity is measured once (first, on the one-unit node) unless ``fixed_capacity``.
    """
    from spillway.policies import make_policy

    spark = spark if spark is not None else experiment_spark(config.master)
    if config.fixed_capacity:
        cap, fixed = capacity_tuples_per_s(config), True
    else:
        cal = measure_capacity(
            level_config(config, 1)[0], spark=spark, calibrate_s=config.calibrate_s
        )
        cap, fixed = float(cal["capacity_tuples_per_s"]), False
    windows: list[pd.DataFrame] = []
    steps: list[dict[str, Any]] = []
    for n in config.levels:
        node_cfg, query_cases = level_config(config, n)
        if not fixed:  # arrivals at n / capacity_queries times the measured capacity
            node_cfg = at_rate(node_cfg, n / config.capacity_queries * cap)
        run: LevelRun = run_level(
            node_cfg,
            spark=spark,
            duration_s=config.duration_s,
            policy=make_policy("random", seed=config.seed),
            capacity_tuples_per_s=cap if fixed else None,
            exact=True,
            exact_span_s=config.exact_span_s,
        )
        assert run.exact is not None
        windows.append(
            level_windows(
                run.results,
                run.exact,
                query_cases,
                level=n,
                stw_s=config.stw_s,
                window_s=config.window_s,
                warmup_s=run.ready_s + config.warmup_s,
            )
        )
        steps.append(_step_record(run, n, node_cfg, cap, run.ready_s + config.warmup_s))
    return pd.concat(windows, ignore_index=True), steps


def _step_record(run: LevelRun, n: int, node: NodeConfig, cap: float, warmup: float) -> dict:
    rate = input_rate(node)
    measured = measured_overload(run, from_s=warmup)
    return {
        "level": n,
        "queries": len(node.queries),
        "input_rate": rate,
        "capacity_tuples_per_s": cap,
        "overload": rate / cap,
        "overload_measured": measured["overload_measured"],
        "capacity_measured_tuples_per_s": measured["capacity_measured_tuples_per_s"],
        "kept_fraction": measured["kept_fraction"],
        "batches": sum(len(b) for b in run.batches.values()),
        "result_rows": len(run.results),
        "exact_rows": 0 if run.exact is None else len(run.exact),
        "ready_s": run.ready_s,
        "until_s": run.until_s,
        "wall_s": run.wall_s,
        "attempts": run.attempts,
    }


# ------------------------------------------------------------------------------ checks


def checks(case_rows: Sequence[Mapping[str, Any]], avc: Sequence[Mapping[str, Any]]) -> list[Check]:
    """THEMIS §7.1's claims on this run's points.

    - ``rho_within_limits``: Spearman's rho of SIC against error at most :data:`RHO_LIMITS`
      for every COUNT, TOP-5 and COV case (a rho that could not be computed fails);
    - ``avg_below_count_at_sic_le_0.8``: AVG's error below COUNT's at every step and dataset
      with SIC <= 0.8; not applicable when no step reached that SIC.

    >>> rows = [{"query": "count", "dataset": "uniform", "spearman_rho": -0.2, "limit": -0.8}]
    >>> [(c.name, c.verdict) for c in checks(rows, [])]
    [('rho_within_limits', 'fail'), ('avg_below_count_at_sic_le_0.8', 'not applicable')]
    """
    rho = every(
        "rho_within_limits",
        [compare(f"{c['query']}/{c['dataset']}", c["spearman_rho"], "<=", c["limit"])
         for c in case_rows if c.get("limit") is not None],
        none_why="no COUNT, TOP-5 or COV case ran",
    )  # fmt: skip
    below = every(
        f"avg_below_count_at_sic_le_{AVG_BELOW_COUNT_UP_TO}",
        [compare(f"{r['dataset']} step {r['level']} (SIC {num(r['sic'], 3)})", r["avg_error"],
                 "<", r["count_error"],
                 what=f"{r['dataset']} step {r['level']} (SIC {num(r['sic'], 3)}): AVG error")
         for r in avc],
        none_why=f"no load step reached SIC <= {AVG_BELOW_COUNT_UP_TO} (or none ran both AVG "
        "and COUNT on one dataset)",
    )  # fmt: skip
    return [rho, below]


# ------------------------------------------------------------------------------ analysis


def analyse(
    config: SicCorrelationConfig, measured: tuple[pd.DataFrame, Sequence[Mapping[str, Any]]]
) -> Analysis:
    """Values, checks, tables, figures and prose of a sic-correlation run (``measured``: every
    compared result window and the per-step records, as :func:`run_levels` returns them).

    summary.json: ``cases`` (query, dataset, spearman_rho, points, the per-query rho),
    ``avg_below_count``, ``count_error_minus_one_minus_sic_max`` and ``steps``.
    """
    windows, steps = measured
    points = aggregate(windows)
    query_points = aggregate(windows, per_query=True)
    case_rows = case_summaries(points, cases(config), query_points)
    avc = avg_vs_count(points)
    rows = windows.assign(window_start=windows["window_start"].astype(str))
    rows["exact"] = rows["exact"].astype(str)
    rows["shed"] = rows["shed"].astype(str)
    values = {
        "cases": case_rows,
        "avg_below_count": avc,
        "count_error_minus_one_minus_sic_max": count_vs_one_minus_sic(points),
        "steps": list(steps),
    }
    found = checks(case_rows, avc)
    return Analysis(
        values=values,
        checks=found,
        tables={"points.csv": points, "query_points.csv": query_points, "windows.csv": rows,
                "steps.csv": list(steps)},
        figures=_figures(points),
        setup=_setup(config, steps),
        paper=_paper(values),
        notes=_notes(config),
        sections=[("AVG vs COUNT error at SIC <= 0.8", _avc_text(avc))],
    )  # fmt: skip


#: What THEMIS §7.1 shows in each panel (its values exist only in the plots).
FIGURE_CLAIMS = {
    "avg": "THEMIS Fig. 6a (AVG): error falls as SIC rises, with small changes",
    "count": "THEMIS Fig. 6b (COUNT): the strongest correlation; error grows linearly with "
    "shedding",
    "max": "THEMIS Fig. 6c (MAX): small error on synthetic data, larger on mixed/real data",
    "top5": "THEMIS Fig. 7 (TOP-5): significant correlation, distance falls as SIC rises",
    "cov": "THEMIS Fig. 7 (COV): significant correlation, larger on real than synthetic data",
}


def _figures(points: Sequence[Mapping[str, Any]]) -> list[Figure]:
    pts = pd.DataFrame(list(_finite(points)))
    figs: list[Figure] = []
    if pts.empty:
        return figs
    # THEMIS Fig. 6: (a) AVG, (b) COUNT, (c) MAX; Fig. 7: TOP-5 and COV.
    panels = [("avg", "fig6a_avg.png", "Fig. 6a"), ("count", "fig6b_count.png", "Fig. 6b"),
              ("max", "fig6c_max.png", "Fig. 6c"), ("top5", "fig7a_top5.png", "Fig. 7"),
              ("cov", "fig7b_cov.png", "Fig. 7")]  # fmt: skip
    for kind, name, fig in panels:
        m = pts[pts["query"] == kind]
        if m.empty:
            continue
        series = {}
        for dataset, g in m.groupby("dataset", sort=False):
            g = g.sort_values("sic")
            series[str(dataset)] = (g["sic"].tolist(), g["error"].tolist())
        figs.append(
            Figure(
                file=name, series=series,
                title=f"{TITLES[kind]}: error vs SIC, random shedding ({fig})",
                xlabel="result SIC (one point per load step)", ylabel=ERROR_NAMES[kind],
                paper=FIGURE_CLAIMS[kind],
            )
        )  # fmt: skip
    return figs


def _setup(config: SicCorrelationConfig, steps: Sequence[Mapping[str, Any]]) -> str:
    cap = steps[0].get("capacity_tuples_per_s", math.nan) if steps else math.nan
    load = (
        f"**fixed node capacity (labelled option)** {num(cap)} tuples/s, the load of "
        f"{config.capacity_queries:g} units of every case at the configured rates, so the SIC "
        "of each step is arithmetic of that budget"
        if config.fixed_capacity
        else f"the node's capacity for this query mix measured once, nothing shed: {num(cap)} "
        f"tuples per second of batch time ({config.calibrate_s:g} s calibration on the one-unit "
        f"node); step n arrives at n / {config.capacity_queries:g} times it (every source rate "
        "scaled, ratios kept) and each step's node budgets with its own cost models; "
        "`overload_measured` is each step's arrival rate over what its own batches achieved"
    )
    exact = (
        f"the last {config.exact_span_s:g} s of each step"
        if config.exact_span_s is not None
        else "every window of each step"
    )
    return (
        f"One spillway Node on Spark (`{config.master}`), random shedder; {load}. Load steps: "
        f"{', '.join(map(str, config.levels))} load units per case (a "
        f"unit is 1 query, {config.spread_replicas} for TOP-5 and COV), each "
        f"step a fresh node streaming for {config.duration_s:g} s once warm (every plan past its "
        f"first micro-batches, `ready_s`); windows in the first {config.warmup_s:g} s after that "
        f"are not compared. Sources: {config.rate:g} tuples/s "
        f"(aggregates, COV), {config.top5_rate:g} tuples/s for TOP-5 (20 sources = 10 "
        f"machines) before scaling. STW {config.stw_s:g} s, trigger (shedding interval) {config.trigger_s:g} s, "
        f"1 s tumbling windows, seed {config.seed}. Exact answers: the node's batch Spark job "
        f"over the same feeds with nothing shed, for {exact}.\n\n"
        + markdown_table(
            list(steps),
            [
                "level",
                "queries",
                "input_rate",
                "overload",
                "overload_measured",
                "kept_fraction",
                "result_rows",
                "exact_rows",
                "wall_s",
            ],
        )  # fmt: skip
    )


def _paper(values: Mapping[str, Any]) -> str:
    rows = [
        {
            "query": TITLES[c["query"]],
            "dataset": c["dataset"],
            "paper": _paper_claim(c["query"]),
            "spearman_rho (measured)": c["spearman_rho"],
            "required": "n/a" if c["limit"] is None else f"<= {c['limit']}",
            "met": "n/a" if c["ok"] is None else ("yes" if c["ok"] else "NO"),
            "points": c["n_points"],
            "rho per query": c["spearman_rho_per_query"],
            "query points": c["n_query_points"],
        }
        for c in values["cases"]
    ]
    return (
        markdown_table(rows)
        + "\n\nLargest |COUNT error − (1 − SIC)| over steps: "
        + f"{num(values['count_error_minus_one_minus_sic_max'], 3)} (a COUNT over a random "
        "share of the tuples misses the rest: about 0.07 expected)"
    )


def _avc_text(avc: Sequence[Mapping[str, Any]]) -> str:
    if not avc:
        return "_(no load step reached SIC <= 0.8)_"
    return markdown_table(avc, ["dataset", "level", "sic", "avg_error", "count_error", "ok"])


def _notes(config: SicCorrelationConfig) -> str:
    return (
        "- The paper's numbers for Figs. 6-7 exist only in its plots; its text states the "
        "trend (error falls as SIC rises; stronger for COUNT, weaker for AVG; COV error larger "
        "on real than synthetic data). The `paper` column quotes that.\n"
        "- Shedding interval: one Spark micro-batch per trigger of "
        f"{config.trigger_s:g} s instead of THEMIS's 250 ms shedding interval.\n"
        "- Real-world data: the `cluster` feed is a synthetic stand-in for the PlanetLab CoTop "
        "CPU/memory traces (not available offline).\n"
        "- One 2-core machine shared with other work, not the paper's 3-server local testbed.\n"
        + (
            "- Overload: THEMIS overloads a real CPU by adding queries; this run fixes the "
            "node's budget in tuples/s (the labelled `fixed_capacity` option), so each added "
            "query raises the overload by a known step and the SIC of a step is arithmetic of "
            "that budget, not a measurement of the machine.\n"
            if config.fixed_capacity
            else "- Overload: THEMIS overloads a real CPU by adding 400 tuples/s queries; here "
            "the node measured its capacity for the mix once and every step scales the source "
            "rates to its multiple of it (the machine would need thousands of 400 tuples/s "
            "queries to saturate). The steps thus overload the real node; `overload_measured` "
            "shows how far each step's own batches confirm the overload asked for.\n"
        )
        + "- Exact answers: the keep-all job re-reads every tuple that arrived (at 10x "
        "overload ten times what the node processed), so it covers "
        + (
            f"the last {config.exact_span_s:g} s of each step.\n"
            if config.exact_span_s is not None
            else "every window.\n"
        )
        + "- Relative errors blow up where the exact answer is close to 0 (an idle machine's CPU "
        "in the cluster feed averages a fraction of a percent), so the cluster AVG and MAX "
        "curves can jump at one step; `windows.csv` shows each window.\n"
        "- All cases run side by side on one node per step (the paper ran one query type at a "
        "time); the random shedder keeps the same share of every lane either way.\n"
        "- A point is one case at one load step (all its queries' result windows), as THEMIS "
        "plots the error against the SIC of each degree of overload; `rho per query` is the "
        "same rank correlation over one point per query and step (each resting on one query's "
        "windows only, so noisier: a COV point from 20 one-second windows estimates a spread "
        "from 20 samples). `windows.csv` holds every compared result."
    )


def _paper_claim(kind: str) -> str:
    return {
        "avg": "error falls as SIC rises; small changes (weak)",
        "max": "small error on synthetic, larger on mixed/real",
        "count": "error falls as SIC rises; strongest; grows linearly with shedding",
        "top5": "significant correlation; distance falls as SIC rises",
        "cov": "significant correlation; larger on real than synthetic",
    }[kind]


EXPERIMENT: Experiment[SicCorrelationConfig, tuple[pd.DataFrame, list]] = Experiment(
    name="sic-correlation",
    title="SIC vs result error under random shedding (THEMIS Figs. 6-7)",
    config_type=SicCorrelationConfig,
    measure=run_levels,
    analyse=analyse,
)


def run(config: SicCorrelationConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run the study on Spark and write its report folder; returns the summary.

    Writes ``summary.json``, ``points.csv``, ``query_points.csv``, ``windows.csv`` (every
    compared result), ``steps.csv``, one PNG per panel (``fig6a_avg.png`` ...
    ``fig7b_cov.png``) and ``report.md``.
    """
    return EXPERIMENT.run(config, out_dir)
