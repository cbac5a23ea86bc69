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


def test_cod_drift_smoke(tmp_path):
    cfg = CodDriftConfig(windows=8, sweep=(0.0, 0.5), sweep_windows=4, rate=3000.0)
    summary = get_experiment("cod-drift").run(cfg, tmp_path)
    for key in ("distance_mean", "distance_max", "overlap_mean", "drift", "checks", "sweep"):
        assert key in summary
    assert summary["distance_mean"] + summary["overlap_mean"] == pytest.approx(1.0)
    assert 0.0 <= summary["distance_max"] <= 0.5
    assert [r["drift"] for r in summary["sweep"]] == [0.0, 0.3, 0.5]
    assert summary["sweep"][0]["distance_mean"] == 0.0
    out = files_of(tmp_path)
    assert {"summary.json", "drift.csv", "sweep.csv", "report.md"} <= out
    assert {"drift_per_window.png", "drift_sweep.png"} <= out
    report = (tmp_path / "report.md").read_text()
    assert "![distance and overlap per window](drift_per_window.png)" in report
    assert json.loads((tmp_path / "summary.json").read_text())["drift"] == 0.3


def test_cod_accuracy_smoke(tmp_path):
    cfg = CodAccuracyConfig(
        seeds=(0,),
        windows=3,
        b_values=(0.98, 0.5),
        scalar_b_values=(0.99,),
        taxi_window_tuples=6000,
        tasks_window_tuples=8000,
        packets_window_tuples=3000,
        taxi_routes=400,
        sensitivity=(("tasks_zipf_s", (2.5,)),),
        sensitivity_windows=2,
    )
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
        assert c["missing_groups_cod"] == 0  # keep-all: CoD never drops a group
        assert 0.0 <= c["error_cod"] <= 1.0 and 0.0 <= c["error_uniform"] <= 1.0
    taxi = cases[0]
    assert taxi["kept_fraction_uniform"] == pytest.approx(0.02, abs=0.01)
    assert taxi["kept_fraction_cod"] >= 0.02  # what "no missing group" costs, measured
    assert taxi["kept_fraction_cod_capped"] <= 0.02 + 1e-9
    assert summary["sensitivity"][0]["setting"] == "tasks_zipf_s"
    assert "taxi_b0.98_error_cod_le_0.10" in summary["checks"]
    out = files_of(tmp_path)
    assert {"summary.json", "points.csv", "cases.csv", "sensitivity.csv", "report.md"} <= out
    assert {"error_vs_processed_taxi.png", "missing_groups_tasks.png"} <= out
    assert "taxi_error_per_window.png" in out
    assert "What the paper reported" in (tmp_path / "report.md").read_text()


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


def test_run_rejects_the_wrong_config(tmp_path):
    with pytest.raises(ConfigError, match="cod-drift needs a CodDriftConfig"):
        get_experiment("cod-drift").run(CodAccuracyConfig(), tmp_path)
    with pytest.raises(ConfigError, match="cod-accuracy needs a CodAccuracyConfig"):
        get_experiment("cod-accuracy").run(CodDriftConfig(), tmp_path)
