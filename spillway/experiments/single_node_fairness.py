"""Fairness of BALANCE-SIC vs random shedding on one Spark node as load rises (THEMIS §7.2 Fig. 8).

THEMIS deploys the complex workload (AVG-all, TOP-5, COV; Table 1) on one node and adds queries
until the mean result SIC falls to about 0.1 (528,000 tuples/s in the paper); Jain's index over
the queries' SIC stays close to 1. Here every load step is a :class:`~spillway.spark.node.Node`
run on Spark with ``n`` queries of each kind, run twice on identical input (same feeds and
seed): once with BALANCE-SIC and once with the random shedder.

Capacity. By default the node's capacity is fixed (``capacity_tuples_per_s``, the load of one
query of each kind at the paper's 400 tuples/s per source), and the source rates are scaled so
that the largest step arrives at ``target_overload`` times it: step ``n`` is then about
``target_overload * n / max(levels)`` times overloaded (with the defaults the scale is 1, the
paper's rates). With ``capacity_tuples_per_s=None`` the capacity is measured instead: the first
run (the largest step, BALANCE-SIC) starts with the node's overload calibration, which measures
what the node processes per second with this query mix and scales the rates, and every run's
controller keeps measuring its own capacity (cost models).

Every second the node reports each query's result SIC over the STW (THEMIS Eq. 4, from the
query coordinator). Per query the samples after ``warmup_s`` are averaged; Jain's index, mean
and standard deviation are taken over those per-query values.

Examples
--------
>>> cfg = make_config(quick=True, seed=0)
>>> cfg.levels, [q.kind for q in step_config(cfg, 1, scale=1.0).queries]
((1, 4, 10), ['avg_all', 'top5', 'cov'])

References
----------
THEMIS (SIGMOD 2016) §7.2, Fig. 8; acceptance test TH-4 (``spec/themis_and_cod.md`` C3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.experiments._spark_runs import (
    LevelRun,
    check_levels,
    check_positive,
    experiment_spark,
    per_query_mean,
    run_level,
)
from spillway.policies import make_policy
from spillway.quality.metrics import jain_index, sic_spread
from spillway.reporting import line_plot, markdown_table, write_csv, write_report, write_summary

#: The complex workload (THEMIS Table 1) and its sources per query (§7: 10, 20 = 10 machines
#: CPU + memory, 2).
WORKLOAD: tuple[tuple[str, int], ...] = (("avg_all", 10), ("top5", 20), ("cov", 2))
#: Policies compared, in report order.
POLICIES: tuple[str, ...] = ("balance-sic", "random")
#: Issue 3 threshold: Jain's index of BALANCE-SIC at every step.
JAIN_MIN = 0.95

#: One line for ``spillway experiment --help``.
DESCRIPTION = "THEMIS Fig. 8: Jain's index of balance-sic and random as queries are added (Spark)"


@dataclass(frozen=True, kw_only=True)
class FairnessConfig:
    """Settings of the single-node fairness study.

    Parameters
    ----------
    levels : queries of each kind at each load step (strictly increasing).
    target_overload : overload of the largest step (mean SIC about its inverse; THEMIS: 0.1).
    rate : tuples/s per source before the calibration scales it (THEMIS local testbed: 400).
    capacity_tuples_per_s : fixed node capacity (default: 1 AVG-all, 1 TOP-5 and 1 COV query
        at 400 tuples/s per source); None measures it (calibration + cost models).
    duration_s : streaming time per run (THEMIS: 5 minutes).
    warmup_s : SIC samples within this long after the node is warm are not used.
    calibrate_s : length of the overload calibration.
    stw_s, trigger_s, headroom : node settings (THEMIS: STW 10 s, interval 250 ms).
    seed : seed of feeds and policies (both policies see identical input).
    master : Spark master URL.
    """

    levels: tuple[int, ...] = (1, 2, 4, 6, 8, 10)
    target_overload: float = 10.0
    rate: float = 400.0
    capacity_tuples_per_s: float | None = 12_800.0
    duration_s: float = 300.0
    warmup_s: float = 10.0
    calibrate_s: float = 20.0
    stw_s: float = 10.0
    trigger_s: float = 1.0
    headroom: float = 0.8
    seed: int = 0
    master: str = "local[2]"

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", check_levels("levels", self.levels))
        for name in ("target_overload", "rate", "duration_s", "calibrate_s", "stw_s", "trigger_s"):
            check_positive(name, getattr(self, name))
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        if self.capacity_tuples_per_s is not None:
            check_positive("capacity_tuples_per_s", self.capacity_tuples_per_s)
        if self.warmup_s >= self.duration_s:
            raise ConfigError(
                f"warmup_s must be below duration_s (SIC is sampled after it), got "
                f"warmup_s={self.warmup_s} and duration_s={self.duration_s}"
            )
        if not 0 < self.headroom <= 1:
            raise ConfigError(f"headroom must be in (0, 1], got {self.headroom!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")


def make_config(quick: bool = False, seed: int = 0) -> FairnessConfig:
    """The paper-shaped study (6 steps of 5 min), or a quick one (3 steps of 22 s).

    >>> make_config(quick=False, seed=0).duration_s
    300.0
    """
    if quick:
        return FairnessConfig(
            levels=(1, 4, 10), duration_s=22.0, warmup_s=8.0, calibrate_s=10.0, seed=seed
        )
    return FairnessConfig(seed=seed)


def step_config(
    config: FairnessConfig, n: int, *, scale: float, overload: float | None = None
) -> NodeConfig:
    """The node of a step with ``n`` queries of each kind, source rates ``rate * scale``.

    With ``overload`` set the node calibrates first and scales the rates itself.
    """
    queries = [
        QuerySpec(
            name=f"{kind}/{i}",
            kind=kind,
            feed="cluster",
            feed_options={} if kind == "top5" else {"layout": "cpu"},
            sources=sources,
            rate=config.rate * scale,
        )
        for i in range(n)
        for kind, sources in WORKLOAD
    ]
    return NodeConfig(
        queries=tuple(queries),
        policy="balance-sic",
        seed=config.seed,
        trigger_s=config.trigger_s,
        stw_s=config.stw_s,
        headroom=config.headroom,
        overload=overload,
        calibrate_s=config.calibrate_s,
        master=config.master,
    )


def input_rate(node: NodeConfig) -> float:
    """Total arrival rate of a node's queries (tuples/s).

    >>> input_rate(step_config(make_config(True, 0), 2, scale=0.5))
    12800.0
    """
    return float(sum(q.rate * q.n_sources for q in node.queries))


def run_stats(ticks: pd.DataFrame, *, warmup_s: float) -> dict[str, Any]:
    """Per-query mean SIC after ``warmup_s`` and their Jain's index, mean and std.

    Also the mean of the per-sample Jain's index (fairness at every instant, not only on
    average) and the mean kept share.

    >>> ticks = pd.DataFrame({"t": [1.0, 1.0, 2.0, 2.0], "query": ["a", "b", "a", "b"],
    ...                       "sic": [0.2, 0.3, 0.3, 0.2], "kept_fraction": [0.5] * 4})
    >>> s = run_stats(ticks, warmup_s=0.0)
    >>> s["jain"], s["mean_sic"], s["std_sic"], round(s["jain_samples"], 4)
    (1.0, 0.25, 0.0, 0.9615)
    """
    per_q = per_query_mean(ticks, "sic", from_s=warmup_s)
    late = ticks[ticks["t"] >= warmup_s]
    spread = sic_spread(np.maximum(per_q.to_numpy(dtype=np.float64), 0.0))
    per_tick = [
        float(jain_index(np.maximum(g["sic"].to_numpy(dtype=np.float64), 0.0)))
        for _, g in late.groupby("t")
    ]
    return {
        "per_query": per_q,
        "jain": spread.jain,
        "mean_sic": spread.mean,
        "std_sic": spread.std,
        "jain_samples": float(np.mean(per_tick)) if per_tick else math.nan,
        "min_jain_samples": float(np.min(per_tick)) if per_tick else math.nan,
        "kept_fraction": float(late["kept_fraction"].mean()) if len(late) else math.nan,
        "samples": len(per_tick),
    }


def level_record(
    n: int, node: NodeConfig, stats: Mapping[str, Mapping[str, Any]], runs: Mapping[str, LevelRun]
) -> dict[str, Any]:
    """One entry of ``levels`` in summary.json (issue 3 keys first, then extras)."""
    rec: dict[str, Any] = {"queries": len(node.queries), "input_rate": input_rate(node)}
    for key in ("jain", "mean_sic", "std_sic"):
        for p in POLICIES:
            rec[f"{key}_{_slug(p)}"] = stats[p][key]
    rec["queries_per_kind"] = n
    for p in POLICIES:
        s, r = stats[p], runs[p]
        rec[f"jain_samples_{_slug(p)}"] = s["jain_samples"]
        rec[f"min_jain_samples_{_slug(p)}"] = s["min_jain_samples"]
        rec[f"kept_fraction_{_slug(p)}"] = s["kept_fraction"]
        late = r.ticks[r.ticks["t"] >= r.ready_s]
        cap = late.groupby("t")["capacity_tuples_per_s"].first()
        rec[f"capacity_tuples_per_s_{_slug(p)}"] = float(cap.median()) if len(cap) else math.nan
        rec[f"attempts_{_slug(p)}"] = r.attempts
        rec[f"ready_s_{_slug(p)}"] = r.ready_s
    return rec


def _slug(policy: str) -> str:
    return policy.replace("-", "_")


def checks(levels: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Issue 3's "must show" for this study, evaluated on the measured levels.

    >>> lv = [{"jain_balance_sic": 0.99, "jain_random": 0.9, "mean_sic_balance_sic": 0.5},
    ...       {"jain_balance_sic": 0.97, "jain_random": 0.96, "mean_sic_balance_sic": 0.2}]
    >>> c = checks(lv)
    >>> c["jain_balance_sic_ge_0.95"], c["balance_sic_fairer_where_random_below_0.95"]
    (True, True)
    >>> c["mean_sic_falls"]
    True
    """
    bs = [lv["jain_balance_sic"] for lv in levels]
    beat = [
        lv["jain_balance_sic"] > lv["jain_random"]
        for lv in levels
        if math.isfinite(lv["jain_random"]) and lv["jain_random"] < JAIN_MIN
    ]
    means = [lv["mean_sic_balance_sic"] for lv in levels]
    return {
        "jain_balance_sic_ge_0.95": bool(bs)
        and all(math.isfinite(j) and j >= JAIN_MIN for j in bs),
        "balance_sic_fairer_where_random_below_0.95": all(beat),
        "mean_sic_falls": all(b < a for a, b in zip(means, means[1:], strict=False)),
    }


