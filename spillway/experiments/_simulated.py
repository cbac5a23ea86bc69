"""What the simulator experiments share: the THEMIS set-up, policy runs and their values.

The experiments of THEMIS §7.2-§7.6 and DISSP §6.4 that need tens of nodes run on
:mod:`spillway.sim` and are built on the experiment skeleton
(:mod:`spillway.experiments.framework`): a frozen config, ``measure`` (the simulations),
``analyse`` (values, :class:`~spillway.experiments.checks.Check` verdicts, tables, figures,
prose). This module holds what they have in common.

Examples
--------
>>> slug("balance-sic")
'balance_sic'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from spillway.progress import report
from spillway.sim import Deployment, SimConfig, SimResult, simulate
from spillway.sim.workload import THEMIS_CAPACITY

#: The two shedders THEMIS compares (§7.2), in report order.
POLICIES: tuple[str, ...] = ("balance-sic", "random")


def run_policies(
    deployment: Deployment,
    config: SimConfig,
    policies: Sequence[str] = POLICIES,
    *,
    label: str = "",
) -> dict[str, SimResult]:
    """The same deployment and input under each policy (only the shedder differs); reports a
    progress line per run."""
    out = {}
    for p in policies:
        out[p] = r = simulate(deployment, dataclasses.replace(config, policy=p))
        s = r.summary()
        report(
            f"{label + ': ' if label else ''}{p}: Jain {s['jain']:.4f}, mean SIC "
            f"{s['mean_sic']:.4f} ({deployment.n_queries} queries, {r.wall_s:.1f} s)"
        )
    return out


def slug(policy: str) -> str:
    """``balance-sic`` → ``balance_sic`` (summary.json key suffixes)."""
    return policy.replace("-", "_")


def policy_values(results: Mapping[str, SimResult]) -> dict[str, Any]:
    """Per policy, keyed ``<stat>_<policy>``: ``jain_*``, ``mean_sic_*``, ``std_*``
    (population std of the per-query SIC), ``iqr_*``, ``range_90_*``, ``min_sic_*``,
    ``jain_per_sample_*`` (mean of Jain's index at every sample), ``derived_shed_share_*``
    (share of the rows sent between fragments that the receiving node shed: upstream work
    wasted) and ``wall_s_*``."""
    out: dict[str, Any] = {}
    for p, r in results.items():
        s = r.summary()
        k = slug(p)
        out[f"jain_{k}"] = s["jain"]
        out[f"mean_sic_{k}"] = s["mean_sic"]
        out[f"std_{k}"] = s["std_sic"]
        out[f"iqr_{k}"] = s["iqr_sic"]
        out[f"range_90_{k}"] = s["range_90_sic"]
        out[f"min_sic_{k}"] = s["min_sic"]
        out[f"jain_per_sample_{k}"] = s["jain_per_sample_mean"]
        acc = r.accounting
        out[f"derived_shed_share_{k}"] = (
            acc.derived_shed / acc.derived_delivered if acc.derived_delivered else 0.0
        )
        out[f"wall_s_{k}"] = r.wall_s
    return out


def themis_setup(sim: SimConfig) -> str:
    """The settings every THEMIS simulation shares, in words."""
    return (
        f"Simulated with `spillway.sim` (the same policies, cost model, overload detector and SIC "
        f"accounting as the Spark runtime). Every node processes {THEMIS_CAPACITY:,.0f} tuples/s "
        "(THEMIS §7.2: 528,000 tuples/s of input left a node at mean SIC about 0.1); every source "
        f"sends {sim.source_rate:g} tuples/s in batches of {sim.batch_size} (Table 2, Emulab). "
        f"Shedding interval {sim.interval_s * 1000:g} ms = STW slide, STW {sim.stw_s:g} s, "
        f"windows of {sim.window_s:g} s, {sim.data_delay_s * 1000:g} ms between nodes and to the "
        f"coordinator, coordinator updates every interval, {sim.duration_s:g} s per run; a "
        f"query's SIC is its Eq. 4 value sampled every {sim.sample_s:g} s and averaged from "
        f"{sim.warmup_s:g} s on. Both policies see identical input (same seed); only the shedder "
        "differs."
    )


__all__ = ["POLICIES", "policy_values", "run_policies", "slug", "themis_setup"]
