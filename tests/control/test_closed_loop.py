from __future__ import annotations

import math

import pytest

from spillway.control.aurora import AuroraConfig
from spillway.control.closed_loop import run_classes
from spillway.errors import ConfigError
from tests.control.plants import constant_node


def test_trace_and_summary_agree():
    run = run_classes(constant_node(1.5), [AuroraConfig(capacity=1.0)], duration_s=30.0)
    tr, c = run.traces[0], run.classes[0]
    assert len(tr.time_s) == 60 and tr.time_s[-1] == pytest.approx(30.0)
    assert sum(tr.results) == pytest.approx(c.results)
    assert tr.window_violation_s(0.0) == pytest.approx(c.delay_violation_mean_s)
    assert c.loss == pytest.approx(1 / 3, abs=0.01)
    assert all(math.isnan(r) or r >= 0 for r in tr.response_s)
    assert set(tr.share) == {1.0}


def test_errors():
    cfg = AuroraConfig()
    with pytest.raises(ConfigError, match=r"managers needs one config per class \(1\), got 2"):
        run_classes(constant_node(1.0), [cfg, cfg], duration_s=1.0)
    with pytest.raises(ConfigError, match="duration_s must be a finite number > 0, got 0"):
        run_classes(constant_node(1.0), [cfg], duration_s=0)
    with pytest.raises(ConfigError, match=r"priorities needs one priority per class \(1\), got 2"):
        run_classes(constant_node(1.0), [cfg], duration_s=1.0, priorities=(1, 2))
