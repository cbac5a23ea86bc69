"""BALANCE-SIC against centralised optimisers: FIT's LP and a log-utility optimum (THEMIS §7.5).

THEMIS compares with two centralised formulations fed with its cost model's values:

- **FIT** (Tatbul et al., VLDB 2007): a linear program that maximises the weighted throughput
  (all weights 1), solved with GLPK on 2 nodes running 60 AVG-all queries of two fragments, all
  source-connected operators on one node: "3 out of the 60 queries process all of their input
  tuples: one query discards a fraction of its input tuples; and all the other queries discard
  all of their tuples".
- **Zhao et al.** (SIGMETRICS 2010) with logarithmic utilities of the output rates
  (proportional fairness), solved with Matlab: as fair as BALANCE-SIC on the simple setup; on
  20 AVG-all (3 fragments), 20 COV and 20 TOP-5 queries (2 fragments) placed at random on 4
  nodes, Jain's index 0.87 against BALANCE-SIC's 0.97.

Here both problems are built from the same deployments the simulator runs: variables are the
kept fraction ``x_f`` of each source-reading fragment's tuples (drops at the inputs, as FIT),
a query's output rate is ``y_q = sum(r_f x_f)`` (``r_f``: its fragment's source tuples per
second), and each node's constraint is ``sum(r_f x_f) <= capacity - derived rows per second``.
The LP maximises ``sum(y_q)`` with :func:`scipy.optimize.linprog` (``method="highs"``); the
log-utility problem maximises ``sum(log y_q)`` with :func:`scipy.optimize.minimize` (SLSQP on
a convex program, so its stopping point is the global optimum). A query's SIC under an allocation is ``y_q / R_q``, the
share of its source tuples processed (Eq. 1 weights every source equally; all sources here
have one rate); BALANCE-SIC and random shedding run in the simulator on the same deployments.

``jain_log_utility`` is Jain's index over the queries' SIC, the quantity BALANCE-SIC balances;
THEMIS reports Jain over "normalised log-output rates" for Zhao et al., given here as
``jain_log_utility_log_rates`` with the normalisation ``log(1 + y_q) / log(1 + R_q)``.

Examples
--------
>>> p = problem(simple_setup(n_queries=4))
>>> sol = fit_lp(p)
>>> sorted(np.round(sol.sic, 3).tolist())[-1], bool(sol.feasible)
(1.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linprog, minimize

from spillway.errors import ConfigError
from spillway.experiments._simulated import policy_values, run_policies, themis_setup
from spillway.experiments.checks import Check, compare, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.quality.metrics import jain_index
from spillway.reporting import markdown_table, num
from spillway.sim import Deployment, FragmentSpec, QuerySpec, SimConfig, WorkloadConfig, chain, tree
from spillway.sim.workload import KINDS, THEMIS_CAPACITY, place

NAME = "related-work"
TITLE = "BALANCE-SIC vs FIT's LP and a log-utility optimum (THEMIS §7.5)"
DESCRIPTION = "THEMIS §7.5: Jain of balance-sic vs the FIT LP (HiGHS) and a log-utility optimum"
PAPER_JAIN_BS, PAPER_JAIN_LOG = 0.97, 0.87
_EPS = 1e-6


@dataclass(frozen=True, kw_only=True)
class RelatedWorkConfig:
    """Settings of the §7.5 comparison.

    Parameters
    ----------
    simple_queries : AVG-all queries of the FIT setup (THEMIS: 60 on 2 nodes).
    complex_per_kind : queries of each kind in the complex setup (THEMIS: 20 each on 4 nodes).
    capacity : tuples/s per node.
    duration_s, warmup_s, seed : the simulations' settings.
    """

    simple_queries: int = 60
    complex_per_kind: int = 20
    complex_nodes: int = 4
    capacity: float = THEMIS_CAPACITY
    duration_s: float = 300.0
    warmup_s: float = 20.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("simple_queries", "complex_per_kind"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
        if (
            isinstance(self.complex_nodes, bool)
            or not isinstance(self.complex_nodes, int)
            or self.complex_nodes < 3
        ):
            raise ConfigError(
                f"complex_nodes must be an int >= 3 (AVG-all has 3 fragments), got {self.complex_nodes!r}"
            )
        if not (
            isinstance(self.capacity, int | float)
            and math.isfinite(self.capacity)
            and self.capacity > 0
        ):
            raise ConfigError(f"capacity must be a finite number > 0, got {self.capacity!r}")
        self.sim()

    def sim(self) -> SimConfig:
        """The simulations' settings."""
        return SimConfig(duration_s=self.duration_s, warmup_s=self.warmup_s, seed=self.seed)


