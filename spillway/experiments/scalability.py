"""Scalability of BALANCE-SIC in nodes and in queries (THEMIS §7.3 Figs. 12-13).

Fig. 12: 500 complex queries with 1-6 fragments (uniform), fragments placed by a Zipf
distribution, on a growing number of nodes: "BALANCE-SIC manages to utilise the increasing
number of nodes as the mean SIC values increase. In all cases, our approach sheds tuples
fairly, as the Jain's index metric approaches to 1." Fig. 13: a fixed deployment on 18 nodes
with a growing number of queries: "with more queries, tuples are discarded fairly", while the
mean SIC falls. The node and query counts are only in the figures; this study runs 6, 12, 18
and 24 nodes, and 250, 500, 1,000 and 2,000 queries (DISSP's node study ran 9-24 nodes).
Random shedding runs beside for context.

Checks (acceptance test TH-8): BALANCE-SIC's Jain's index at least 0.9 at every point; mean SIC
rises with every node added and falls with every query added, which the simulated set-up makes
true (fixed node capacity, fixed source rates: mean SIC is about capacity / load), so those two
are not applicable while they hold and fail if the numbers break them.

Examples
--------
>>> cfg = make_config(quick=True)
>>> cfg.nodes, cfg.queries
((6, 12), (60, 120))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.experiments._simulated import POLICIES, policy_values, run_policies, themis_setup
from spillway.experiments.checks import Check, by_construction, compare, every
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.reporting import markdown_table, num
from spillway.sim import SimConfig, WorkloadConfig, build
from spillway.sim.workload import THEMIS_CAPACITY

NAME = "scalability"
TITLE = "Fairness as nodes and queries are added (THEMIS Figs. 12-13)"
DESCRIPTION = "THEMIS Figs. 12-13: mean SIC and Jain of balance-sic as nodes / queries grow (sim)"
JAIN_MIN = 0.9


@dataclass(frozen=True, kw_only=True)
class ScalabilityConfig:
    """Settings of the Figs. 12-13 study.

    Parameters
    ----------
    nodes : node counts of Fig. 12 (increasing; at least 6: queries have up to 6 fragments).
    queries_fig12 : queries in Fig. 12 (THEMIS: 500).
    queries : query counts of Fig. 13 (increasing).
    nodes_fig13 : nodes in Fig. 13 (THEMIS: 18).
    fragments : fragments per query, uniform in this range (THEMIS: 1-6).
    placement : THEMIS §7.3: Zipf.
    duration_s, warmup_s, seed : as in :class:`spillway.sim.SimConfig`.
    """

    nodes: tuple[int, ...] = (6, 12, 18, 24)
    queries_fig12: int = 500
    queries: tuple[int, ...] = (250, 500, 1000, 2000)
    nodes_fig13: int = 18
    fragments: tuple[int, int] = (1, 6)
    placement: str = "zipf"
    duration_s: float = 300.0
    warmup_s: float = 20.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("nodes", "queries"):
            v = getattr(self, name)
            if not v or list(v) != sorted(set(v)):
                raise ConfigError(f"{name} must be a non-empty increasing tuple, got {v!r}")
        for n in (*self.nodes, self.nodes_fig13):
            WorkloadConfig(
                n_nodes=n, n_queries=1, fragments=self.fragments, placement=self.placement
            )
        SimConfig(duration_s=self.duration_s, warmup_s=self.warmup_s, seed=self.seed)

    def workload(self, n_nodes: int, n_queries: int) -> WorkloadConfig:
        """The deployment at one point."""
        return WorkloadConfig(n_nodes=n_nodes, n_queries=n_queries, fragments=self.fragments,
                              placement=self.placement, seed=self.seed)  # fmt: skip


def make_config(quick: bool = False, seed: int = 0) -> ScalabilityConfig:
    """The paper-shaped study or a quick one (two points each, fewer queries, 30 s)."""
    if quick:
        return ScalabilityConfig(nodes=(6, 12), queries_fig12=100, queries=(60, 120),
                                 nodes_fig13=6, duration_s=30.0, seed=seed)  # fmt: skip
    return ScalabilityConfig(seed=seed)


def measure(config: ScalabilityConfig) -> dict[str, list[dict[str, Any]]]:
    """Records of Fig. 12 (per node count) and Fig. 13 (per query count)."""
    sim = SimConfig(duration_s=config.duration_s, warmup_s=config.warmup_s, seed=config.seed)
    out: dict[str, list[dict[str, Any]]] = {"nodes": [], "queries": []}
    for n in config.nodes:
        d = build(config.workload(n, config.queries_fig12))
        out["nodes"].append({"nodes": n, "queries": d.n_queries, "fragments": d.n_fragments,
                             **policy_values(run_policies(d, sim))})  # fmt: skip
    for q in config.queries:
        d = build(config.workload(config.nodes_fig13, q))
        out["queries"].append({"nodes": config.nodes_fig13, "queries": q, "fragments": d.n_fragments,
                               **policy_values(run_policies(d, sim))})  # fmt: skip
    return out


def _monotone(name: str, rows: Sequence[Mapping[str, Any]], x: str, rising: bool) -> Check:
    """Mean SIC rising with nodes / falling with queries: arithmetic of the simulated set-up
    (every node a fixed capacity, every source a fixed rate), so not applicable while it holds
    and a failure if it does not (:func:`~spillway.experiments.checks.by_construction`)."""
    if len(rows) < 2:
        return every(name, [], none_why=f"fewer than two {x} counts ran")
    means = [r["mean_sic_balance_sic"] for r in rows]
    pairs = list(zip(means, means[1:], strict=False))
    ok = all((b > a) if rising else (b < a) for a, b in pairs)
    path = " -> ".join(f"{num(m)} ({r[x]} {x})" for m, r in zip(means, rows, strict=True))
    added = "a node adds capacity to the same load" if rising else "a query adds load to the " \
        "same capacity"  # fmt: skip
    because = (
        f"every simulated node processes a fixed {THEMIS_CAPACITY:,.0f} tuples/s and every "
        f"source sends at a fixed rate, so {added} and mean SIC, about capacity / load, "
        f"{'rises' if rising else 'falls'} by arithmetic"
    )
    return by_construction(name, ok, because, f"mean SIC of BALANCE-SIC {path}")


def checks(measured: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Check]:
    """TH-8 on the measured points.

    >>> m = {"nodes": [{"nodes": n, "queries": 500, "mean_sic_balance_sic": s, "jain_balance_sic": j}
    ...                for n, s, j in ((6, 0.2, 0.95), (12, 0.3, 0.8))], "queries": []}
    >>> [c.verdict for c in checks(m)]
    ['not applicable', 'not applicable', 'fail']
    >>> m["nodes"][1]["mean_sic_balance_sic"] = 0.19   # added nodes, yet mean SIC fell
    >>> checks(m)[0].verdict
    'fail'
    """
    pts = [*measured["nodes"], *measured["queries"]]
    jain = [compare(f"{r['nodes']} nodes / {r['queries']} queries", r["jain_balance_sic"], ">=",
                    JAIN_MIN, what="Jain's index of BALANCE-SIC") for r in pts]  # fmt: skip
    return [
        _monotone("mean_sic_rises_with_nodes", measured["nodes"], "nodes", rising=True),
        _monotone("mean_sic_falls_with_queries", measured["queries"], "queries", rising=False),
        every("jain_ge_0.9_everywhere", jain, none_why="no point ran"),
    ]


def analyse(
    config: ScalabilityConfig, measured: Mapping[str, Sequence[Mapping[str, Any]]]
) -> Analysis:
    """Summary values (``nodes``, ``queries``), checks, tables, figures and prose."""
    cks = checks(measured)
    figs = []
    for key, x, file, label, paper in (
        ("nodes", "nodes", "fig12", "nodes", "Fig. 12: mean SIC rises with nodes; Jain approaches 1"),
        ("queries", "queries", "fig13", "queries", "Fig. 13: mean SIC falls with queries; Jain stays high"),
    ):  # fmt: skip
        rows = measured[key]
        xs = [r[x] for r in rows]
        for stat, ylabel in (
            ("mean_sic", "mean query SIC"),
            ("jain", "Jain's index over query SIC"),
        ):
            figs.append(Figure(
                file=f"{file}_{stat}.png", title=f"{ylabel} vs {label}", xlabel=f"number of {label}",
                ylabel=ylabel,
                series={p: (xs, [r[f"{stat}_{p.replace('-', '_')}"] for r in rows]) for p in POLICIES},
                hlines={f"required ({JAIN_MIN})": JAIN_MIN} if stat == "jain" else {},
                paper=paper))  # fmt: skip
    c = {k.name: k for k in cks}
    paper = markdown_table([
        {"claim": "Fig. 12: mean SIC rises with nodes", "paper": "yes (values only in the plot)",
         "measured": " -> ".join(num(r["mean_sic_balance_sic"]) for r in measured["nodes"]),
         "verdict": c["mean_sic_rises_with_nodes"].verdict},
        {"claim": "Fig. 13: mean SIC falls with queries", "paper": "yes",
         "measured": " -> ".join(num(r["mean_sic_balance_sic"]) for r in measured["queries"]),
         "verdict": c["mean_sic_falls_with_queries"].verdict},
        {"claim": "Jain's index", "paper": "approaches 1 in all cases",
         "measured": ", ".join(num(r["jain_balance_sic"]) for r in [*measured["nodes"], *measured["queries"]]),
         "verdict": c["jain_ge_0.9_everywhere"].verdict},
    ], ["claim", "paper", "measured", "verdict"])  # fmt: skip
    cols = ["nodes", "queries", "fragments", "jain_balance_sic", "jain_random",
            "mean_sic_balance_sic", "mean_sic_random", "std_balance_sic", "std_random"]  # fmt: skip
    sim = SimConfig(duration_s=config.duration_s, warmup_s=config.warmup_s, seed=config.seed)
    return Analysis(
        values={"nodes": list(measured["nodes"]), "queries": list(measured["queries"])},
        checks=cks,
        setup=(
            f"Fig. 12: {config.queries_fig12} complex queries on {', '.join(map(str, config.nodes))} "
            f"nodes; Fig. 13: {', '.join(map(str, config.queries))} queries on {config.nodes_fig13} "
            f"nodes. Queries have {config.fragments[0]}-{config.fragments[1]} fragments (uniform), "
            f"placed by {config.placement} (node rank r with probability proportional to 1/r, "
            "distinct nodes per query). " + themis_setup(sim)
        ),
        paper=paper,
        notes=(
            "- The node and query counts of Figs. 12-13 are only in the plots.\n"
            "- Zipf placement makes the first nodes much busier than the last (with 24 nodes the "
            "busiest hosts about 4 times the average): single-fragment queries on a busy node "
            "cannot be raised by other nodes, which bounds Jain's index for any shedder.\n"
            "- Capacity and rates as in federated-fairness (THEMIS's capacity figure, Emulab's "
            "rate)."
        ),
        tables={"nodes.csv": list(measured["nodes"]), "queries.csv": list(measured["queries"])},
        figures=figs,
        sections=[
            ("Fig. 12 points (summary.json `nodes`)", markdown_table(measured["nodes"], cols)),
            ("Fig. 13 points (summary.json `queries`)", markdown_table(measured["queries"], cols)),
        ],
    )


EXPERIMENT: Experiment[ScalabilityConfig, Any] = Experiment(
    name=NAME, title=TITLE, config_type=ScalabilityConfig, measure=measure, analyse=analyse
)


def run(config: ScalabilityConfig, out_dir: Path | str) -> dict[str, Any]:
    """Measure, analyse and write the report folder; returns the summary."""
    return EXPERIMENT.run(config, out_dir)


__all__ = [
    "DESCRIPTION",
    "EXPERIMENT",
    "ScalabilityConfig",
    "analyse",
    "checks",
    "make_config",
    "measure",
    "run",
]
