"""What a coordinator with a fixed lag would have shown over a ``spillway federation up`` run.

Usage (after a run; reads only its files)::

    .venv/bin/python scripts/fixed_lag_check.py DIR [--lag 20]

Before the nodes reported their progress, the coordinator summed each query's STW ending
``lag`` seconds ago in source time, counting the results that had reached it by then. From
the roots' stored results (:func:`spillway.federation.up.root_results`: each row's window
start, SIC and time produced) this replays that rule every second from the first result to
the last and prints, per query, as JSON lines: the instants, the mean value shown, the mean
of what those STWs hold once every result is in, the mean and least difference and the share
of instants that fell short. The run's own coordinator values are checked in its
``summary.json`` (``max_gap_from_results``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from spillway.federation import load_federation
from spillway.federation.up import root_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the run's --out directory")
    ap.add_argument("--lag", type=float, default=20.0, help="the fixed lag (s)")
    args = ap.parse_args()
    summary = json.loads((args.out / "summary.json").read_text())
    fed = load_federation(summary["federation"])
    for q in fed.queries:
        rows = root_results(fed, args.out, q.name)
        if rows is None:
            continue
        start, sic, produced = rows
        at = np.arange(start.min() + args.lag + fed.stw_s, produced.max(), 1.0)
        lo, hi = at - args.lag - fed.stw_s, at - args.lag
        inside = (start[None, :] >= lo[:, None]) & (start[None, :] < hi[:, None])
        shown = (inside & (produced[None, :] <= at[:, None])) @ sic
        held = inside @ sic
        gap = shown - held
        print(json.dumps({
            "query": q.name, "lag_s": args.lag, "instants": int(at.size),
            "shown_mean": round(float(shown.mean()), 3), "held_mean": round(float(held.mean()), 3),
            "gap_mean": round(float(gap.mean()), 3), "gap_min": round(float(gap.min()), 3),
            "short_share": round(float((gap < -1e-9).mean()), 3),
        }))  # fmt: skip


if __name__ == "__main__":
    main()
