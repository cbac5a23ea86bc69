"""The decision-time benchmark (spillway.bench.decision): result shape, not timing."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.bench.decision import STW_INTERVALS, measure_decision_ms, overloaded_backlog
from spillway.errors import ConfigError, UnknownNameError
from spillway.policies.base import Admission


def test_measure_decision_ms_reports_every_policy_and_size():
    out = measure_decision_ms(sizes=((4, 3), (2, 5)), repeats=3, seed=1)
    assert out["unit"] == "ms" and out["repeats"] == 3 and out["seed"] == 1
    assert out["policies"] == ["random", "balance-sic"]
    assert [(r["queries"], r["sources"], r["lanes"]) for r in out["results"]] == [
        (4, 3, 12),
        (2, 5, 10),
    ]
    for row in out["results"]:
        assert set(row["median_ms"]) == set(row["min_ms"]) == {"random", "balance-sic"}
        assert all(row["min_ms"][p] <= row["median_ms"][p] for p in row["min_ms"])
        assert all(ms > 0 for ms in row["median_ms"].values())
        ms = row["median_ms"]
        assert row["fair_over_random"] == pytest.approx(ms["balance-sic"] / ms["random"])
        assert row["capacity"] == pytest.approx(row["tuples"] / 3)


def test_overloaded_backlog_is_realistic():
    b, cap = overloaded_backlog(50, 4, seed=3)
    assert b.n_lanes == 200 and cap == pytest.approx(b.total_count / 3)
    assert (b.count >= 1).all() and len(set(b.count.tolist())) > 50  # varied source rates
    # One interval of a 10-interval source time window holds a tenth of each query's SIC.
    waiting = Admission(keep=b.count).query_gain(b)
    assert waiting == pytest.approx(np.full(50, 1 / STW_INTERVALS))
    assert b.query_sic.std() > 0.05  # different SIC secured per query


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"repeats": 0}, ConfigError, "repeats must be an int >= 1, got 0"),
        ({"policies": ()}, ConfigError, "policies must name at least one policy"),
        ({"policies": ("fifo",)}, UnknownNameError, "unknown policy 'fifo'"),
        ({"sizes": ((0, 3),)}, ConfigError, "n_queries must be an int >= 1, got 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        measure_decision_ms(**{"sizes": ((2, 2),), "repeats": 1, **kwargs})


def test_bad_load_is_refused():
    with pytest.raises(ConfigError, match="load must be a finite number > 0, got 0"):
        overloaded_backlog(2, 2, load=0)
