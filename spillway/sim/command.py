"""``spillway simulate``: one simulated federation of THEMIS's complex workload, with a report.

``spillway simulate --nodes 18 --fragments 2000 --minutes 5 --out DIR`` builds the deployment
(:func:`spillway.sim.workload.build`: 1-6 fragments per query by default, random placement,
THEMIS's node capacity and source rate), runs it (:func:`spillway.sim.simulate`) and writes
into ``DIR``:

- ``summary.json``: ``wall_s`` (seconds to build and run; writing excluded), the settings,
  Jain's index, mean and std of the per-query SIC and more (:meth:`SimResult.summary`), the
  per-query SIC, the tuple accounting and node totals;
- ``queries.csv`` (per query: kind, fragments, mean SIC), ``nodes.csv`` (per node totals),
  ``sic_over_time.csv`` (every sample);
- ``sic_over_time.png``: min, mean and max query SIC over time.

The CLI registers it with :func:`add_parser` and dispatches to :func:`cmd_simulate`.

Examples
--------
>>> import tempfile
>>> out = run_simulate(nodes=3, fragments=12, minutes=0.5, per_query=(1, 3), out=tempfile.mkdtemp())
>>> import json; s = json.loads((out / "summary.json").read_text())
>>> s["nodes"], s["fragments"] >= 12, s["accounting"]["balanced"], s["wall_s"] > 0
(3, True, True, True)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.reporting import line_plot, write_csv, write_summary
from spillway.sim.config import SimConfig
from spillway.sim.engine import simulate
from spillway.sim.workload import PLACEMENTS, WorkloadConfig, build

DESCRIPTION = "Simulate a federation of nodes running THEMIS's complex workload (no Spark)."

EPILOG = """\
examples:
  spillway simulate --nodes 18 --fragments 2000 --minutes 5 --out runs/sim
  spillway simulate --policy random --placement zipf --per-query 2 --out runs/sim-random

Queries are THEMIS's complex workload (AVG-all, TOP-5, COV, dealt in turn), split into
--per-query fragments (a number, or lo-hi for a uniform draw; default 1-6) on distinct nodes;
every node processes 52,800 tuples/s and every source sends 150 tuples/s (THEMIS §7). The
folder gets summary.json (wall_s, Jain's index, mean and std of query SIC), CSV files and a
plot of query SIC over time.
"""


def _fragments_per_query(text: str) -> int | tuple[int, int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return (lo, hi)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of fragments or a range lo-hi, got {text!r}"
        ) from None


def add_parser(sub: Any, *, positive: Any, seed: Any) -> argparse.ArgumentParser:
    """Register ``simulate`` on the CLI's subparsers (``positive`` and ``seed`` parse
    arguments the CLI's way)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="simulate a federation of nodes (THEMIS's complex workload) without Spark",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    p.add_argument("--nodes", type=int, default=18, help="number of nodes (default 18)")
    p.add_argument(
        "--fragments", type=int, default=2000, help="total query fragments (default 2000)"
    )
    p.add_argument("--minutes", type=positive, default=5.0, help="simulated minutes (default 5)")
    p.add_argument(
        "--per-query",
        type=_fragments_per_query,
        default=(1, 6),
        metavar="K|LO-HI",
        help="fragments per query: a number or a range (default 1-6, THEMIS 'mixed')",
    )
    p.add_argument("--placement", choices=PLACEMENTS, default="random", help="default random")
    p.add_argument(
        "--policy",
        choices=("balance-sic", "random"),
        default="balance-sic",
        help="default balance-sic",
    )
    p.add_argument("--seed", type=seed, default=0, help="seed (default 0)")
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="report folder (default runs/simulate-<time>)"
    )
    return p


def run_simulate(
    *,
    nodes: int = 18,
    fragments: int = 2000,
    minutes: float = 5.0,
    per_query: int | tuple[int, int] = (1, 6),
    placement: str = "random",
    policy: str = "balance-sic",
    seed: int = 0,
    out: Path | str,
) -> Path:
    """Build, run and write the report folder ``out``; returns it.

    Raises
    ------
    ConfigError
        A setting breaks a rule of :class:`WorkloadConfig` or :class:`SimConfig` (e.g. more
        fragments per query than nodes, a run shorter than the 20 s warm-up).
    """
    duration = float(minutes) * 60.0
    warmup = 20.0
    if duration <= warmup:
        warmup = duration / 2
    t0 = time.perf_counter()
    workload = WorkloadConfig(
        n_nodes=nodes, n_fragments=fragments, fragments=per_query, placement=placement, seed=seed
    )
    deployment = build(workload)
    try:
        config = SimConfig(
            duration_s=round(duration / 0.25) * 0.25, warmup_s=warmup, policy=policy, seed=seed
        )
    except ConfigError as e:
        raise ConfigError(f"--minutes {minutes}: {e}") from None
    result = simulate(deployment, config)
    wall = time.perf_counter() - t0
    folder = Path(out)
    summary: dict[str, Any] = {
        "wall_s": wall,
        "simulate_wall_s": result.wall_s,
        "nodes": deployment.n_nodes,
        "fragments": deployment.n_fragments,
        "queries": deployment.n_queries,
        "simulated_s": config.duration_s,
        "steps": config.n_steps,
        "policy": policy,
        "placement": placement,
        "fragments_per_query": list(workload.fragment_range),
        **result.summary(),
        "per_query_sic": result.per_query_sic(),
        "accounting": result.accounting.as_dict(),
        "node_kept_share": [r["kept_share"] for r in result.nodes.rows()],
        "workload": {k: v for k, v in vars(workload).items()},
        "config": config.to_dict(),
    }
    write_summary(folder, summary, significant=4)
    write_csv(folder / "queries.csv", result.query_rows())
    write_csv(folder / "nodes.csv", result.nodes.rows())
    t = result.sample_times
    write_csv(
        folder / "sic_over_time.csv",
        [
            {"t": float(ti), **{f"q{j}": float(v) for j, v in enumerate(row)}}
            for ti, row in zip(t, result.query_sic, strict=True)
        ],
    )
    sic = result.query_sic
    line_plot(
        folder / "sic_over_time.png",
        {
            "min": (t.tolist(), sic.min(axis=1).tolist()),
            "mean": (t.tolist(), sic.mean(axis=1).tolist()),
            "max": (t.tolist(), sic.max(axis=1).tolist()),
        },
        title=f"query SIC over time ({policy}, {deployment.n_queries} queries on {nodes} nodes)",
        xlabel="simulated time (s)",
        ylabel="query SIC over the STW (Eq. 4)",
    )
    return folder


def cmd_simulate(args: argparse.Namespace, out: Path) -> Path:
    """The CLI's ``simulate``: :func:`run_simulate` with the parsed options into the report
    folder ``out`` (the CLI creates it); returns the folder."""
    return run_simulate(
        nodes=args.nodes,
        fragments=args.fragments,
        minutes=args.minutes,
        per_query=args.per_query,
        placement=args.placement,
        policy=args.policy,
        seed=args.seed,
        out=out,
    )


__all__ = ["DESCRIPTION", "add_parser", "cmd_simulate", "run_simulate"]
