"""THEMIS §7.6: decision time of the fair and the random shedder on the same backlogs."""

from __future__ import annotations

from pathlib import Path

import pytest

from spillway.errors import ConfigError
from spillway.experiments import overhead as oh


def test_check_fails_when_the_fair_shedder_is_much_slower() -> None:
    assert oh.checks({"fair_over_random": 1.8})[0].verdict == "fail"
    assert oh.checks({"fair_over_random": 1.1})[0].verdict == "pass"
    assert oh.checks({"fair_over_random": float("nan")})[0].verdict == "fail"


def test_record_keeps_overloaded_decisions_after_the_warm_up() -> None:
    cfg = oh.OverheadConfig(
        n_nodes=6, n_fragments=400, trace_s=25.0, warmup_s=20.0, sample_every=2, repeats=1
    )
    trace = oh.record(cfg)
    assert trace and all(cap < b.total_count for b, cap in trace)
    assert len(trace) <= 6 * 5 * 4 // 2 + 6


def test_quick_run_times_both_policies(tmp_path: Path) -> None:
    s = oh.run(oh.make_config(quick=True), tmp_path)
    assert s["decisions_timed"] > 0 and s["fair_ms_mean"] > 0 and s["random_ms_mean"] > 0
    assert s["checks"][0]["name"] == "fair_over_random_le_1.5"


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="repeats must be an int"):
        oh.OverheadConfig(repeats=0)
    with pytest.raises(ConfigError, match="warmup_s"):
        oh.OverheadConfig(trace_s=10.0)
