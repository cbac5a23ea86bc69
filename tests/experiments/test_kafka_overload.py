"""kafka-overload: its analysis on realistic measured data, every check on an input that fails
it, and the per-window error against the exact answer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError, SpillwayError
from spillway.experiments._spark_runs import LevelRun
from spillway.experiments.kafka_overload import (
    EXPERIMENT,
    KafkaOverloadConfig,
    checks,
    make_config,
    shedding_capacity,
    window_errors,
)

CFG = make_config(quick=True)


def _windows(sic, slope=-1.0, seed=0):
    rng = np.random.default_rng(seed)
    return [{"window_start": i, "sic_window": s, "error": max(0.0, 0.5 + slope * (s - 0.5)
                                                               + rng.normal(0, 0.02)),
             "routes": 30, "missing": 2} for i, s in enumerate(sic)]  # fmt: skip


def _measured(**over):
    sic = np.linspace(0.2, 0.6, 20)
    m = {
        "capacity_probe_tuples_per_s": 27_000.0,
        "probe_producers": {"produced": 4.4e6, "achieved_rate": 110_000.0},
        "capacity_tuples_per_s": 18_000.0,
        "loaded_producers": {"produced": 3.1e6, "achieved_rate": 79_000.0},
        "asked_rate": 54_000.0,
        "producers": {"produced": 5.1e6, "achieved_rate": 51_000.0},
        "arrived_tuples_per_s": 50_400.0,
        "run_capacity_tuples_per_s": 17_000.0,
        "intervals": [{"t": 30.0, "span": 1, "batch_s": 1.6, "processed_tuples": 28_000}],
        "overload_measured": 2.8,
        "kept_fraction": 0.35,
        "latency_s": list(np.linspace(2.0, 6.5, 100)),
        "query_sic": {"fares": 0.35, "trips": 0.34},
        "windows": {"fares": _windows(sic), "trips": _windows(sic, seed=1)},
        "replay_identical": True,
        "replay_batch": 57,
        "replay_rows": 1_900,
        "replay_why": "batch 57 run again in a new process gave the same 1900 rows",
    }
    m.update(over)
    return m


def test_a_realistic_run_reports_the_names_the_issue_fixes(tmp_path):
    summary = EXPERIMENT.write(CFG, _measured(), tmp_path)
    assert {"jain", "latency_p95_s", "latency_bound_s", "queries", "replay_identical"} <= set(
        summary
    )
    assert summary["latency_bound_s"] == 8.0 and summary["jain"] > 0.99
    fares = summary["queries"]["fares"]
    assert fares["error_mean"] > 0 and fares["sic_mean"] == 0.35
    assert fares["spearman_sic_error"] < -0.9
    assert {c["verdict"] for c in summary["checks"]} == {"pass"}
    assert (tmp_path / "sic_error.png").exists() and (tmp_path / "windows_fares.csv").exists()
    assert (tmp_path / "intervals.csv").exists()
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["replay_batch"] == 57 and written["capacity_probe_tuples_per_s"] == 27_000


@pytest.mark.parametrize(
    ("change", "name", "verdict"),
    [
        ({"latency_s": [20.0] * 10}, "latency_within_bound", "fail"),
        ({"latency_s": []}, "latency_within_bound", "fail"),
        ({"overload_measured": 1.5}, "overload_reached_80pct", "fail"),
        ({"kept_fraction": 1.0}, "kept_near_capacity", "fail"),
        ({"kept_fraction": 0.007}, "kept_near_capacity", "fail"),
        ({"windows": {"fares": _windows(np.linspace(0.2, 0.6, 20), slope=1.0)}},
         "error_falls_with_sic", "fail"),
        ({"windows": {"fares": _windows([0.5, 0.51, 0.52, 0.5])}},
         "error_falls_with_sic", "not applicable"),
        ({"windows": {}}, "error_falls_with_sic", "not applicable"),
        ({"replay_identical": False, "replay_why": "the replayed batch differs"},
         "replay_identical", "fail"),
        ({"replay_identical": None}, "replay_identical", "not applicable"),
    ],
)  # fmt: skip
def test_every_check_fails_or_does_not_apply_on_its_own_input(change, name, verdict):
    got = {c.name: c for c in checks(CFG, _measured(**change))}
    assert got[name].verdict == verdict, got[name].why


def _stepped(slope, seed=0):
    """Windows of a stepped run: 1/level of each step kept (1.5x, 3.5x, 4x, 5 windows each)."""
    sic = np.repeat([1 / 1.5, 1 / 3.5, 1 / 4.0], 5) * 0.5
    rng = np.random.default_rng(seed)
    return _windows(sic + rng.normal(0, 0.01, sic.size), slope=slope, seed=seed)


@pytest.mark.parametrize(("slope", "verdict"), [(-1.0, "pass"), (1.0, "fail")])
def test_error_falls_with_sic_applies_to_a_stepped_run_and_fails_if_error_rises(slope, verdict):
    # At one constant rate the windows' SIC spanned 0.037 (not applicable); steps between
    # 1.5x and 4x spread it, and an error that rises with SIC then fails the check.
    windows = {"fares": _stepped(slope), "trips": _stepped(-1.0, seed=1)}
    got = {c.name: c for c in checks(CFG, _measured(windows=windows))}
    assert got["error_falls_with_sic"].verdict == verdict, got["error_falls_with_sic"].why


def test_the_report_states_the_rate_pattern_and_the_overloads_the_decisions_saw(tmp_path):
    levels = [1.5, 3.5, 4.0, 1.5, 3.5, 4.0]
    intervals = [{"t": 20.0 + 4 * i, "arrived_tuples": int(4 * 18_000 * v), "measured": True,
                  "span": 1, "batch_s": 1.6, "processed_tuples": 28_000}
                 for i, v in enumerate([3.0, *levels])]  # fmt: skip
    summary = EXPERIMENT.write(CFG, _measured(intervals=intervals), tmp_path)
    assert summary["rate_pattern"]["overloads"] == [1.5, 3.5, 4.0]
    assert summary["rate_pattern"]["mean_overload"] == 3.0
    assert summary["decision_overload_min"] == pytest.approx(1.5)
    assert summary["decision_overload_max"] == pytest.approx(4.0)
    fares = summary["queries"]["fares"]
    assert fares["window_sic_min"] == pytest.approx(0.2) and fares["window_sic_max"] == 0.6
    report = (tmp_path / "report.md").read_text()
    assert "1.5x, 3.5x, 4x in turn, 10 s each, repeated (mean 3x)" in report
    assert "1.5x-4x (median 3.5x)" in report


def test_the_steps_are_kept_as_a_tuple_from_a_json_list_and_average_to_the_level():
    cfg = KafkaOverloadConfig(**json.loads(json.dumps({"steps": [2.0, 4.0], "step_s": 5})))
    assert cfg.steps == (2.0, 4.0)


def test_the_window_error_counts_a_missing_route_as_1_and_compares_sic_mass():
    t = pd.to_datetime([100, 100, 100, 102], unit="s", utc=True)
    exact = pd.DataFrame({"window_start": t, "key": [1, 2, 3, 1],
                          "mean_fare": [10.0, 20.0, 40.0, 8.0], "sic": [0.1] * 4})  # fmt: skip
    shed = pd.DataFrame({"window_start": t[:2], "key": [1, 2], "mean_fare": [12.0, 20.0],
                         "sic": [0.05, 0.05]})  # fmt: skip
    w = window_errors(shed, exact, "mean_fare")
    assert w["error"].tolist() == pytest.approx([(0.2 + 0 + 1) / 3, 1.0])
    assert w["sic_window"].tolist() == pytest.approx([0.1 / 0.3, 0.0])
    assert w["missing"].tolist() == [1, 1]
    assert window_errors(shed, exact.iloc[:0], "mean_fare").empty


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"level": 1.0}, "level must be an overload > 1"),
     ({"warmup_s": 200.0, "duration_s": 100.0}, "must be below duration_s"),
     ({"trigger_s": 0}, "trigger_s"),
     ({"steps": (1.5, 4.0)}, r"steps \[1.5, 4.0\] have mean 2.75, not the level 3"),
     ({"steps": (3.0, -1.0, 7.0)}, r"steps\[1\] must be a finite number > 0"),
     ({"step_s": 0}, "step_s"),
     ({"node_cpu": 0}, "node_cpu must be a number of cores > 0")],
)  # fmt: skip
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        KafkaOverloadConfig(**kw)


def test_the_shedding_capacity_counts_only_the_batches_decided_once_settled():
    """The capacity is rows over batch time of the batches decided after the settle time: the
    first batches of a load (sized by a cost model that has not met it yet) are left out, and a
    run with none after it is an error, not a capacity."""

    def run(batches):
        return LevelRun(results=pd.DataFrame(), exact=None, ticks=pd.DataFrame(), history=[],
                        until_s=0.0, epoch_s=0.0, ready_s=0.0, wall_s=0.0,
                        batches={"user": batches})  # fmt: skip

    early = [{"rows": 400_000, "duration_s": 4.0, "boundary": b} for b in (5, 6)]
    late = [{"rows": 50_000, "duration_s": 1.6, "boundary": b} for b in range(11, 21)]
    got = shedding_capacity(run(early + late), settled_s=20.0, trigger_s=2.0)
    assert got["capacity_tuples_per_s"] == pytest.approx(50_000 / 1.6)
    assert got["capacity_batches"] == 10 and got["capacity_batch_s"] == pytest.approx(1.6)
    with pytest.raises(SpillwayError, match="shedding capacity run processed no measured batch"):
        shedding_capacity(run(early), settled_s=20.0, trigger_s=2.0)
