"""scripts/stw_lag.py: what a run's result lag is made of (no Spark run)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.scripts._load import load_script


def test_late_results_and_slow_batches_show_in_the_parts() -> None:
    script = load_script("stw_lag")
    ends = [0.5 * i for i in range(1, 9)]
    on_time = pd.DataFrame({"end": ends, "produced": [e + 0.3 for e in ends]})
    got = script.lag_parts(on_time, from_s=1.0)
    assert got["late_median_s"] == pytest.approx(0.3) and got["gap_median_s"] == pytest.approx(0.5)
    # a node falling behind: each batch 0.6 s after the last, the lag growing
    behind = pd.DataFrame({"end": ends, "produced": [0.8 + 0.6 * i for i in range(8)]})
    late = script.lag_parts(behind, from_s=1.0)
    assert late["gap_mean_s"] == pytest.approx(0.6) and late["late_mean_s"] > got["late_mean_s"]
    empty = script.lag_parts(on_time, from_s=100.0)
    assert math.isnan(empty["late_median_s"]) and math.isnan(empty["gap_mean_s"])