def random_below(levels: Sequence[Mapping[str, Any]]) -> int:
    """Number of steps where the random shedder's Jain's index is below 0.95.

    >>> random_below([{"jain_random": 0.9}, {"jain_random": 0.99}])
    1
    """
    return sum(
        1 for lv in levels if math.isfinite(lv["jain_random"]) and lv["jain_random"] < JAIN_MIN
    )


# ------------------------------------------------------------------------------ the Spark part


def run_steps(config: FairnessConfig, spark: Any = None) -> dict[str, Any]:
    """Run every step with both policies on Spark; returns levels, points, ticks, calibration."""
    spark = spark if spark is not None else experiment_spark(config.master)
    top = config.levels[-1]
    calibration: dict[str, Any] | None = None
    if config.capacity_tuples_per_s is None:
        scale = None
    else:
        base = input_rate(step_config(config, top, scale=1.0))
        scale = config.target_overload * config.capacity_tuples_per_s / base
    levels, points, ticks = [], [], []
    for n in sorted(config.levels, reverse=True):  # the largest step first: it calibrates
        stats, runs = {}, {}
        node = None
        for p in POLICIES:
            if scale is None:
                node_p = step_config(config, n, scale=1.0, overload=config.target_overload)
            else:
                node_p = step_config(config, n, scale=scale)
            run = run_level(
                node_p,
                spark=spark,
                duration_s=config.duration_s,
                policy=make_policy(p, seed=config.seed),
                capacity_tuples_per_s=config.capacity_tuples_per_s,
            )
            if scale is None:
                scale, calibration = run.rate_scale, run.calibration
            node = node_p if node_p.overload is None else _scaled(node_p, run.rate_scale)
            stats[p] = run_stats(run.ticks, warmup_s=run.ready_s + config.warmup_s)
            runs[p] = run
            for q, sic in stats[p]["per_query"].items():
                points.append({"queries_per_kind": n, "policy": p, "query": q, "sic": sic})
            ticks.append(run.ticks.assign(queries_per_kind=n, policy=p))
        assert node is not None
        levels.append(level_record(n, node, stats, runs))
    levels.sort(key=lambda r: r["queries"])
    return {
        "levels": levels,
        "points": points,
        "ticks": pd.concat(ticks, ignore_index=True) if ticks else pd.DataFrame(),
        "calibration": calibration,
        "rate_scale": scale,
    }


