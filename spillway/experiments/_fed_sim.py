"""spark-federation's simulator check: the Spark run's federation re-run by
:mod:`spillway.sim` at the capacities and input rates the Spark run measured.

The claim: given what a Spark run measured, the simulator's per-query SIC is within
:data:`SIC_TOLERANCE` (0.05) and its Jain within :data:`JAIN_TOLERANCE` (0.02) of the Spark
run's (checks ``sim_sic_within_0.05``, ``sim_jain_within_0.02``; "not applicable" with the
reason when the Spark run lacks what the simulator needs).

Taken from the Spark run (:func:`spark_measured`, over its measured part, ``warmup_s`` to
``duration_s`` after every node was up):

- every node's capacity as its own cost model measured it: each decision's
  ``capacity_tuples`` over the feed time it covered (``history.jsonl``), a step function of
  time, not a mean (the capacities still climb through the part: run 9's node b went from
  about 84,000 to 566,000 tuples per decision in the coordinated run). A decision is placed at
  the first second of the run's timeline whose arrivals count it (a node writes its status once
  a second), so within 1-2 s of when it was made;
- each fragment's input rate per source as its producers achieved it: its tuples decided over
  the feed time of the part's decisions;
- each query's mean SIC from the coordinator and Jain over those means
  (:func:`~spillway.experiments.spark_federation.mode_values`).

What the simulator runs (:func:`simulation_of`): the federation file's nodes, queries and
placement (one fragment per entry, its sources at the rate measured, its rows to its ``to``
fragments, replicated), every node with the file's policy, ``coordinated`` as the file says
(else each node balances its own admissions), interval = the coordinator's slide (250 ms), the
file's STW, the queries' 1 s windows, the run's seed. It runs :data:`LEAD_S` at the capacities
of the part's start (its STW and cost models fill), then the part at the measured capacities,
and its SIC is averaged over the part only.

Where the two legitimately differ (reported, not tuned away):

- micro-batch timing: a Spark node decides once a micro-batch (every 1-3 s on these cores,
  the decision's ``span``), on all that arrived meanwhile; the simulator every 250 ms;
- lag: Spark's results reach the coordinator a micro-batch or two after the shedding
  (p95 2.6-9.6 s in run 9) and its values are for the STW ending at each query's watermark;
  the simulator's results arrive a window and a step later;
- the capacity's climb is followed in steps of a decision; what a node processed between
  two decisions, and any backlog it carried, is not;
- the simulator's nodes learn their capacity from their own processing times (with 2 %
  noise) as Spark's do, starting at the measured one.

Examples
--------
>>> from spillway.experiments import spark_federation as sf
>>> fed = sf.federation(sf.make_config(quick=True), "random")
>>> caps = {"a": [[90.0, 2e5]], "b": [[90.0, 2e5]], "c": [[90.0, 5e4]]}
>>> rates = {"local-a.f": 5e4, "local-b.f": 4e4, "local-c.f": 5e3, "shared.leaf-a": 5e3,
...          "shared.leaf-b": 5e3, "shared.root": 5e3}
>>> spark = {"start_s": 90.0, "end_s": 110.0, "capacity": caps, "rates": rates,
...          "sic": {"local-a": 0.35, "local-b": 0.45, "local-c": 0.5, "shared": 0.33},
...          "jain": 0.97}
>>> got = beside_spark(fed, spark, seed=0)
>>> [(r["query"], round(r["sim_sic"], 2)) for r in got["queries"]]
[('local-a', 0.36), ('local-b', 0.44), ('local-c', 0.5), ('shared', 0.32)]
>>> [c.verdict for c in sim_checks({"random": got})]
['pass', 'pass']
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spillway.errors import InputDataError, SpillwayError
from spillway.experiments.checks import Check, compare, every
from spillway.federation.config import FederationConfig
from spillway.quality import jain_index
from spillway.reporting import markdown_table, num
from spillway.sim import Deployment, FragmentSpec, QuerySpec, SimConfig, simulate

#: Largest difference of a query's mean SIC, simulator against Spark.
SIC_TOLERANCE = 0.05
#: Largest difference of Jain over the queries' means, simulator against Spark.
JAIN_TOLERANCE = 0.02
#: Simulated seconds before the measured part, at the capacities of its start: an STW and
#: more, so the simulator's STW, coordinator and cost models have filled.
LEAD_S = 30.0
#: The queries' tumbling window (``spillway.config.QuerySpec.window_s``, the federation's).
WINDOW_S = 1.0
#: The checks, in report order.
CHECK_NAMES = (f"sim_sic_within_{SIC_TOLERANCE:g}", f"sim_jain_within_{JAIN_TOLERANCE:g}")
#: A history record's fields the check reads (``measure`` keeps only these).
HISTORY_KEYS = ("t", "capacity_tuples", "arrived_tuples", "query_arrived")
#: Fields kept too when a record has them (histories written before they existed lack them):
#: the intervals a decision spans, whether it probed the cost model, and what it kept of
#: each fragment.
OPTIONAL_KEYS = ("span", "probe", "query_admitted")


def compact_history(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A node's ``history.jsonl`` lines reduced to its decisions' :data:`HISTORY_KEYS` and
    :data:`OPTIONAL_KEYS` (the per-plan batch lines dropped).

    >>> compact_history([{"t": 3.0, "capacity_tuples": 9.0, "arrived_tuples": 20,
    ...                   "query_arrived": {"q.f": 20}, "batch_s": 1.2, "probe": True},
    ...                  {"plan": "p"}])  # doctest: +NORMALIZE_WHITESPACE
    [{'t': 3.0, 'capacity_tuples': 9.0, 'arrived_tuples': 20, 'query_arrived': {'q.f': 20},
      'probe': True}]
    """
    keys = HISTORY_KEYS + OPTIONAL_KEYS
    return [{k: x[k] for k in keys if k in x} for x in lines
            if all(k in x for k in HISTORY_KEYS)]  # fmt: skip


