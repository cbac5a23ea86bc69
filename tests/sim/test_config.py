"""Simulation settings and node failures."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.sim.config import NodeFailure, SimConfig


def test_derived_counts() -> None:
    c = SimConfig(duration_s=10.0, interval_s=0.125, stw_s=5.0, sample_s=0.5, warmup_s=1.0)
    assert (c.n_steps, c.steps_per_window, c.steps_per_sample) == (80, 8, 4)
    assert c.delay_steps(0.125) == 1 and c.delay_steps(0.126) == 2 and c.delay_steps(0.0) == 0
    assert c.to_dict()["interval_s"] == 0.125


def test_failure_window() -> None:
    f = NodeFailure(node=1, at_s=5.0, until_s=8.0)
    assert [f.down(t) for t in (4.9, 5.0, 7.9, 8.0)] == [False, True, True, False]
    assert NodeFailure(node=0, at_s=1.0).down(1e9)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"duration_s": 0.0}, ConfigError, "duration_s must be a finite number > 0"),
        ({"data_delay_s": -1.0}, ConfigError, "data_delay_s must be a finite number >= 0"),
        ({"heartbeat_timeout_s": 0.0}, ConfigError, "heartbeat_timeout_s"),
        ({"projection_lag_s": -0.1}, ConfigError, "projection_lag_s"),
        ({"headroom": 1.5}, ConfigError, "headroom must be in"),
        ({"batch_size": 0}, ConfigError, "batch_size must be an int"),
        ({"window_s": 1.1}, ConfigError, "a window closes on a decision"),
        ({"duration_s": 10.1}, ConfigError, "the run is whole steps"),
        ({"sample_s": 0.3}, ConfigError, "SIC is sampled on a step"),
        ({"warmup_s": 400.0}, ConfigError, "warmup_s"),
        ({"profile": "wavy"}, UnknownNameError, "profile must be one of"),
        ({"profile_options": {"factor": 2}}, ConfigError, "profile_options"),
        ({"policy": "fifo"}, UnknownNameError, "policy must be one of"),
        ({"coordination": "gossip"}, UnknownNameError, "coordination must be one of"),
        ({"failures": (1,)}, ConfigError, "failures must be a tuple of NodeFailure"),
        ({"seed": -3}, ConfigError, "seed must be"),
    ],
)
def test_errors(kwargs: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        SimConfig(**kwargs)


def test_failure_errors() -> None:
    with pytest.raises(ConfigError, match="node must be an int"):
        NodeFailure(node=-1, at_s=0.0)
    with pytest.raises(ConfigError, match="at_s must be"):
        NodeFailure(node=0, at_s=float("nan"))
    with pytest.raises(ConfigError, match="until_s"):
        NodeFailure(node=0, at_s=2.0, until_s=1.0)