def make_config(quick: bool = False, seed: int = 0) -> RelatedWorkConfig:
    """The paper-shaped comparison or a quick one (30 s simulations)."""
    if quick:
        return RelatedWorkConfig(duration_s=30.0, seed=seed)
    return RelatedWorkConfig(seed=seed)


def simple_setup(n_queries: int = 60, capacity: float = THEMIS_CAPACITY) -> Deployment:
    """FIT's setup: AVG-all queries whose source-reading fragment (10 sources) runs on node 0
    and whose aggregating fragment (no sources) runs on node 1."""
    q = QuerySpec(kind="avg_all", fragments=(
        FragmentSpec(node=1, sources=0),
        FragmentSpec(node=0, sources=10, downstream=(0,)),
    ))  # fmt: skip
    return Deployment(n_nodes=2, capacity=float(capacity), queries=(q,) * n_queries)


def complex_setup(config: RelatedWorkConfig) -> Deployment:
    """Zhao's complex setup: AVG-all with 3 fragments, COV and TOP-5 with 2, placed at random."""
    kinds = [("avg_all", 3)] * config.complex_per_kind
    kinds += [("cov", 2)] * config.complex_per_kind + [("top5", 2)] * config.complex_per_kind
    wl = WorkloadConfig(n_nodes=config.complex_nodes, fragments=(1, 3), seed=config.seed)
    nodes = place([k for _, k in kinds], wl, np.random.default_rng(config.seed))
    queries = []
    for (kind, _), where in zip(kinds, nodes, strict=True):
        spec = KINDS[kind]
        make = tree if spec.shape == "tree" else chain
        queries.append(QuerySpec(kind=kind, fragments=make(where, spec.sources, spec.rows_out)))
    return Deployment(
        n_nodes=config.complex_nodes, capacity=float(config.capacity), queries=tuple(queries)
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class Problem:
    """The allocation problem of a deployment (see the module docstring).

    ``rate`` (V,): source tuples/s of each source-reading fragment; ``query`` (V,): its query;
    ``node`` (V,); ``capacity`` (N,): capacity left after derived rows; ``query_rate`` (Q,).
    """

    rate: np.ndarray
    query: np.ndarray
    node: np.ndarray
    capacity: np.ndarray
    query_rate: np.ndarray

    @property
    def node_matrix(self) -> np.ndarray:
        """(N, V): ``rate`` on the row of the fragment's node."""
        a = np.zeros((self.capacity.shape[0], self.rate.shape[0]))
        a[self.node, np.arange(self.rate.shape[0])] = self.rate
        return a

    @property
    def query_matrix(self) -> np.ndarray:
        """(Q, V): ``rate`` on the row of the fragment's query."""
        a = np.zeros((self.query_rate.shape[0], self.rate.shape[0]))
        a[self.query, np.arange(self.rate.shape[0])] = self.rate
        return a


def problem(d: Deployment, source_rate: float = 150.0, window_s: float = 1.0) -> Problem:
    """Build the allocation problem of ``d`` (Table 2 rate; derived rows at ``1/window_s``)."""
    t = d.topology()
    derived = np.zeros(d.n_nodes)
    for e in range(t.n_edges):
        src, dst = int(t.edge_from[e]), int(t.edge_to[e])
        rows = t.frag_rows[src] / (t.edge_k[e] if t.edge_partition[e] else 1)
        derived[t.frag_node[dst]] += rows / window_s
    keep = t.frag_sources > 0
    rate = t.frag_sources[keep] * source_rate
    return Problem(
        rate=rate.astype(np.float64),
        query=t.frag_query[keep],
        node=t.frag_node[keep],
        capacity=np.maximum(t.capacity - derived, 0.0),
        query_rate=t.query_sources * source_rate,
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class Allocation:
    """A solved allocation: kept fractions ``x`` (V,), output rates ``y`` (Q,), SIC (Q,)."""

    x: np.ndarray
    y: np.ndarray
    sic: np.ndarray
    feasible: bool
    objective: float


def _allocation(p: Problem, x: np.ndarray, objective: float) -> Allocation:
    x = np.clip(x, 0.0, 1.0)
    y = p.query_matrix @ x
    ok = bool((p.node_matrix @ x <= p.capacity * (1 + 1e-6) + 1e-6).all())
    return Allocation(x=x, y=y, sic=y / p.query_rate, feasible=ok, objective=objective)


def fit_lp(p: Problem) -> Allocation:
    """FIT's LP: maximise total throughput ``sum(y_q)`` (weights 1), HiGHS.

    Raises
    ------
    ConfigError
        When HiGHS reports no optimal solution.
    """
    res = linprog(-p.rate, A_ub=p.node_matrix, b_ub=p.capacity, bounds=(0.0, 1.0), method="highs")
    if res.status != 0:
        raise ConfigError(f"the LP has no optimal solution: {res.message}")
    return _allocation(p, res.x, float(-res.fun))


def log_utility(p: Problem) -> Allocation:
    """Zhao et al. with logarithmic utilities: maximise ``sum(log y_q)`` (proportional fairness).

    A convex program (concave objective, linear constraints), so the point where SLSQP stops
    (Karush-Kuhn-Tucker conditions met) is the global optimum. Output rates are taken in shares
    of each query's rate (the objective differs by a constant) for conditioning.

    Raises
    ------
    ConfigError
        When the solver does not converge to a feasible point.
    """
    a_q, a_n = p.query_matrix / p.query_rate[:, None], p.node_matrix
    cap = np.maximum(p.capacity, 1e-12)

    def f(x: np.ndarray) -> float:
        return float(-np.log(np.maximum(a_q @ x, 1e-12)).sum())

    def grad(x: np.ndarray) -> np.ndarray:
        return -a_q.T @ (1.0 / np.maximum(a_q @ x, 1e-12))

    room = {"type": "ineq", "fun": lambda x: (p.capacity - a_n @ x) / cap,
            "jac": lambda x: -a_n / cap[:, None]}  # fmt: skip
    x0 = np.full(p.rate.shape[0], 0.5)
    res = minimize(f, x0, jac=grad, method="SLSQP", bounds=[(0.0, 1.0)] * x0.shape[0],
                   constraints=[room], options={"maxiter": 1000, "ftol": 1e-12})  # fmt: skip
    out = _allocation(p, res.x, float(-res.fun))
    if not res.success or not out.feasible:
        raise ConfigError(f"the log-utility solver did not reach a feasible optimum: {res.message}")
    return out


def _stats(a: Allocation, prefix: str) -> dict[str, Any]:
    full = int((a.sic >= 1 - _EPS).sum())
    zero = int((a.sic <= _EPS).sum())
    return {
        f"jain_{prefix}": float(jain_index(a.sic)),
        f"mean_sic_{prefix}": float(a.sic.mean()),
        f"{prefix}_full": full,
        f"{prefix}_zero": zero,
        f"{prefix}_partial": int(a.sic.shape[0] - full - zero),
    }


def measure(config: RelatedWorkConfig) -> dict[str, Any]:
    """Solve both problems and simulate both shedders on both setups."""
    out: dict[str, Any] = {}
    sim = config.sim()
    for setup, d in (("simple", simple_setup(config.simple_queries, config.capacity)),
                     ("complex", complex_setup(config))):  # fmt: skip
        p = problem(d, sim.source_rate, sim.window_s)
        lp, lu = fit_lp(p), log_utility(p)
        log_rates = np.log1p(lu.y) / np.log1p(p.query_rate)
        results = run_policies(d, sim)
        out[setup] = {
            "queries": d.n_queries,
            "offered_over_capacity": float((p.node_matrix @ np.ones(p.rate.shape[0])).max() / config.capacity),
            **_stats(lp, "lp"),
            **_stats(lu, "log_utility"),
            "jain_log_utility_log_rates": float(jain_index(log_rates)),
            **policy_values(results),
            "per_query": [
                {"query": i, "kind": d.queries[i].kind, "sic_lp": float(lp.sic[i]),
                 "sic_log_utility": float(lu.sic[i]),
                 "sic_balance_sic": float(results["balance-sic"].per_query_sic()[i]),
                 "sic_random": float(results["random"].per_query_sic()[i])}
                for i in range(d.n_queries)
            ],
        }  # fmt: skip
    return out


def checks(m: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """THEMIS §7.5's claims on the measured values.

    >>> m = {"complex": {"jain_balance_sic": 0.96, "jain_log_utility": 0.98},
    ...      "simple": {"jain_balance_sic": 0.99, "jain_lp": 0.6, "lp_full": 35, "lp_zero": 24,
    ...                 "lp_partial": 1}}
    >>> [c.verdict for c in checks(m)]
    ['fail', 'fail', 'pass', 'not applicable']
    """
    c, s = m["complex"], m["simple"]
    return [
        compare("jain_balance_sic_ge_0.97", c["jain_balance_sic"], ">=", PAPER_JAIN_BS,
                what="Jain's index of BALANCE-SIC (complex setup, simulated)"),
        compare("balance_sic_above_log_utility", c["jain_balance_sic"], ">", c["jain_log_utility"],
                what="Jain's index over query SIC, BALANCE-SIC vs the log-utility optimum"),
        compare("balance_sic_fairer_than_lp", s["jain_balance_sic"], ">", s["jain_lp"],
                what="Jain's index, simple setup, BALANCE-SIC vs the LP"),
        not_applicable(
            "lp_serves_few_and_starves_the_rest",
            f"holds by construction: an optimal vertex of this LP has at most one fractional "
            f"variable per binding node constraint, so queries are served fully or not at all; "
            f"here {s['lp_full']} full, {s['lp_partial']} partial, {s['lp_zero']} starved, a split "
            "set by the capacity (see the report)"),
    ]  # fmt: skip


def analyse(config: RelatedWorkConfig, m: Mapping[str, Mapping[str, Any]]) -> Analysis:
    """Summary values (``jain_balance_sic``, ``jain_log_utility``, ``jain_lp`` and per setup)."""
    c, s = m["complex"], m["simple"]
    cks = checks(m)
    values = {
        "jain_balance_sic": c["jain_balance_sic"],
        "jain_log_utility": c["jain_log_utility"],
        "jain_lp": s["jain_lp"],
        "jain_log_utility_log_rates": c["jain_log_utility_log_rates"],
        "paper_jain_balance_sic": PAPER_JAIN_BS,
        "paper_jain_log_utility": PAPER_JAIN_LOG,
        "simple": {k: v for k, v in s.items() if k != "per_query"},
        "complex": {k: v for k, v in c.items() if k != "per_query"},
    }
    paper = markdown_table([
        {"claim": "FIT LP, 60 AVG-all on 2 nodes", "paper": "3 fully served, 1 partial, 56 starved",
         "measured": f"{s['lp_full']} full, {s['lp_partial']} partial, {s['lp_zero']} starved "
                     f"(Jain {num(s['jain_lp'])})"},
        {"claim": "log utility, simple setup", "paper": "fair, as BALANCE-SIC",
         "measured": f"Jain {num(s['jain_log_utility'])} (BALANCE-SIC {num(s['jain_balance_sic'])})"},
        {"claim": "log utility, complex setup", "paper": "Jain 0.87 (normalised log-output rates)",
         "measured": f"Jain {num(c['jain_log_utility'])} over SIC, "
                     f"{num(c['jain_log_utility_log_rates'])} over log-rates"},
        {"claim": "BALANCE-SIC, complex setup", "paper": "Jain 0.97",
         "measured": f"Jain {num(c['jain_balance_sic'])} (random shedding {num(c['jain_random'])})"},
    ], ["claim", "paper", "measured"])  # fmt: skip
    per_q = list(c["per_query"])
    figs = [Figure(
        file="complex_sic_per_query.png", title="query SIC per allocation, complex setup",
        xlabel="query (20 AVG-all, 20 COV, 20 TOP-5)", ylabel="query SIC",
        series={k: ([r["query"] for r in per_q], [r[f"sic_{k}"] for r in per_q])
                for k in ("balance_sic", "log_utility", "lp", "random")},
        paper="(§7.5 gives only Jain's index: 0.97 BALANCE-SIC, 0.87 log utility)")]  # fmt: skip
    cols = ["setup", "queries", "offered_over_capacity", "jain_balance_sic", "jain_random",
            "jain_log_utility", "jain_lp", "lp_full", "lp_partial", "lp_zero",
            "mean_sic_balance_sic", "mean_sic_log_utility", "mean_sic_lp"]  # fmt: skip
    table = [
        {"setup": k, **{x: v for x, v in m[k].items() if x != "per_query"}}
        for k in ("simple", "complex")
    ]
    return Analysis(
        values=values,
        checks=cks,
        setup=(
            f"Simple (FIT) setup: {config.simple_queries} AVG-all queries, each a 10-source fragment "
            "on node 0 feeding a source-less aggregating fragment on node 1. Complex (Zhao) setup: "
            f"{config.complex_per_kind} AVG-all (3 fragments), {config.complex_per_kind} COV and "
            f"{config.complex_per_kind} TOP-5 (2 fragments) on {config.complex_nodes} nodes at "
            "random. The LP (HiGHS) and the log-utility program (SLSQP) allocate kept "
            "fractions of the source-reading fragments under each node's capacity; BALANCE-SIC "
            "and random shedding run in the simulator on the same deployments. "
            + themis_setup(config.sim())
        ),
        paper=paper,
        notes=(
            "- THEMIS solved FIT with GLPK and Zhao with Matlab; here HiGHS and scipy's "
            "SLSQP. The LP is degenerate (identical queries): any split of the capacity "
            "is optimal, and the solver returns a vertex, all-or-nothing per query.\n"
            f"- How many queries the LP serves follows from the overload: at THEMIS's capacity "
            f"figure node 0 is offered {num(s['offered_over_capacity'])}x what it processes, so "
            f"{s['lp_full']} queries fit; the paper's 3 of 60 implies its node 0 processed "
            "about 3.5 queries' input.\n"
            '- THEMIS reports Jain over "normalised log-output rates" for Zhao et al. and over '
            "SIC for BALANCE-SIC; `jain_log_utility` is over SIC for both (the same quantity), "
            "the log-rate version is reported beside. Proportional fairness equalises output "
            "rates, so queries with more sources get a smaller share of their data.\n"
            f"- At THEMIS's capacity figure the complex setup is lightly overloaded (the busiest "
            f"node is offered {num(c['offered_over_capacity'])}x its capacity), so every allocation "
            "is close to fair there; THEMIS's 0.87 for the log-utility optimum points to a more "
            "loaded setup, whose node capacities the paper does not give.\n"
            "- The centralised optimisers know every rate and capacity exactly and do not shed "
            "derived rows; the simulated shedders decide per node every 250 ms."
        ),
        tables={
            "setups.csv": table,
            "complex_per_query.csv": per_q,
            "simple_per_query.csv": list(s["per_query"]),
        },
        figures=figs,
        sections=[("Both setups", markdown_table(table, cols))],
    )


EXPERIMENT: Experiment[RelatedWorkConfig, Any] = Experiment(
    name=NAME, title=TITLE, config_type=RelatedWorkConfig, measure=measure, analyse=analyse
)


def run(config: RelatedWorkConfig, out_dir: Path | str) -> dict[str, Any]:
    """Measure, analyse and write the report folder; returns the summary."""
    return EXPERIMENT.run(config, out_dir)


__all__ = [
    "DESCRIPTION",
    "EXPERIMENT",
    "Allocation",
    "Problem",
    "RelatedWorkConfig",
    "analyse",
    "checks",
    "complex_setup",
    "fit_lp",
    "log_utility",
    "make_config",
    "measure",
    "problem",
    "run",
    "simple_setup",
]