def _scaled(node: NodeConfig, scale: float) -> NodeConfig:
    """The node as it ran after calibration: rates scaled, no calibration."""
    qs = tuple(replace(q, rate=q.rate * scale) for q in node.queries)
    return replace(node, queries=qs, overload=None)


# ------------------------------------------------------------------------------ outputs


def write_outputs(
    out_dir: Path | str, measured: Mapping[str, Any], config: FairnessConfig
) -> dict[str, Any]:
    """Write summary.json, levels.csv, points.csv, ticks.csv, the Fig. 8 panels and report.md."""
    out = Path(out_dir)
    levels = list(measured["levels"])
    summary = {
        "experiment": "single-node-fairness",
        "levels": levels,
        "checks": checks(levels),
        "levels_where_random_below_0.95": random_below(levels),
        "calibration": measured.get("calibration"),
        "rate_scale": measured.get("rate_scale"),
        "config": asdict(config),
    }
    write_summary(out, summary)
    write_csv(out / "levels.csv", levels)
    write_csv(out / "points.csv", measured["points"])
    ticks = measured.get("ticks")
    if isinstance(ticks, pd.DataFrame) and not ticks.empty:
        write_csv(out / "ticks.csv", ticks.to_dict("records"))
    figs = _plots(out, levels, ticks)
    write_report(out, "Single-node fairness: BALANCE-SIC vs random (THEMIS Fig. 8)",
                 _report_sections(summary, config, figs))  # fmt: skip
    return summary


