import json
import math

import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments import cod_latency as cl
from spillway.status import IntervalRecord


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"workloads": ("dec",)}, UnknownNameError, "workload must be one of taxi, tasks"),
        ({"workloads": ()}, ConfigError, "workloads must name at least one"),
        ({"b": 1.0}, ConfigError, r"b must be a shed fraction in \(0, 1\)"),
        ({"rate": 0}, ConfigError, "rate must be a finite number > 0"),
        ({"sources": 0}, ConfigError, "sources must be an int >= 1"),
        ({"warmup_s": 50.0, "duration_s": 40.0}, ConfigError, "warmup_s .* must be below"),
        ({"seed": -1}, ConfigError, "seed must be a non-negative int"),
        ({"window_s": 1.0, "trigger_s": 2.0}, ConfigError, r"window_s \(1.0\) must equal"),
    ],
)
def test_config_rejects_bad_settings(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cl.CodLatencyConfig(**kwargs)


def test_node_config_is_one_grouped_mean_over_the_workload_feed():
    cfg = cl.CodLatencyConfig(rate=10_000.0, sources=4, trigger_s=2.0)
    node = cl.node_config(cfg, "tasks")
    (q,) = node.queries
    assert (q.kind, q.feed, q.n_sources, q.rate) == ("group_avg", "tasks", 4, 2500.0)
    assert node.trigger_s == 2.0 and node.seed == 0


def test_modes_are_no_shedding_uniform_and_grouped_cod_at_b():
    cfg = cl.CodLatencyConfig(b=0.97, seed=3)
    normal, uniform, cod = (cl.make_run_policy(p, cfg) for p in cl.POLICIES)
    assert normal.name == "none"
    assert uniform.config.b == 0.97 and cod.config.b == 0.97 and cod.config.kind == "grouped"
    assert uniform.sheds_always and cod.sheds_always and cod.needs_groups
    with pytest.raises(UnknownNameError, match="mode must be one of normal, uniform, cod"):
        cl.make_run_policy("storm", cfg)


def _records(arrived, admitted, trigger=2.0):
    return [
        IntervalRecord(t=trigger * (k + 1), capacity_tuples=1e9, arrived_tuples=a,
                       admitted_tuples=m, processed_tuples=m, batch_s=0.1)
        for k, (a, m) in enumerate(zip(arrived, admitted, strict=True))
    ]  # fmt: skip


def test_throughput_counts_rows_after_the_first_measured_batch_over_batch_time():
    hist = _records([100, 200, 300, 400, 500], [10, 20, 30, 40, 50])
    # batches end at boundaries 2 (covers 1-2), 3 and 5 (covers 4-5)
    batches = [{"boundary": 2, "duration_s": 9.0}, {"boundary": 3, "duration_s": 1.0},
               {"boundary": 5, "duration_s": 3.0}]  # fmt: skip
    out = cl.throughput_of(hist, batches, from_s=4.0, trigger_s=2.0)
    assert out["busy_s"] == 4.0  # the batch at boundary 2 only marks the start
    assert out["rows_per_s"] == pytest.approx((300 + 400 + 500) / 4.0)
    assert out["kept_rows_per_s"] == pytest.approx((30 + 40 + 50) / 4.0)
    assert out["busy_share"] == pytest.approx(4.0 / 6.0)
    assert math.isnan(cl.throughput_of(hist, batches[:1], from_s=0.0, trigger_s=2.0)["rows_per_s"])


def test_latency_ignores_windows_before_the_warm_up_and_counts_each_window_once():
    res = pd.DataFrame({
        "query": ["q"] * 5, "window_start": [0.0, 1.0, 1.0, 2.0, 3.0],
        "produced_at": [1000.5, 1002.0, 1002.0, 1003.0, 1004.0],
        "latency_s": [9.0, 1.0, 1.0, 2.0, 3.0],
    })  # fmt: skip
    out = cl.latency_of(res, epoch_s=1000.0, from_s=1.0)
    assert out["windows"] == 3 and out["latency_mean_s"] == pytest.approx(2.0)
    empty = cl.latency_of(res, epoch_s=1000.0, from_s=99.0)
    assert empty["windows"] == 0 and math.isnan(empty["latency_p95_s"])


def _run(workload, policy, mean, p95, rows):
    return {"workload": workload, "policy": policy, "latency_mean_s": mean,
            "latency_p95_s": p95, "rows_per_s": rows, "kept_rows_per_s": rows / 50,
            "busy_share": 0.5, "kept_fraction": 0.02, "error": 0.05, "missing_groups": 0.0,
            "windows": 30}  # fmt: skip


def _verdicts(runs):
    return {c.name: c.verdict for c in cl.checks(runs)}


def test_checks_pass_when_both_shedders_are_faster_and_cod_keeps_pace():
    good = [_run("taxi", "normal", 0.45, 0.71, 4.0e5), _run("taxi", "uniform", 0.22, 0.29, 7.9e5),
            _run("taxi", "cod", 0.23, 0.26, 7.6e5)]  # fmt: skip
    assert _verdicts(good) == {
        "latency_below_normal": "pass",
        "cod_rows_within_20pct_of_uniform": "pass",
    }


def test_latency_check_fails_when_the_batch_fixed_cost_dominates():
    # 4,000 tuples/s: a micro-batch's fixed cost is most of its time, so shedding 98 % of the
    # rows barely moves the window latency (a run like the Spark test's below).
    flat = [_run("taxi", "normal", 0.45, 0.70, 4.0e4), _run("taxi", "uniform", 0.46, 0.72, 4.1e4),
            _run("taxi", "cod", 0.44, 0.71, 4.0e4)]  # fmt: skip
    (lat,) = [c for c in cl.checks(flat) if c.name == "latency_below_normal"]
    assert lat.failed
    assert lat.why.startswith("failed at taxi uniform mean: 0.46 is not < 0.45")


def test_rows_check_fails_when_cods_group_selection_is_slow():
    # CoD's per-group selection scans every tuple's key in the batch: at 60 % of Uniform's rows/s
    slow = [_run("taxi", "normal", 0.45, 0.71, 4.0e5), _run("taxi", "uniform", 0.22, 0.29, 7.9e5),
            _run("taxi", "cod", 0.23, 0.28, 4.7e5)]  # fmt: skip
    assert _verdicts(slow)["cod_rows_within_20pct_of_uniform"] == "fail"


def test_a_missing_mode_fails_and_no_run_is_not_applicable():
    no_normal = [_run("taxi", "uniform", 0.22, 0.29, 7.9e5), _run("taxi", "cod", 0.23, 0.26, 7.6e5)]
    assert _verdicts(no_normal)["latency_below_normal"] == "fail"
    assert _verdicts([]) == {
        "latency_below_normal": "not applicable",
        "cod_rows_within_20pct_of_uniform": "not applicable",
    }
    nan = [_run("taxi", "normal", math.nan, math.nan, 4.0e5), *no_normal]  # no window measured
    assert _verdicts(nan)["latency_below_normal"] == "fail"


def test_write_outputs(tmp_path):
    runs = [_run("taxi", "normal", 3.0, 5.0, 1e5), _run("taxi", "uniform", 1.0, 2.0, 1e6),
            _run("taxi", "cod", 1.25, 2.5, 0.9e6)]  # fmt: skip
    cfg = cl.CodLatencyConfig(workloads=("taxi",), duration_s=40.0)
    summary = cl.EXPERIMENT.write(cfg, runs, tmp_path)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["runs"][2]["latency_p95_s"] == 2.5
    assert saved["ratios"][0]["p95_normal_over_cod"] == pytest.approx(2.0)
    assert summary["checks"][0] == {"name": "latency_below_normal", "verdict": "pass",
                                    "why": summary["checks"][0]["why"]}  # fmt: skip
    for name in ("runs.csv", "latency_taxi.png", "rows_taxi.png", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    report = (tmp_path / "report.md").read_text()
    assert "2.25x" in report and "](latency_taxi.png)" in report


@pytest.mark.spark
def test_measure_on_spark_sheds_b_and_cod_keeps_every_group():
    from spillway.testing import local_spark

    spark = local_spark("spillway-tests")
    cfg = cl.CodLatencyConfig(
        workloads=("taxi",), b=0.9, rate=4000.0, duration_s=8.0, warmup_s=2.0, exact=True
    )
    runs = {r["policy"]: r for r in cl.measure(cfg, spark=spark)}
    assert set(runs) == set(cl.POLICIES)
    assert runs["normal"]["kept_fraction"] == 1.0
    assert runs["normal"]["error"] == pytest.approx(0.0, abs=1e-9)
    assert runs["normal"]["missing_groups"] == 0.0
    for p in ("uniform", "cod"):
        assert runs[p]["kept_fraction"] == pytest.approx(0.1, abs=0.02)
        assert runs[p]["windows"] >= 2 and runs[p]["rows_per_s"] > 0
    assert runs["cod"]["missing_groups"] == 0.0 < runs["uniform"]["missing_groups"]
    assert runs["cod"]["error"] < runs["uniform"]["error"]
