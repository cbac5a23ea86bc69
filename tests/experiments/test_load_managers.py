"""load-managers: config errors and the report from measured records (no Spark)."""

from __future__ import annotations

import json

import pytest

from spillway.errors import ConfigError
from spillway.experiments import load_managers as lm


def _measured(scheme, rt_before, rt_after, kept=0.5):
    recs = [
        {"t": float(t), "processed": 100, "capacity": 0.8,
         "response_time_s": rt_before if t < 25 else rt_after}
        for t in range(0, 50)
    ]  # fmt: skip
    arrived = [(float(t), 200, int(200 * kept)) for t in range(0, 50)]
    return {"scheme": scheme, "settings": {}, "rate": 9e5, "records": recs, "arrived": arrived}


def test_config_errors():
    with pytest.raises(ConfigError, match="schemes must name at least one"):
        lm.LoadManagersConfig(schemes=())
    with pytest.raises(ConfigError, match="warmup_s must be a finite number >= 0 and < 50"):
        lm.LoadManagersConfig(duration_s=50.0, warmup_s=50.0)
    with pytest.raises(ConfigError, match="load manager 'aurora' has no setting pole"):
        lm.LoadManagersConfig(schemes=(("aurora", {"pole": 0.5}),))


def test_report_from_measured_records(tmp_path):
    cfg = lm.make_config(quick=True)
    measured = [_measured("aurora", 1.0, 3.0), _measured("ctrl", 2.0, 4.0),
                _measured("seamless", 1.0, 1.6), _measured("aloma", 1.0, 1.55)]  # fmt: skip
    s = lm.EXPERIMENT.write(cfg, measured, tmp_path)
    runs = {r["scheme"]: r for r in s["runs"]}
    assert set(runs["aloma"]) >= {"scheme", "workload", "target_s", "delay_violation_mean_s",
                                  "loss"}  # fmt: skip
    # D = 1.5 s; after warm-up (10 s): 15 intervals at 1.0 s, 25 at 1.55 s -> 25/40 · 0.05
    assert runs["aloma"]["delay_violation_mean_s"] == pytest.approx(0.03125, rel=1e-3)
    assert runs["aloma"]["loss"] == pytest.approx(0.5)
    verdicts = {c["name"]: c["verdict"] for c in s["checks"]}
    assert verdicts == {
        "aloma_violation_le_0.1D": "pass",
        "seamless_violation_le_0.1D": "pass",
        "ctrl_wrong_h_violates_more_than_aloma": "pass",
        "every_scheme_sheds_under_overload": "not applicable",
    }
    assert json.loads((tmp_path / "summary.json").read_text())["runs"][0]["workload"] == "flat"
    assert (tmp_path / "delay_violation.png").exists() and (tmp_path / "report.md").exists()
