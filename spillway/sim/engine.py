"""The time-stepped simulator of a federation of nodes (THEMIS §5-§7), one step per interval.

Every step ``k`` (time ``t = k · interval``) runs, in this order:

1. **Deliveries.** Derived rows (an upstream fragment's window output) and results due at this
   step arrive: rows join the consumer node's input buffer as one lane per edge, results go to
   the query coordinator, with node reports (heartbeats).
2. **Sources.** Each source's batches that arrived in ``(t - interval, t]`` (a
   :mod:`spillway.feeds.profiles` profile of batches at its fragment's ``rate``, else
   ``source_rate``) join its lane; a
   :class:`~spillway.quality.StwCounter` re-estimates every source's tuples per STW and stamps
   them with THEMIS Eq. 1.
3. **Coordinator.** :class:`~spillway.quality.coordination.SicCoordinator` computes every
   query's Eq. 4 over ``[t - STW, t)`` and sends the update; a node sees an update
   ``coord_delay`` later.
4. **Decisions.** A node that is down loses its input. Otherwise its cost model
   (:mod:`spillway.control.cost_model`: overhead, per kept and per arrived tuple, fitted from
   its own processing times and the tuples each interval covered) gives the budget of the
   interval net of what its arrivals cost (:func:`spillway.control.node_budget`), the overload
   detector
   (:func:`spillway.control.detect`) says whether to shed, and if so the policy's
   ``decide(Backlog, capacity)`` chooses the keep count of every lane (THEMIS §6: "discards
   batches until the remaining IB tuples = c"). The Backlog's ``query_sic`` is the local
   projection of the last update (:class:`~spillway.quality.projection.LocalProjection`), or
   without a coordinator the node's own admissions (``local``, THEMIS Fig. 4 top) or, with
   ``share`` (the Spark node's rule without a coordinator), its own admissions over the SIC
   mass that arrived at the fragment in the STW, this decision's backlog included, with the
   tuple SICs divided by the same mass: the policy balances each fragment's kept share. Lanes of fragments the coordinator reports
   orphaned are shed. Nothing waits: what is not kept is shed (THEMIS's input buffer is cut to
   ``c`` every interval).
5. **Processing.** Kept tuples are processed during ``[t, t + interval)``; their SIC adds to
   their fragment's open window. The processing time the node's cost model sees is the true
   cost of the node (``1 / capacity`` per kept tuple, nothing per shed one: THEMIS's model;
   the capacity of the step under ``Deployment.capacity_steps``)
   with seeded noise; an overrun is carried into the next interval's budget.
6. **Windows.** When a window closes, each fragment emits ``rows_out`` rows carrying its
   window's SIC (THEMIS Eq. 3 via :func:`spillway.quality.propagation.spread`), replicated
   (each copy ``1/k``, :func:`~spillway.quality.propagation.replicate`) or partitioned
   (rows dealt round-robin, SIC unchanged, :func:`~spillway.quality.propagation.partition`)
   to its consumers, which receive them ``data_delay`` later; a root's rows are the query's
   results, produced at ``t + interval``.
7. **Reports.** Every live node reports to the coordinator (received ``coord_delay`` later,
   and never before the next step).

Delays are rounded up to whole steps (see :mod:`spillway.sim.config`). Arrivals are batched
(THEMIS Table 2: 3 batches of 50 tuples per source per second); shedding is per tuple, as the
policies decide keep counts per lane.

Determinism: every random number comes from generators seeded from ``config.seed`` (arrival
phases are hashed from it; each node's policy and noise have their own stream), loops run in
a fixed order and sums are numpy reductions over arrays in a fixed order, so the same
deployment and config give bit-identical results.

What the simulator does not model: payload values (SIC is query-independent, THEMIS §4, so
only counts and SIC flow), operator selectivity (every window that kept something emits
``rows_out`` rows), and a node's queueing beyond one interval.

Examples
--------
>>> from spillway.sim.deployment import Deployment, QuerySpec, chain
>>> d = Deployment(n_nodes=2, capacity=2_000.0, queries=(
...     QuerySpec(kind="cov", fragments=chain([0, 1], sources=2)),
...     QuerySpec(kind="cov", fragments=chain([1, 0], sources=2))))
>>> r = simulate(d, SimConfig(duration_s=40.0, warmup_s=25.0, seed=3))
>>> r.per_query_sic().round(3).tolist()          # underloaded: every result complete
[1.0, 1.0]
>>> r.accounting.balanced()
True

Without a coordinator, node 0 holds all of q1 and a leaf with a third of q2's sources (the
other leaf on an idle node). ``local`` sees that leaf's admitted SIC as low and feeds it;
``share`` keeps the same share of both fragments:

>>> from spillway.sim.deployment import FragmentSpec
>>> d = Deployment(n_nodes=3, capacity=(200.0, 1e9, 1e9), queries=(
...     QuerySpec(kind="q1", fragments=(FragmentSpec(node=0, sources=2),)),
...     QuerySpec(kind="q2", fragments=(FragmentSpec(node=2, sources=0),
...         FragmentSpec(node=0, sources=1, downstream=(0,)),
...         FragmentSpec(node=1, sources=2, downstream=(0,))))))
>>> for c in ("local", "share"):
...     cfg = SimConfig(duration_s=60.0, warmup_s=30.0, coordination=c)
...     print(c, simulate(d, cfg).per_query_sic().round(2).tolist())
local [0.26, 0.93]
share [0.44, 0.81]
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spillway.control import (
    CostModelConfig,
    CostModelState,
    OverloadConfig,
    detect,
    estimate,
    initial_state,
    node_budget,
    observe,
)
from spillway.errors import ConfigError
from spillway.feeds.profiles import make_profile
from spillway.policies import Backlog, Policy, make_policy
from spillway.quality.coordination import CoordinatorConfig, SicCoordinator, SicUpdate
from spillway.quality.projection import LocalProjection
from spillway.quality.propagation import partition, replicate, spread
from spillway.quality.sic import StwConfig, StwCounter
from spillway.sim.config import SimConfig
from spillway.sim.deployment import Deployment, Topology
from spillway.sim.result import Accounting, FragmentStats, NodeStats, SimResult

#: ``observer(step, node, backlog, capacity)``: called before every policy decision.
Observer = Callable[[int, int, Backlog, float], None]

_PLAN = "fragments"  # the one plan of a simulated node (THEMIS: one cost per tuple)


def _seed(seed: int, *path: int) -> int:
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])


class _Arrivals:
    """Batches of every source by time ``t``: one profile of ``config.profile`` per distinct
    source rate (``FragmentSpec.rate``, else ``config.source_rate``), so a deployment whose
    sources all share one rate runs exactly one profile over all of them."""

    def __init__(self, topo: Topology, config: SimConfig) -> None:
        rates = topo.frag_rate[topo.source_frag]
        rates = np.where(np.isnan(rates), config.source_rate, rates)
        self.n = topo.n_sources
        distinct = list(dict.fromkeys(rates.tolist())) or [config.source_rate]
        self.groups = [
            (
                np.flatnonzero(rates == r) if self.n else np.arange(0),
                make_profile(
                    config.profile,
                    n_sources=max(int((rates == r).sum()), 1),
                    rate=r / config.batch_size,
                    seed=config.seed if g == 0 else _seed(config.seed, 3, g),
                    **dict(config.profile_options),
                ),
            )
            for g, r in enumerate(distinct)
        ]

    def count(self, t: float) -> np.ndarray:
        """Batches of every source that arrived in ``[0, t)`` (S,)."""
        if len(self.groups) == 1:
            return self.groups[0][1].count(t)[: self.n]
        out = np.zeros(self.n, dtype=np.int64)
        for idx, p in self.groups:
            out[idx] = p.count(t)[: idx.size]
        return out


@dataclass
class _Node:
    """Mutable state of one node."""

    policy: Policy
    cost_config: CostModelConfig
    cost: CostModelState
    noise: np.random.Generator
    per_tuple_s: float
    carry_s: float = 0.0


def projection_lags(topology: Topology, config: SimConfig) -> np.ndarray:
    """Expected time from an admission to its effect on the query's Eq. 4, per fragment.

    A kept tuple waits on average half a window for its window to close, then an interval of
    processing; each hop to the root and the result's way to the coordinator add the data
    delay (whole steps). With ``depth`` hops: ``(depth + 1) · (W/2 + I/2 + delay)``.

    >>> from spillway.sim.deployment import Deployment, QuerySpec, chain
    >>> d = Deployment(n_nodes=2, capacity=1.0, queries=(
    ...     QuerySpec(fragments=chain([0, 1], sources=1)),))
    >>> projection_lags(d.topology(), SimConfig()).tolist()
    [1.75, 0.875]
    """
    if config.projection_lag_s is not None:
        return np.full(topology.n_fragments, config.projection_lag_s)
    i = config.interval_s
    hop = config.window_s / 2 + i / 2 + config.delay_steps(config.data_delay_s) * i
    return (topology.layout.depth + 1) * hop


class Simulation:
    """One run of ``deployment`` under ``config`` (see the module docstring).

    Parameters
    ----------
    deployment : Deployment
    config : SimConfig

    Raises
    ------
    ConfigError
        A failure names a node that does not exist, or the policy needs what the simulator
        does not model (per-group lanes or value statistics: CoD).
    """

    def __init__(self, deployment: Deployment, config: SimConfig) -> None:
        if not isinstance(deployment, Deployment):
            raise ConfigError(f"deployment must be a Deployment, got {type(deployment).__name__}")
        if not isinstance(config, SimConfig):
            raise ConfigError(f"config must be a SimConfig, got {type(config).__name__}")
        for f in config.failures:
            if f.node >= deployment.n_nodes:
                raise ConfigError(
                    f"a failure names node {f.node}, but there are {deployment.n_nodes} nodes"
                )
        probe = make_policy(config.policy, seed=0)
        if probe.needs_groups or probe.needs_stats or probe.sheds_always:
            raise ConfigError(
                f"policy {config.policy!r} needs per-group lanes, value statistics or a fixed shed "
                "fraction, which the simulator does not model; use balance-sic or random"
            )
        self.deployment = deployment
        self.config = config
        self.topology = deployment.topology()

    def run(self, observer: Observer | None = None) -> SimResult:
        """Run every step; returns what was measured. ``observer`` sees every policy call."""
        t0 = time.perf_counter()
        cfg, topo = self.config, self.topology
        n_nodes, n_f, n_l, n_e = topo.n_nodes, topo.n_fragments, topo.n_lanes, topo.n_edges
        q_of_f = topo.frag_query
        step_s = cfg.interval_s
        m = cfg.steps_per_window
        dd = cfg.delay_steps(cfg.data_delay_s)
        dc = cfg.delay_steps(cfg.coord_delay_s)
        coordinated = cfg.coordination == "coordinated"
        share = cfg.coordination == "share"
        stw = StwConfig(stw_s=cfg.stw_s, slide_s=step_s)

        profile = _Arrivals(topo, cfg)
        counter = StwCounter(stw, n_lanes=topo.n_sources)
        src_n_sources = topo.query_sources[q_of_f[topo.source_frag]]
        coord = SicCoordinator(
            topo.layout, CoordinatorConfig(stw=stw, timeout_s=cfg.heartbeat_timeout_s)
        )
        lags = projection_lags(topo, cfg)
        proj = LocalProjection(
            stw,
            n_f,
            lag_s=lags,
            history_s=(
                proj_history := cfg.stw_s + float(lags.max(initial=0.0)) + (dc + 2) * step_s
            ),
        )
        # arrived SIC mass per fragment over the STW: the ``share`` base's denominator
        arrived_mass = LocalProjection(stw, n_f, lag_s=np.zeros(n_f), history_s=proj_history)
        nodes = [self._node(n) for n in range(n_nodes)]
        cap_steps = list(self.deployment.capacity_steps)
        overload = OverloadConfig()

        lane_node = topo.frag_node[topo.lane_frag]
        lane_local = (topo.lane_frag - topo.node_frags[lane_node]).astype(np.int64)
        lane_ids = np.arange(n_l, dtype=np.int64)
        is_src = topo.lane_is_source
        src_frag = topo.lane_frag[is_src]  # the fragment of every source lane
        ring = dd + 2
        transit_rows = np.zeros((ring, n_e), dtype=np.int64)
        transit_sic = np.zeros((ring, n_e))
        results: dict[int, list[tuple[float, np.ndarray, np.ndarray]]] = {}
        beats: dict[int, list[tuple[float, np.ndarray]]] = {}
        updates: deque[tuple[int, SicUpdate]] = deque()
        visible: SicUpdate | None = None
        root = topo.layout.root
        root_frags = np.flatnonzero(root)

        count = np.zeros(n_l, dtype=np.int64)
        sic = np.zeros(n_l)
        window_acc = np.zeros(n_f)
        prev_batches = np.zeros(topo.n_sources, dtype=np.int64)
        acc = Accounting()
        per_node = {
            k: np.zeros(n_nodes)
            for k in ("arrived", "kept", "shed", "lost", "over", "util", "cap", "dec")
        }
        frag_arrived = np.zeros(n_f)  # source tuples per fragment from warmup_s on
        frag_kept = np.zeros(n_f)
        samples_t: list[float] = []
        samples: list[np.ndarray] = []
        lost_log: list[tuple[float, tuple[int, ...]]] = []
        last_lost: tuple[int, ...] = ()

        for k in range(1, cfg.n_steps + 1):
            t = k * step_s
            alive = np.array(
                [not any(f.node == n and f.down(t) for f in cfg.failures) for n in range(n_nodes)]
            )
            while cap_steps and cap_steps[0][0] <= t + 1e-9:  # the nodes' true cost changes
                for node, c in zip(nodes, cap_steps.pop(0)[1], strict=True):
                    node.per_tuple_s = 1.0 / float(c)
            # 1. deliveries
            slot = k % ring
            rows_in = transit_rows[slot].copy()
            sic_in = transit_sic[slot].copy()
            transit_rows[slot] = 0
            transit_sic[slot] = 0.0
            for gen, q, s in results.pop(k, []):
                coord.record(np.full(q.shape, gen), q, s)
            for sent, who in beats.pop(k, []):
                coord.heard(who, at=sent)
            # 2. sources
            batches = profile.count(t)
            arrived = (batches - prev_batches) * cfg.batch_size
            prev_batches = batches
            counter.push(arrived)
            count[topo.source_lane] = arrived
            sic[topo.source_lane] = counter.tuple_sic(src_n_sources) if topo.n_sources else 0.0
            count[topo.edge_lane] = rows_in
            row_sic = np.zeros(n_e)
            np.divide(sic_in, rows_in, out=row_sic, where=rows_in > 0)
            sic[topo.edge_lane] = row_sic
            acc.source_arrived += int(arrived.sum())
            acc.derived_delivered += int(rows_in.sum())
            per_node["arrived"] += np.bincount(lane_node, weights=count, minlength=n_nodes)
            # 3. coordinator
            update = coord.update(t)
            if update.lost_nodes != last_lost:
                last_lost = update.lost_nodes
                lost_log.append((t, last_lost))
            updates.append((k + dc, update))
            while updates and updates[0][0] <= k:
                visible = updates.popleft()[1]
            if k % cfg.steps_per_sample == 0:
                samples_t.append(t)
                samples.append(update.sic)
            # 4. decisions
            dead = ~alive[lane_node]
            lost = np.where(dead, count, 0)
            count[dead] = 0
            orphaned = np.zeros(n_l, dtype=np.int64)
            if coordinated and visible is not None and visible.orphaned.any():
                orph = visible.orphaned[topo.lane_frag]
                orphaned = np.where(orph, count, 0)
            keep = np.zeros(n_l, dtype=np.int64)
            decide_count = count - orphaned
            if coordinated and visible is not None:
                waiting = np.bincount(topo.lane_frag, weights=decide_count * sic, minlength=n_f)
                base = proj.base(
                    t, visible.sic[q_of_f], visible.as_of, visible.ceiling[q_of_f], waiting
                )
            elif share:
                mass_in = np.bincount(topo.lane_frag, weights=decide_count * sic, minlength=n_f)
                norm = arrived_mass.own(t) + mass_in
                empty = norm <= 0
                norm = np.where(empty, 1.0, norm)
                base = np.where(empty, 1.0, proj.own(t) / norm)
                lane_sic = sic / norm[topo.lane_frag]
            else:
                base = proj.own(t)
            if not share:
                lane_sic = sic
            for n in range(n_nodes):
                if not alive[n]:
                    continue
                ls, le = int(topo.node_lanes[n]), int(topo.node_lanes[n + 1])
                cnt = decide_count[ls:le]
                total = int(cnt.sum())
                node = nodes[n]
                est = estimate(node.cost)
                budget = node_budget(
                    {_PLAN: est}, interval_s=step_s, headroom=cfg.headroom, arrived={_PLAN: total}
                )
                avail = max(0.0, budget.available_s - node.carry_s)
                cap = avail / est.per_tuple_s
                per_node["cap"][n] += cap / step_s
                if total == 0:
                    node.carry_s = max(0.0, node.carry_s - step_s)
                    continue
                per_node["dec"][n] += 1
                verdict = detect(overload, backlog_cost=total * est.per_tuple_s, budget=avail)
                if not verdict.overloaded:
                    keep[ls:le] = cnt
                else:
                    per_node["over"][n] += 1
                    fs, fe = int(topo.node_frags[n]), int(topo.node_frags[n + 1])
                    backlog = Backlog(
                        lane_query=lane_local[ls:le],
                        lane_source=lane_ids[ls:le],
                        count=cnt,
                        tuple_sic=lane_sic[ls:le],
                        query_sic=base[fs:fe],
                    )
                    if observer is not None:
                        observer(k, n, backlog, cap)
                    keep[ls:le] = node.policy.decide(backlog, cap).keep
                processed = int(keep[ls:le].sum())
                noise = (
                    float(
                        np.exp(
                            node.noise.normal(0.0, cfg.duration_noise) - cfg.duration_noise**2 / 2
                        )
                    )
                    if cfg.duration_noise > 0
                    else 1.0
                )
                duration = processed * node.per_tuple_s * noise
                node.cost = observe(node.cost_config, node.cost, processed, duration, total)
                node.carry_s = max(0.0, node.carry_s + duration - step_s)
                per_node["util"][n] += duration / step_s
            # 5. accounting and processing
            shed = count - keep
            kept_sic = keep * sic
            acc.source_kept += int(keep[is_src].sum())
            acc.source_shed += int(shed[is_src].sum())
            acc.source_lost += int(lost[is_src].sum())
            acc.source_orphaned += int(orphaned[is_src].sum())
            acc.derived_kept += int(keep[~is_src].sum())
            acc.derived_shed += int(shed[~is_src].sum())
            acc.derived_lost += int(lost[~is_src].sum())
            acc.derived_orphaned += int(orphaned[~is_src].sum())
            per_node["kept"] += np.bincount(lane_node, weights=keep, minlength=n_nodes)
            if t > cfg.warmup_s + 1e-9:  # arrivals after the warm-up
                frag_arrived += np.bincount(src_frag, count[is_src] + lost[is_src], minlength=n_f)
                frag_kept += np.bincount(src_frag, keep[is_src], minlength=n_f)
            per_node["shed"] += np.bincount(lane_node, weights=shed, minlength=n_nodes)
            per_node["lost"] += np.bincount(lane_node, weights=lost, minlength=n_nodes)
            gain = np.bincount(topo.lane_frag, weights=kept_sic, minlength=n_f)
            proj.record(t, gain)
            if share:
                arrived_mass.record(
                    t, np.bincount(topo.lane_frag, weights=decide_count * sic, minlength=n_f)
                )
            window_acc += gain
            window_acc[~alive[topo.frag_node]] = 0.0
            # 6. windows
            if k % m == 0:
                fires = window_acc > 0
                n_out = np.where(fires, topo.frag_rows, 0)
                per_row = spread(window_acc, n_out)
                gen = (k + 1) * step_s
                due = k + 1 + dd
                fired_roots = root_frags[fires[root_frags]]
                if fired_roots.size:
                    results.setdefault(due, []).append(
                        (gen, q_of_f[fired_roots], window_acc[fired_roots].copy())
                    )
                    acc.results_sent += int(n_out[fired_roots].sum())
                if n_e:
                    src = topo.edge_from
                    rows_src = n_out[src]
                    part = topo.edge_partition
                    offset = (k // m - 1) % topo.edge_k
                    dealt = rows_src // topo.edge_k + (
                        (topo.edge_j - offset) % topo.edge_k < rows_src % topo.edge_k
                    )
                    rows_e = np.where(part, dealt, rows_src)
                    sic_row_e = np.where(
                        part, partition(per_row[src]), replicate(per_row[src], topo.edge_k)
                    )
                    slot_d = due % ring
                    transit_rows[slot_d] += rows_e
                    transit_sic[slot_d] += rows_e * sic_row_e
                    acc.derived_sent += int(rows_e.sum())
                window_acc[:] = 0.0
            # 7. reports
            who = np.flatnonzero(alive)
            if who.size:
                beats.setdefault(k + max(1, dc), []).append((t, who))

        acc.derived_in_transit = int(transit_rows.sum())
        steps = cfg.n_steps
        dec = np.maximum(per_node["dec"], 1)
        stats = NodeStats(
            arrived=per_node["arrived"].astype(np.int64),
            kept=per_node["kept"].astype(np.int64),
            shed=per_node["shed"].astype(np.int64),
            lost=per_node["lost"].astype(np.int64),
            overloaded_share=per_node["over"] / dec,
            utilisation=per_node["util"] / steps,
            capacity=per_node["cap"] / steps,
            decisions=per_node["dec"].astype(np.int64),
        )
        frags_per_query = np.bincount(q_of_f, minlength=topo.n_queries)
        order = np.lexsort((topo.frag_index, q_of_f))  # the deployment's order
        fragments = FragmentStats(
            query=q_of_f[order], index=topo.frag_index[order],
            arrived=frag_arrived[order].astype(np.int64), kept=frag_kept[order].astype(np.int64),
        )  # fmt: skip
        return SimResult(
            config=cfg,
            kinds=topo.kinds,
            query_kind=topo.query_kind,
            query_fragments=frags_per_query,
            sample_times=np.asarray(samples_t),
            query_sic=np.asarray(samples).reshape(len(samples), topo.n_queries),
            accounting=acc,
            nodes=stats,
            fragments=fragments,
            lost_nodes=tuple(lost_log),
            wall_s=time.perf_counter() - t0,
        )

    def _node(self, n: int) -> _Node:
        cfg = self.config
        cap = float(self.topology.capacity[n])
        per_tuple = 1.0 / cap
        cost_cfg = CostModelConfig(
            prior_overhead_s=0.0,
            prior_overhead_std_s=0.01 * cfg.interval_s,
            prior_per_tuple_s=per_tuple,
            prior_per_tuple_std_s=per_tuple,
            rows_scale=cap * cfg.interval_s,
            warmup_batches=0,
            min_per_tuple_s=min(1e-9, per_tuple),
        )
        return _Node(
            policy=make_policy(cfg.policy, seed=_seed(cfg.seed, 2, n)),
            cost_config=cost_cfg,
            cost=initial_state(cost_cfg),
            noise=np.random.default_rng(_seed(cfg.seed, 1, n)),
            per_tuple_s=per_tuple,
        )


def simulate(
    deployment: Deployment, config: SimConfig, observer: Observer | None = None
) -> SimResult:
    """Run ``deployment`` under ``config`` (:class:`Simulation`); returns the result."""
    return Simulation(deployment, config).run(observer)


__all__ = ["Observer", "Simulation", "projection_lags", "simulate"]
