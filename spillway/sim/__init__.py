"""A deterministic, time-stepped simulator of federated nodes (THEMIS §5-§7), without Spark.

Spark runs on this machine cover one to three nodes; THEMIS's fairness results come from 18
nodes and about 2,000 query fragments. The simulator runs such federations in seconds, and it
runs them with the same code as the Spark runtime wherever a decision or a SIC value is made:

- what to shed: the registered :mod:`spillway.policies` (``Policy.decide`` on the same
  :class:`~spillway.policies.Backlog` lane model: one lane per source, one per upstream edge);
- how much: :mod:`spillway.control` (each node's online cost model, its budget per interval
  and the overload detector);
- SIC: :mod:`spillway.quality` (Eq. 1 from a :class:`~spillway.quality.StwCounter`, Eq. 3
  propagation with replication and partitioning, Eq. 4 and the query coordinator of
  :mod:`spillway.quality.coordination`, the local projection of
  :mod:`spillway.quality.projection`);
- arrivals: :mod:`spillway.feeds.profiles` (constant, THEMIS's bursty sources, Pareto).

Modules (one concept each):

- :mod:`~spillway.sim.deployment`: nodes, queries, fragments and their placement
  (:class:`Deployment`), flattened into arrays (:class:`Topology`);
- :mod:`~spillway.sim.workload`: THEMIS's complex workload (AVG-all trees, TOP-5 and COV
  chains) placed at random, by Zipf or balanced (:func:`build`);
- :mod:`~spillway.sim.config`: run settings (:class:`SimConfig`, :class:`NodeFailure`);
- :mod:`~spillway.sim.engine`: the step loop (:func:`simulate`);
- :mod:`~spillway.sim.result`: what a run measured (:class:`SimResult`);
- :mod:`~spillway.sim.command`: ``spillway simulate`` (summary.json, CSV, a plot).

Examples
--------
>>> d = build(WorkloadConfig(n_nodes=3, n_queries=12, fragments=(1, 3), capacity=8_000.0))
>>> a = simulate(d, SimConfig(duration_s=30.0, warmup_s=20.0, seed=1))
>>> b = simulate(d, SimConfig(duration_s=30.0, warmup_s=20.0, seed=1))
>>> bool((a.query_sic == b.query_sic).all()), a.accounting.balanced()
(True, True)
"""

from __future__ import annotations

from spillway.sim.config import COORDINATION, NodeFailure, SimConfig
from spillway.sim.deployment import Deployment, FragmentSpec, QuerySpec, Topology, chain, tree
from spillway.sim.engine import Simulation, simulate
from spillway.sim.result import Accounting, FragmentStats, NodeStats, SimResult
from spillway.sim.workload import KINDS, PLACEMENTS, THEMIS_CAPACITY, WorkloadConfig, build

__all__ = [
    "COORDINATION",
    "KINDS",
    "PLACEMENTS",
    "THEMIS_CAPACITY",
    "Accounting",
    "Deployment",
    "FragmentSpec",
    "FragmentStats",
    "NodeFailure",
    "NodeStats",
    "QuerySpec",
    "SimConfig",
    "SimResult",
    "Simulation",
    "Topology",
    "WorkloadConfig",
    "build",
    "chain",
    "simulate",
    "tree",
]
