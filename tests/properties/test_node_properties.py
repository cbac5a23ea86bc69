"""The property suite: seeded configs, each a short Spark run, and the promises every run keeps.

- query SIC (THEMIS Eq. 4 as measured, :mod:`spillway.quality.stw_account`) never above 1.02;
- a query that lost nothing over an STW reads within 0.02 of 1 there, once its STW has filled;
- every query has results;
- each query's kept fraction is its own rows kept over its rows decided, and its results were
  computed from no more rows than it kept.

``make test`` runs the first :data:`DEFAULT_CONFIGS` configs; ``make properties`` runs
``SPILLWAY_PROPERTY_CONFIGS`` (32) of them and writes one summary line per config to
``runs/properties/summary.jsonl``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from spillway.run_report import summarise_run
from tests.properties.configs import DURATION_S, property_config

DEFAULT_CONFIGS = 6
N_CONFIGS = int(os.environ.get("SPILLWAY_PROPERTY_CONFIGS", DEFAULT_CONFIGS))
SIC_MAX = 1.02
UNSHED_TOLERANCE = 0.02


def unshed_windows(history, name: str, stw_s: float, lag_s: float) -> list[int]:
    """Indices of the intervals at which ``name`` had kept every tuple decided over the STW
    (and ``lag_s`` before it, the measured window trailing the decisions)."""
    out = []
    for i, r in enumerate(history):
        span = [h for h in history[: i + 1] if h.t > r.t - stw_s - lag_s]
        if all(h.query_admitted.get(name, 0) == h.query_arrived.get(name, 0) for h in span):
            out.append(i)
    return out


def check_run(config, history, summary) -> list[str]:
    """Every broken promise of one run, as text (empty: all kept)."""
    broken = []
    t0 = history[0].t if history else 0.0
    lag = 3 * config.trigger_s + max(q.window_s for q in config.queries)
    for q in summary["queries"]:
        name = q["name"]
        sic = np.array([r.query_sic.get(name, math.nan) for r in history])
        finite = sic[np.isfinite(sic)]
        if finite.size and finite.max() > SIC_MAX:
            broken.append(f"{name}: SIC {finite.max():.4f} > {SIC_MAX}")
        for i in unshed_windows(history, name, config.stw_s, lag):
            r = history[i]
            filled = r.t - t0 >= config.stw_s + lag and np.isfinite(sic[i])
            if filled and abs(sic[i] - 1) > UNSHED_TOLERANCE:
                broken.append(
                    f"{name}: unshed at t={r.t:.1f} but SIC {sic[i]:.4f} "
                    f"(intervals {[(h.t, h.query_arrived.get(name), h.processed_tuples) for h in history]})"
                )
                break
        if q["windows"] == 0:
            broken.append(f"{name}: no result")
        if q["rows_in"] and not math.isclose(
            q["kept_fraction"], q["rows_kept"] / q["rows_in"], rel_tol=1e-9
        ):
            broken.append(f"{name}: kept_fraction {q['kept_fraction']} != rows kept / rows in")
    return broken


@pytest.mark.spark
@pytest.mark.parametrize("index", range(N_CONFIGS))
def test_every_run_keeps_its_promises(spark, tmp_path, index):
    from spillway.spark.node import Node

    config = property_config(index)
    node = Node(config, spark=spark)
    node.run(DURATION_S)
    history, snapshot, results = node.history(), node.snapshot(), node.results()
    summary = summarise_run(
        config=config,
        history=history,
        snapshot=snapshot,
        results=results,
        duration_s=DURATION_S,
        calibration=node.calibration,
    )
    for name in results["query"].unique():
        # a window's input rows, once per window (TOP-5 and grouped rows repeat them)
        windows = results[results["query"] == name].drop_duplicates("window_start")
        assert windows["n_in"].sum() <= sum(r.query_admitted.get(name, 0) for r in history)
    broken = check_run(config, history, summary)
    out = Path(os.environ.get("SPILLWAY_PROPERTY_OUT", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    with (out / "summary.jsonl").open("a") as f:
        f.write(
            json.dumps(
                {
                    "index": index,
                    "policy": config.policy,
                    "overload_requested": config.overload,
                    "overload_measured": summary["overload_measured"],
                    "queries": [(q.kind, q.window_s, q.profile) for q in config.queries],
                    "sic_max": max(
                        (v for r in history for v in r.query_sic.values() if math.isfinite(v)),
                        default=None,
                    ),
                    "windows": [q["windows"] for q in summary["queries"]],
                    "broken": broken,
                }
            )
            + "\n"
        )
    assert not broken, broken