def placed(
    history: Sequence[Mapping[str, Any]], timeline: Sequence[Mapping[str, Any]], node: str
) -> list[tuple[float, float, Mapping[str, Any]]]:
    """The node's decisions after its first as ``(elapsed_s, feed seconds covered, record)``:
    ``elapsed_s`` is the first timeline second whose ``arrived`` count of the node includes the
    decision (the node's status counts every decision's arrivals); decisions the timeline never
    counted are left out.

    >>> h = [{"t": 10.0, "arrived_tuples": 5}, {"t": 12.0, "arrived_tuples": 7},
    ...      {"t": 13.0, "arrived_tuples": 3}]
    >>> tl = [{"elapsed_s": float(e), "arrived": {"a": a}} for e, a in [(0, 5), (1, 5), (2, 12)]]
    >>> [(e, dt, r["t"]) for e, dt, r in placed(h, tl, "a")]
    [(2.0, 2.0, 12.0)]
    """
    out: list[tuple[float, float, Mapping[str, Any]]] = []
    total, i = 0, 0
    for k, rec in enumerate(history):
        total += int(rec["arrived_tuples"])
        while i < len(timeline) and timeline[i].get("arrived", {}).get(node, -1) < total:
            i += 1
        if i == len(timeline):
            break
        if k > 0:
            dt = float(rec["t"]) - float(history[k - 1]["t"])
            if dt > 0:
                out.append((float(timeline[i]["elapsed_s"]), dt, rec))
    return out


