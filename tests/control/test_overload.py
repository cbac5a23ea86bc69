from __future__ import annotations

import math

import pytest

from spillway.control.overload import OverloadConfig, detect
from spillway.errors import ConfigError


def test_themis_rule_without_hysteresis():
    cfg = OverloadConfig()
    d = detect(cfg, backlog_cost=1.0, budget=1.0)
    assert (d.overloaded, d.admit, d.shed, d.load) == (False, 1.0, 0.0, 1.0)
    d = detect(cfg, backlog_cost=3.0, budget=1.0)
    assert (d.overloaded, d.admit, d.shed, d.load) == (True, 1.0, 2.0, 3.0)


def test_hysteresis_enters_late_and_leaves_at_the_budget():
    cfg = OverloadConfig(hysteresis=0.2)
    costs = [0.5, 1.1, 1.19, 1.3, 1.1, 1.01, 1.0, 1.1]
    expect = [False, False, False, True, True, True, False, False]
    prev = None
    seen = []
    for c in costs:
        prev = detect(cfg, backlog_cost=c, budget=1.0, previous=prev)
        seen.append(prev.overloaded)
        assert prev.admit + prev.shed == pytest.approx(c)
        assert prev.admit <= (1.0 if prev.overloaded else c)
    assert seen == expect


def test_zero_budget():
    d = detect(OverloadConfig(), backlog_cost=0.0, budget=0.0)
    assert (d.overloaded, d.load) == (False, 0.0)
    d = detect(OverloadConfig(), backlog_cost=5.0, budget=0.0)
    assert (d.overloaded, d.admit, d.shed, d.load) == (True, 0.0, 5.0, math.inf)


@pytest.mark.parametrize("h", [-0.1, 1.0, "0.1", True])
def test_config_errors(h):
    with pytest.raises(ConfigError, match=r"hysteresis must be a number in \[0, 1\)"):
        OverloadConfig(hysteresis=h)


@pytest.mark.parametrize(
    ("cost", "budget", "match"),
    [
        (-1.0, 1.0, r"backlog_cost must be a finite number >= 0, got -1.0"),
        (1.0, math.nan, r"budget must be a finite number >= 0, got nan"),
        (1.0, math.inf, r"budget must be a finite number >= 0, got inf"),
    ],
)
def test_input_errors(cost, budget, match):
    with pytest.raises(ConfigError, match=match):
        detect(OverloadConfig(), backlog_cost=cost, budget=budget)
