"""scripts/ui_overhead.py: the figures it compares and its table's arithmetic (no run)."""

from __future__ import annotations

import doctest
import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ui_overhead.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ui_overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_doctests(script: ModuleType) -> None:
    result = doctest.testmod(script)
    assert result.attempted >= 8 and result.failed == 0


def test_figures_leave_out_the_settling_start_and_unfinished_end(script: ModuleType) -> None:
    rows = [
        {
            "t_s": str(t),
            "span_s": "1.0",
            "arrived_tuples": str(a),
            "admitted_tuples": str(p),
            "processed_tuples": str(p),
            "batch_s": str(b),
        }
        for t, a, p, b in [(3, 500, 50, 2.0), (4, 160, 120, 0.6), (5, 40, 80, 0.4), (6, 9, 0, 0.0)]
    ]
    f = script.figures(rows, settle_s=1.0)
    assert f["processed_per_batch_s"] == pytest.approx(200.0)
    assert f["processed_per_wall_s"] == pytest.approx(100.0)
    assert f["shed_share"] == pytest.approx(0.0)  # 200 arrived, 200 admitted
    assert (f["measured_s"], f["batches"]) == (2.0, 2)
    assert math.isnan(script.figures([], settle_s=0.0)["processed_per_batch_s"])


def test_table_mean_and_spread_over_pairs(script: ModuleType) -> None:
    def pair(plain: float, watched: float) -> dict[str, object]:
        base = {"foreign_cores": 0.0, "batches": 50, "node_cores": 1.5, "watcher_cores": 0.2}
        base |= {"processed_per_wall_s": 10.0, "shed_share": 0.0}
        return {
            "first": "plain",
            "plain": {**base, "processed_per_batch_s": plain},
            "watched": {**base, "processed_per_batch_s": watched},
        }

    lines = script.pair_table([pair(200.0, 190.0), pair(100.0, 99.0), pair(50.0, 51.0)], cores=4)
    # differences -5 %, -1 %, +2 %: mean -1.33 %, sample standard deviation 3.51 %
    assert "mean difference -1.3 %, standard deviation 3.5 % over 3 pairs" in lines[-4]
    assert "mean difference +0.0 %, standard deviation 0.0 %" in lines[-3]
    assert lines[-1].endswith("0.20 cores (5.0 % of the machine's 4)")