def spark_measured(
    fed: FederationConfig,
    run: Mapping[str, Any],
    values: Mapping[str, Any],
    start_s: float,
    end_s: float,
) -> dict[str, Any] | str:
    """What :func:`beside_spark` needs from one Spark run (``run``: ``timeline`` and
    ``histories``, node → :func:`compact_history`; ``values``: its
    :func:`~spillway.experiments.spark_federation.mode_values`), over ``[start_s, end_s]``; a
    reason (str) when the run lacks it.

    >>> from spillway.experiments import spark_federation as sf
    >>> fed = sf.federation(sf.make_config(quick=True), "random")
    >>> spark_measured(fed, {"timeline": []}, {"samples": 3}, 90.0, 130.0)
    'the run kept no node histories (history.jsonl): no capacities to simulate it at'
    """
    hist = run.get("histories") or {}
    if not hist:
        return "the run kept no node histories (history.jsonl): no capacities to simulate it at"
    if not values.get("samples"):
        return "the coordinator gave no query a value over the measured part"
    capacity: dict[str, list[list[float]]] = {}
    arrived: dict[str, float] = {}
    admitted: dict[str, float] = {}
    covered: dict[str, float] = {}
    for node in fed.nodes:
        decisions = placed(hist.get(node, []), run["timeline"], node)
        before = [d for d in decisions if d[0] < start_s]
        inside = [d for d in decisions if start_s <= d[0] <= end_s]
        if not inside:
            return f"node {node} recorded no decision from {start_s:g} to {end_s:g} s"
        series = [(start_s, before[-1])] if before else []
        series += [(d[0], d) for d in inside]
        capacity[node] = [[e, float(rec["capacity_tuples"]) / dt] for e, (_, dt, rec) in series]
        for _, dt, rec in inside:
            for frag, n in rec["query_arrived"].items():
                arrived[frag] = arrived.get(frag, 0.0) + float(n)
                covered[frag] = covered.get(frag, 0.0) + dt
                got = rec.get("query_admitted", {}).get(frag)  # None: an older history
                admitted[frag] = admitted.get(frag, 0.0) + (math.nan if got is None else got)
    rates, kept = {}, {}
    for q in fed.queries:
        for f in q.fragments:
            key = f"{q.name}.{f.name}"
            if f.sources > 0:
                if not covered.get(key):
                    return f"fragment {key} decided no tuple from {start_s:g} to {end_s:g} s"
                rates[key] = arrived[key] / covered[key] / f.sources
                if arrived[key] > 0 and math.isfinite(admitted.get(key, math.nan)):
                    kept[key] = admitted[key] / arrived[key]
    return {"start_s": start_s, "end_s": end_s, "capacity": capacity, "rates": rates,
            "kept": kept, "sic": dict(values["sic"]),
            "jain": float(values["jain"])}  # fmt: skip


def _steps(
    capacity: Mapping[str, Sequence[Sequence[float]]], nodes: Sequence[str], start_s: float
) -> list[tuple[float, tuple[float, ...]]]:
    """Every node's capacity at each time any of them changed (a step function each)."""
    times = sorted({max(float(t), start_s) for n in nodes for t, _ in capacity[n]})
    out = []
    for t in times:
        caps = []
        for n in nodes:
            pts = capacity[n]
            upto = [float(c) for tt, c in pts if max(float(tt), start_s) <= t]
            caps.append(upto[-1] if upto else float(pts[0][1]))
        out.append((t, tuple(caps)))
    return out


