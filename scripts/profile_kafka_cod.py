"""What a per-group (CoD) decision over Kafka planned, and what its micro-batch then took.

Usage (under the shared lock, with nothing else heavy running)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/profile_kafka_cod.py OUT \
        [--policy cod] [--level 3] [--duration 40]

Runs the ``overload`` experiment's Kafka node at one level (its capacity measured first, as
the experiment does) and writes the experiment's report to ``OUT``. Meanwhile it records, in
the driver:

- per decision: its time on the driver (``decide_s``, of it ``group_count_s`` counting the
  groups: for a log, fetching and parsing the driver's sample), the capacity in tuples the controller admitted to, the tuples the bounded
  group read covers (``read``), the tuples arrived and kept, and the seconds the cost model
  predicts for such a batch (``overhead + per_tuple · kept + per_arrived · read``);
- per measured batch: its rows, the tuples it read (the cost model's per-arrived count), the
  decided ranges of each log lane read in part (each is read as ``LOG_RUNS`` runs, a seek
  each), what the cost model predicted for it just before, and what it took.

Then prints, as JSON lines, those rows and their medians after warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from spillway.experiments import overload as ov
from spillway.spark import controller as ctl
from spillway.spark.source import LOG_RUNS, PlanOffset

DECISIONS: list[dict[str, Any]] = []
BATCHES: list[dict[str, Any]] = []


def _instrument() -> None:
    cls = ctl.NodeController
    capacity, ask, observe = cls._capacity, cls._ask_policy, cls.observe_batch
    decide, units = cls._decide, cls._units

    def _timed(fn: Any, name: str, fresh: int) -> Any:
        def run(self: Any, *a: Any, **kw: Any) -> Any:
            n, t0 = len(DECISIONS), time.perf_counter()
            out = fn(self, *a, **kw)
            if DECISIONS and len(DECISIONS) >= n + fresh:  # the decision this call made
                DECISIONS[-1][name] = round(time.perf_counter() - t0, 3)
            return out

        return run

    def _capacity(self: Any, count: Any) -> Any:
        out = capacity(self, count)
        DECISIONS.append({"arrived": int(count.sum()), "cap_tuples": round(out[2])})
        return out

    def _ask_policy(self: Any, k: int, backlog: Any, lo: Any, hi: Any, cap: float, **kw: Any):
        keep, units = ask(self, k, backlog, lo, hi, cap, **kw)
        read = kw.get("read")
        est = next(iter(self.cost_estimates().values()))
        n_read = int(read.sum()) if read is not None else int((hi - lo).sum())
        kept = int(keep.sum())
        DECISIONS[-1].update(
            read=n_read,
            kept=kept,
            predicted_s=round(
                est.overhead_s + est.per_tuple_s * kept + est.per_arrived_s * n_read, 3
            ),
        )
        return keep, units

    def observe_batch(self: Any, plan: str, **kw: Any) -> None:
        est = self.cost_estimates()[plan]
        st = self._plan(plan)
        covered = ctl._covered(
            kw.get("start_offset"), kw.get("end_offset"), self._lane_log[st.lanes].tolist()
        )
        ranges = 0
        if kw.get("end_offset") is not None:
            ranges = sum(len(r) for r in PlanOffset.from_json(kw["end_offset"]).read.values())
        rows = int(kw["rows"])
        BATCHES.append({
            "rows": rows, "read": covered, "ranges": ranges, "seeks": ranges * LOG_RUNS,
            "predicted_s": round(est.duration_s(rows, covered), 3),
            "took_s": round(float(kw["duration_s"]), 3),
            "overhead_s": round(est.overhead_s, 3), "per_tuple_us": round(est.per_tuple_s * 1e6, 2),
            "per_arrived_us": round(est.per_arrived_s * 1e6, 3),
        })  # fmt: skip
        observe(self, plan, **kw)

    cls._capacity, cls._ask_policy, cls.observe_batch = _capacity, _ask_policy, observe_batch  # type: ignore[method-assign]
    cls._decide, cls._units = _timed(decide, "decide_s", 1), _timed(units, "group_count_s", 0)  # type: ignore[method-assign]


def _medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for r in rows for k, v in r.items() if isinstance(v, int | float)})
    return {k: statistics.median(float(r[k]) for r in rows if r.get(k) is not None) for k in keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--policy", default="cod")
    ap.add_argument("--level", type=float, default=3.0)
    ap.add_argument("--duration", type=float, default=40.0)
    args = ap.parse_args()
    _instrument()
    cfg = ov.OverloadConfig(sources=("kafka",), policies=(args.policy,), levels=(args.level,),
                            trigger_s=2.0, duration_s=args.duration, warmup_s=8.0,
                            plain_spark=False)  # fmt: skip
    ov.run(cfg, args.out)  # the capacity runs first (keep-all), then the measured run
    for d in DECISIONS:
        print(json.dumps({"figure": "decision", **d}))
    for b in BATCHES:
        print(json.dumps({"figure": "batch", **b}))
    shed = [b for b in BATCHES if b["ranges"] > 0]
    print(json.dumps({"figure": "read-in-part batches", "n": len(shed), **_medians(shed[3:])}))
    planned = [d for d in DECISIONS if "read" in d]
    print(json.dumps({"figure": "shedding decisions", "n": len(planned), **_medians(planned[3:])}))


if __name__ == "__main__":
    main()
