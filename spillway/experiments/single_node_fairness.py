"""Fairness of BALANCE-SIC vs random shedding on one Spark node as load rises (THEMIS §7.2 Fig. 8).

THEMIS deploys the complex workload (AVG-all, TOP-5, COV; Table 1) on one node and adds queries
until the mean result SIC falls to about 0.1 (528,000 tuples/s in the paper); Jain's index over
the queries' SIC stays close to 1. Here every load step is a :class:`~spillway.spark.node.Node`
run on Spark with ``n`` queries of each kind, run twice on identical input (same feeds and
seed): once with BALANCE-SIC and once with the random shedder.

Capacity. By default it is measured, once, first: the node's overload calibration on the
smallest step's node (nothing shed, rows per second of batch time at its operating point), the
source rates scaled so that the largest step arrives at ``target_overload`` times it (step ``n``
at about ``target_overload * n / max(levels)`` times), every run budgeting with its own cost
models. Each run reports the overload its own batches measured (arrivals over rows per second
of batch time), which is above the nominal one at the larger steps: a node with more queries
processes fewer rows per second than the smallest step's (the quick run of 2026-11-28: 650,000
rows/s calibrated, the runs' own estimates 208,000-329,000). The labelled option
``capacity_tuples_per_s`` fixes the budget instead (:data:`FIXED_CAPACITY`: the load of one
query of each kind at the paper's 400 tuples/s per source, the rates then the paper's); a
falling mean SIC is then arithmetic of that budget, not a finding, and is reported not
applicable. The fixed budget was the default while the calibration did not finish on this mix
here (a round saw too few micro-batches in its wait); since a round waits two minutes for its
batches it has (the quick run above), and the measured capacity is the default.

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
THEMIS (SIGMOD 2016) §7.2, Fig. 8.
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
from spillway.errors import ConfigError
from spillway.experiments._spark_runs import (
    LevelRun,
    check_levels,
    check_positive,
    experiment_spark,
    input_rate,
    measure_capacity,
    measured_overload,
    per_query_mean,
    run_level,
)
from spillway.experiments.checks import LABELS, Check, compare, every, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.policies import make_policy
from spillway.quality.metrics import jain_index, sic_spread
from spillway.reporting import markdown_table, num

#: The complex workload (THEMIS Table 1) and its sources per query (§7: 10, 20 = 10 machines
#: CPU + memory, 2).
WORKLOAD: tuple[tuple[str, int], ...] = (("avg_all", 10), ("top5", 20), ("cov", 2))
#: Policies compared, in report order.
POLICIES: tuple[str, ...] = ("balance-sic", "random")
#: Jain's index BALANCE-SIC must reach at every step (THEMIS §7.2: "close to 1").
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
    capacity_tuples_per_s : None (the default) measures the capacity (calibration + cost
        models; module docstring); a number fixes the node's budget, the labelled option
        (:data:`FIXED_CAPACITY`: 1 AVG-all, 1 TOP-5 and 1 COV query at 400 tuples/s per source).
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
    capacity_tuples_per_s: float | None = None
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
            levels=(1, 4, 10), duration_s=22.0, warmup_s=8.0, calibrate_s=16.0, seed=seed
        )
    return FairnessConfig(seed=seed)


def step_config(config: FairnessConfig, n: int, *, scale: float) -> NodeConfig:
    """The node of a step with ``n`` queries of each kind, source rates ``rate * scale``."""
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
        calibrate_s=config.calibrate_s,
        master=config.master,
    )


#: The node's budget of the labelled fixed-capacity option: the load of one query of each
#: kind at 400 tuples/s per source.
FIXED_CAPACITY = 12_800.0


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
    """One entry of ``levels`` in summary.json (the documented keys first, then extras)."""
    rec: dict[str, Any] = {"queries": len(node.queries), "input_rate": input_rate(node)}
    for key in ("jain", "mean_sic", "std_sic"):
        for p in POLICIES:
            rec[f"{key}_{_slug(p)}"] = stats[p][key]
    rec["queries_per_kind"] = n
    for p in POLICIES:
        s, r = stats[p], runs[p]
        measured = measured_overload(r, from_s=r.ready_s)
        rec[f"overload_measured_{_slug(p)}"] = measured["overload_measured"]
        rec[f"capacity_measured_tuples_per_s_{_slug(p)}"] = measured[
            "capacity_measured_tuples_per_s"
        ]
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


def checks(levels: Sequence[Mapping[str, Any]], config: FairnessConfig) -> list[Check]:
    """THEMIS §7.2's claims for this study, evaluated on the measured levels.

    - ``jain_balance_sic_ge_0.95``: BALANCE-SIC's Jain's index >= 0.95 at every step (``why``
      says when random shedding meets it too: then it does not separate the two on one node);
    - ``balance_sic_fairer_where_random_below_0.95``: BALANCE-SIC's index above random's at every
      step where random's is below 0.95; not applicable when there is no such step (on one node
      random shedding keeps the same share of every query, so it is fair already);
    - ``mean_sic_falls``: mean SIC falls at every added step, a real test with the measured
      capacity of the default (``capacity_tuples_per_s=None``: the node's own cost models
      decide what it can keep, so a node whose estimate grows with load, or that falls behind,
      fails it); not applicable with a fixed capacity (SIC about capacity / load is then
      arithmetic).

    >>> lv = [{"queries": 3, "jain_balance_sic": 0.99, "jain_random": 0.9,
    ...        "mean_sic_balance_sic": 0.5},
    ...       {"queries": 30, "jain_balance_sic": 0.97, "jain_random": 0.96,
    ...        "mean_sic_balance_sic": 0.2}]
    >>> [(c.name, c.verdict) for c in checks(lv, make_config(quick=True))]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('jain_balance_sic_ge_0.95', 'pass'), ('balance_sic_fairer_where_random_below_0.95', 'pass'),
     ('mean_sic_falls', 'pass')]
    >>> checks(lv, FairnessConfig(capacity_tuples_per_s=FIXED_CAPACITY))[2].verdict
    'not applicable'
    """
    jain = every(
        f"jain_balance_sic_ge_{JAIN_MIN}",
        [compare(f"{lv['queries']} queries", lv["jain_balance_sic"], ">=", JAIN_MIN)
         for lv in levels],
        none_why="no load step was measured",
    )  # fmt: skip
    rand = [lv["jain_random"] for lv in levels if _finite(lv.get("jain_random"))]
    if jain.passed and rand and min(rand) >= JAIN_MIN:
        jain = Check(
            name=jain.name, verdict=jain.verdict,
            why=f"{jain.why} (random shedding meets it too, lowest {num(min(rand))}: on one node "
            "this does not separate the two policies)",
        )  # fmt: skip
    low = [lv for lv in levels if _finite(lv.get("jain_random")) and lv["jain_random"] < JAIN_MIN]
    fairer = every(
        f"balance_sic_fairer_where_random_below_{JAIN_MIN}",
        [compare(f"{lv['queries']} queries", lv["jain_balance_sic"], ">", lv["jain_random"],
                 what=f"{lv['queries']} queries: BALANCE-SIC's Jain") for lv in low],
        none_why=f"random shedding's Jain's index never fell below {JAIN_MIN} "
        f"(lowest {num(min(rand)) if rand else 'n/a'}): on one node it keeps the same share of "
        "every query's tuples and is fair already, so THEMIS's gain over random (a multi-node "
        "result, Fig. 10) cannot be tested here",
    )  # fmt: skip
    means = [(lv["queries"], lv["mean_sic_balance_sic"]) for lv in levels]
    if config.capacity_tuples_per_s is not None:
        falls = not_applicable(
            "mean_sic_falls",
            f"holds by construction: the node's capacity is fixed (labelled option) at "
            f"{num(config.capacity_tuples_per_s)} tuples/s, so mean SIC is about capacity / load "
            "and falls as load is added by arithmetic (measured "
            + " → ".join(num(m, 3) for _, m in means)
            + ")",
        )
    else:
        falls = every(
            "mean_sic_falls",
            [compare(f"{q0} → {q1} queries", m1, "<", m0, what=f"{q0} → {q1} queries: mean SIC")
             for (q0, m0), (q1, m1) in zip(means, means[1:], strict=False)],
            none_why="a single load step: nothing to compare",
        )  # fmt: skip
    return [jain, fairer, falls]


def _finite(x: Any) -> bool:
    return x is not None and math.isfinite(float(x))


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
    """Run every step with both policies on Spark; returns levels, points, ticks, calibration.

    With the measured capacity (the default) the node's calibration runs once, first, on the
    smallest step's node (:func:`~spillway.experiments._spark_runs.measure_capacity`); a
    calibration on the largest step's node jumps its rate by up to 20x between rounds, past
    what the two cores finish in a round.
    """
    spark = spark if spark is not None else experiment_spark(config.master)
    calibration: dict[str, Any] | None = None
    if config.capacity_tuples_per_s is None:
        calibration = measure_capacity(
            step_config(config, config.levels[0], scale=1.0),
            spark=spark,
            calibrate_s=config.calibrate_s,
        )
        cap = float(calibration["capacity_tuples_per_s"])
    else:
        cap = config.capacity_tuples_per_s
    scale = rate_scale(config, cap)
    levels, points, ticks = [], [], []
    for n in config.levels:
        node = step_config(config, n, scale=scale)
        stats, runs = {}, {}
        for p in POLICIES:
            run = run_level(
                node,
                spark=spark,
                duration_s=config.duration_s,
                policy=make_policy(p, seed=config.seed),
                capacity_tuples_per_s=config.capacity_tuples_per_s,
            )
            stats[p] = run_stats(run.ticks, warmup_s=run.ready_s + config.warmup_s)
            runs[p] = run
            for q, sic in stats[p]["per_query"].items():
                points.append({"queries_per_kind": n, "policy": p, "query": q, "sic": sic})
            ticks.append(run.ticks.assign(queries_per_kind=n, policy=p))
        levels.append(level_record(n, node, stats, runs))
    return {
        "levels": levels,
        "points": points,
        "ticks": pd.concat(ticks, ignore_index=True) if ticks else pd.DataFrame(),
        "calibration": calibration,
        "rate_scale": scale,
    }


def rate_scale(config: FairnessConfig, capacity_tuples_per_s: float) -> float:
    """Factor on ``config.rate`` that makes the largest step arrive at ``target_overload``
    times ``capacity_tuples_per_s`` (the other steps in proportion to their queries).

    >>> rate_scale(FairnessConfig(), FIXED_CAPACITY)  # the paper's rates reach 10x 12,800
    1.0
    """
    top = step_config(config, config.levels[-1], scale=1.0)
    return (
        config.target_overload
        * check_positive("capacity", capacity_tuples_per_s)
        / (input_rate(top))
    )


# ------------------------------------------------------------------------------ analysis


def analyse(config: FairnessConfig, measured: Mapping[str, Any]) -> Analysis:
    """Values, checks, tables, figures and prose of a single-node-fairness run (``measured`` as
    :func:`run_steps` returns it)."""
    levels = list(measured["levels"])
    ticks = measured.get("ticks")
    tables: dict[str, Any] = {"levels.csv": levels, "points.csv": measured["points"]}
    if isinstance(ticks, pd.DataFrame) and not ticks.empty:
        tables["ticks.csv"] = ticks
    found = checks(levels, config)
    values = {
        "levels": levels,
        f"levels_where_random_below_{JAIN_MIN}": random_below(levels),
        "calibration": measured.get("calibration"),
        "rate_scale": measured.get("rate_scale"),
    }
    cols = ["queries", "input_rate", "jain_balance_sic", "jain_random", "mean_sic_balance_sic",
            "mean_sic_random", "std_sic_balance_sic", "std_sic_random"]  # fmt: skip
    extra = ["queries", "overload_measured_balance_sic", "overload_measured_random",
             "jain_samples_balance_sic", "jain_samples_random",
             "min_jain_samples_balance_sic", "min_jain_samples_random",
             "kept_fraction_balance_sic", "kept_fraction_random",
             "capacity_tuples_per_s_balance_sic", "attempts_balance_sic", "attempts_random"]  # fmt: skip
    return Analysis(
        values=values,
        checks=found,
        tables=tables,
        figures=_figures(levels, ticks),
        setup=_setup(config, values),
        paper=_paper(levels, found),
        notes=_notes(config),
        sections=[
            ("Every step (summary.json `levels`)", markdown_table(levels, cols)),
            ("More per step", markdown_table(levels, extra)),
        ],
    )


def _figures(levels: Sequence[Mapping[str, Any]], ticks: Any) -> list[Figure]:
    x = [lv["queries"] for lv in levels]
    paper = {
        "mean_sic": "THEMIS Fig. 8a: mean result SIC falls as queries are added, to about 0.1 at "
        "528,000 tuples/s",
        "jain": "THEMIS Fig. 8b: Jain's index stays close to 1 at every load",
        "std_sic": "THEMIS Fig. 8c: the std of query SIC stays small",
    }
    figs = []
    for key, name, label, hline in (
        ("mean_sic", "fig8a_mean_sic.png", "mean result SIC across queries", None),
        ("jain", "fig8b_jain.png", "Jain's index over query SIC", JAIN_MIN),
        ("std_sic", "fig8c_std_sic.png", "std of query SIC", None),
    ):
        figs.append(
            Figure(
                file=name,
                series={p: (x, [lv[f"{key}_{_slug(p)}"] for lv in levels]) for p in POLICIES},
                title=f"{label} vs number of queries (Fig. 8)",
                xlabel="number of queries on the node", ylabel=label,
                hlines={f"required ({JAIN_MIN})": hline} if hline is not None else {},
                paper=paper[key],
            )
        )  # fmt: skip
    if isinstance(ticks, pd.DataFrame) and not ticks.empty:
        top = ticks[ticks["queries_per_kind"] == ticks["queries_per_kind"].max()]
        series = {}
        for p in POLICIES:
            g = top[top["policy"] == p].groupby("t")["sic"]
            for stat in ("min", "mean", "max"):
                s = getattr(g, stat)()
                series[f"{p} {stat}"] = (s.index.tolist(), s.tolist())
        figs.append(
            Figure(
                file="fig8d_sic_over_time.png", series=series,
                title="query SIC over time at the largest step (min / mean / max over queries)",
                xlabel="feed time (s)", ylabel="query SIC over the STW (Eq. 4)",
            )
        )  # fmt: skip
    return figs


def _setup(config: FairnessConfig, values: Mapping[str, Any]) -> str:
    cal = values.get("calibration") or {}
    if config.capacity_tuples_per_s is None:
        cap = (
            f"capacity measured once, first, by the node's calibration on the smallest step's "
            f"node: {num(cal.get('capacity_tuples_per_s'))} tuples per second of batch time for "
            f"this mix, nothing shed; every source rate scaled by "
            f"{num(values.get('rate_scale'), 3)} so the largest step arrives at "
            f"{config.target_overload:g}x that, the other steps in proportion; every run budgets "
            "with its own cost models (`overload_measured_*`: arrivals over what its own "
            "batches achieved)"
        )
    else:
        cap = (
            f"**capacity fixed (labelled option) at {config.capacity_tuples_per_s:,.0f} tuples/s**"
        )
    return (
        f"One spillway Node on Spark (`{config.master}`); the complex workload (AVG-all over 10 "
        "CPU sources, TOP-5 over 10 machines' CPU and free memory, COV of 2 machines' CPU) on "
        f"the cluster feed; steps of {', '.join(map(str, config.levels))} queries of each kind; "
        f"{cap}. Each step runs {config.duration_s:g} s with BALANCE-SIC and again with the "
        f"random shedder on identical input. STW {config.stw_s:g} s, trigger {config.trigger_s:g}"
        f" s, headroom {config.headroom:g}, seed {config.seed}. Query SIC: the node's Eq. 4 "
        f"value every second, averaged per query from {config.warmup_s:g} s after the node is "
        "warm (every plan past its first micro-batches)."
    )


def _paper(levels: Sequence[Mapping[str, Any]], found: Sequence[Check]) -> str:
    verdict = {c.name: LABELS[c.verdict] for c in found}
    rows = [
        {"claim": "Jain's index", "paper": "close to 1 at every load",
         "measured (BALANCE-SIC)": _range(levels, "jain_balance_sic"),
         "measured (random)": _range(levels, "jain_random"),
         "required": f">= {JAIN_MIN} at every step",
         "verdict": verdict[f"jain_balance_sic_ge_{JAIN_MIN}"]},
        {"claim": "mean SIC", "paper": "falls as queries are added; about 0.1 at 528,000 t/s",
         "measured (BALANCE-SIC)": _range(levels, "mean_sic_balance_sic"),
         "measured (random)": _range(levels, "mean_sic_random"),
         "required": "falls at every step", "verdict": verdict["mean_sic_falls"]},
        {"claim": "vs random", "paper": "(single node: not shown; multi-node +33% Jain, Fig. 10)",
         "measured (BALANCE-SIC)": "", "measured (random)": f"below {JAIN_MIN} at "
         f"{random_below(levels)} step(s)", "required": "fairer wherever random < 0.95",
         "verdict": verdict[f"balance_sic_fairer_where_random_below_{JAIN_MIN}"]},
    ]  # fmt: skip
    return markdown_table(rows)


def _notes(config: FairnessConfig) -> str:
    return (
        "- THEMIS sheds every 250 ms; here one Spark micro-batch per trigger of "
        f"{config.trigger_s:g} s is the shedding interval.\n"
        "- The cluster feed is a synthetic stand-in for the PlanetLab CoTop traces.\n"
        "- One 2-core machine shared with other work (the paper: a local testbed node). "
        + (
            "This run fixes the node's capacity in tuples/s (the labelled option) rather than "
            "measuring it: the overload steps reach mean SIC 0.1 with tens of queries at the "
            "paper's 400 tuples/s per source, and the falling mean SIC is arithmetic, not a "
            "finding"
            if config.capacity_tuples_per_s is not None
            else "Source rates are scaled from the measured capacity instead of the paper's "
            "400 tuples/s per source (the machine would need thousands of such queries to "
            "saturate), so the overload steps are reached with tens of queries"
        )
        + "; the paper's 528,000 tuples/s is hardware-specific and not reproduced.\n"
        "- **What one node cannot test.** On one node the random shedder also keeps the same "
        "share of every query's tuples, so its SIC values are nearly equal too and Jain's index "
        "does not separate the policies; the paper's fairness gains over random come from "
        "multi-node deployments (Fig. 10), which this experiment does not cover.\n"
        "- Jain's index is taken over per-query SIC averaged over the run; "
        "`jain_samples_*` is the mean of the index taken at every 1 s sample."
    )


def _range(levels: Sequence[Mapping[str, Any]], key: str) -> str:
    vals = [lv[key] for lv in levels if _finite(lv.get(key))]
    return f"{min(vals):.4f} .. {max(vals):.4f}" if vals else "n/a"


EXPERIMENT: Experiment[FairnessConfig, dict[str, Any]] = Experiment(
    name="single-node-fairness",
    title="Single-node fairness: BALANCE-SIC vs random (THEMIS Fig. 8)",
    config_type=FairnessConfig,
    measure=run_steps,
    analyse=analyse,
)


def run(config: FairnessConfig, out_dir: Path | str) -> dict[str, Any]:
    """Run the study on Spark and write its report folder; returns the summary."""
    return EXPERIMENT.run(config, out_dir)