def simulation_of(
    fed: FederationConfig, measured: Mapping[str, Any], seed: int = 0
) -> tuple[Deployment, SimConfig]:
    """The simulator's deployment and run settings for ``measured`` (:func:`spark_measured`)
    on ``fed``'s placement (see the module docstring).

    Raises
    ------
    InputDataError
        A node without a capacity, a fragment without a rate, nodes with different policies
        (the simulator runs one), or an empty measured part.
    """
    start, end = float(measured["start_s"]), float(measured["end_s"])
    if not end > start:
        raise InputDataError(f"the measured part must end after it starts, got {start}-{end} s")
    cap = measured["capacity"]
    for n in fed.nodes:
        if not cap.get(n):
            raise InputDataError(f"node {n} has no measured capacity: it cannot be simulated")
    if len(set(fed.policies)) != 1:
        raise InputDataError(f"the simulator runs one policy on every node, got {fed.policies}")
    ix = {n: i for i, n in enumerate(fed.nodes)}
    queries = []
    for q in fed.queries:
        names = [f.name for f in q.fragments]
        frags = []
        for f in q.fragments:
            key = f"{q.name}.{f.name}"
            rate = measured["rates"].get(key) if f.sources > 0 else None
            if f.sources > 0 and not (rate and math.isfinite(rate) and rate > 0):
                raise InputDataError(f"fragment {key} has no measured input rate ({rate!r})")
            frags.append(FragmentSpec(node=ix[f.node], sources=f.sources, rate=rate,
                                      downstream=tuple(names.index(t) for t in f.to)))  # fmt: skip
        queries.append(QuerySpec(kind=q.name, fragments=tuple(frags)))
    steps = _steps(cap, fed.nodes, start)
    step_s = float(fed.slide_s)
    span = math.ceil((end - start) / step_s - 1e-9) * step_s
    deployment = Deployment(
        n_nodes=len(fed.nodes),
        capacity=steps[0][1],
        queries=tuple(queries),
        capacity_steps=tuple((LEAD_S + t - start, c) for t, c in steps[1:]),
    )
    config = SimConfig(
        duration_s=LEAD_S + span, warmup_s=LEAD_S, interval_s=step_s, stw_s=float(fed.stw_s),
        window_s=WINDOW_S, policy=fed.policies[0],
        coordination="coordinated" if fed.coordinated else "share",
        heartbeat_timeout_s=float(fed.timeout_s), seed=seed,
    )  # fmt: skip
    return deployment, config


def beside_spark(
    fed: FederationConfig, measured: Mapping[str, Any], seed: int = 0
) -> dict[str, Any]:
    """Run the simulator on what a Spark run measured (:func:`spark_measured`) and put its
    per-query SIC and Jain beside the Spark run's.

    Returns ``queries`` (per query ``spark_sic``, ``sim_sic``, ``abs_diff``), ``spark_jain``,
    ``sim_jain``, ``jain_abs_diff``, ``capacity_mean`` (per node, the measured step function's
    mean over the part, tuples/s) and ``sim_kept_fraction`` (per node, over the whole
    simulated run).
    """
    deployment, config = simulation_of(fed, measured, seed)
    res = simulate(deployment, config)
    sim = res.per_query_sic(LEAD_S)
    names = [q.name for q in fed.queries]
    spark = measured["sic"]
    rows = [
        {"query": q, "spark_sic": spark.get(q, math.nan), "sim_sic": float(s),
         "abs_diff": abs(float(s) - float(spark.get(q, math.nan)))}
        for q, s in zip(names, sim, strict=True)
    ]  # fmt: skip
    sim_jain = float(jain_index(sim))
    start, end = float(measured["start_s"]), float(measured["end_s"])
    mean_cap = {}
    for i, n in enumerate(fed.nodes):
        pts = [(LEAD_S, deployment.capacities()[i])] + [
            (t, c[i]) for t, c in deployment.capacity_steps
        ]
        edges = [t for t, _ in pts[1:]] + [LEAD_S + end - start]
        mean_cap[n] = sum(c * (b - a) for (a, c), b in zip(pts, edges, strict=True)) / (end - start)
    return {
        "queries": rows,
        "spark_jain": float(measured["jain"]),
        "sim_jain": sim_jain,
        "jain_abs_diff": abs(sim_jain - float(measured["jain"])),
        "capacity_mean": mean_cap,
        "sim_kept_fraction": {
            n: float(res.nodes.kept[i] / res.nodes.arrived[i]) if res.nodes.arrived[i] else None
            for i, n in enumerate(fed.nodes)
        },
        "fragments": fragment_rows(fed, measured.get("kept", {}), res),
    }


