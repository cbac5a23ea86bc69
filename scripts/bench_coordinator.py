"""Measure the query coordinator service on this machine: one interval's reports from N nodes.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_coordinator.py [--rounds 400]

Builds THEMIS Fig. 10's mixed deployment (18 nodes, about 2,000 fragments of the complex
workload, 1-6 per query, random placement: ``spillway.sim.workload``), starts a
:class:`~spillway.federation.CoordinatorService` on loopback and connects one
:class:`~spillway.federation.CoordinatorClient` per node. Each round is one shedding interval:
every node reports, in turn, one result per window of each query whose root it hosts, and
receives its queries' Eq. 4 values. Prints one JSON object: the round trip of one report
(median and p99, milliseconds), the time for all nodes' reports of one interval, and the size
of the layout. The first round, which connects every client, is reported apart.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from spillway.federation import CoordinatorClient, CoordinatorService
from spillway.quality.coordination import CoordinatorConfig
from spillway.quality.sic import StwConfig
from spillway.sim.workload import WorkloadConfig, build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=400, help="intervals (default 400 = 100 s)")
    ap.add_argument("--interval", type=float, default=0.25, help="shedding interval, seconds")
    args = ap.parse_args()
    layout = (
        build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=(1, 6), seed=0))
        .topology()
        .layout
    )
    n_nodes = int(layout.n_nodes or 0)
    roots = [
        layout.fragment_query[(layout.fragment_node == n) & layout.root] for n in range(n_nodes)
    ]
    cfg = CoordinatorConfig(stw=StwConfig(stw_s=10.0, slide_s=args.interval), timeout_s=1.0)
    now = [0.0]  # logical time: the service sees one interval per round, however fast it runs
    rng = np.random.default_rng(0)
    per_report: list[float] = []
    per_round: list[float] = []
    with CoordinatorService(layout, cfg, clock=lambda: now[0], origin_s=0.0) as service:
        clients = [
            CoordinatorClient(service.address, service.authkey, node=n) for n in range(n_nodes)
        ]
        try:
            for k in range(1, args.rounds + 1):
                now[0] = k * args.interval
                r0 = time.perf_counter()
                for n, client in enumerate(clients):
                    q = roots[n]
                    t0 = time.perf_counter()
                    client.report(
                        sent=now[0],
                        result_time=np.full(q.shape, now[0] - 0.5 * args.interval),
                        query=q,
                        sic=rng.uniform(0.0, 0.01, size=q.shape),
                    )
                    per_report.append(time.perf_counter() - t0)
                per_round.append(time.perf_counter() - r0)
        finally:
            for c in clients:
                c.close()
    # The first round connects every client (HMAC handshake both ways): reported apart.
    rep = np.array(per_report[n_nodes:]) * 1e3
    rnd = np.array(per_round[1:]) * 1e3
    print(
        json.dumps(
            {
                "nodes": n_nodes,
                "queries": layout.n_queries,
                "fragments": layout.n_fragments,
                "rounds": args.rounds,
                "first_round_ms": round(per_round[0] * 1e3, 2),
                "report_ms_median": round(float(np.median(rep)), 3),
                "report_ms_p99": round(float(np.percentile(rep, 99)), 3),
                "interval_all_nodes_ms_median": round(float(np.median(rnd)), 2),
                "interval_all_nodes_ms_p99": round(float(np.percentile(rnd, 99)), 2),
                "interval_ms": args.interval * 1e3,
            }
        )
    )


if __name__ == "__main__":
    main()
