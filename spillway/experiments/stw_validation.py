"""Does the sliding STW measure perfect processing as SIC 1? (THEMIS §7, opening paragraph).

THEMIS deploys 10 underloaded TOP-5 queries and measures their result SIC over an STW of 10 s
and of 100 s: 0.9700 ± 0.0064 and 1.0086 ± 0.0034 (mean ± std across queries). Here each STW
is one :class:`~spillway.spark.node.Node` run on Spark with 10 TOP-5 queries (20 sources = 10
machines of the cluster feed, 20 tuples/s per source) and BALANCE-SIC against the node's
measured capacity; the load is far below it, so nothing should be shed (the report shows the
kept share). Every second the node reports each query's SIC over the STW (Eq. 4, from the
query coordinator); per query the samples after ``warmup_s`` are averaged, then the mean and
standard deviation across queries are reported.

Examples
--------
>>> cfg = make_config(quick=True, seed=0)
>>> [(r.stw_s, r.duration_s) for r in cfg.runs]
[(10.0, 30.0), (100.0, 125.0)]
>>> len(node_config(cfg, cfg.runs[0]).queries)
10

References
----------
THEMIS (SIGMOD 2016) §7 (STW validation); acceptance test TH-1 (``spec/themis_and_cod.md`` C3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.experiments._spark_runs import (
    check_positive,
    experiment_spark,
    per_query_mean,
    run_level,
)
from spillway.reporting import line_plot, markdown_table, write_csv, write_report, write_summary

#: THEMIS §7: mean ± std of query SIC across 10 underloaded TOP-5 queries, per STW (s).
PAPER: dict[float, tuple[float, float]] = {10.0: (0.9700, 0.0064), 100.0: (1.0086, 0.0034)}
#: Issue 3 / TH-1: both means must lie in this interval.
MEAN_RANGE = (0.95, 1.02)

#: One line for ``spillway experiment --help``.
DESCRIPTION = "THEMIS §7: mean SIC of underloaded TOP-5 queries with a 10 s and a 100 s STW (Spark)"


@dataclass(frozen=True, kw_only=True)
class StwRun:
    """One STW setting: its length and how long the node streams with it.

    >>> StwRun(stw_s=100.0, duration_s=-5.0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: duration_s must be a finite number > 0, got -5.0
    """

    stw_s: float
    duration_s: float

    def __post_init__(self) -> None:
        check_positive("stw_s", self.stw_s)
        check_positive("duration_s", self.duration_s)


@dataclass(frozen=True, kw_only=True)
class StwValidationConfig:
    """Settings of the STW validation.

    Parameters
    ----------
    runs : the STW settings to measure, each with its streaming time (THEMIS: 10 s and
        100 s, reported over 5 minutes).
    queries : number of TOP-5 queries (THEMIS: 10).
    rate : tuples/s per source (20 sources per query).
    capacity_factor : the node's capacity fixed at this many times the input rate, so the
        shedder admits everything (underloaded by construction); None lets the cost models
        measure it.
    warmup_s : SIC samples within this long after the node is warm (every plan past its
        first micro-batches) are not used.
    trigger_s : shedding interval = trigger.
    seed : seed of feeds and policy.
    master : Spark master URL.
    """

    runs: tuple[StwRun, ...] = (
        StwRun(stw_s=10.0, duration_s=300.0),
        StwRun(stw_s=100.0, duration_s=300.0),
    )
    queries: int = 10
    rate: float = 20.0
    capacity_factor: float | None = 10.0
    warmup_s: float = 10.0
    trigger_s: float = 1.0
    seed: int = 0
    master: str = "local[2]"

    def __post_init__(self) -> None:
        runs = tuple(self.runs)
        object.__setattr__(self, "runs", runs)
        if not runs or not all(isinstance(r, StwRun) for r in runs):
            raise ConfigError(f"runs must be a non-empty tuple of StwRun, got {self.runs!r}")
        if not isinstance(self.queries, int) or isinstance(self.queries, bool) or self.queries < 1:
            raise ConfigError(f"queries must be an int >= 1, got {self.queries!r}")
        check_positive("rate", self.rate)
        if self.capacity_factor is not None:
            check_positive("capacity_factor", self.capacity_factor)
        check_positive("trigger_s", self.trigger_s)
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        for r in runs:
            if self.warmup_s >= r.duration_s:
                raise ConfigError(
                    f"warmup_s ({self.warmup_s}) must be below every run's duration_s "
                    f"({r.duration_s} for stw_s={r.stw_s})"
                )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")


def make_config(quick: bool = False, seed: int = 0) -> StwValidationConfig:
    """The paper-shaped runs (5 minutes per STW) or quick ones (30 s and 125 s)."""
    if quick:
        return StwValidationConfig(
            runs=(StwRun(stw_s=10.0, duration_s=30.0), StwRun(stw_s=100.0, duration_s=125.0)),
            seed=seed,
        )
    return StwValidationConfig(seed=seed)


def node_config(config: StwValidationConfig, run: StwRun) -> NodeConfig:
    """The node of one STW setting: ``queries`` TOP-5 queries on the cluster feed."""
    queries = tuple(
        QuerySpec(name=f"top5/{i}", kind="top5", feed="cluster", sources=20, rate=config.rate)
        for i in range(config.queries)
    )
    return NodeConfig(
        queries=queries,
        policy="balance-sic",
        seed=config.seed,
        trigger_s=config.trigger_s,
        stw_s=run.stw_s,
        master=config.master,
    )


def stw_stats(
    ticks: pd.DataFrame, *, stw_s: float, warmup_s: float, ready_s: float = 0.0
) -> dict[str, Any]:
    """Mean and std across queries of each query's mean SIC over the samples whose whole STW
    lies after the node was warm: feed time ``>= ready_s + max(warmup_s, stw_s)``.

    Eq. 4 sums the results produced in one STW. Before a whole STW has passed the coordinator
    can only extrapolate from the part seen, and an STW reaching back into the start-up sees
    the results of the first windows arrive late and all at once, so those samples are left
    out.

    >>> ticks = pd.DataFrame({"t": [5.0, 12.0, 12.0], "query": ["a", "a", "b"],
    ...                       "sic": [0.2, 0.98, 1.0], "kept_fraction": [1.0] * 3})
    >>> s = stw_stats(ticks, stw_s=10.0, warmup_s=3.0)
    >>> s["stw_s"], s["sic_mean"], s["sic_std"], s["queries"]
    (10.0, 0.99, 0.01, 2)
    """
    start = ready_s + max(warmup_s, stw_s)
    per_q = per_query_mean(ticks, "sic", from_s=start).to_numpy(dtype=np.float64)
    late = ticks[ticks["t"] >= start]
    return {
        "stw_s": float(stw_s),
        "sic_mean": round(float(per_q.mean()), 12) if per_q.size else math.nan,
        "sic_std": round(float(per_q.std()), 12) if per_q.size else math.nan,
        "queries": int(per_q.size),
        "samples_per_query": int(late.groupby("query").size().min()) if len(late) else 0,
        "from_s": float(start),
        "sample_std_over_time": float(late.groupby("t")["sic"].mean().std(ddof=0))
        if len(late)
        else math.nan,
        "kept_fraction": float(late["kept_fraction"].mean()) if len(late) else math.nan,
    }


def checks(stw: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Issue 3: every mean within [0.95, 1.02], and the longest STW's mean closest to 1.

    >>> c = checks([{"stw_s": 10.0, "sic_mean": 0.97}, {"stw_s": 100.0, "sic_mean": 1.004}])
    >>> c["means_in_range"], c["longer_stw_closer_to_1"]
    (True, True)
    """
    lo, hi = MEAN_RANGE
    means = [s["sic_mean"] for s in stw]
    in_range = all(math.isfinite(m) and lo <= m <= hi for m in means)
    by_len = sorted(stw, key=lambda s: s["stw_s"])
    closer = len(by_len) >= 2 and abs(by_len[-1]["sic_mean"] - 1) < abs(by_len[0]["sic_mean"] - 1)
    return {"means_in_range": bool(in_range), "longer_stw_closer_to_1": bool(closer)}


# ------------------------------------------------------------------------------ the Spark part


def run_stws(config: StwValidationConfig, spark: Any = None) -> dict[str, Any]:
    """Run every STW setting on Spark; returns the per-STW stats and all ticks."""
    from spillway.policies import make_policy

    spark = spark if spark is not None else experiment_spark(config.master)
    stats, ticks = [], []
    for r in config.runs:
        node = node_config(config, r)
        rate = sum(q.rate * q.n_sources for q in node.queries)
        factor = config.capacity_factor
        lr = run_level(
            node,
            spark=spark,
            duration_s=r.duration_s,
            policy=make_policy("balance-sic", seed=config.seed),
            capacity_tuples_per_s=None if factor is None else factor * rate,
        )
        s = stw_stats(lr.ticks, stw_s=r.stw_s, warmup_s=config.warmup_s, ready_s=lr.ready_s)
        s["ready_s"] = lr.ready_s
        s["duration_s"] = r.duration_s
        s["attempts"] = lr.attempts
        s["capacity_tuples_per_s"] = float(lr.ticks["capacity_tuples_per_s"].median())
        s["input_rate"] = rate
        stats.append(s)
        ticks.append(lr.ticks.assign(stw_s=r.stw_s))
    return {"stw": stats, "ticks": pd.concat(ticks, ignore_index=True)}


# ------------------------------------------------------------------------------ outputs


def write_outputs(
    out_dir: Path | str, measured: Mapping[str, Any], config: StwValidationConfig
) -> dict[str, Any]:
    """Write summary.json, stw.csv, ticks.csv, points.csv, the plot and report.md."""
    out = Path(out_dir)
    stw = list(measured["stw"])
    summary = {
        "experiment": "stw-validation",
        "stw": stw,
        "paper": [{"stw_s": k, "sic_mean": m, "sic_std": s} for k, (m, s) in PAPER.items()],
        "checks": checks(stw),
        "config": asdict(config),
    }
    write_summary(out, summary)
    write_csv(out / "stw.csv", stw)
    ticks: pd.DataFrame = measured["ticks"]
    write_csv(out / "ticks.csv", ticks.to_dict("records"))
    start = {float(s["stw_s"]): float(s["from_s"]) for s in stw}
    per_q = [
        {"stw_s": s, "query": q, "sic": v}
        for s, g in ticks.groupby("stw_s", sort=True)
        for q, v in per_query_mean(g, "sic", from_s=start[float(s)]).items()
    ]
    write_csv(out / "points.csv", per_q)
    series = {}
    for s, g in ticks.groupby("stw_s", sort=True):
        m = g.groupby("t")["sic"].mean()
        series[f"STW {s:g} s (mean over queries)"] = (m.index.tolist(), m.tolist())
    line_plot(
        out / "stw_sic_over_time.png",
        series,
        title="Query SIC of underloaded TOP-5 queries over time",
        xlabel="feed time (s)",
        ylabel="query SIC over the STW (Eq. 4)",
        hlines={"perfect processing (1.0)": 1.0},
    )
    bars = {
        f"STW {s['stw_s']:g} s": ([s["stw_s"]], [s["sic_mean"]]) for s in stw
    }  # one marker per STW
    line_plot(
        out / "stw_mean_sic.png",
        bars,
        title="Mean query SIC across queries per STW",
        xlabel="STW (s)",
        ylabel="mean query SIC",
        hlines={
            f"allowed {MEAN_RANGE[0]}": MEAN_RANGE[0],
            f"allowed {MEAN_RANGE[1]}": MEAN_RANGE[1],
        },
    )
    write_report(out, "STW validation: SIC of underloaded TOP-5 queries (THEMIS §7)",
                 _report_sections(summary, config))  # fmt: skip
    return summary


def _report_sections(summary: Mapping[str, Any], config: StwValidationConfig) -> list:
    rows = []
    for s in summary["stw"]:
        paper = PAPER.get(s["stw_s"])
        rows.append(
            {
                "STW (s)": s["stw_s"],
                "paper mean ± std": "n/a" if paper is None else f"{paper[0]:.4f} ± {paper[1]:.4f}",
                "measured mean ± std": f"{s['sic_mean']:.4f} ± {s['sic_std']:.4f}",
                "kept share": s["kept_fraction"],
                "run (s)": s["duration_s"],
                "samples per query": s["samples_per_query"],
            }
        )
    c = summary["checks"]
    verdict = (
        f"- both means within [{MEAN_RANGE[0]}, {MEAN_RANGE[1]}]: "
        f"{'yes' if c['means_in_range'] else 'NO'}\n"
        f"- longer STW closer to 1: {'yes' if c['longer_stw_closer_to_1'] else 'NO'}"
    )
    setup = (
        f"One spillway Node on Spark (`{config.master}`) per STW with {config.queries} TOP-5 "
        f"queries (20 sources = 10 machines of the cluster feed, {config.rate:g} tuples/s per "
        f"source, {config.queries * 20 * config.rate:,.0f} tuples/s in all), BALANCE-SIC "
        + (
            f"against a capacity fixed at {config.capacity_factor:g}x the input (underloaded "
            "by construction: nothing is shed)"
            if config.capacity_factor is not None
            else "against the measured capacity"
        )
        + f", trigger {config.trigger_s:g} s, seed "
        f"{config.seed}. Each query's SIC over the STW (Eq. 4) is sampled every second and "
        f"averaged over the samples whose whole STW lies after the node was warm (from "
        f"`ready_s` + max({config.warmup_s:g} s, STW) on: `from_s`); mean ± std are across "
        "queries.\n\n"
        + markdown_table(
            list(summary["stw"]),
            [
                "stw_s",
                "duration_s",
                "input_rate",
                "capacity_tuples_per_s",
                "kept_fraction",
                "samples_per_query",
                "sample_std_over_time",
            ],
        )  # fmt: skip
    )
    notes = (
        "- THEMIS's queries have two fragments on different nodes; here each TOP-5 query runs "
        "whole on one node (the STW then only has to cover one node's processing latency).\n"
        f"- Shedding interval = one Spark trigger of {config.trigger_s:g} s (THEMIS: 250 ms); "
        "results are produced once per micro-batch.\n"
        "- The cluster feed is a synthetic stand-in for the PlanetLab CoTop traces.\n"
        "- Only samples whose whole STW lies after the node was warm are used (`from_s`): "
        "before one STW has passed the query coordinator extrapolates Eq. 4 from the part "
        "seen, and an STW reaching back into the start-up sees the first windows' results "
        "arrive late and all at once (the plot shows the 10 s STW overshooting to about 2 "
        "then). THEMIS reports its values over 5 minutes after deployment.\n"
        "- Eq. 4 is summed here over the time results are produced. In steady state a node "
        "produces one 1 s window per second, so averaged over time both STWs give 1 by "
        "construction, and the STW length shows in how much a single sample jitters "
        "(`sample_std_over_time`: whether a window's result lands just inside or just "
        "outside the STW moves a 10 s sum by 0.1 and a 100 s sum by 0.01). Which mean ends "
        "up closer to 1 is then decided by sampling noise of that jitter, not by a "
        "systematic under-count as in THEMIS (0.97 at 10 s, which the paper attributes to "
        "the STW needing to be much longer than the end-to-end latency).\n"
        "- One 2-core machine shared with other work."
        + (
            "\n- The capacity is fixed above the input instead of measured: on this machine a "
            "TOP-5 micro-batch's fixed cost alone fills most of the 1 s interval, so the "
            "runtime's measured budget (headroom x interval - fixed cost) leaves nothing and "
            "sheds almost everything even at 4,000 tuples/s; that would test the cost model, "
            "not the STW."
            if config.capacity_factor is not None
            else ""
        )
    )
    return [
        ("Setup", setup),
        ("Paper vs measured", markdown_table(rows) + "\n\n" + verdict),
        ("Figures", "![SIC over time](stw_sic_over_time.png)\n\n![mean SIC](stw_mean_sic.png)"),
        ("How this run differs from the paper", notes),
    ]


def run(config: StwValidationConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run both STW settings on Spark and write the report folder; returns the summary."""
    return write_outputs(out_dir, run_stws(config), config)