def _plots(out: Path, levels: Sequence[Mapping[str, Any]], ticks: Any) -> list[tuple[str, str]]:
    x = [lv["queries"] for lv in levels]
    figs = []
    for key, name, label, hline in (
        ("mean_sic", "fig8a_mean_sic.png", "mean result SIC across queries", None),
        ("jain", "fig8b_jain.png", "Jain's index over query SIC", JAIN_MIN),
        ("std_sic", "fig8c_std_sic.png", "std of query SIC", None),
    ):
        series = {p: (x, [lv[f"{key}_{_slug(p)}"] for lv in levels]) for p in POLICIES}
        line_plot(
            out / name,
            series,
            title=f"{label} vs number of queries (Fig. 8)",
            xlabel="number of queries on the node",
            ylabel=label,
            hlines={f"required ({JAIN_MIN})": hline} if hline is not None else None,
        )
        figs.append((label, name))
    if isinstance(ticks, pd.DataFrame) and not ticks.empty:
        top = ticks[ticks["queries_per_kind"] == ticks["queries_per_kind"].max()]
        series = {}
        for p in POLICIES:
            g = top[top["policy"] == p].groupby("t")["sic"]
            for stat in ("min", "mean", "max"):
                s = getattr(g, stat)()
                series[f"{p} {stat}"] = (s.index.tolist(), s.tolist())
        line_plot(
            out / "fig8d_sic_over_time.png",
            series,
            title="query SIC over time at the largest step (min / mean / max over queries)",
            xlabel="feed time (s)",
            ylabel="query SIC over the STW (Eq. 4)",
        )
        figs.append(("SIC over time", "fig8d_sic_over_time.png"))
    return figs


