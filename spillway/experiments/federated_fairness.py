"""BALANCE-SIC vs random shedding across 18 nodes, 1-6 fragments per query (THEMIS §7.2 Fig. 10).

THEMIS deploys the complex workload (AVG-all, TOP-5, COV) on 18 Emulab nodes with about 2,000
fragments in every case, queries split into 1, 2, ..., 6 fragments or a random number of 1-6
("mixed"), and compares BALANCE-SIC with random shedding: BALANCE-SIC is fairer in every case
(Fig. 10a, Jain's index), with a lower spread (10b, std of query SIC) and a higher mean SIC
(10c); for the mixed workload its Jain's index is 33 % higher.

The setup here is fixed from the paper before either policy runs: 18 nodes, about 2,000
fragments, kinds dealt in turn, THEMIS's node capacity and Emulab source rate
(:mod:`spillway.experiments._simulated`). The paper does not say how Fig. 10's fragments were
placed; both readings run, uniformly at random (``mixed_jain_ratio``, the headline) and
Zipf-skewed (``mixed_jain_ratio_zipf``, THEMIS §7.3's placement and its claim of fairness
"even with skewed workload distributions"). For the mixed configuration BALANCE-SIC also runs
without the coordinator (each node balancing its own fragments, THEMIS Fig. 4 top).

Examples
--------
>>> cfg = make_config(quick=True)
>>> cfg.n_nodes, cfg.configs[-1], workload(cfg, "mixed", "zipf").fragments
(6, 'mixed', (1, 6))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments._simulated import POLICIES, policy_values, run_policies, themis_setup
from spillway.experiments.checks import Check, compare, every
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.reporting import markdown_table, num
from spillway.sim import SimConfig, SimResult, WorkloadConfig, build, simulate
from spillway.sim.workload import PLACEMENTS

NAME = "federated-fairness"
TITLE = "BALANCE-SIC vs random across federated nodes (THEMIS Fig. 10)"
#: One line for ``spillway experiment --help``.
DESCRIPTION = (
    "THEMIS Fig. 10: Jain, std and mean SIC of balance-sic vs random on 18 simulated nodes"
)
#: THEMIS §7.2: "For the most realistic mixed workload, BALANCE-SIC is 33% better".
PAPER_MIXED_RATIO = 1.33
CONFIGS: tuple[str, ...] = ("1", "2", "3", "4", "5", "6", "mixed")


@dataclass(frozen=True, kw_only=True)
class FederatedFairnessConfig:
    """Settings of the Fig. 10 study.

    Parameters
    ----------
    n_nodes : nodes (THEMIS: 18).
    n_fragments : fragments in every configuration (THEMIS: about 2,000).
    configs : fragments per query: ``"1"`` .. ``"6"`` or ``"mixed"`` (uniform 1-6).
    placements : how fragments are placed (``random``, ``zipf``).
    duration_s, warmup_s : simulated time per run and the start of the averaging.
    with_local : also run BALANCE-SIC without the coordinator on the mixed configuration.
    seed : seed of placement, arrivals and policies.
    """

    n_nodes: int = 18
    n_fragments: int = 2000
    configs: tuple[str, ...] = CONFIGS
    placements: tuple[str, ...] = ("random", "zipf")
    duration_s: float = 300.0
    warmup_s: float = 20.0
    with_local: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.configs or any(c not in CONFIGS for c in self.configs):
            raise UnknownNameError(
                f"configs must be among {', '.join(CONFIGS)}; got {self.configs!r}"
            )
        if not self.placements or any(p not in PLACEMENTS for p in self.placements):
            raise UnknownNameError(
                f"placements must be among {', '.join(PLACEMENTS)}; got {self.placements!r}"
            )
        top = max(6 if c == "mixed" else int(c) for c in self.configs)
        if (
            isinstance(self.n_nodes, bool)
            or not isinstance(self.n_nodes, int)
            or self.n_nodes < top
        ):
            raise ConfigError(
                f"n_nodes must be an int >= {top} (fragments of a query run on distinct nodes), got {self.n_nodes!r}"
            )
        if (
            isinstance(self.n_fragments, bool)
            or not isinstance(self.n_fragments, int)
            or self.n_fragments < 1
        ):
            raise ConfigError(f"n_fragments must be an int >= 1, got {self.n_fragments!r}")
        self.sim()  # validates duration, warm-up and seed

    def sim(self) -> SimConfig:
        """The simulation settings of every run (THEMIS defaults otherwise)."""
        return SimConfig(duration_s=self.duration_s, warmup_s=self.warmup_s, seed=self.seed)


def make_config(quick: bool = False, seed: int = 0) -> FederatedFairnessConfig:
    """The paper-shaped study (18 nodes, ~2,000 fragments, 5 min per run) or a quick one
    (6 nodes, 667 fragments: the paper's load per node; configurations 1, 3 and mixed; 30 s per run)."""
    if quick:
        return FederatedFairnessConfig(
            n_nodes=6, n_fragments=667, configs=("1", "3", "mixed"), duration_s=30.0, seed=seed
        )
    return FederatedFairnessConfig(seed=seed)


def workload(config: FederatedFairnessConfig, name: str, placement: str) -> WorkloadConfig:
    """The deployment of configuration ``name`` with ``placement``."""
    frags: int | tuple[int, int] = (1, 6) if name == "mixed" else int(name)
    return WorkloadConfig(
        n_nodes=config.n_nodes,
        n_fragments=config.n_fragments,
        fragments=frags,
        placement=placement,
        seed=config.seed,
    )


def measure(config: FederatedFairnessConfig) -> dict[str, Any]:
    """Run every (configuration, placement) under both policies; per-run summaries."""
    runs: list[dict[str, Any]] = []
    per_query: list[dict[str, Any]] = []
    sim = config.sim()
    for placement in config.placements:
        for name in config.configs:
            d = build(workload(config, name, placement))
            results = run_policies(d, sim)
            rec: dict[str, Any] = {
                "name": name,
                "placement": placement,
                "queries": d.n_queries,
                "fragments": d.n_fragments,
                **policy_values(results),
            }
            if config.with_local and name == "mixed":
                local = simulate(d, replace(sim, coordination="local"))
                rec["jain_balance_sic_local"] = local.summary()["jain"]
                rec["mean_sic_balance_sic_local"] = local.summary()["mean_sic"]
                rec["std_balance_sic_local"] = local.summary()["std_sic"]
            rec["by_fragments"] = {p: _by_fragments(r) for p, r in results.items()}
            runs.append(rec)
            for p, r in results.items():
                for row in r.query_rows():
                    per_query.append({"config": name, "placement": placement, "policy": p, **row})
    return {"runs": runs, "per_query": per_query}


def _by_fragments(r: SimResult) -> dict[int, float]:
    return {int(k): float(v) for k, v in r.summary()["mean_sic_by_fragments"].items()}


def _ratio(runs: Sequence[Mapping[str, Any]], placement: str) -> float:
    for r in runs:
        if r["name"] == "mixed" and r["placement"] == placement:
            return (
                float(r["jain_balance_sic"] / r["jain_random"])
                if r["jain_random"] > 0
                else math.nan
            )
    return math.nan


def checks(runs: Sequence[Mapping[str, Any]]) -> list[Check]:
    """THEMIS Fig. 10's claims on the measured runs (and the project's targets for this run).

    >>> run = {"name": "mixed", "placement": "random", "jain_balance_sic": 0.99,
    ...        "jain_random": 0.8, "std_balance_sic": 0.01, "std_random": 0.07,
    ...        "mean_sic_balance_sic": 0.2, "mean_sic_random": 0.15}
    >>> [c.verdict for c in checks([run])]
    ['fail', 'not applicable', 'pass', 'pass', 'pass']
    """
    out = [
        compare("mixed_jain_ratio_ge_1.33", _ratio(runs, "random"), ">=", PAPER_MIXED_RATIO,
                what="Jain(BALANCE-SIC) / Jain(random), mixed, random placement"),
    ]  # fmt: skip
    zipf = _ratio(runs, "zipf")
    if math.isfinite(zipf):
        out.append(compare("mixed_jain_ratio_zipf_ge_1.33", zipf, ">=", PAPER_MIXED_RATIO,
                           what="Jain(BALANCE-SIC) / Jain(random), mixed, Zipf placement"))  # fmt: skip
    else:
        out.append(every("mixed_jain_ratio_zipf_ge_1.33", [],
                         none_why="the mixed configuration did not run with Zipf placement"))  # fmt: skip
    for name, key, op, what in (
        ("higher_jain_in_every_config", "jain", ">", "Jain's index"),
        ("lower_std_in_every_config", "std", "<", "std of query SIC"),
        ("mean_sic_not_lower_in_every_config", "mean_sic", ">=", "mean query SIC"),
    ):
        parts = [
            compare(f"{r['name']}/{r['placement']}", r[f"{key}_balance_sic"], op, r[f"{key}_random"],
                    what=f"{what} BALANCE-SIC vs random")
            for r in runs
        ]  # fmt: skip
        out.append(every(name, parts, none_why="no configuration ran"))
    return out


def analyse(config: FederatedFairnessConfig, measured: Mapping[str, Any]) -> Analysis:
    """Summary values (``configs``, ``mixed_jain_ratio``), checks, tables, figures, prose."""
    runs = list(measured["runs"])
    keys = ["name", "placement", "queries", "fragments", "jain_balance_sic", "jain_random",
            "std_balance_sic", "std_random", "mean_sic_balance_sic", "mean_sic_random"]  # fmt: skip
    configs = []
    for r in runs:
        entry = {k: r[k] for k in keys}
        entry["jain_ratio"] = (
            r["jain_balance_sic"] / r["jain_random"] if r["jain_random"] else math.nan
        )
        for k in ("iqr", "range_90", "jain_per_sample", "min_sic", "derived_shed_share"):
            for p in ("balance_sic", "random"):
                entry[f"{k}_{p}"] = r[f"{k}_{p}"]
        for k in ("jain_balance_sic_local", "mean_sic_balance_sic_local", "std_balance_sic_local"):
            if k in r:
                entry[k] = r[k]
        configs.append(entry)
    ratio, ratio_z = _ratio(runs, "random"), _ratio(runs, "zipf")
    cks = checks(runs)
    values = {
        "configs": configs,
        "mixed_jain_ratio": ratio,
        "mixed_jain_ratio_zipf": ratio_z,
        "paper_mixed_jain_ratio": PAPER_MIXED_RATIO,
        "mixed_mean_sic_by_fragments": {
            r["placement"]: r["by_fragments"] for r in runs if r["name"] == "mixed"
        },
    }
    return Analysis(
        values=values,
        checks=cks,
        setup=_setup(config),
        paper=_paper(configs, ratio, ratio_z, cks),
        notes=_notes(config),
        tables={"configs.csv": configs, "per_query.csv": list(measured["per_query"])},
        figures=_figures(config, configs, runs),
        sections=[
            (
                "Every configuration (summary.json `configs`)",
                markdown_table(configs, [*keys, "jain_ratio"]),
            )
        ],  # fmt: skip
    )


EXPERIMENT: Experiment[FederatedFairnessConfig, Any] = Experiment(
    name=NAME, title=TITLE, config_type=FederatedFairnessConfig, measure=measure, analyse=analyse
)


def run(config: FederatedFairnessConfig, out_dir: Path | str) -> dict[str, Any]:
    """Measure, analyse and write the report folder; returns the summary."""
    return EXPERIMENT.run(config, out_dir)


def _setup(config: FederatedFairnessConfig) -> str:
    return (
        f"{config.n_nodes} nodes; THEMIS's complex workload (AVG-all trees of 10-source "
        "fragments, TOP-5 chains of 20-source fragments emitting 5 rows, COV chains of 2-source "
        "fragments), kinds dealt in turn; queries added until their fragments reach "
        f"{config.n_fragments:,} with 1, 2, ..., 6 fragments per query or a uniform 1-6 (mixed), "
        f"each fragment of a query on a distinct node, placed {' and '.join(config.placements)}"
        " (Zipf: node rank r drawn with probability proportional to 1/r). "
        + themis_setup(config.sim())
        + " Per configuration: Jain's index, std and mean over the per-query mean SIC."
    )


def _paper(configs: Sequence[Mapping[str, Any]], ratio: float, ratio_z: float,
           cks: Sequence[Check]) -> str:  # fmt: skip
    n = len(configs)
    count = {c.name: c for c in cks}

    def won(key: str, op: str) -> int:
        f = {">": lambda a, b: a > b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b}[op]
        return sum(bool(f(c[f"{key}_balance_sic"], c[f"{key}_random"])) for c in configs)

    rows = [
        {"claim": "mixed: Jain BALANCE-SIC / random", "paper": "1.33 (+33 %)",
         "measured": f"{num(ratio)} (random placement), {num(ratio_z)} (Zipf)",
         "verdict": count["mixed_jain_ratio_ge_1.33"].verdict},
        {"claim": "BALANCE-SIC fairer (Jain, Fig. 10a)", "paper": "in all cases",
         "measured": f"{won('jain', '>')} of {n} configurations",
         "verdict": count["higher_jain_in_every_config"].verdict},
        {"claim": "lower std of SIC (Fig. 10b)", "paper": "in all cases",
         "measured": f"{won('std', '<')} of {n}", "verdict": count["lower_std_in_every_config"].verdict},
        {"claim": "higher mean SIC (Fig. 10c)", "paper": "in all cases",
         "measured": f"{won('mean_sic', '>=')} of {n}",
         "verdict": count["mean_sic_not_lower_in_every_config"].verdict},
        {"claim": "absolute Jain / std / mean per configuration", "paper": "only in the plots",
         "measured": "table below", "verdict": "-"},
    ]  # fmt: skip
    return markdown_table(rows, ["claim", "paper", "measured", "verdict"])


def _figures(config: FederatedFairnessConfig, configs: Sequence[Mapping[str, Any]],
             runs: Sequence[Mapping[str, Any]]) -> list[Figure]:  # fmt: skip
    groups = list(config.configs)
    figs = []
    for key, file, label, paper in (
        ("jain", "fig10a_jain.png", "Jain's index over query SIC",
         "Fig. 10a: Jain's index per configuration, BALANCE-SIC above random in all; mixed +33 %"),
        ("std", "fig10b_std.png", "std of query SIC",
         "Fig. 10b: std of SIC, BALANCE-SIC below random"),
        ("mean_sic", "fig10c_mean_sic.png", "mean query SIC",
         "Fig. 10c: mean SIC, BALANCE-SIC above random"),
    ):  # fmt: skip
        bars = {}
        for placement in config.placements:
            for p in POLICIES:
                by = {
                    c["name"]: c[f"{key}_{p.replace('-', '_')}"]
                    for c in configs
                    if c["placement"] == placement
                }
                bars[f"{p} ({placement} placement)"] = [by.get(g, math.nan) for g in groups]
        figs.append(Figure(file=file, title=f"{label} per configuration", xlabel="fragments per query",
                           ylabel=label, bars=bars, groups=groups, paper=paper))  # fmt: skip
    series = {}
    for r in runs:
        if r["name"] != "mixed":
            continue
        for p in POLICIES:
            by = r["by_fragments"][p]
            ks = sorted(by)
            series[f"{p} ({r['placement']})"] = (ks, [by[k] for k in ks])
    if series:
        figs.append(Figure(file="mixed_sic_by_fragments.png",
                           title="mixed workload: mean SIC of queries with k fragments",
                           xlabel="fragments of the query", ylabel="mean query SIC", series=series,
                           paper="(not in the paper: why random is unfair, per fragment count)"))  # fmt: skip
    return figs


def _notes(config: FederatedFairnessConfig) -> str:
    return "\n".join([
        "- Simulated, not Emulab: nodes are a capacity in tuples/s (THEMIS's cost model is "
        "per tuple too) and payloads are not computed (SIC is query-independent, THEMIS §4).",
        "- Node capacity is the one figure THEMIS gives (§7.2, one node, mean SIC about 0.1 at "
        "528,000 tuples/s); the Emulab nodes' capacity is not stated. With Table 2's 150 "
        "tuples/s per source, 2,000 fragments overload 18 nodes about 3.4 times.",
        "- The placement of Fig. 10 is not stated; random placement is the headline, Zipf the "
        "second reading. Kinds are dealt in turn (equal thirds); the paper's mix is not stated.",
        "- Random shedding keeps a uniformly random subset of tuples (hypergeometric per lane); "
        "THEMIS's random shedder drops whole batches, which adds variance and so lowers its "
        "Jain's index somewhat; this simulation therefore does not favour BALANCE-SIC.",
        "- Delays are whole shedding intervals (5 ms between nodes counts as one 250 ms step).",
        "- Each node's query SIC base is the coordinator's last value with the node's own "
        "admissions since, minus the SIC waiting in its input buffer (THEMIS §6, "
        "`spillway.quality.projection`).",
    ])  # fmt: skip


__all__ = [
    "CONFIGS",
    "DESCRIPTION",
    "FederatedFairnessConfig",
    "analyse",
    "checks",
    "make_config",
    "measure",
    "run",
    "workload",
]
