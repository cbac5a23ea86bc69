"""crc-sensitivity: config errors, the SD_r node, and the report from measured records (no
Spark)."""

from __future__ import annotations

import json

import pytest

from spillway.errors import ConfigError
from spillway.experiments import crc_sensitivity as crc
from spillway.experiments import dilos as dl


def _measured(crc_cycles: int, losses: tuple[float, float, float], capacity: float = 250.0):
    """A DILoS run on SD_r as ``dilos.measure_runs`` records it: 40 decisions of 100 tuples a
    class, ``losses`` of them shed."""
    recs = [
        {"t": float(t), "class": c, "arrived": 100, "dropped": int(100 * losses[c - 1]),
         "processed": 50, "response_time_s": 0.5 * c, "capacity": 0.1 * c, "load": 0.3}
        for t in range(40)
        for c in (1, 2, 3)
    ]  # fmt: skip
    return {"name": dl.run_name("dilos", "aurora", "SD_r") + f"-crc{crc_cycles}",
            "config": "dilos", "manager": "aurora", "input": "SD_r", "crc_cycles": crc_cycles,
            "rate": 9e3, "capacity_tuples_per_s": capacity, "records": recs}  # fmt: skip


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="crc_cycles must name distinct CRCs"):
        crc.CrcSensitivityConfig(crc_cycles=(2, 2))
    with pytest.raises(ConfigError, match="crc_cycles must be ints >= 1"):
        crc.CrcSensitivityConfig(crc_cycles=(0, 2))
    with pytest.raises(ConfigError, match="unknown load manager 'pid'"):
        crc.CrcSensitivityConfig(manager="pid")
    with pytest.raises(ConfigError, match="trace_period_s must be a finite number > 0"):
        crc.CrcSensitivityConfig(trace_period_s=0.0)
    with pytest.raises(ConfigError, match="input must be one of SD_c, SD_p, SD_r"):
        dl.make_config(quick=True).node("aurora", "dilos", "SD_x")


def test_sd_r_puts_class_1_on_the_trace_at_its_mean_rate() -> None:
    cfg = crc.make_config(quick=True)
    node = cfg.dilos().node("aurora", "dilos", "SD_r", crc_cycles=5)
    sd_p = cfg.dilos().node("aurora", "dilos", "SD_p")
    c1, c2, c3 = node.queries
    assert (c1.profile, c1.profile_options["period_s"]) == ("trace", cfg.trace_period_s)
    assert c1.rate == pytest.approx(sd_p.queries[0].rate * 250 / 950)  # S_r around 250 t/s
    assert (c2, c3) == sd_p.queries[1:]  # classes 2 and 3 as in SD_p
    assert node.class_crc_cycles == 5 and node.class_redistribution


def test_report_from_measured_records(tmp_path) -> None:
    cfg = crc.make_config(quick=True)
    measured = [_measured(10, (0.0, 0.2, 0.6)), _measured(1, (0.0, 0.1, 0.4)),
                _measured(2, (0.0, 0.1, 0.5)), _measured(5, (0.0, 0.2, 0.5))]  # fmt: skip
    summary = crc.EXPERIMENT.write(cfg, measured, tmp_path)
    assert [r["crc_cycles"] for r in summary["runs"]] == [1, 2, 5, 10]  # sorted
    assert summary["runs"][0]["total_loss"] == pytest.approx((0.1 + 0.4) / 3, abs=1e-3)
    verdicts = {c["name"]: c["verdict"] for c in summary["checks"]}
    # 300 tuples a decision against a measured capacity of 250 tuples/s
    assert verdicts == {"loss_lowest_at_crc_le_2": "pass",
                        "higher_class_never_loses_more": "pass",
                        "input_overloads_node": "pass"}  # fmt: skip
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert (tmp_path / "class_loss_by_crc.png").exists()
    report = (tmp_path / "report.md").read_text()
    assert "Pham Fig. 32" in report and "SD_r" in report
    # the same runs with the lowest loss at 10 cycles, class 1 above class 2 at 5, and more
    # capacity than arrivals: every check fails
    measured = [_measured(10, (0.0, 0.1, 0.2), 400.0), _measured(1, (0.0, 0.1, 0.4), 400.0),
                _measured(5, (0.3, 0.2, 0.5), 400.0)]  # fmt: skip
    failed = crc.EXPERIMENT.write(cfg, measured, tmp_path / "bad")
    assert {c["verdict"] for c in failed["checks"]} == {"fail"}


def test_nothing_shed_or_no_short_crc_is_not_applicable() -> None:
    runs = [dict(crc.dilos.summarise(crc.make_config(quick=True).dilos(), m),
                 crc_cycles=m["crc_cycles"])
            for m in (_measured(5, (0.0, 0.0, 0.0)), _measured(10, (0.0, 0.0, 0.0)))]  # fmt: skip
    best = crc.checks(runs)[0]
    assert best.verdict == "not applicable" and "shed anything" in best.why
    runs = [dict(crc.dilos.summarise(crc.make_config(quick=True).dilos(), m),
                 crc_cycles=m["crc_cycles"])
            for m in (_measured(5, (0.0, 0.1, 0.5)), _measured(10, (0.0, 0.1, 0.4)))]  # fmt: skip
    best = crc.checks(runs)[0]
    assert best.verdict == "not applicable" and "no CRC of 2 cycles or less" in best.why
    assert [c.verdict for c in crc.checks([])] == ["not applicable"] * 3
