"""What a federation node's micro-batches cost, per mode, from its recorded history.

Reads ``ROOT/MODE/NODE/history.jsonl`` (or ``ROOT/MODE/nodes/NODE/history.jsonl``: a
``federation up`` folder per mode, or copies of its nodes' histories) and prints, per mode,
over the node's batches after the first third (past its warm-up):

- the batches' rows and durations (ranges), and a least-squares line through them
  (``duration = fixed + per_row x rows``) with the correlation of rows and duration: a node
  whose batches last about the same whatever they keep pays mostly a fixed cost;
- its cost model's own figures at its decisions over the same part (median fixed cost and
  per kept tuple) and the budget they leave for kept tuples;
- the share of what arrived that it kept, the records a log lane brought per decision, and
  the share of its shed records its reader read all the same (those in a gap between two kept
  runs shorter than the reader reads through, :func:`spillway.spark.source.shed_read`), with
  the kept runs of this code (:func:`spillway.spark.source.log_runs`) or, with ``--runs 16``,
  the 16 runs a lane always had before (the histories of run 12 and earlier).

Usage::

    .venv/bin/python scripts/node_batch_fit.py ROOT --node c --lanes 20 --budget 1.6 [--runs 16]

``--lanes``: the node's log lanes (partitions it reads); ``--budget``: headroom x trigger (s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spillway.kafka.feed import READ_GAP
from spillway.spark.source import shed_read


def history_of(root: Path, mode: str, node: str) -> list[dict[str, Any]] | None:
    """A node's ``history.jsonl`` lines in a mode's folder, or None when it has none."""
    for p in (root / mode / node / "history.jsonl", root / mode / "nodes" / node / "history.jsonl"):
        if p.exists():
            return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return None


def batch_fit(
    lines: Sequence[Mapping[str, Any]], lanes: int, budget_s: float, runs: int | None = None
) -> dict[str, Any]:
    """The figures the module docstring lists, over the batches (and decisions) after the
    first third of each.

    >>> rows = [1000 * (i % 5 + 1) for i in range(30)]
    >>> lines = [{"plan": "p", "batches": [{"rows": r, "duration_s": 1.0 + 2e-4 * r}
    ...                                    for r in rows]}]
    >>> lines += [{"t": float(i), "arrived_tuples": 40_000, "admitted_tuples": 10_000,
    ...            "overhead_s": 1.0, "per_tuple_s": 2e-4} for i in range(9)]
    >>> f = batch_fit(lines, lanes=4, budget_s=1.6)
    >>> round(f["fixed_s"], 3), round(f["per_row_us"], 1), round(f["corr"], 2), f["kept"]
    (1.0, 200.0, 1.0, 0.25)
    >>> f["lane_records_per_decision"], f["read_through"], round(f["model_left_s"], 2)
    (10000.0, 0.0, 0.6)
    >>> round(batch_fit(lines, lanes=4, budget_s=1.6, runs=16)["read_through"], 2)
    0.97
    """
    rows: list[float] = []
    durations: list[float] = []
    for line in lines:
        if "plan" in line:
            b = [x for x in line["batches"] if x.get("rows", 0) > 0]
            b = b[len(b) // 3 :]
            rows += [float(x["rows"]) for x in b]
            durations += [float(x["duration_s"]) for x in b]
    decisions = [x for x in lines if "arrived_tuples" in x]
    decisions = decisions[len(decisions) // 3 :]
    if len(rows) < 3 or not decisions:
        raise ValueError("too few batches or decisions to fit")
    r, d = np.array(rows), np.array(durations)
    fixed, per_row = np.polyfit(r, d, 1)[::-1]
    arrived = sum(int(x["arrived_tuples"]) for x in decisions)
    admitted = sum(int(x["admitted_tuples"]) for x in decisions)
    per_lane = arrived / len(decisions) / lanes
    model_fixed = statistics.median(float(x["overhead_s"]) for x in decisions)
    return {
        "batches": len(rows),
        "rows": (min(rows), max(rows)),
        "duration_s": (min(durations), max(durations)),
        "fixed_s": float(fixed),
        "per_row_us": float(per_row) * 1e6,
        "corr": float(np.corrcoef(r, d)[0, 1]) if r.std() > 0 and d.std() > 0 else float("nan"),
        "model_fixed_s": model_fixed,
        "model_per_tuple_us": statistics.median(float(x["per_tuple_s"]) for x in decisions) * 1e6,
        "model_left_s": budget_s - model_fixed,
        "kept": admitted / arrived if arrived else float("nan"),
        "lane_records_per_decision": per_lane,
        "read_through": read_through(per_lane, admitted / arrived if arrived else 1.0, runs),
    }


def read_through(per_lane: float, kept: float, runs: int | None) -> float:
    """Share of a lane's shed records its reader fetches all the same, for a lane of
    ``per_lane`` records a decision keeping ``kept`` of them (one hashed layout)."""
    n = int(round(per_lane))
    keep = int(round(n * kept))
    return shed_read(0, n, keep, 0, READ_GAP, runs) / (n - keep) if n > keep else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--node", required=True)
    ap.add_argument("--lanes", type=int, required=True, help="the node's log lanes")
    ap.add_argument("--budget", type=float, default=1.6, help="headroom x trigger (s)")
    ap.add_argument("--modes", default="calibration,coordinated,uncoordinated,random")
    ap.add_argument("--runs", type=int, default=None, help="kept runs a lane (default: log_runs)")
    args = ap.parse_args(argv)
    if args.lanes < 1 or not args.root.is_dir():
        print("node_batch_fit: need --lanes >= 1 and an existing ROOT folder", file=sys.stderr)
        return 2
    print(
        "| mode | batches | rows | duration (s) | fit: fixed (s) / per row (µs) / corr "
        "| model: fixed (s) / per tuple (µs) / left (s) | kept "
        "| records a lane a decision (shed read through) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        lines = history_of(args.root, mode, args.node)
        if lines is None:
            continue
        f = batch_fit(lines, args.lanes, args.budget, args.runs)
        print(f"| {mode} | {f['batches']} | {f['rows'][0]:,.0f}-{f['rows'][1]:,.0f} "
              f"| {f['duration_s'][0]:.2f}-{f['duration_s'][1]:.2f} "
              f"| {f['fixed_s']:.2f} / {f['per_row_us']:.2f} / {f['corr']:.2f} "
              f"| {f['model_fixed_s']:.2f} / {f['model_per_tuple_us']:.1f} / "
              f"{f['model_left_s']:.2f} | {f['kept']:.3f} "
              f"| {f['lane_records_per_decision']:,.0f} ({f['read_through']:.0%}) |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
