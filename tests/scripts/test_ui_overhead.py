"""scripts/ui_overhead.py: the figures it compares and its table's arithmetic (no run)."""

from __future__ import annotations

import doctest
import math
from types import ModuleType

import pytest

from tests.scripts._load import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("ui_overhead")


def test_doctests(script: ModuleType) -> None:
    result = doctest.testmod(script)
    assert result.attempted >= 8 and result.failed == 0


def test_same_work_compares_only_intervals_both_runs_admitted_whole(
    script: ModuleType,
) -> None:
    def row(t: float, arrived: int, kept: int, batch_s: float) -> dict[str, str]:
        return {
            "t_s": str(t),
            "span_s": "2.0",
            "arrived_tuples": str(arrived),
            "admitted_tuples": str(kept),
            "processed_tuples": str(kept),
            "batch_s": str(batch_s),
        }

    plain = script.finished(
        [row(2, 900, 600, 5.0), row(4, 600, 600, 1.0), row(6, 600, 600, 1.0), row(8, 600, 0, 0)]
    )
    watched = script.finished(
        [row(2, 900, 600, 6.0), row(4, 600, 500, 0.9), row(6, 600, 600, 1.2), row(8, 600, 600, 1)]
    )
    assert len(plain) == 3  # the unfinished last interval is dropped
    c = script.same_work(plain, watched, settle_s=2.0)
    # t=4: the watched run shed; t=8: the plain run never finished it; only t=6 is the same work
    assert c["batches"] == 1
    assert (c["plain"], c["watched"]) == pytest.approx((600.0, 500.0))
    assert c["difference"] == pytest.approx(-1 / 6)
    assert script.shed_share(watched, settle_s=2.0) == pytest.approx(100 / 1800)
    assert math.isnan(script.shed_share([], settle_s=0.0))


def _pair(plain: float, watched: float, serving_s: float = 1.0) -> dict[str, object]:
    run = {"foreign_cores": 0.0, "shed_share": 0.0, "node_cores": 1.5, "watcher_cores": 0.2}
    run |= {"wall_s": 100.0, "serving_cpu_s": serving_s}
    same = {"batches": 30, "plain": plain, "watched": watched, "plain_batch_s": 1.0}
    same |= {"watched_batch_s": plain / watched, "difference": (watched - plain) / plain}
    return {"first": "plain", "plain": run, "watched": run, "same_work": same}


def test_table_mean_and_spread_over_pairs(script: ModuleType) -> None:
    lines = script.pair_table([_pair(200.0, 190.0), _pair(100.0, 99.0), _pair(50.0, 51.0)], cores=4)
    # differences -5 %, -1 %, +2 %: mean -1.33 %, sample standard deviation 3.51 %
    assert "mean difference -1.3 %, standard deviation 3.5 % over 3 pairs" in lines[-4]
    assert lines[-2].endswith("0.20 cores (5.0 % of the machine's 4)")
    # 1 s of the servers' CPU in 100 s: 0.01 cores
    assert lines[-1].endswith("0.01 cores (0.2 % of the machine's 4)")


def test_verdict_fails_when_watching_costs_the_goal_or_more(script: ModuleType) -> None:
    cpu = [0.01, 0.01, 0.01]  # the CPU watching took: reported, never the verdict
    # watched runs 4 %, 5 % and 6 % slower: mean cost exactly 5 %, not below it
    line = script.verdict(cpu, [-0.04, -0.05, -0.06], goal=0.05)
    assert line.endswith("goal (below 5 %): NOT met")
    assert "mean 5.0 %" in line and "2 of 3 pairs at 5 % or more" in line
    assert "CPU it took 1.0 % of the machine" in line
    ok = script.verdict(cpu, [-0.04, -0.05, -0.0599], goal=0.08)
    assert ok.endswith("(below 8 %): met")
    # mean cost -1 %, but pairs from -12 to +12 %: the spread hides a 5 % cost
    assert "not shown" in script.verdict(cpu, [-0.03, 0.12, -0.12], goal=0.05)
    # a small CPU share does not make a slow node pass (measured: 1.9 % CPU, 5.0 % slower)
    line = script.verdict([0.019] * 4, [-0.039, -0.04, -0.105, -0.017], goal=0.05)
    assert line.endswith("NOT met")
    # a watched run faster than its plain pair is a negative cost
    assert "pairs from -3.0 to -1.0 %" in script.verdict(cpu[:2], [0.01, 0.03], goal=0.05)
    assert "not measured" in script.verdict([], [], goal=0.05)


def test_direct_cost_needs_the_servers_cpu(script: ModuleType) -> None:
    watched = {"watcher_cores": 0.04, "serving_cpu_s": 6.0, "wall_s": 120.0}
    assert script.direct_cost(watched, cores=2) == pytest.approx((0.04 + 0.05) / 2)
    # a run whose summary lacks the servers' CPU has no direct cost: NaN, never 0
    assert math.isnan(script.direct_cost({"watcher_cores": 0.04, "wall_s": 1.0}, cores=2))


def test_table_reports_the_verdict_of_its_pairs(script: ModuleType) -> None:
    slow = [_pair(100.0, 90.0), _pair(100.0, 93.0), _pair(100.0, 95.0)]
    assert script.pair_table(slow, cores=2)[-5].endswith("goal (below 5 %): NOT met")
    assert script.pair_table(slow, cores=2, goal=0.20)[-5].endswith("goal (below 20 %): met")
