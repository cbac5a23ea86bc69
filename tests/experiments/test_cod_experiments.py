"""The experiments registry and smoke runs of cod-drift and cod-accuracy with tiny configs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments import EXPERIMENTS, get_experiment
from spillway.experiments.cod_accuracy import CodAccuracyConfig, evaluate_window
from spillway.experiments.cod_drift import CodDriftConfig

CASE_KEYS = {
    "workload",
    "b",
    "error_uniform",
    "error_cod",
    "missing_groups_uniform",
    "missing_groups_cod",
    "kept_fraction_uniform",
    "kept_fraction_cod",
}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_experiment_keeps_the_contract(name):
    mod = get_experiment(name)
    assert mod.__doc__ and mod.__doc__.strip().splitlines()[0]  # the CLI lists this line
    for quick in (True, False):
        cfg = mod.make_config(quick=quick, seed=1)
        assert dataclasses.is_dataclass(cfg)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.seeds = ()  # type: ignore[misc]
    assert callable(mod.run)


def test_unknown_experiment():
    with pytest.raises(UnknownNameError, match="experiment must be one of cod-accuracy, cod-drift"):
        get_experiment("cod-throughput")


def files_of(path):
    return {p.name for p in path.iterdir()}


def _verdicts(summary):
    return {c["name"]: c["verdict"] for c in summary["checks"]}


def test_cod_drift_smoke(tmp_path):
    cfg = CodDriftConfig(windows=8, sweep=(0.0, 0.5), sweep_windows=4, rate=3000.0)
    summary = get_experiment("cod-drift").run(cfg, tmp_path)
    for key in ("distance_mean", "distance_max", "overlap_mean", "drift", "checks", "sweep"):
        assert key in summary
    assert summary["measured_on"] == "taxi stand-in (drift 0.3)"
    assert summary["distance_mean"] + summary["overlap_mean"] == pytest.approx(1.0)
    assert 0.0 <= summary["distance_max"] <= 0.5
    assert [r["drift"] for r in summary["sweep"]] == [0.0, 0.3, 0.5]
    assert summary["sweep"][0]["distance_mean"] == 0.0
    out = files_of(tmp_path)
    assert {"summary.json", "drift.csv", "sweep.csv", "report.md"} <= out
    assert {"drift_per_window.png", "drift_sweep.png"} <= out
    report = (tmp_path / "report.md").read_text()
    assert "](drift_per_window.png)" in report and "CoD Fig. 2 (DEBS 2015" in report
    assert "not measured (no ride file replayed)" in report  # the paper's 30 % is not claimed
    assert json.loads((tmp_path / "summary.json").read_text())["drift"] == 0.3
    assert _verdicts(summary) == {
        "feed_distance_mean_within_0.05_of_configured": "pass",
        "feed_sweep_within_0.05_of_configured": "pass",
        "distance_mean_near_paper_0.3": "not applicable",
    }


def test_cod_drift_feed_checks_fail_on_a_feed_too_thin_for_its_drift(tmp_path):
    # 60 rides/s: under half a ride per premium route per slide, so ride-count noise reorders
    # the top-10 and the feed drifts more than it was configured to (0.22 at drift 0 and 0.1).
    thin = CodDriftConfig(drift=0.0, rate=60.0, windows=20, sweep=(0.0, 0.1), sweep_windows=10)
    summary = get_experiment("cod-drift").run(thin, tmp_path)
    assert summary["rides_per_premium_route_per_slide"] < 1
    verdicts = _verdicts(summary)
    assert verdicts["feed_distance_mean_within_0.05_of_configured"] == "fail"
    assert verdicts["feed_sweep_within_0.05_of_configured"] == "fail"


def _ride_file(path, drift):
    """Two and a half minutes of the stand-in's rides written as a ride file (time, route,
    fare)."""
    import numpy as np
    import pandas as pd

    from spillway.experiments.cod_drift import taxi_feed

    feed = taxi_feed(CodDriftConfig(rate=2000.0), drift)
    idx = np.arange(int(feed.count(150.0)[0]))
    p = feed.payload(0, idx)
    pd.DataFrame({"time": 1.7e9 + feed.arrival_time(0, idx), "route": p["key"],
                  "fare": p["value"]}).to_parquet(path, index=False)  # fmt: skip
    return str(path)


def test_cod_drift_measures_a_replayed_ride_file_against_the_paper(tmp_path):
    ride_file = _ride_file(tmp_path / "near.parquet", 0.3)
    near = CodDriftConfig(data=ride_file, windows=40, sweep=(), rate=2000.0)
    s = get_experiment("cod-drift").run(near, tmp_path / "a")
    assert s["measured_on"] == "near.parquet" and s["pairs"] >= 25
    assert _verdicts(s)["distance_mean_near_paper_0.3"] == "pass"
    # Rides whose top-10 changes by only 10 % per window: the paper's 30 % is not there.
    ride_file = _ride_file(tmp_path / "calm.parquet", 0.1)
    calm = CodDriftConfig(data=ride_file, windows=40, sweep=(), rate=2000.0)
    s = get_experiment("cod-drift").run(calm, tmp_path / "b")
    assert s["distance_mean"] == pytest.approx(0.1, abs=0.05)
    assert _verdicts(s)["distance_mean_near_paper_0.3"] == "fail"


def test_cod_drift_refuses_a_ride_file_shorter_than_two_windows(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("time,route,fare\n0,1,5.0\n3,2,6.0\n")
    with pytest.raises(ConfigError, match="spans 3 s: it must hold at least two windows"):
        get_experiment("cod-drift").run(CodDriftConfig(data=str(path), sweep=()), tmp_path)


def _accuracy(**kw):
    base = {"seeds": (0,), "windows": 3, "b_values": (0.98, 0.5), "scalar_b_values": (0.99,),
            "taxi_window_tuples": 6000, "tasks_window_tuples": 8000,
            "packets_window_tuples": 3000, "taxi_routes": 400, "sensitivity": ()}  # fmt: skip
    return CodAccuracyConfig(**{**base, **kw})


def test_cod_accuracy_smoke(tmp_path):
    cfg = _accuracy(sensitivity=(("tasks_zipf_s", (2.5,)),), sensitivity_windows=2)
    summary = get_experiment("cod-accuracy").run(cfg, tmp_path)
    cases = summary["cases"]
    assert [(c["workload"], c["b"]) for c in cases] == [
        ("taxi", 0.98),
        ("taxi", 0.5),
        ("tasks", 0.98),
        ("tasks", 0.5),
        ("packets", 0.99),
    ]
    for c in cases:
        assert set(c) >= CASE_KEYS
        assert 0.0 <= c["error_cod"] <= 1.0 and 0.0 <= c["error_uniform"] <= 1.0
    taxi = cases[0]
    assert taxi["kept_fraction_uniform"] == pytest.approx(0.02, abs=0.01)
    assert taxi["kept_fraction_cod"] <= 0.02 + 1e-9  # CoD at the budget: exactly 1 - b
    assert taxi["kept_fraction_cod_keep_one"] > 0.02  # what "no missing group" costs
    assert taxi["missing_groups_cod_keep_one"] == 0
    # Uniform at keep-one's volume: the same tuples per window, groups lost whole
    assert taxi["kept_fraction_uniform_keep_one"] == taxi["kept_fraction_cod_keep_one"]
    assert taxi["missing_groups_uniform_keep_one"] > 0
    pair = {(r["workload"], r["CoD variant"]): r for r in summary["side_by_side"]}
    one = pair[("taxi", "CoD keep-one-per-group (over the budget)")]
    assert one["Uniform: kept %"] == one["kept %"] > 2.0
    assert summary["variants"]["cod"] == "CoD at the budget (exactly 1 − b kept)"
    assert summary["sensitivity"][0]["setting"] == "tasks_zipf_s"
    out = files_of(tmp_path)
    assert {"summary.json", "points.csv", "cases.csv", "sensitivity.csv", "report.md"} <= out
    assert {"error_vs_processed_taxi.png", "missing_groups_tasks.png"} <= out
    assert "taxi_error_per_window.png" in out
    report = (tmp_path / "report.md").read_text()
    assert "CoD keep-one-per-group (over the budget)" in report and "CoD Fig. 10" in report


def test_cod_accuracy_checks_hold_where_the_budget_holds_every_group(tmp_path):
    # 20,000-tuple windows over ~200 routes: the 2 % budget (400 tuples) holds every group.
    cfg = _accuracy(workloads=("taxi",), taxi_routes=100, taxi_window_tuples=20000)
    v = _verdicts(get_experiment("cod-accuracy").run(cfg, tmp_path))
    assert v["taxi_b0.98_error_cod_le_0.1"] == "pass"
    assert v["taxi_b0.98_error_uniform_ge_4x_cod"] == "pass"
    # CoD keeps one tuple of every group whenever the budget holds them: by construction.
    assert v["taxi_b0.98_missing_groups_cod_zero"] == "not applicable"
    assert v["taxi_b0.98_missing_groups_cod_keep_one_zero"] == "not applicable"


def test_cod_accuracy_checks_fail_when_windows_hold_more_groups_than_the_budget(tmp_path):
    # 6,000-tuple windows over a long tail of 3,000 routes: far more routes per window than
    # the 120 tuples CoD may keep at b = 0.98, so CoD at the budget misses groups, its error
    # rises, and CoD at 2 % no longer beats Uniform at 50 %.
    cfg = _accuracy(workloads=("taxi",), taxi_routes=3000)
    s = get_experiment("cod-accuracy").run(cfg, tmp_path)
    assert s["cases"][0]["windows_groups_over_budget"] == 1.0
    v = _verdicts(s)
    assert v["taxi_b0.98_error_cod_le_0.1"] == "fail"
    assert v["taxi_b0.98_missing_groups_cod_zero"] == "fail"
    assert v["taxi_cod_b0.98_below_uniform_b0.5"] == "fail"
    assert v["taxi_b0.98_missing_groups_cod_keep_one_zero"] == "not applicable"


def test_cod_accuracy_ratio_fails_with_few_groups(tmp_path):
    # GCM's real 4 scheduling classes: Uniform at b = 0.98 never misses a class, so its error
    # is nowhere near 4x CoD's.
    cfg = _accuracy(workloads=("tasks",), b_values=(0.98,), tasks_classes=4,
                    tasks_window_tuples=20000)  # fmt: skip
    v = _verdicts(get_experiment("cod-accuracy").run(cfg, tmp_path))
    assert v["tasks_b0.98_error_uniform_ge_4x_cod"] == "fail"


def test_cod_accuracy_without_the_claims_b_reports_not_applicable(tmp_path):
    cfg = _accuracy(workloads=("taxi", "packets"), b_values=(0.9,))
    v = _verdicts(get_experiment("cod-accuracy").run(cfg, tmp_path))
    assert v["taxi_b0.98_error_cod_le_0.1"] == "not applicable"
    assert v["taxi_cod_b0.98_below_uniform_b0.5"] == "not applicable"
    assert v["packets_abs_diff_le_0.02"] == "not applicable"  # holds by construction


def test_evaluate_window_scalar_is_exact_without_shedding():
    import numpy as np

    from spillway.policies.cod import CoD
    from spillway.policies.uniform import Uniform

    v = np.random.default_rng(0).exponential(500.0, 2000)
    pols = {("uniform", 0.0): Uniform(b=0.0), ("cod", 0.0): CoD(kind="scalar", b=0.0)}
    rows = evaluate_window(np.zeros(2000, np.int64), v, "scalar", pols, np.random.default_rng(1))
    assert [r["error"] for r in rows] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert [r["kept_fraction"] for r in rows] == [1.0, 1.0]


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: CodAccuracyConfig(windows=0), ConfigError, "windows must be an int >= 1"),
        (lambda: CodAccuracyConfig(seeds=()), ConfigError, "seeds must be non-negative ints"),
        (lambda: CodAccuracyConfig(workloads=("dec",)), UnknownNameError, "workload must be one"),
        (lambda: CodAccuracyConfig(b_values=(1.0,)), ConfigError, "every b must be a shed"),
        (lambda: CodAccuracyConfig(variants=("cod",)), ConfigError, "must include 'uniform'"),
        (
            lambda: CodAccuracyConfig(variants=("uniform", "cod", "uniform_keep_one")),
            ConfigError,
            "'uniform_keep_one' keeps as many tuples as 'cod_keep_one': list 'cod_keep_one'",
        ),
        (
            lambda: CodAccuracyConfig(sensitivity=(("taxi_rate", (1.0,)),)),
            UnknownNameError,
            "sensitivity setting must be one of",
        ),
        (lambda: CodDriftConfig(drift=0.7), ConfigError, "every drift must be in \\[0, 0.5\\]"),
        (lambda: CodDriftConfig(windows=1), ConfigError, "windows must be an int >= 2"),
        (lambda: CodDriftConfig(window_s=10.0), ConfigError, "window_s must be 1 or 3 times"),
    ],
)
def test_config_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_run_rejects_the_wrong_config(tmp_path):  # the message names the experiment
    with pytest.raises(ConfigError, match="cod-drift needs a CodDriftConfig"):
        get_experiment("cod-drift").run(CodAccuracyConfig(), tmp_path)
    with pytest.raises(ConfigError, match="cod-accuracy needs a CodAccuracyConfig"):
        get_experiment("cod-accuracy").run(CodDriftConfig(), tmp_path)