def _report_sections(
    summary: Mapping[str, Any], config: FairnessConfig, figs: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    cal = summary.get("calibration") or {}
    if config.capacity_tuples_per_s is None:
        cap = (
            f"capacity measured by the node's calibration: "
            f"{cal.get('capacity_tuples_per_s', math.nan):,.0f} tuples/s for this mix; source "
            f"rates scaled by {summary.get('rate_scale') or math.nan:.3g} so the largest step "
            f"arrives at {config.target_overload:g}x that"
        )
    else:
        cap = f"capacity fixed at {config.capacity_tuples_per_s:,.0f} tuples/s"
    setup = (
        f"One spillway Node on Spark (`{config.master}`); the complex workload (AVG-all over 10 "
        "CPU sources, TOP-5 over 10 machines' CPU and free memory, COV of 2 machines' CPU) on "
        f"the cluster feed; steps of {', '.join(map(str, config.levels))} queries of each kind; "
        f"{cap}. Each step runs {config.duration_s:g} s with BALANCE-SIC and again with the "
        f"random shedder on identical input. STW {config.stw_s:g} s, trigger {config.trigger_s:g}"
        f" s, headroom {config.headroom:g}, seed {config.seed}. Query SIC: the node's Eq. 4 "
        f"value every second, averaged per query from {config.warmup_s:g} s after the node is warm "
        "(every plan past its first micro-batches)."
    )
    cols = ["queries", "input_rate", "jain_balance_sic", "jain_random", "mean_sic_balance_sic",
            "mean_sic_random", "std_sic_balance_sic", "std_sic_random"]  # fmt: skip
    extra = ["queries", "jain_samples_balance_sic", "jain_samples_random",
             "min_jain_samples_balance_sic", "min_jain_samples_random",
             "kept_fraction_balance_sic", "kept_fraction_random",
             "capacity_tuples_per_s_balance_sic", "attempts_balance_sic", "attempts_random"]  # fmt: skip
    c = summary["checks"]
    levels = summary["levels"]
    paper = [
        {"claim": "Jain's index", "paper": "close to 1 at every load",
         "measured (BALANCE-SIC)": _range(levels, "jain_balance_sic"),
         "required": f">= {JAIN_MIN} at every step",
         "pass": _yes(c["jain_balance_sic_ge_0.95"])},
        {"claim": "mean SIC", "paper": "falls as queries are added; about 0.1 at 528,000 t/s",
         "measured (BALANCE-SIC)": _range(levels, "mean_sic_balance_sic"),
         "required": "falls at every step", "pass": _yes(c["mean_sic_falls"])},
        {"claim": "vs random", "paper": "(single node: not shown; multi-node +33% Jain)",
         "measured (BALANCE-SIC)": f"random below {JAIN_MIN} at "
                                   f"{summary['levels_where_random_below_0.95']} step(s)",
         "required": "fairer wherever random < 0.95",
         "pass": _yes(c["balance_sic_fairer_where_random_below_0.95"])},
    ]  # fmt: skip
    notes = (
        "- THEMIS sheds every 250 ms; here one Spark micro-batch per trigger of "
        f"{config.trigger_s:g} s is the shedding interval.\n"
        "- The cluster feed is a synthetic stand-in for the PlanetLab CoTop traces.\n"
        "- One 2-core machine shared with other work (the paper: a local testbed node). "
        + (
            "The node's capacity is fixed in tuples/s rather than measured (the cost-model "
            "budget of this runtime sums the fixed overhead of every plan, and with three "
            "plans running concurrently on 2 busy cores that sum reaches the whole interval); "
            "the overload steps thus reach mean SIC 0.1 with tens of queries at the paper's "
            "400 tuples/s per source"
            if config.capacity_tuples_per_s is not None
            else "Source rates are scaled from the measured capacity instead of the paper's "
            "400 tuples/s per source, so the overload steps are reached with tens of queries"
        )
        + "; the paper's 528,000 tuples/s is hardware-specific and not reproduced.\n"
        "- On one node the random shedder also keeps the same share of every query's tuples, "
        "so its SIC values are nearly equal too; the paper's fairness gains over random come "
        "from multi-node deployments (Fig. 10), which this experiment does not cover.\n"
        "- Jain's index is taken over per-query SIC averaged over the run; "
        "`jain_samples_*` is the mean of the index taken at every 1 s sample."
    )
    return [
        ("Setup", setup),
        ("Paper vs measured", markdown_table(paper)),
        ("Every step (summary.json `levels`)", markdown_table(levels, cols)),
        ("More per step", markdown_table(levels, extra)),
        ("Figures", "\n\n".join(f"![{lab}]({name})" for lab, name in figs)),
        ("How this run differs from the paper", notes),
    ]


def _range(levels: Sequence[Mapping[str, Any]], key: str) -> str:
    vals = [lv[key] for lv in levels if math.isfinite(lv[key])]
    return f"{min(vals):.4f} .. {max(vals):.4f}" if vals else "n/a"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def run(config: FairnessConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run the study on Spark and write its report folder; returns the summary."""
    return write_outputs(out_dir, run_steps(config), config)