def fragment_rows(
    fed: FederationConfig, spark_kept: Mapping[str, float], res: Any
) -> list[dict[str, Any]]:
    """Per fragment with sources: the share of its source tuples its node kept over the
    measured part, in Spark (``spark_kept``, from the decisions' ``query_admitted``; NaN for a
    history without it) and in the simulator (``res``: its
    :class:`~spillway.sim.result.FragmentStats`, in the file's order). Where the two agree on
    a node's total but not on its fragments, the gap is in how the node split its capacity."""
    sim = res.fragments.kept_share()
    rows, i = [], 0
    for q in fed.queries:
        for f in q.fragments:
            key = f"{q.name}.{f.name}"
            if f.sources > 0:
                rows.append({"fragment": key, "node": f.node,
                             "spark_kept": float(spark_kept.get(key, math.nan)),
                             "sim_kept": float(sim[i])})  # fmt: skip
            i += 1
    return rows


def sim_checks(sims: Mapping[str, Mapping[str, Any] | str]) -> list[Check]:
    """``sim_sic_within_0.05`` and ``sim_jain_within_0.02`` over the modes' :func:`beside_spark`
    results (a str: why that mode could not be simulated; no mode compared: not applicable).

    >>> [c.as_dict()["verdict"] for c in sim_checks({"coordinated": "no node histories"})]
    ['not applicable', 'not applicable']
    """
    sic_parts, jain_parts, missing = [], [], []
    for mode, s in sims.items():
        if isinstance(s, str):
            missing.append(f"{mode}: {s}")
            continue
        sic_parts += [
            compare(f"{mode}/{r['query']}", r["abs_diff"], "<=", SIC_TOLERANCE,
                    what=f"|sim - Spark| mean SIC (sim {num(r['sim_sic'])}, Spark "
                    f"{num(r['spark_sic'])})")
            for r in s["queries"]
        ]  # fmt: skip
        jain_parts.append(
            compare(mode, s["jain_abs_diff"], "<=", JAIN_TOLERANCE,
                    what=f"|sim - Spark| Jain (sim {num(s['sim_jain'])}, Spark "
                    f"{num(s['spark_jain'])})")
        )  # fmt: skip
    none = "; ".join(missing) or "no mode was run"
    return [
        every(CHECK_NAMES[0], sic_parts, none_why=none),
        every(CHECK_NAMES[1], jain_parts, none_why=none),
    ]


def compare_runs(
    config: Any, measured: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any] | str], float]:
    """:func:`beside_spark` for every compared mode of a spark-federation ``measured`` record
    (``config``: its :class:`~spillway.experiments.spark_federation.SparkFederationConfig`);
    per mode the result or why it could not run, and the wall seconds it all took."""
    from spillway.experiments import spark_federation as sf

    t0 = time.perf_counter()
    out: dict[str, dict[str, Any] | str] = {}
    for run in measured.get("runs", []):
        mode = run["mode"]
        if mode not in sf.MODES:
            continue
        fed = sf.federation(config, mode)
        got = spark_measured(fed, run, sf.mode_values(config, run), config.warmup_s,
                             config.duration_s)  # fmt: skip
        try:
            out[mode] = got if isinstance(got, str) else beside_spark(fed, got, config.seed)
        except InputDataError as e:
            out[mode] = str(e)
    return out, time.perf_counter() - t0


