"""Where stw-validation's 10 s value goes: one short STW run, its value and its result lag.

Runs ``stw-validation``'s node once (STW 10 s, 30 s, ``--trigger`` = window) and prints the
10 s value (THEMIS §4's rule, about ``1 - lag / STW``), the mean result lag ``A``, and what ``A``
is made of: how long after its window's end each window's result was produced (``produced -
end``, the batch's latency) and the time between result batches (``A`` is about the first plus
half the second).

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/stw_lag.py --trigger 0.5
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pandas as pd


def lag_parts(windows: pd.DataFrame, *, from_s: float) -> dict[str, float]:
    """What the result lag is made of, over the windows ending at or after ``from_s``: medians
    and means of ``produced - end`` (a window's result after its end) and of the time between
    result batches (distinct production times).

    >>> w = pd.DataFrame({"end": [1.0, 1.5, 2.0, 2.5], "produced": [1.4, 1.9, 2.4, 3.0]})
    >>> {k: round(v, 3) for k, v in lag_parts(w, from_s=1.5).items()}
    {'late_median_s': 0.4, 'late_mean_s': 0.433, 'gap_median_s': 0.55, 'gap_mean_s': 0.55}
    """
    w = windows[windows["end"] >= from_s]
    late = w["produced"] - w["end"]
    gaps = np.diff(np.unique(w["produced"].round(4)))
    nan = float("nan")
    return {
        "late_median_s": float(late.median()),
        "late_mean_s": float(late.mean()),
        "gap_median_s": float(np.median(gaps)) if gaps.size else nan,
        "gap_mean_s": float(gaps.mean()) if gaps.size else nan,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trigger", type=float, default=0.5, help="trigger = window (s)")
    ap.add_argument("--duration", type=float, default=30.0)
    args = ap.parse_args()

    from spillway.experiments.stw_validation import StwRun, StwValidationConfig, run_stws

    cfg = StwValidationConfig(
        runs=(StwRun(stw_s=10.0, duration_s=args.duration),), trigger_s=args.trigger
    )
    measured: dict[str, Any] = run_stws(cfg)
    s = measured["stw"][0]
    parts = lag_parts(measured["windows"], from_s=s["from_s"] - s["stw_s"])
    print(f"10 s value {s['sic_mean']:.4f}, mean result lag {s['lag_mean_s']:.3f} s")
    print(
        f"produced - window end: median {parts['late_median_s']:.3f} s, "
        f"mean {parts['late_mean_s']:.3f} s"
    )
    print(
        f"between result batches: median {parts['gap_median_s']:.3f} s, "
        f"mean {parts['gap_mean_s']:.3f} s"
    )


if __name__ == "__main__":
    main()
