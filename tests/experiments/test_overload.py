"""The overload study: its settings, its checks (each can fail), and a shortened Kafka run."""

from __future__ import annotations

import json
import math

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments import overload as ov


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"policies": ("fifo",)}, UnknownNameError, "policies must be among random"),
        ({"policies": ()}, ConfigError, "policies must name at least one"),
        ({"sources": ("files",)}, UnknownNameError, "sources must be among generated, kafka"),
        ({"levels": (0.5,)}, ConfigError, "levels must be overloads > 1"),
        ({"levels": ()}, ConfigError, "levels must be overloads > 1"),
        ({"duration_s": 0}, ConfigError, "duration_s must be a finite number > 0"),
        ({"warmup_s": 70.0}, ConfigError, "warmup_s .* must be below"),
        ({"node_cpu": 0}, ConfigError, "node_cpu must be a number of cores > 0"),
    ],
)
def test_config_rejects_bad_settings(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ov.OverloadConfig(**kwargs)


def _run(**change):
    r = {"source": "kafka", "policy": "cod", "level": 3.0, "batch_mean_s": 0.7,
         "trigger_s": 1.0, "latency_p95_s": 2.5, "latency_bound_s": 4.0,
         "overload_measured": 2.8, "kept_fraction": 0.3}  # fmt: skip
    return {**r, **change}


def test_each_check_fails_on_a_run_that_breaks_it():
    ok = {c.name: c.verdict for c in ov.checks({"runs": [_run()]})}
    assert ok == {"batch_below_trigger": "pass", "latency_within_bound": "pass",
                  "overload_reached_80pct": "pass", "kept_near_capacity": "pass",
                  "plain_spark_lag_grows": "not applicable"}  # fmt: skip
    for change, name in (
        ({"batch_mean_s": 1.3}, "batch_below_trigger"),
        ({"latency_p95_s": 9.0}, "latency_within_bound"),
        ({"latency_p95_s": math.nan}, "latency_within_bound"),
        ({"overload_measured": 1.5}, "overload_reached_80pct"),
        ({"kept_fraction": 0.0045}, "kept_near_capacity"),  # cod at 10x: its key scan ate it
        ({"kept_fraction": 0.94}, "kept_near_capacity"),  # the capacity was underestimated
    ):
        got = {c.name: c for c in ov.checks({"runs": [_run(), _run(**change)]})}
        assert got[name].failed, change
    assert all(c.verdict == "not applicable" for c in ov.checks({"runs": []}))


def test_plain_spark_lag_must_grow():
    flat = {"behind_first": 1000.0, "behind_last": 1100.0}
    grows = {"behind_first": 1000.0, "behind_last": 90_000.0}
    (c,) = [c for c in ov.checks({"runs": [_run()], "plain_spark": flat}) if "plain" in c.name]
    assert c.failed
    (c,) = [c for c in ov.checks({"runs": [_run()], "plain_spark": grows}) if "plain" in c.name]
    assert c.verdict == "pass"


def test_the_report_of_measured_runs(tmp_path):
    cfg = ov.OverloadConfig(policies=("cod",), levels=(3.0,), sources=("kafka",))
    plain = {"batches": [{"rows": 10, "duration_s": 1.0, "offsets_behind": 5.0}],
             "batch_mean_s": 2.0, "latency_p95_s": 30.0, "latency_first_s": 2.0,
             "latency_last_s": 40.0, "behind_first": 10.0, "behind_last": 5000.0,
             "asked_rate": 27000.0, "achieved_rate": 21500.0}  # fmt: skip
    measured = {"runs": [_run(achieved_rate=9000.0, asked_rate=9000.0)],
                "capacity": {"kafka": 3000.0}, "plain_spark": plain,
                "capacity_fit": {"kafka": {"capacity_method": "fit", "fixed_s": 0.4,
                                           "per_row_s": 2e-4, "rough_tuples_per_s": 2500.0,
                                           "capacity_tuples_per_s": 3000.0}}}  # fmt: skip
    summary = ov.EXPERIMENT.write(cfg, measured, tmp_path)
    assert summary["verdicts"]["fail"] == 0
    report = (tmp_path / "report.md").read_text()
    assert "Plain Spark" in report and "kafka 3,000 tuples/s: fit, fixed 0.4 s" in report
    assert "Producers asked 27,000 tuples/s and achieved 21,500. Consumer lag" in report
    assert json.loads((tmp_path / "summary.json").read_text())["capacity"] == {"kafka": 3000.0}


@pytest.mark.kafka
@pytest.mark.spark
def test_a_shortened_kafka_run(spark, tmp_path):
    # The plumbing of the Kafka half, shortened (a 2 s trigger, as every Kafka run in
    # EXPERIMENTS.md). Whether a run at 3x sheds is the experiment's own check
    # (kept_near_capacity) on full-length runs: here the capacity runs last 6.7 s, mostly the
    # cold start, and what they measure is no overload for the warm node. (This test asserted
    # that the run shed; it held only through a defect, empty first batches capping the
    # controller's capacity at 2 tuples, fixed in d7ee976: since, the run kept everything.)
    cfg = ov.OverloadConfig(policies=("balance-sic",), levels=(3.0,), sources=("kafka",),
                            trigger_s=2.0, duration_s=20.0, warmup_s=3.0,
                            plain_spark=False)  # fmt: skip
    measured = ov.measure_kafka(cfg, spark)
    (run,) = measured["runs"]
    assert measured["capacity_tuples_per_s"] > 0
    assert measured["capacity_fit"]["capacity_tuples_per_s"] == measured["capacity_tuples_per_s"]
    # the run's capacity was measured with the producers sending 3x it (background included)
    lc = measured["level_capacity"]["3x"]
    first = lc["rounds"][0]
    assert first["producers_rate"] == pytest.approx(3.0 * measured["capacity_tuples_per_s"])
    assert run["capacity_tuples_per_s"] == lc["capacity_tuples_per_s"] > 0
    assert "error" not in run, run
    assert run["asked_rate"] == pytest.approx(3.0 * lc["capacity_tuples_per_s"])
    assert run["achieved_rate"] > 0 and run["windows"] > 0, run
    assert 0 < run["kept_fraction"] <= 1, run
    assert math.isfinite(run["per_arrived_us"]) and math.isfinite(run["per_admitted_us"])


def test_a_failed_run_is_reported_and_fails_its_checks():
    def boom():
        raise ov.SpillwayError("the streaming query failed: Python worker died")

    got = ov._guarded(boom)
    assert got == {"error": "the streaming query failed: Python worker died"}
    checks = {c.name: c for c in ov.checks({"runs": [_run(), {**_run(), **got,
                                                              "batch_mean_s": None}]})}  # fmt: skip
    assert checks["batch_below_trigger"].failed


def test_a_failed_plain_spark_run_fails_its_check():
    (c,) = [c for c in ov.checks({"runs": [], "plain_spark_error": "boom"}) if "plain" in c.name]
    assert c.failed