def table(sims: Mapping[str, Mapping[str, Any] | str], wall_s: float) -> str:
    """The report's section: per mode, each query's SIC and Jain, Spark's beside the
    simulator's, and the measured capacities it ran at."""
    parts = [
        "The same federation in the simulator (`spillway.sim`), at the capacities each node's "
        "cost model measured over the measured part (a step per decision) and the input rates "
        f"its producers achieved; {num(LEAD_S)} s at the part's first capacities before it. "
        f"Tolerances: SIC {SIC_TOLERANCE:g}, Jain {JAIN_TOLERANCE:g}. Simulated in "
        f"{wall_s:.2f} s (wall)."
    ]
    for mode, s in sims.items():
        if isinstance(s, str):
            parts.append(f"**{mode}**: not simulated ({s}).")
            continue
        rows: list[dict[str, Any]] = [
            {"query": r["query"], "Spark": r["spark_sic"], "simulator": r["sim_sic"],
             "abs diff": r["abs_diff"]}
            for r in s["queries"]
        ]  # fmt: skip
        rows.append({"query": "Jain", "Spark": s["spark_jain"], "simulator": s["sim_jain"],
                     "abs diff": s["jain_abs_diff"]})  # fmt: skip
        caps = ", ".join(f"{n} {num(c)}" for n, c in s["capacity_mean"].items())
        kept = ", ".join(
            f"{r['fragment']} ({r['node']}) {num(r['spark_kept'])} / {num(r['sim_kept'])}"
            for r in s.get("fragments", [])
        )
        parts.append(f"**{mode}** (mean measured capacity, tuples/s: {caps})\n\n"
                     + markdown_table(rows)
                     + (f"\n\nKept share of each fragment's source tuples over the part, "
                        f"Spark / simulator: {kept}." if kept else ""))  # fmt: skip
    return "\n\n".join(parts)


def read_histories(out: Path, nodes: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every node's :func:`compact_history` from a ``federation up`` folder
    (``OUT/nodes/NODE/history.jsonl``, or ``OUT/NODE/history.jsonl``); nodes without one are
    left out."""
    got = {}
    for n in nodes:
        for p in (out / "nodes" / n / "history.jsonl", out / n / "history.jsonl"):
            if p.exists():
                lines = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
                got[n] = compact_history(lines)
                break
    return got


def load_runs(root: Path) -> dict[str, Any]:
    """A kept runs folder (``SparkFederationConfig.runs_dir``, or one laid out alike) as a
    ``measured`` record: per compared mode ``ROOT/MODE/timeline.jsonl``, ``summary.json`` and
    every node's ``ROOT/MODE/nodes/NODE/history.jsonl`` (or ``ROOT/MODE/NODE/history.jsonl``).

    Raises
    ------
    InputDataError
        No mode's timeline in ``root``.
    """
    from spillway.experiments import spark_federation as sf

    runs = []
    for mode in sf.MODES:
        d = root / mode
        tl = d / "timeline.jsonl"
        if not tl.exists():
            continue
        sp = d / "summary.json"
        summary = json.loads(sp.read_text()) if sp.exists() else {}
        timeline = [json.loads(x) for x in tl.read_text().splitlines() if x.strip()]
        runs.append({"mode": mode, "summary": summary, "timeline": timeline,
                     "histories": read_histories(d, sf.NODES)})  # fmt: skip
    if not runs:
        raise InputDataError(f"{root} holds no run folder ({', '.join(sf.MODES)}/timeline.jsonl)")
    return {"runs": runs}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spillway.experiments._fed_sim RUNS_DIR [--quick] [--seed N]``: the check on
    a kept runs folder (:func:`load_runs`), printed."""
    from spillway.experiments import spark_federation as sf

    p = argparse.ArgumentParser(prog="python -m spillway.experiments._fed_sim")
    p.add_argument("runs_dir", type=Path)
    p.add_argument("--quick", action="store_true", help="the runs were --quick ones")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        sims, wall = compare_runs(sf.make_config(quick=args.quick, seed=args.seed),
                                  load_runs(args.runs_dir))  # fmt: skip
    except SpillwayError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(sims, wall))
    for c in sim_checks(sims):
        print(f"{c.verdict.upper()}  {c.name}: {c.why}")
    return 0


__all__ = [
    "CHECK_NAMES",
    "JAIN_TOLERANCE",
    "LEAD_S",
    "SIC_TOLERANCE",
    "beside_spark",
    "compact_history",
    "compare_runs",
    "load_runs",
    "placed",
    "read_histories",
    "sim_checks",
    "simulation_of",
    "spark_measured",
    "table",
]

if __name__ == "__main__":
    sys.exit(main())
