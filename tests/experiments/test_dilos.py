"""dilos: config errors and the report from measured records (no Spark)."""

from __future__ import annotations

import json

import pytest

from spillway.errors import ConfigError
from spillway.experiments import dilos as dl


def _measured(config, manager, losses, rt=1.0):
    recs = [
        {"t": float(t), "class": c, "arrived": 100, "dropped": int(100 * losses[c - 1]),
         "processed": 50, "response_time_s": rt * c, "capacity": 0.1 * c}
        for t in range(0, 40)
        for c in (1, 2, 3)
    ]  # fmt: skip
    return {"name": f"{config}-{manager}", "config": config, "manager": manager, "rate": 9e3,
            "records": recs}  # fmt: skip


def test_config_errors():
    with pytest.raises(ConfigError, match="configs and managers must each name at least one"):
        dl.DilosExperimentConfig(managers=())
    with pytest.raises(ConfigError, match=r"class_rates needs one share per class \(3\)"):
        dl.DilosExperimentConfig(class_rates=(0.5, 0.5))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"class_rates\[2\] must be a finite number > 0"):
        dl.DilosExperimentConfig(class_rates=(0.5, 0.5, 0.0))
    with pytest.raises(ConfigError, match="warmup_s must be a finite number >= 0 and < 40"):
        dl.DilosExperimentConfig(duration_s=40.0, warmup_s=40.0)
    with pytest.raises(ConfigError, match="unknown load manager 'pid'"):
        dl.DilosExperimentConfig(managers=("pid",))


def test_report_from_measured_records(tmp_path):
    cfg = dl.make_config(quick=True)
    measured = [_measured("separate", "aurora", (0.0, 0.0, 0.8)),
                _measured("dilos", "aurora", (0.0, 0.1, 0.3))]  # fmt: skip
    s = dl.EXPERIMENT.write(cfg, measured, tmp_path)
    by = {r["name"]: r for r in s["configs"]}
    assert by["dilos-aurora"]["class_loss"] == {"1": 0.0, "2": 0.1, "3": 0.3}
    assert by["separate-aurora"]["class_latency_p95_s"] == {"1": 1.0, "2": 2.0, "3": 3.0}
    verdicts = {c["name"]: c["verdict"] for c in s["checks"]}
    assert verdicts == {
        "higher_class_never_loses_more": "pass",
        "class3_loss_lower_with_dilos": "pass",
        "higher_class_lower_latency": "not applicable",
    }
    worse = [_measured("separate", "aurora", (0.0, 0.0, 0.2)),
             _measured("dilos", "aurora", (0.3, 0.1, 0.3))]  # fmt: skip
    verdicts = {c.name: c.verdict for c in dl.checks(cfg, [dl.summarise(cfg, m) for m in worse])}
    assert verdicts["higher_class_never_loses_more"] == "fail"
    assert verdicts["class3_loss_lower_with_dilos"] == "fail"
    assert json.loads((tmp_path / "summary.json").read_text())["configs"][0]["name"]
    assert (tmp_path / "class_loss.png").exists() and (tmp_path / "report.md").exists()
