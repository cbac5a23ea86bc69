"""THEMIS Fig. 4's situation on real Spark: coordinated BALANCE-SIC vs uncoordinated vs random.

THEMIS §5.2 (Fig. 4): a query whose fragments run on several nodes is shed by each of them; a
node that balances only the SIC its own fragments secured cannot see what the others left the
query, so the shared query ends apart from the node-local ones (Fig. 4: 0.45 against 0.2, Jain
0.85); with the query coordinator's values (``updateSIC``) every node balances the queries'
global SIC and all three end at 0.3 (Jain 1).

Here three Spark nodes (``spillway federation up``: one Spark application each, ``local[1]``,
sharing this machine's two cores with the Kafka broker and the coordinator) host four queries:
``local-a``, ``local-b`` and ``local-c`` on one node each, and ``shared`` with a leaf on ``a``
and on ``b`` feeding its root on ``c`` through Kafka (a third of its sources on each node). The
overload is unequal and made by input rates alone, relative to the capacity each node measured
(``rates = "measured"``, the default): a calibration run of the same federation first, every
node shedding uniformly at random an input above what it can process (:data:`PROBE_LOCAL_RATES`,
:data:`PROBE_SHARED_RATE`), gives each node's capacity: what it kept per second over the part
the modes are measured on, the rate its own cost model let it process
(:func:`calibration_values`); then every node's input is :data:`LEVELS` times its capacity (``a`` the most, ``c``
the least), ``shared`` a fixed part of the least loaded node's input and each local query the
rest (:func:`derive_rates`). ``rates = "configured"`` runs the fixed rates ``local_rates`` and
``shared_rate`` instead, labelled so in the report. The same federation, at the same rates,
runs four times, only the shedding changing (the federation file's keys):

- ``coordinated``: every node BALANCE-SIC over the coordinator's values (``coordinated =
  true``, the default);
- ``uncoordinated``: every node BALANCE-SIC over its local SIC only (``coordinated = false``:
  the coordinator still computes Eq. 4 for the measurement, the nodes ignore it);
- ``random``: every node sheds uniformly at random (``policy = "random"``);
- ``node_kill``: as ``coordinated``, with node ``c`` crashed mid-run and restarted from its
  checkpoint (``federation up --kill``, the kill's checks: :func:`kill_values`).

Measured, over the same part of every run (``warmup_s`` to ``duration_s`` after every node was
up): each query's SIC as the coordinator computes it (Eq. 4 over the STW ending at the query's
watermark, what ``federation up`` shows each second in ``timeline.jsonl``), its mean, and Jain
over the queries' means (``jain_<mode>``, the simulator's figure) and the mean of Jain at every
second (``jain_per_sample_<mode>``); every node's p95 result latency (its slowest query's, over
the recent STW, the worst second of the part) and the share of what it decided during the part
that it kept.

Examples
--------
>>> cfg = make_config(quick=True)
>>> cfg.modes, cfg.duration_s, cfg.latency_bound_s
(('coordinated', 'uncoordinated', 'random', 'node_kill'), 130.0, 30.0)
>>> federation(cfg, "node_kill") == federation(cfg, "coordinated")
True
>>> fed = federation(cfg, "uncoordinated")
>>> fed.coordinated, fed.policies, [q.name for q in fed.queries]
(False, ('balance-sic', 'balance-sic', 'balance-sic'), ['local-a', 'local-b', 'local-c', 'shared'])
>>> federation(cfg, "random").policies
('random', 'random', 'random')
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError, InputDataError, RunFailedError, UnknownNameError
from spillway.experiments._spark_runs import check_positive
from spillway.experiments.checks import Check, check, compare, counts, every, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.federation.config import FederationConfig
from spillway.federation.cpu import check_cores, find_controller
from spillway.progress import report
from spillway.quality import jain_index
from spillway.reporting import markdown_table, num

NAME = "spark-federation"
TITLE = "Coordinated vs uncoordinated BALANCE-SIC vs random on 3 Spark nodes (THEMIS Fig. 4)"
#: One line for ``spillway experiment --help``.
DESCRIPTION = (
    "THEMIS Fig. 4 on Spark: 3 nodes, unequal overload; Jain of coordinated BALANCE-SIC, "
    "uncoordinated, random"
)
#: The runs compared: the shedding each node does.
MODES: tuple[str, ...] = ("coordinated", "uncoordinated", "random")
#: The run that crashes :data:`KILL_NODE` mid-run and restarts it (coordinated BALANCE-SIC).
KILL_MODE = "node_kill"
#: Every run, in order.
RUNS: tuple[str, ...] = (*MODES, KILL_MODE)
#: The calibration run's name (``rates = "measured"``): the ``random`` federation at the
#: probe rates, before the others.
CALIBRATION = "calibration"
NODES: tuple[str, ...] = ("a", "b", "c")
#: The node the kill run crashes: it hosts ``local-c`` and ``shared``'s root, so the
#: survivors (no fragment on it) are ``local-a`` and ``local-b``.
KILL_NODE = "c"
#: The STW "before the kill" ends this long before it: the node decides a tuple a micro-batch
#: or a few after it arrives (1-8 s p95 here), and those it had not decided when it was killed
#: are decided after the restart, with the outage's backlog.
BEFORE_GAP_S = 5.0
#: Where each run's input rates come from (``SparkFederationConfig.rates``): ``measured``, a
#: calibration run and :data:`LEVELS` times each node's capacity; ``configured``, the fixed
#: ``local_rates`` and ``shared_rate`` (an option, labelled so in the report).
RATE_SOURCES: tuple[str, ...] = ("measured", "configured")
#: Each node's input over the capacity it measured in the calibration, nodes a, b, c: the
#: unequal overload of THEMIS Fig. 4 (a the most, c the least). A node keeps about
#: ``1 / level`` (c 40 %): what a node processes moved by up to 2.6x between runs at the same
#: rates (EXPERIMENTS.md "Run 5": node c 48,000 coordinated, 125,000 uncoordinated; a quick
#: run of 2026-11-27 20:08 UTC: node b 210,000 random, 526,000 uncoordinated), so the least
#: level leaves that much room below the 90 % of :data:`MAX_KEPT`.
LEVELS: tuple[float, float, float] = (4.0, 3.0, 2.5)
#: Each node's CPU limit in cores (a cgroup quota, :mod:`spillway.federation.cpu`): three nodes
#: take 1.5 of the machine's 2 cores, the broker, the coordinator and this process the rest.
#: Unlimited, the nodes shared the cores as the kernel scheduled them and what one processed
#: moved by 2x between runs while the three's total held (EXPERIMENTS.md "Runs 7 and 8", run
#: 7: node a 619,000 then 482,000 tuples/s, c 69,000 then 122,000, all three 1,175,000 then
#: 1,111,000), so a node's capacity was not its own. With the limit (run 8) a node's throughput
#: still differed between modes as the nodes warm through a quick run.
NODE_CPU = 0.5
#: Every node's cost model is probed every this many decisions (``NodeConfig.probe_every``):
#: a node's batches are the size its model allows, so without probes the model keeps the
#: per-tuple cost of its first (cold, large) batches; run 10's node ``c`` kept 28,000-42,000
#: tuples a decision through its calibration at a fitted 15.6-16.6 µs a tuple, every batch
#: near its prediction (EXPERIMENTS.md "Run 10").
PROBE_EVERY = 4
#: The part of the least loaded node's input that is ``shared``'s (the same rate per source on
#: every node); each node's local query has the rest of its input.
SHARED_SHARE = 0.5
#: The calibration's input, tuples per second per source of ``local-a``, ``local-b``,
#: ``local-c`` (nodes a and b 660,000 tuples/s, c 120,000 with ``shared``): above what each
#: node processed in the runs at the configured rates (a 440,000-540,000, b up to 420,000
#: kept whole, c 48,000-125,000 tuples/s; EXPERIMENTS.md "Run 5"), so every node sheds and
#: keeps what its cost model measures it can process, not a rate it kept up with.
PROBE_LOCAL_RATES: tuple[float, float, float] = (60000.0, 60000.0, 6000.0)
#: The calibration's ``shared`` rate per source. Not higher: a node's shed tuples still cost
#: (a generated one is hashed to choose), so its capacity falls as its input grows, and a
#: node calibrated far above the input the run then gives it measures a capacity the run does
#: not have (run 10: ``c`` calibrated at 300,000 t/s with 24,000 here measured 19,781, was fed
#: 49,454 and kept 99.7 %; EXPERIMENTS.md "Run 10"). At 6,000, ``c``'s calibration input is
#: about 1-3 times its run's.
PROBE_SHARED_RATE = 6000.0
#: The configured rates (``rates = "configured"``), tuples per second per source of each
#: node-local query; with 10 sources a fragment, nodes a, b and c receive 600,000, 420,000 and
#: 300,000 tuples/s. Not tuned to the nodes: in EXPERIMENTS.md "Run 5" node b kept 99-100 % of
#: its input in the uncoordinated and random runs.
LOCAL_RATES: tuple[float, float, float] = (36000.0, 18000.0, 6000.0)
#: Tuples per second per source of the shared query (its fragment on every node), configured.
SHARED_RATE = 24000.0
#: THEMIS Fig. 4 (§5.2): the query SIC with and without ``updateSIC``, and Jain of each.
PAPER_SIC = {"coordinated": (0.3, 0.3, 0.3), "uncoordinated": (0.2, 0.45, 0.2)}
PAPER_JAIN = {"coordinated": 1.0, "uncoordinated": 0.8525}
#: Above this Jain the uncoordinated or random run is already fair: no comparison separates.
SEPARABLE_BELOW = 0.99
#: A node that keeps more than this share of what arrived is not overloaded.
MAX_KEPT = 0.9


@dataclass(frozen=True, kw_only=True)
class SparkFederationConfig:
    """Settings of the study.

    Parameters
    ----------
    modes : which runs (:data:`RUNS`: the three compared, then the kill run).
    duration_s : each run's length after every node is up (``federation up --duration``).
    warmup_s : the measured part starts this long after every node is up (the first results
        and the queries' first watermarks come 20-40 s in).
    sources : sources of every fragment.
    rates : :data:`RATE_SOURCES`: ``measured`` (a calibration run, then ``levels`` times each
        node's capacity: :func:`derive_rates`) or ``configured`` (``local_rates``,
        ``shared_rate``).
    levels : each node's input over its measured capacity, nodes a, b, c (each > 1).
    shared_share : ``shared``'s part of the least loaded node's input, in (0, 1).
    calibration_s : the calibration run's length after every node is up; the capacities are
        what each node kept per second from ``warmup_s`` on (:func:`calibration_values`).
    probe_local_rates, probe_shared_rate : the calibration's input (tuples/s per source).
    local_rates : configured tuples per second per source of ``local-a``, ``local-b``,
        ``local-c`` (``rates = "configured"`` only).
    shared_rate : configured tuples per second per source of ``shared``.
    stw_s, slide_s, timeout_s : the coordinator's settings (THEMIS: 10 s, 250 ms).
    latency_bound_stws : the p95 latency bound in STWs: a result later than this counts in
        the coordinator's Eq. 4 that many windows after its source time, so the nodes balance
        values older than the window they balance.
    node_cpu : every node's CPU limit in cores (:data:`NODE_CPU`), so that each has a capacity
        of its own as THEMIS's nodes do; None: the nodes share the machine's cores. Where this
        process may not create cgroups the runs go unlimited and the report says so.
    probe_every : every node's ``probe_every`` (:data:`PROBE_EVERY`; 0: no probes).
    seed : ``federation up --seed`` (node ``i`` gets ``seed + i``).
    kill_at_s, kill_down_s : the kill run crashes :data:`KILL_NODE` ``kill_at_s`` after every
        node is up and restarts it ``kill_down_s`` later (``federation up --kill``).
    runs_dir : where each run's ``federation up`` folder (logs, results, timeline.jsonl) and
        ``measured.json`` are kept; None: a temporary folder, removed at the end.
    """

    modes: tuple[str, ...] = RUNS
    duration_s: float = 240.0
    warmup_s: float = 60.0
    sources: int = 10
    rates: str = "measured"
    levels: tuple[float, float, float] = LEVELS
    shared_share: float = SHARED_SHARE
    calibration_s: float = 240.0
    probe_local_rates: tuple[float, float, float] = PROBE_LOCAL_RATES
    probe_shared_rate: float = PROBE_SHARED_RATE
    local_rates: tuple[float, float, float] = LOCAL_RATES
    shared_rate: float = SHARED_RATE
    stw_s: float = 10.0
    slide_s: float = 0.25
    timeout_s: float = 3.0
    latency_bound_stws: float = 3.0
    node_cpu: float | None = NODE_CPU
    probe_every: int = PROBE_EVERY
    seed: int = 0
    kill_at_s: float = 90.0
    kill_down_s: float = 30.0
    runs_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.modes or any(m not in RUNS for m in self.modes):
            raise UnknownNameError(f"modes must be among {', '.join(RUNS)}; got {self.modes!r}")
        if self.rates not in RATE_SOURCES:
            raise UnknownNameError(
                f"rates must be one of {', '.join(RATE_SOURCES)}; got {self.rates!r}"
            )
        for name in ("duration_s", "warmup_s", "shared_rate", "latency_bound_stws", "kill_at_s",
                     "kill_down_s", "calibration_s", "probe_shared_rate"):  # fmt: skip
            check_positive(name, getattr(self, name))
        if self.node_cpu is not None:
            object.__setattr__(self, "node_cpu", check_cores(self.node_cpu, "node_cpu"))
        if not 0.0 < self.shared_share < 1.0:
            raise ConfigError(f"shared_share must be in (0, 1), got {self.shared_share!r}")
        if not self.kill_at_s + self.kill_down_s < self.duration_s:
            raise ConfigError(
                f"kill_at_s + kill_down_s ({self.kill_at_s + self.kill_down_s:g}) must be below "
                f"duration_s ({self.duration_s:g}): the node restarts within the run"
            )
        if not self.warmup_s < self.duration_s:
            raise ConfigError(
                f"warmup_s ({self.warmup_s:g}) must be below duration_s ({self.duration_s:g}): "
                "the measured part is what follows the warm-up"
            )
        if not self.warmup_s < self.calibration_s:
            raise ConfigError(
                f"warmup_s ({self.warmup_s:g}) must be below calibration_s "
                f"({self.calibration_s:g}): the capacities are measured after the warm-up"
            )
        for name in ("local_rates", "probe_local_rates", "levels"):
            got = getattr(self, name)
            if len(got) != len(NODES):
                raise ConfigError(f"{name} must give {len(NODES)} numbers, got {got!r}")
            for r in got:
                check_positive(name, r)
        if not all(x > 1.0 for x in self.levels):
            raise ConfigError(f"levels must each be > 1 (an overload), got {self.levels!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an int >= 0, got {self.seed!r}")
        federation(self, self.modes[0])  # validates sources and the coordinator's settings

    @property
    def latency_bound_s(self) -> float:
        """The p95 latency bound every node must meet (s)."""
        return self.latency_bound_stws * self.stw_s


#: Seconds after every node is up before the measured part (quick and full runs): when the
#: nodes' capacities have settled. In run 8 (EXPERIMENTS.md "Runs 7 and 8", every node on 0.5
#: cores) each node's capacity per decision climbed for 65-112 s after its first batch
#: (:func:`settled_at` over its ``history.jsonl``; 11 of the 12 node runs by 89 s), so a
#: measured part from 60 s on caught the climb, at a point that differed from mode to mode.
WARMUP_S = 90.0


def make_config(quick: bool = False, seed: int = 0) -> SparkFederationConfig:
    """Runs of 240 s after a calibration as long (measured from :data:`WARMUP_S` on; node c
    killed at 90 s, restarted 30 s later), or quick ones of 130 s after a calibration as long
    (measured from :data:`WARMUP_S` on, 40 s; c killed at 40 s and restarted 10 s later, so its
    new process, a JVM start on busy cores that took 40 s in the shipped example's test, has
    the rest of the run to come back and catch up).

    The warm-up is the time the nodes' capacities take to settle (:func:`settled_at`): every
    mode starts cold node processes, whose JVMs and cost models climb for over a minute.

    The quick runs keep the levels: the overload, what the study is about, is the same.

    >>> q = make_config(quick=True)
    >>> q.warmup_s, q.duration_s, q.calibration_s, make_config().warmup_s
    (90.0, 130.0, 130.0, 90.0)
    """
    if quick:
        return SparkFederationConfig(duration_s=130.0, warmup_s=WARMUP_S, seed=seed,
                                     kill_at_s=40.0, kill_down_s=10.0,
                                     calibration_s=130.0)  # fmt: skip
    return SparkFederationConfig(seed=seed, warmup_s=WARMUP_S)


def settled_at(samples: Sequence[tuple[float, float]], tolerance: float = 0.25) -> float:
    """When a node's capacity settled: the time of the first sample from which on every sample
    stays within ``tolerance`` (as a fraction below, its inverse above) of the median over the
    last 20 s of ``samples`` (``(t, capacity)`` in time order); the last sample's time when
    it never did before it.

    >>> climb = [(t, min(100.0, 10.0 + t)) for t in range(0, 200, 2)]
    >>> settled_at(climb)
    66.0
    >>> settled_at([(0.0, 5.0), (1.0, 5.0)])
    0.0
    """
    if not samples:
        raise ValueError("settled_at needs at least one sample")
    end_t = samples[-1][0]
    tail = sorted(c for t, c in samples if t >= end_t - 20.0)
    mid = len(tail) // 2
    level = tail[mid] if len(tail) % 2 else (tail[mid - 1] + tail[mid]) / 2
    lo, hi = level * (1.0 - tolerance), level / (1.0 - tolerance)
    start = end_t
    for t, c in reversed(samples):
        if not lo <= c <= hi:
            break
        start = t
    return float(start)


def node_settled_s(run: Mapping[str, Any]) -> dict[str, float]:
    """When each node's capacity settled (:func:`settled_at`), in seconds of the run's timeline
    (from when every node was up), over its decisions placed on the timeline
    (:func:`~spillway.experiments._fed_sim.placed`): each one's ``capacity_tuples`` per
    interval of its span. Probe decisions are left out: a probe raises one decision's capacity
    by ``probe_gain`` on purpose, and counted, it would read every probing node as unsettled.
    Nodes without a kept history (``run["histories"]``) or a placed decision are left out.

    >>> tl = [{"elapsed_s": float(e), "arrived": {"a": 10 * e}} for e in range(200)]
    >>> h = [{"t": float(t), "capacity_tuples": min(100.0, t) * (1.5 if t % 8 == 0 else 1),
    ...       "arrived_tuples": 20, "probe": t % 8 == 0} for t in range(0, 200, 2)]
    >>> node_settled_s({"timeline": tl, "histories": {"a": h}})
    {'a': 78.0}
    >>> for r in h:
    ...     r["probe"] = False
    >>> node_settled_s({"timeline": tl, "histories": {"a": h}})
    {'a': 196.0}
    """
    from spillway.experiments._fed_sim import placed  # it imports this module

    out = {}
    for node, history in run.get("histories", {}).items():
        xs = [
            (e, float(r["capacity_tuples"]) / max(1, int(r.get("span", 1))))
            for e, _, r in placed(history, run["timeline"], node)
            if not r.get("probe", False)
        ]
        if xs:
            out[node] = settled_at(xs)
    return out


@dataclass(frozen=True, kw_only=True)
class InputRates:
    """Tuples per second per source: ``local`` of ``local-a``, ``local-b``, ``local-c``;
    ``shared`` of ``shared`` (on every node).

    >>> r = InputRates(local=(36000.0, 18000.0, 6000.0), shared=24000.0)
    >>> r.node_loads(10)
    {'a': 600000.0, 'b': 420000.0, 'c': 300000.0}
    """

    local: tuple[float, float, float]
    shared: float

    def node_loads(self, sources: int) -> dict[str, float]:
        """Tuples per second arriving at each node from its sources (``sources`` a fragment;
        ``shared``'s link rows at ``c`` not counted: a few per window)."""
        return {n: sources * (r + self.shared) for n, r in zip(NODES, self.local, strict=True)}


def configured_rates(config: SparkFederationConfig) -> InputRates:
    """The configured rates (``local_rates``, ``shared_rate``)."""
    return InputRates(local=config.local_rates, shared=config.shared_rate)


def probe_rates(config: SparkFederationConfig) -> InputRates:
    """The calibration run's rates (``probe_local_rates``, ``probe_shared_rate``)."""
    return InputRates(local=config.probe_local_rates, shared=config.probe_shared_rate)


def derive_rates(
    capacities: Mapping[str, float | None],
    levels: Sequence[float] = LEVELS,
    sources: int = 10,
    shared_share: float = SHARED_SHARE,
) -> InputRates:
    """The rates that bring each node's input to its level times its measured capacity.

    Node ``n`` (of :data:`NODES`, ``levels`` in that order) gets ``levels[n] * capacity[n]``
    tuples/s from its ``sources`` sources of ``local-n`` and ``sources`` of ``shared``;
    ``shared`` takes ``shared_share`` of the smallest node input (one rate per source on every
    node), each local query the rest of its node's.

    >>> r = derive_rates({"a": 500_000.0, "b": 400_000.0, "c": 100_000.0}, (3.0, 2.0, 1.5))
    >>> r.shared, r.local
    (7500.0, (142500.0, 72500.0, 7500.0))
    >>> r.node_loads(10)
    {'a': 1500000.0, 'b': 800000.0, 'c': 150000.0}
    >>> derive_rates({"a": 500_000.0, "b": None, "c": 100_000.0})
    Traceback (most recent call last):
    ...
    spillway.errors.InputDataError: node b measured no capacity (None): its input cannot be set relative to it
    """
    if len(levels) != len(NODES):
        raise ConfigError(f"levels must give {len(NODES)} numbers, got {levels!r}")
    if not 0.0 < shared_share < 1.0:
        raise ConfigError(f"shared_share must be in (0, 1), got {shared_share!r}")
    check_positive("sources", sources)
    targets = []
    for n, level in zip(NODES, levels, strict=True):
        cap = capacities.get(n)
        if cap is None or not (math.isfinite(cap) and cap > 0):
            raise InputDataError(
                f"node {n} measured no capacity ({cap!r}): its input cannot be set relative to it"
            )
        targets.append(level * cap / sources)
    shared = shared_share * min(targets)
    local = tuple(round(t - shared, 6) for t in targets)
    return InputRates(local=(local[0], local[1], local[2]), shared=round(shared, 6))


def federation(
    config: SparkFederationConfig, mode: str, rates: InputRates | None = None
) -> FederationConfig:
    """The federation file of run ``mode`` (the same nodes, queries and rates in every mode) at
    ``rates`` (None: the configured ones).

    Raises
    ------
    UnknownNameError
        ``mode`` is not one of :data:`MODES`.
    """
    if mode not in RUNS:
        raise UnknownNameError(f"mode must be one of {', '.join(RUNS)}; got {mode!r}")
    rates = configured_rates(config) if rates is None else rates
    s = config.sources
    policy = "random" if mode == "random" else "balance-sic"
    local = [
        {"name": f"local-{n}", "rate": r, "fragments": [{"name": "f", "node": n, "sources": s}]}
        for n, r in zip(NODES, rates.local, strict=True)
    ]
    shared = {
        "name": "shared",
        "rate": rates.shared,
        "fragments": [
            {"name": "leaf-a", "node": "a", "sources": s, "to": ["root"]},
            {"name": "leaf-b", "node": "b", "sources": s, "to": ["root"]},
            {"name": "root", "node": "c", "sources": s},
        ],
    }
    return FederationConfig.from_dict({
        "coordinator": {"stw_s": config.stw_s, "slide_s": config.slide_s,
                        "timeout_s": config.timeout_s,
                        "coordinated": mode in ("coordinated", KILL_MODE)},
        "nodes": [{"name": n, "policy": policy,
                   **({} if config.node_cpu is None else {"cpu": config.node_cpu}),
                   "probe_every": config.probe_every}
                  for n in NODES],
        "queries": [*local, shared],
    })  # fmt: skip


def _toml(fed: FederationConfig) -> str:
    """``fed`` as a federation file (the subset of TOML it needs)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    d = fed.to_dict()
    lines = ["[coordinator]", *(f"{k} = {value(v)}" for k, v in d["coordinator"].items())]
    for n in d["nodes"]:
        lines += ["", "[[nodes]]", *(f"{k} = {value(v)}" for k, v in n.items())]
    for q in d["queries"]:
        lines += ["", "[[queries]]", *(f"{k} = {value(v)}" for k, v in q.items())]
    return "\n".join(lines) + "\n"


def measure(config: SparkFederationConfig) -> dict[str, Any]:
    """Run the federation once per mode (one broker for all), each with ``federation up``;
    per run its summary.json and timeline.jsonl; the kill run also its killed node's queries'
    SIC from their stored results (:func:`lost_sic`). With ``rates = "measured"`` a calibration
    run comes first (:func:`calibration_values`) and sets every mode's rates
    (:func:`derive_rates`); ``calibration`` and ``rates`` say what was run."""
    from spillway.experiments._fed_sim import read_histories
    from spillway.federation.up import add_federation_command
    from spillway.testing import running_broker

    parser = argparse.ArgumentParser(prog="spillway")
    add_federation_command(parser.add_subparsers(dest="command"))
    if config.node_cpu is not None and find_controller() is None:
        report("spark-federation: no writable cgroup CPU controller, the nodes run unlimited")
        config = replace(config, node_cpu=None)

    runs: list[dict[str, Any]] = []
    calibration: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        if config.runs_dir is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="spillway-fed-"))
            root = Path(tmp)
        else:
            root = Path(config.runs_dir)
            root.mkdir(parents=True, exist_ok=True)
        kafka = Path(tempfile.mkdtemp(dir=root, prefix="kafka-"))
        stack.callback(shutil.rmtree, kafka, True)
        with running_broker(kafka) as broker:

            def up(name: str, fed: FederationConfig, duration_s: float,
                   kill: str | None = None) -> tuple[Path, Path, dict[str, Any], list[Any]]:  # fmt: skip
                fed_file = root / f"{name}.toml"
                fed_file.write_text(_toml(fed))
                out = root / name
                argv = ["federation", "up", str(fed_file), "--duration", str(duration_s),
                        "--out", str(out), "--kafka-dir", str(broker.data_dir), "--seed",
                        str(config.seed), *(["--kill", kill] if kill else [])]  # fmt: skip
                args = parser.parse_args(argv)
                report(f"spark-federation: {name} for {duration_s:g} s")
                with (root / f"{name}.log").open("w") as log, contextlib.redirect_stdout(log):
                    args.handler(args)
                summary = json.loads((out / "summary.json").read_text())
                if summary["duration_s"] < duration_s - 5.0:  # Ctrl-C, SIGTERM, a failure
                    raise RunFailedError(
                        f"the {name} run stopped {summary['duration_s']:g} s after every node was "
                        f"up, not {duration_s:g} s (interrupted, or its nodes ended: "
                        f"{summary.get('node_exit')}); its folder: {out}"
                    )
                timeline = out / "timeline.jsonl"
                lines = timeline.read_text().splitlines() if timeline.exists() else []
                return fed_file, out, summary, [json.loads(x) for x in lines]

            rates = configured_rates(config)
            if config.rates == "measured":
                _, _, summary, timeline = up(
                    CALIBRATION, federation(config, "random", probe_rates(config)),
                    config.calibration_s,
                )  # fmt: skip
                calibration = calibration_values(config, summary, timeline)
                rates = derive_rates(calibration["capacity_tuples_per_s"], config.levels,
                                     config.sources, config.shared_share)  # fmt: skip
                report(
                    "spark-federation: measured capacities "
                    + ", ".join(f"{n} {c:,.0f}" for n, c in
                                calibration["capacity_tuples_per_s"].items())
                    + " tuples/s; node inputs "
                    + ", ".join(f"{n} {x:,.0f}" for n, x in
                                rates.node_loads(config.sources).items())
                )  # fmt: skip
            measured = {"runs": runs, "calibration": calibration, "node_cpu": config.node_cpu,
                        "rates": {"source": config.rates, "local": list(rates.local),
                                  "shared": rates.shared}}  # fmt: skip
            for mode in config.modes:
                kill = (f"{KILL_NODE}@{config.kill_at_s:g}+{config.kill_down_s:g}"
                        if mode == KILL_MODE else None)  # fmt: skip
                fed_file, out, summary, timeline = up(
                    mode, federation(config, mode, rates), config.duration_s, kill
                )
                runs.append({
                    "mode": mode,
                    "summary": summary,
                    "timeline": timeline,
                    **({"lost_sic": lost_sic(config, fed_file, out, summary["kill"])}
                       if mode == KILL_MODE else {"histories": read_histories(out, NODES)}),
                })  # fmt: skip
                (root / "measured.json").write_text(json.dumps(measured))
    return measured


def kept_between(
    timeline: Sequence[Mapping[str, Any]], lo: float, hi: float
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per node, over the timeline's lines from ``lo`` to ``hi`` s: the share of the tuples it
    decided that it kept (None: it decided none), and the tuples it kept per second.

    >>> tl = [{"elapsed_s": t, "arrived": {"a": 100 * t}, "kept": {"a": 30 * t}}
    ...       for t in (0, 10, 20, 30)]
    >>> kept_between(tl, 10, 30)
    ({'a': 0.3}, {'a': 30.0})
    """
    part = [e for e in timeline if lo <= e["elapsed_s"] <= hi]
    share: dict[str, float | None] = {}
    rate: dict[str, float | None] = {}
    if not part:
        return share, rate
    first, last = part[0], part[-1]
    span = last["elapsed_s"] - first["elapsed_s"]
    for n in last.get("arrived", {}):
        got = last["arrived"][n] - first.get("arrived", {}).get(n, 0)
        held = last["kept"][n] - first.get("kept", {}).get(n, 0)
        share[n] = held / got if got > 0 else None
        rate[n] = held / span if span > 0 else None
    return share, rate


def calibration_values(
    config: SparkFederationConfig, summary: Mapping[str, Any], timeline: Sequence[Any]
) -> dict[str, Any]:
    """What the calibration run measured, per node, over the part of it the mode runs are
    measured on (``warmup_s`` to ``calibration_s``): ``capacity_tuples_per_s``, the tuples it
    kept per second, with ``kept_fraction`` of its input (below :data:`MAX_KEPT`: it shed, so
    it kept what its own cost model said it could process, a limit it met); and
    ``cost_model_tuples_per_s``, its cost model's capacity at the end (over its last STW:
    ``federation up``'s summary).

    The part matters: the nodes' estimates climb for a minute or more (a quick run of
    2026-11-27 20:08 UTC: node b kept 84,000 tuples/s in its first 30 s and 258,000 from 30 s
    to 60 s of the calibration; 395,000-526,000 from 60 s on in the mode runs), so the
    capacity is read where the modes are.

    >>> tl = [{"elapsed_s": t, "arrived": {"a": 800 * t}, "kept": {"a": 400 * t - 9000 * (t < 60)}}
    ...       for t in range(111)]
    >>> v = calibration_values(make_config(quick=True),
    ...                        {"nodes": {"a": {"capacity_tuples_per_s": 520.0}}}, tl)
    >>> v["capacity_tuples_per_s"], v["kept_fraction"], v["cost_model_tuples_per_s"]
    ({'a': 400.0}, {'a': 0.5}, {'a': 520.0})
    """
    share, rate = kept_between(timeline, config.warmup_s, config.calibration_s)
    model = {n: d.get("capacity_tuples_per_s") for n, d in summary.get("nodes", {}).items()}
    return {
        "duration_s": config.calibration_s,
        "capacity_tuples_per_s": rate,
        "kept_fraction": share,
        "cost_model_tuples_per_s": model,
        "probe_tuples_per_s": probe_rates(config).node_loads(config.sources),
    }


def mode_values(config: SparkFederationConfig, run: Mapping[str, Any]) -> dict[str, Any]:
    """One run's figures over the measured part (``warmup_s`` to ``duration_s``).

    ``sic``: each query's mean SIC over the seconds where the coordinator gave every query a
    value; ``jain``: Jain over those means; ``jain_per_sample``: Jain at each such second,
    averaged; ``samples``: how many; per node ``latency_p95_s``: its worst p95 of the part,
    ``kept_fraction``: the share of the tuples it decided during the part that it kept (None
    when it decided none), ``capacity_tuples_per_s``: its own measure at the end,
    ``settled_s``: when its capacity settled (:func:`node_settled_s`; empty without histories).

    >>> cfg = make_config(quick=True)
    >>> line = lambda t, s, k: {"elapsed_s": t, "sic": dict(zip("wxyz", s)), "jain": None,
    ...     "latency_p95_s": {"a": 9.0 + t / 100}, "arrived": {"a": 10 * t}, "kept": {"a": k}}
    >>> run = {"mode": "random", "summary": {"nodes": {"a": {"capacity_tuples_per_s": 9.0}}},
    ...        "timeline": [line(40, (0, 0, 0, 1), 90), line(90, (.2, .4, .2, .2), 100),
    ...                     line(100, (.2, .2, .2, .2), 130)]}
    >>> v = mode_values(cfg, run)
    >>> {q: round(s, 3) for q, s in v["sic"].items()}, v["samples"]
    ({'w': 0.2, 'x': 0.3, 'y': 0.2, 'z': 0.2}, 2)
    >>> round(v["jain"], 4), round(v["jain_per_sample"], 4)
    (0.9643, 0.9464)
    >>> v["latency_p95_s"], v["kept_fraction"], v["capacity_tuples_per_s"]
    ({'a': 10.0}, {'a': 0.3}, {'a': 9.0})
    """
    part = [
        e for e in run["timeline"]
        if config.warmup_s <= e["elapsed_s"] <= config.duration_s
    ]  # fmt: skip
    full = [e for e in part if e["sic"] and all(v is not None for v in e["sic"].values())]
    names = list(full[0]["sic"]) if full else []
    m = np.array([[e["sic"][q] for q in names] for e in full], dtype=float)
    m = m.reshape(len(full), len(names))
    means = m.mean(axis=0) if m.shape[0] else np.full(len(names), math.nan)
    p95: dict[str, float | None] = {}
    for e in part:
        for n, v in e.get("latency_p95_s", {}).items():
            if v is not None:
                p95[n] = max(v, p95.get(n) or 0.0)
            else:
                p95.setdefault(n, None)
    kept, _ = kept_between(part, config.warmup_s, config.duration_s)
    nodes = run["summary"].get("nodes", {})
    return {
        "sic": {q: float(x) for q, x in zip(names, means, strict=True)},
        "jain": float(jain_index(means)) if m.shape[0] else math.nan,
        "jain_per_sample": float(np.mean(jain_index(m, axis=1))) if m.shape[0] else math.nan,
        "samples": int(m.shape[0]),
        "latency_p95_s": p95,
        "kept_fraction": kept,
        "capacity_tuples_per_s": {n: d.get("capacity_tuples_per_s") for n, d in nodes.items()},
        "settled_s": node_settled_s(run),
    }


def kill_split(fed: FederationConfig, node: str = KILL_NODE) -> tuple[list[str], list[str]]:
    """The queries with no fragment on ``node`` (the survivors) and those with one.

    >>> kill_split(federation(make_config(quick=True), KILL_MODE))
    (['local-a', 'local-b'], ['local-c', 'shared'])
    """
    hit = [q.name for q in fed.queries if any(f.node == node for f in q.fragments)]
    return [q.name for q in fed.queries if q.name not in hit], hit


def stw_sic_between(
    start: np.ndarray, sic: np.ndarray, lo: float, hi: float, stw_s: float
) -> float:
    """The SIC of the result windows starting in ``[lo, hi)`` (source time, s), per STW: their
    sum times ``stw_s / (hi - lo)`` (NaN for an empty span).

    >>> stw_sic_between(np.array([0.0, 5.0, 12.0]), np.array([0.1, 0.2, 0.4]), 0.0, 10.0, 10.0)
    0.3
    >>> stw_sic_between(np.array([0.0, 5.0]), np.array([0.1, 0.2]), 0.0, 5.0, 10.0)
    0.2
    """
    if not hi > lo:
        return math.nan
    inside = (start >= lo) & (start < hi)
    return round(float(sic[inside].sum()) * stw_s / (hi - lo), 6)


def lost_sic(
    config: SparkFederationConfig, fed_file: Path, out: Path, kill: Mapping[str, Any]
) -> dict[str, dict[str, float | None]]:
    """Per query with a fragment on the killed node, the SIC its root's stored results hold
    in the end (``OUT/nodes/NODE/results.csv``, every replayed and late window included), per
    STW of source time: ``before`` the STW ending :data:`BEFORE_GAP_S` before the kill (its
    tuples all decided before it), ``outage`` from the kill to the restart (None where the run
    has no kill or restart, or the root left no results)."""
    from spillway.federation.config import load_federation
    from spillway.federation.up import root_results

    fed = load_federation(fed_file)
    k0, k1 = kill.get("killed_wall"), kill.get("restarted_wall")
    got: dict[str, dict[str, float | None]] = {}
    for q in kill_split(fed, kill.get("node", KILL_NODE))[1]:
        rows = root_results(fed, out, q)
        if rows is None or k0 is None or k1 is None:
            got[q] = {"before": None, "outage": None}
            continue
        start, sic, _ = rows
        got[q] = {
            "before": stw_sic_between(
                start, sic, k0 - config.stw_s - BEFORE_GAP_S, k0 - BEFORE_GAP_S, config.stw_s
            ),
            "outage": stw_sic_between(start, sic, k0, k1, config.stw_s),
        }
    return got


def _means(timeline: Sequence[Mapping[str, Any]], names: Sequence[str], lo: float,
           hi: float) -> dict[str, float]:  # fmt: skip
    """Each query's mean SIC over the seconds in ``[lo, hi]`` where all of ``names`` had one."""
    part = [
        [e["sic"][q] for q in names]
        for e in timeline
        if lo <= e["elapsed_s"] <= hi and all(e["sic"].get(q) is not None for q in names)
    ]
    m = np.array(part, dtype=float).reshape(len(part), len(names))
    return {q: float(x) for q, x in zip(names, m.mean(axis=0), strict=True)} if part else {}


def kill_values(config: SparkFederationConfig, run: Mapping[str, Any]) -> dict[str, Any]:
    """The kill run's figures (``summary.json`` ``node_kill``).

    ``jain_survivors``: Jain over the survivors' mean SIC (the coordinator's, each second) from
    the kill to the end; ``jain_survivors_outage``: the same from the kill until the
    coordinator heard the restarted node again (the restart when it never did); per query
    with a fragment on the killed node (``lost_queries``) its SIC from the results
    (:func:`lost_sic`: ``results_before``, ``results_outage``) and the coordinator's (mean
    over the STW before the kill, lowest from the kill on); the kill's times and
    ``caught_up`` as ``federation up --kill`` measured them.

    >>> cfg = make_config(quick=True)
    >>> line = lambda t, a, b, c: {"elapsed_s": t, "sic": {"local-a": a, "local-b": b,
    ...     "local-c": c, "shared": c}}
    >>> tl = [line(40, .2, .2, .3), line(50, .2, .3, .3), line(70, .3, .3, .05)]
    >>> kill = {"node": "c", "killed_at_s": 45.0, "alive_again_at_s": 60.0, "caught_up": True}
    >>> v = kill_values(cfg, {"summary": {"kill": kill}, "timeline": tl,
    ...     "lost_sic": {"local-c": {"before": .3, "outage": .01}}})
    >>> round(v["jain_survivors"], 4), round(v["jain_survivors_outage"], 4), v["caught_up"]
    (0.9918, 0.9615, True)
    >>> v["lost_queries"]["local-c"]  # doctest: +NORMALIZE_WHITESPACE
    {'results_before': 0.3, 'results_outage': 0.01, 'coordinator_before': 0.3,
     'coordinator_min_after': 0.05}
    """
    kill = run["summary"].get("kill") or {}
    fed = federation(config, KILL_MODE)
    survivors, hit = kill_split(fed, kill.get("node", KILL_NODE))
    t0 = kill.get("killed_at_s")
    t1 = kill.get("alive_again_at_s") or kill.get("restarted_at_s") or config.duration_s
    tl = run["timeline"]

    def jain(means: Mapping[str, float]) -> float:
        return float(jain_index(list(means.values()))) if means else math.nan

    after = {} if t0 is None else _means(tl, survivors, t0, config.duration_s)
    outage = {} if t0 is None else _means(tl, survivors, t0, t1)
    lost = {}
    for q in hit:
        res = run.get("lost_sic", {}).get(q, {})
        pre = {} if t0 is None else _means(tl, [q], t0 - config.stw_s, t0 - 1e-9)
        low = [e["sic"][q] for e in tl if t0 is not None and e["elapsed_s"] >= t0
               and e["sic"].get(q) is not None]  # fmt: skip
        lost[q] = {
            "results_before": res.get("before"),
            "results_outage": res.get("outage"),
            "coordinator_before": pre.get(q),
            "coordinator_min_after": min(low) if low else None,
        }
    keys = ("killed_at_s", "lost_seen_at_s", "restarted_at_s", "alive_again_at_s",
            "caught_up_at_s", "caught_up", "catch_up")  # fmt: skip
    return {
        "jain_survivors": jain(after),
        "jain_survivors_outage": jain(outage),
        "survivors": survivors,
        "survivor_sic_after": after,
        "survivor_sic_outage": outage,
        "lost_queries": lost,
        **{k: kill.get(k) for k in keys},
    }


def kill_checks(v: Mapping[str, Any]) -> list[Check]:
    """The issue's kill must-show on :func:`kill_values`: Jain >= 0.95 among the survivors
    (after the kill and during the outage), the lost fragments show (every hit query's results
    over the outage hold less than half the SIC of the STW before the kill), the coordinator
    saw the node lost and then alive again, and it caught up.

    >>> v = {"jain_survivors": 0.97, "jain_survivors_outage": 0.9, "lost_seen_at_s": 47.0,
    ...      "alive_again_at_s": 80.0, "caught_up": True,
    ...      "lost_queries": {"local-c": {"results_before": 0.3, "results_outage": 0.2}}}
    >>> [(c.name, c.verdict) for c in kill_checks(v)]  # doctest: +NORMALIZE_WHITESPACE
    [('node_kill_jain_survivors_ge_0.95', 'pass'),
     ('node_kill_jain_survivors_outage_ge_0.95', 'fail'), ('node_kill_lost_fragments_show', 'fail'),
     ('node_kill_seen_lost_and_alive_again', 'pass'), ('node_kill_caught_up', 'pass')]
    """
    shown = [
        compare(q, d.get("results_outage"), "<", 0.5 * d["results_before"]
                if d.get("results_before") is not None else math.nan,
                what="SIC per STW of its results over the outage vs half the STW before")
        for q, d in v.get("lost_queries", {}).items()
    ]  # fmt: skip
    lost, back = v.get("lost_seen_at_s"), v.get("alive_again_at_s")
    up = v.get("caught_up")
    return [
        compare("node_kill_jain_survivors_ge_0.95", v.get("jain_survivors"), ">=", 0.95,
                what="Jain over the survivors' SIC from the kill to the end"),
        compare("node_kill_jain_survivors_outage_ge_0.95", v.get("jain_survivors_outage"), ">=",
                0.95, what="Jain over the survivors' SIC during the outage"),
        every("node_kill_lost_fragments_show", shown,
              none_why="no query had a fragment on the killed node"),
        check("node_kill_seen_lost_and_alive_again", lost is not None and back is not None,
              f"the coordinator showed it lost at {lost} s and heard it again at {back} s "
              "(None: never)"),
        check("node_kill_caught_up", up is True,
              f"every offset of its input at the restart decided (processed or counted shed): "
              f"{up} (at {v.get('caught_up_at_s')} s)"),
    ]  # fmt: skip


def _above(name: str, jain: Mapping[str, float], other: str) -> Check:
    """Coordinated above ``other``'s Jain, unless ``other`` is already fair (not applicable)."""
    o = jain.get(other, math.nan)
    if other in jain and math.isfinite(o) and o >= SEPARABLE_BELOW:
        return not_applicable(
            name,
            f"the {other} run is already fair (Jain {num(o)} >= {SEPARABLE_BELOW}): the "
            "comparison cannot separate the two",
        )
    return compare(name, jain.get("coordinated", math.nan), ">", o,
                   what=f"Jain coordinated vs {other}")  # fmt: skip


def checks(
    config: SparkFederationConfig,
    values: Mapping[str, Mapping[str, Any]],
    calibration: Mapping[str, Any] | None = None,
) -> list[Check]:
    """The issue's claims on the runs' figures (``values``: per mode, :func:`mode_values`;
    ``calibration``: :func:`calibration_values`, whose nodes must have shed too for their
    capacities to be limits they met: ``every_node_overloaded`` counts them).
    ``capacities_settled_before_measuring``: every node's capacity settled (``settled_s``,
    :func:`node_settled_s`) by ``warmup_s``, so the measured part saw warm nodes.

    >>> cfg = make_config(quick=True)
    >>> v = {"coordinated": {"jain": 0.97, "latency_p95_s": {"a": 20.0},
    ...                      "kept_fraction": {"a": 0.4}},
    ...      "uncoordinated": {"jain": 0.995, "latency_p95_s": {"a": 41.0},
    ...                        "kept_fraction": {"a": 0.4}},
    ...      "random": {"jain": 0.9, "latency_p95_s": {"a": 25.0}, "kept_fraction": {"a": 0.95}}}
    >>> [(c.name, c.verdict) for c in checks(cfg, v)]  # doctest: +NORMALIZE_WHITESPACE
    [('jain_coordinated_ge_0.95', 'pass'), ('coordinated_above_uncoordinated', 'not applicable'),
     ('coordinated_above_random', 'pass'), ('p95_latency_bounded_on_every_node', 'fail'),
     ('every_node_overloaded', 'fail'), ('capacities_settled_before_measuring', 'not applicable')]
    >>> v["random"]["settled_s"] = {"a": 70.0, "b": 104.0}
    >>> checks(cfg, v)[-1].why
    'failed at random/b: capacity settled at (s) 104 is not <= 90'
    """
    jain = {m: float(v.get("jain", math.nan)) for m, v in values.items()}
    bound = config.latency_bound_s
    out = [
        compare("jain_coordinated_ge_0.95", jain.get("coordinated", math.nan), ">=", 0.95,
                what="Jain over the queries' SIC, coordinated"),
        _above("coordinated_above_uncoordinated", jain, "uncoordinated"),
        _above("coordinated_above_random", jain, "random"),
    ]  # fmt: skip
    lat = [
        compare(f"{m}/{n}", p, "<=", bound, what="p95 latency (s)")
        for m, v in values.items()
        for n, p in v.get("latency_p95_s", {}).items()
    ]
    out.append(every("p95_latency_bounded_on_every_node", lat, none_why="no run measured"))
    runs = {**({CALIBRATION: calibration} if calibration else {}), **values}
    kept = [
        compare(f"{m}/{n}", k, "<", MAX_KEPT, what="kept share of arrivals")
        for m, v in runs.items()
        for n, k in v.get("kept_fraction", {}).items()
    ]
    out.append(every("every_node_overloaded", kept, none_why="no run measured"))
    settled = [
        compare(f"{m}/{n}", at, "<=", config.warmup_s, what="capacity settled at (s)")
        for m, v in values.items()
        for n, at in v.get("settled_s", {}).items()
    ]
    out.append(every("capacities_settled_before_measuring", settled,
                     none_why="no node's decisions were kept (history.jsonl)"))  # fmt: skip
    return out


def analyse(config: SparkFederationConfig, measured: Mapping[str, Any]) -> Analysis:
    """Summary values (``jain_coordinated``, ``jain_uncoordinated``, ``jain_random``,
    ``node_kill``, ``runs``), checks, tables, figures, prose."""
    from spillway.experiments import _fed_sim  # it imports this module

    runs = list(measured["runs"])
    values = {r["mode"]: mode_values(config, r) for r in runs if r["mode"] in MODES}
    calibration = measured.get("calibration")
    cks = checks(config, values, calibration)
    sims, sim_wall_s = _fed_sim.compare_runs(config, measured)
    cks += _fed_sim.sim_checks(sims)
    killed = next((r for r in runs if r["mode"] == KILL_MODE), None)
    kv = None if killed is None else kill_values(config, killed)
    if kv is not None:
        cks += kill_checks(kv)
    summary: dict[str, Any] = {
        f"jain_{m}": values[m]["jain"] if m in values else math.nan for m in MODES
    }
    summary.update({
        f"jain_per_sample_{m}": values[m]["jain_per_sample"] if m in values else math.nan
        for m in MODES
    })  # fmt: skip
    used = _used_rates(config, measured)
    summary["input_rates"] = {
        "source": "measured" if calibration else "configured",
        "local_tuples_per_s_per_source": dict(zip(NODES, used.local, strict=True)),
        "shared_tuples_per_s_per_source": used.shared,
        "node_input_tuples_per_s": used.node_loads(config.sources),
        **({"levels": dict(zip(NODES, config.levels, strict=True)), "calibration": calibration}
           if calibration else {}),
    }  # fmt: skip
    summary["latency_bound_s"] = config.latency_bound_s
    summary["paper_jain"] = PAPER_JAIN
    if kv is None:
        summary["node_kill"] = {
            "verdict": "not applicable",
            "why": f"not run: no {KILL_MODE!r} run among the measured ones",
            "jain_survivors": None,
            "caught_up": None,
        }
    else:
        tally = counts(c for c in cks if c.name.startswith("node_kill_"))
        summary["node_kill"] = {"verdict": "fail" if tally["fail"] else "pass", **kv}
    summary["runs"] = {m: {k: v for k, v in values[m].items()} for m in values}
    summary["simulator"] = {"wall_s": sim_wall_s, "modes": sims}
    rows = [
        {"mode": m, "query": q, "mean_sic": s}
        for m, v in values.items()
        for q, s in v["sic"].items()
    ]
    nodes = [
        {"mode": m, "node": n, "latency_p95_s": v["latency_p95_s"].get(n),
         "kept_fraction": v["kept_fraction"].get(n),
         "capacity_tuples_per_s": v["capacity_tuples_per_s"].get(n),
         "capacity_settled_s": v.get("settled_s", {}).get(n)}
        for m, v in values.items()
        for n in sorted(set(v["latency_p95_s"]) | set(v["kept_fraction"]))
    ]  # fmt: skip
    timeline = [
        {"mode": r["mode"], "elapsed_s": e["elapsed_s"], "jain": e["jain"],
         **{f"sic_{q}": s for q, s in e["sic"].items()},
         **{f"p95_{n}": p for n, p in e.get("latency_p95_s", {}).items()}}
        for r in runs
        for e in r["timeline"]
    ]  # fmt: skip
    return Analysis(
        values=summary,
        checks=cks,
        setup=_setup(config, used, calibration, measured.get("node_cpu")),
        paper=_paper(values, cks, kv),
        notes=_notes(),
        tables={
            "query_sic.csv": rows,
            "nodes.csv": nodes,
            "timeline.csv": timeline,
            "simulator.csv": [
                {"mode": m, **r}
                for m, s in sims.items()
                if not isinstance(s, str)
                for r in s["queries"]
            ],
        },
        figures=_figures(config, values, runs, kv),
        sections=[
            ("Input rates", _rates_table(config, used, calibration)),
            ("Per query: mean SIC over the measured part", markdown_table(rows)),
            ("Per node", markdown_table(nodes)),
            ("Simulator beside Spark", _fed_sim.table(sims, sim_wall_s)),
        ],
    )


EXPERIMENT: Experiment[SparkFederationConfig, Any] = Experiment(
    name=NAME, title=TITLE, config_type=SparkFederationConfig, measure=measure, analyse=analyse
)


def run(config: SparkFederationConfig, out_dir: Path | str) -> dict[str, Any]:
    """Measure, analyse and write the report folder; returns the summary."""
    return EXPERIMENT.run(config, out_dir)


def _used_rates(config: SparkFederationConfig, measured: Mapping[str, Any]) -> InputRates:
    """The rates the mode runs ran at (``measured["rates"]``; the configured ones if absent)."""
    got = measured.get("rates")
    if not got:
        return configured_rates(config)
    loc = [float(x) for x in got["local"]]
    return InputRates(local=(loc[0], loc[1], loc[2]), shared=float(got["shared"]))


def _rates_table(
    config: SparkFederationConfig, used: InputRates, calibration: Mapping[str, Any] | None
) -> str:
    """Per node: the calibration's figures (when measured), the level, the input it got."""
    loads = used.node_loads(config.sources)
    rows = []
    for i, n in enumerate(NODES):
        row: dict[str, Any] = {"node": n}
        if calibration:
            row.update({
                "calibration input (t/s)": calibration["probe_tuples_per_s"].get(n),
                "calibration kept": calibration["kept_fraction"].get(n),
                "measured capacity (t/s)": calibration["capacity_tuples_per_s"].get(n),
                "its cost model at the end (t/s)": calibration["cost_model_tuples_per_s"].get(n),
                "level": config.levels[i],
            })  # fmt: skip
        row.update({"local query (t/s per source)": used.local[i],
                    "shared (t/s per source)": used.shared, "node input (t/s)": loads[n]})  # fmt: skip
        rows.append(row)
    return markdown_table(rows)


def _setup(
    config: SparkFederationConfig,
    used: InputRates,
    calibration: Mapping[str, Any] | None,
    node_cpu: float | None,
) -> str:
    a, b, c = used.local
    s = config.sources
    loads = used.node_loads(s)
    if calibration:
        la, lb, lc = config.levels
        pa, pb, pc = config.probe_local_rates
        how = (
            "Rates measured, not configured: first a calibration run of the same federation for "
            f"{num(config.calibration_s)} s, every node shedding uniformly at random (policy "
            f"`random`) an input above its capacity ({num(pa)}, {num(pb)}, {num(pc)} tuples/s "
            f"per source of the local queries, {num(config.probe_shared_rate)} of `shared`); "
            f"each node's capacity is what it kept per second from {num(config.warmup_s)} s on "
            "(the part the modes are measured on), the rate its own cost model let it "
            f"process; then each node's input is {num(la)}, {num(lb)} and {num(lc)} times its "
            f"capacity (a, b, c), `shared` taking {num(config.shared_share)} of the least "
            "loaded node's input. "
        )
    else:
        how = 'Rates configured (`rates = "configured"`), not set from measured capacities. '
    return (
        "Three nodes `a`, `b`, `c` started by `spillway federation up` (one Spark application "
        "each, `local[1]`, a trigger of 1 s), the query coordinator and a Kafka broker, all on "
        "this machine's two cores, "
        + (
            "the nodes sharing them as the kernel schedules (no CPU limit). "
            if node_cpu is None
            else f"each node limited to {num(node_cpu)} cores (a cgroup CPU quota: a capacity "
            "of its own, as separate machines have). "
        )
        + "Queries (AVG over gaussian sources, "
        f"{s} sources per fragment): `local-a`, `local-b`, `local-c` on one node each at "
        f"{num(a)}, {num(b)} and {num(c)} tuples/s per source; `shared` at "
        f"{num(used.shared)} tuples/s per source with a leaf on `a` and on `b` sending "
        "its results to its root on `c` through Kafka. Node loads: "
        f"a {num(loads['a'])}, b {num(loads['b'])}, c {num(loads['c'])} tuples/s (plus "
        f"`shared`'s link rows at `c`). {how}"
        "While running, each node sheds to the capacity its own cost model measures"
        + (
            f", probing it every {config.probe_every} decisions (a decision admits 1.5 times "
            "that capacity when the last batches fitted their budget, so the model sees "
            "batches of another size). "
            if config.probe_every
            else ". "
        )
        + f"Coordinator: STW {num(config.stw_s)} s sliding every {num(config.slide_s)} s, a node "
        f"lost after {num(config.timeout_s)} s of silence. Each mode runs "
        f"{num(config.duration_s)} s after every node is up; every figure is taken from "
        f"{num(config.warmup_s)} s to {num(config.duration_s)} s. The `{KILL_MODE}` run is "
        f"the coordinated one with node `{KILL_NODE}` killed {num(config.kill_at_s)} s after "
        f"every node is up and restarted {num(config.kill_down_s)} s later. "
        "The p95 latency bound is "
        f"{num(config.latency_bound_stws)} STWs = {num(config.latency_bound_s)} s: a result "
        "later than that reaches the coordinator's Eq. 4 that many windows after its source "
        "time."
    )


def _paper(
    values: Mapping[str, Mapping[str, Any]],
    cks: Sequence[Check],
    kv: Mapping[str, Any] | None = None,
) -> str:
    verdict = {c.name: c.verdict for c in cks}

    def jain(m: str) -> str:
        return num(values[m]["jain"]) if m in values else "not run"

    rows = [
        {"claim": "coordinated BALANCE-SIC: Jain", "paper (Fig. 4)": "1.0 (0.3, 0.3, 0.3)",
         "this run": jain("coordinated"), "verdict": verdict["jain_coordinated_ge_0.95"]},
        {"claim": "uncoordinated BALANCE-SIC: Jain", "paper (Fig. 4)": "0.8525 (0.2, 0.45, 0.2)",
         "this run": jain("uncoordinated"),
         "verdict": verdict["coordinated_above_uncoordinated"]},
        {"claim": "random shedding: Jain", "paper (Fig. 4)": "(not in Fig. 4)",
         "this run": jain("random"), "verdict": verdict["coordinated_above_random"]},
    ]  # fmt: skip
    if kv is not None:
        lost = "; ".join(
            f"{q} {num(d['results_before'])} -> {num(d['results_outage'])}"
            for q, d in kv["lost_queries"].items()
        )
        rows += [
            {"claim": f"node {KILL_NODE} killed: Jain among the survivors (after the kill; "
             "outage)", "paper (Fig. 4)": "(not in the paper; target >= 0.95)",
             "this run": f"{num(kv['jain_survivors'])}; {num(kv['jain_survivors_outage'])}",
             "verdict": f"{verdict['node_kill_jain_survivors_ge_0.95']}; "
             f"{verdict['node_kill_jain_survivors_outage_ge_0.95']}"},
            {"claim": "the lost fragments show: SIC per STW of results, before -> outage",
             "paper (Fig. 4)": "(not in the paper)", "this run": lost,
             "verdict": verdict["node_kill_lost_fragments_show"]},
            {"claim": "restarted, every offset of its input processed or counted shed",
             "paper (Fig. 4)": "(not in the paper)",
             "this run": f"{kv['caught_up']} (at {num(kv['caught_up_at_s'])} s; restarted at "
             f"{num(kv['restarted_at_s'])} s)", "verdict": verdict["node_kill_caught_up"]},
        ]  # fmt: skip
    return markdown_table(rows, ["claim", "paper (Fig. 4)", "this run", "verdict"])


def _figures(
    config: SparkFederationConfig,
    values: Mapping[str, Mapping[str, Any]],
    runs: Sequence[Mapping[str, Any]],
    kv: Mapping[str, Any] | None = None,
) -> list[Figure]:
    modes = [m for m in MODES if m in values]
    groups = sorted({q for v in values.values() for q in v["sic"]})
    figs = [
        Figure(
            file="jain.png", title="Jain over the queries' mean SIC", xlabel="mode",
            ylabel="Jain's index",
            bars={"this run (3 Spark nodes)": [values[m]["jain"] for m in modes],
                  "THEMIS Fig. 4 (2 nodes)": [PAPER_JAIN.get(m, math.nan) for m in modes]},
            groups=modes, hlines={"0.95": 0.95},
            paper="Fig. 4: coordinated (0.3, 0.3, 0.3), Jain 1.0; uncoordinated (0.2, 0.45, "
            "0.2), Jain 0.85",
        ),
        Figure(
            file="query_sic.png", title="Mean SIC per query over the measured part",
            xlabel="query", ylabel="mean SIC (Eq. 4, the coordinator's)",
            bars={m: [values[m]["sic"].get(q, math.nan) for q in groups] for m in modes},
            groups=groups,
            paper="Fig. 4: the shared query q2 at 0.45 uncoordinated against 0.2 for the local "
            "ones; 0.3 for all coordinated",
        ),
    ]  # fmt: skip
    series = {}
    for r in runs:
        pts = [
            (e["elapsed_s"], float(jain_index(list(e["sic"].values()))))
            for e in r["timeline"]
            if e["sic"] and all(v is not None for v in e["sic"].values())
        ]
        if pts:
            series[r["mode"]] = ([p[0] for p in pts], [p[1] for p in pts])
    if series:
        figs.append(Figure(
            file="jain_over_time.png", title="Jain over the queries' SIC, each second",
            xlabel="seconds since every node was up", ylabel="Jain's index", series=series,
            paper="(THEMIS shows no time series for Fig. 4)",
        ))  # fmt: skip
    killed = next((r for r in runs if r["mode"] == KILL_MODE), None)
    if killed is not None and kv is not None and killed["timeline"]:
        names = list(killed["timeline"][-1]["sic"])
        lines = {
            q: ([e["elapsed_s"] for e in killed["timeline"] if e["sic"].get(q) is not None],
                [e["sic"][q] for e in killed["timeline"] if e["sic"].get(q) is not None])
            for q in names
        }  # fmt: skip
        figs.append(Figure(
            file="node_kill_sic.png",
            title=f"Node {KILL_NODE} killed at {num(kv['killed_at_s'])} s, restarted at "
            f"{num(kv['restarted_at_s'])} s: each query's SIC",
            xlabel="seconds since every node was up", ylabel="SIC (Eq. 4, the coordinator's)",
            series=lines, paper="(THEMIS shows no node failure)",
        ))  # fmt: skip
    return figs


def _notes() -> str:
    return "\n".join([
        "- THEMIS's Fig. 4 is a worked example (two nodes, capacity 5 tuples each, five "
        "iterations); this is its situation on Spark: three nodes, four queries, one of them "
        "spanning the three nodes, an unequal overload.",
        "- Spark micro-batches: a node decides once per trigger (1 s), not per 250 ms "
        "interval, and its results reach the coordinator a micro-batch or two later (several "
        "seconds on two shared cores); the coordinator's values trail the shedding by that.",
        "- Two cores shared by three Spark applications, the broker and the coordinator: the "
        "nodes' capacities vary with each other's load; each node's cost model follows its own.",
        "- Uncoordinated nodes balance the share of each local query's SIC they kept (THEMIS "
        "Fig. 4 top); the shared query's link rows at `c` are one of `c`'s local queries.",
        "- Random sheds every tuple with the same probability on each node (a uniform sample).",
        "- Simulator beside Spark (`_fed_sim`): the simulator decides every 250 ms where a "
        "Spark node decides once a micro-batch, its results reach the coordinator without "
        "Spark's seconds of lag, and it follows the measured capacities a decision at a time. "
        "Its `local` coordination balances each node's own admitted SIC (THEMIS Fig. 4 top, "
        "over-serving `shared`); Spark's uncoordinated nodes balance each fragment's kept "
        "share, so the uncoordinated rows compare two different rules.",
        f"- `{KILL_MODE}`: coordinated BALANCE-SIC with node `{KILL_NODE}` crashed (SIGKILL of "
        "its process group) and restarted from its checkpoint by `federation up --kill`. The "
        "coordinator freezes a query rooted on a lost node (its STW stops at its last "
        "watermark), so the lost fragments show in the coordinator's values only once the "
        "restarted node's results pass the outage; the check reads them from the results the "
        "root stored (source time), which is what those STWs hold in the end.",
    ])  # fmt: skip


__all__ = [
    "DESCRIPTION",
    "MODES",
    "InputRates",
    "SparkFederationConfig",
    "analyse",
    "calibration_values",
    "checks",
    "derive_rates",
    "federation",
    "make_config",
    "measure",
    "mode_values",
    "run",
]
