"""The Spark benchmarks' pure parts: throughput and latency arithmetic, config, report."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from spillway.bench import spark_bench as sb
from spillway.errors import ConfigError
from spillway.policies.base import Backlog
from spillway.status import IntervalRecord


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"source_rate": 0}, "source_rate must be a finite number > 0"),
        ({"overload": math.inf}, "overload must be a finite number > 0"),
        ({"source_sources": 0}, "source_sources must be an int >= 1"),
        ({"source_rounds": 0}, "source_rounds must be an int >= 1"),
        ({"max_backlog_rows": 1.5}, "max_backlog_rows must be an int >= 1"),
        ({"warmup_batches": -1}, "warmup_batches must be an int >= 0"),
        ({"warmup_s": 500.0}, "warmup_s must be >= 0 and below overload_duration_s"),
        ({"headroom": 0.0}, r"headroom must be in \(0, 1\]"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        sb.SparkBenchConfig(**kwargs)


def test_quick_is_shorter_and_full_runs_three_minutes():
    quick, full = sb.make_config(True), sb.make_config(False)
    assert full.overload_duration_s == 180.0 and full.overload == quick.overload == 3.0
    assert quick.overload_duration_s < full.overload_duration_s
    assert quick.source_rate == full.source_rate


def test_no_shedding_keeps_everything_beyond_capacity():
    b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[50, 70], tuple_sic=[0.1, 0.1],
                query_sic=[0.0, 0.0])  # fmt: skip
    assert sb.NoShedding(seed=3).decide(b, 0.0).keep.tolist() == [50, 70]


def test_rows_per_second_skips_warmup_and_empty_batches():
    batches = [{"rows": 5, "duration_s": 20.0}, {"rows": 0, "duration_s": 0.4},
               {"rows": 300, "duration_s": 0.5}, {"rows": 100, "duration_s": 0.5}]  # fmt: skip
    out = sb.rows_per_second(batches, skip=1)
    assert out == {"rows_per_s": 400.0, "batches": 2, "rows": 400, "batch_s": 1.0}
    assert math.isnan(sb.rows_per_second(batches[:1], skip=1)["rows_per_s"])


def test_latency_growth_is_the_least_squares_slope():
    assert sb.latency_growth([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0]) == 0.0
    assert sb.latency_growth([0, 1, 2, 3], [0.0, 2.0, 4.0, 6.0]) == pytest.approx(2.0)
    assert math.isnan(sb.latency_growth([5.0], [1.0]))
    assert math.isnan(sb.latency_growth([1.0, 1.0], [1.0, 2.0]))


def _results(times, latencies, epoch=1000.0, rows_per_window=1):
    rows = []
    for i, (t, lat) in enumerate(zip(times, latencies, strict=True)):
        rows += [{"query": "q", "window_start": float(i), "produced_at": epoch + t,
                  "latency_s": lat}] * rows_per_window  # fmt: skip
    return pd.DataFrame(rows)


def test_latency_stats_one_value_per_window_after_warmup():
    res = _results([1, 5, 10, 20, 30], [9.0, 1.0, 2.0, 3.0, 4.0], rows_per_window=5)
    s = sb.latency_stats(res, epoch_s=1000.0, warmup_s=2.0)
    assert s["windows"] == 4
    assert s["p95_s"] == pytest.approx(np.quantile([1.0, 2.0, 3.0, 4.0], 0.95))
    assert (s["first_s"], s["last_s"], s["max_s"]) == (1.0, 4.0, 4.0)
    assert s["growth_s_per_s"] > 0
    empty = sb.latency_stats(res.iloc[0:0], epoch_s=0.0, warmup_s=0.0)
    assert empty["windows"] == 0 and math.isnan(empty["p95_s"])
    late = sb.latency_stats(res, epoch_s=1000.0, warmup_s=100.0)
    assert late["windows"] == 0


def _rec(t, admitted, processed):
    return IntervalRecord(t=t, capacity_tuples=1000.0, arrived_tuples=3000,
                          admitted_tuples=admitted, processed_tuples=processed, batch_s=0.9)  # fmt: skip


def test_processed_rate_counts_admitted_tuples_of_finished_batches():
    # Spark counts a source scanned twice twice (processed = 2 x admitted): not used.
    hist = [_rec(1.0, 50, 100), _rec(2.0, 800, 1600), _rec(3.0, 1000, 2000), _rec(4.0, 900, 0)]
    assert sb.processed_rate(hist, warmup_s=2.0, trigger_s=1.0) == 900.0
    assert math.isnan(sb.processed_rate(hist, warmup_s=9.0, trigger_s=1.0))
    gap = [_rec(1.0, 500, 0), _rec(2.0, 700, 700)]  # interval 1's batch never finished
    assert sb.processed_rate(gap, warmup_s=0.0, trigger_s=1.0) == 350.0


def test_unprocessed_counts_admissions_spark_has_not_finished():
    assert sb.unprocessed([_rec(1.0, 500, 1000), _rec(2.0, 700, 0), _rec(3.0, 9, 0)]) == 709


def test_overload_workload_is_calibrated_to_three_times_capacity():
    cfg = sb.make_config(True)
    node = sb.overload_node(cfg)
    assert node.overload == 3.0 and node.headroom == cfg.headroom
    assert {q.kind for q in node.queries} == {"top5"}
    assert len(node.queries) == cfg.overload_queries
    assert node.trigger_s == cfg.overload_trigger_s and node.stw_s == 10 * node.trigger_s


def _summary() -> dict:
    lat = {"p50_s": 1.0, "p95_s": 1.5, "max_s": 2.0, "growth_s_per_s": 0.0, "first_s": 1.0,
           "last_s": 1.1, "windows": 10}  # fmt: skip
    grow = dict(lat, p95_s=30.0, growth_s_per_s=0.6)
    return {
        "source_rows_per_s": 100.0, "rate_source_rows_per_s": 200.0, "source_ratio": 0.5,
        "latency_p95_shed_s": 1.5, "latency_p95_noshed_s": 30.0, "latency_shed": lat,
        "latency_noshed": grow, "utilisation": 0.9, "capacity_tuples_per_s": 1000.0,
        "input_tuples_per_s": 3000.0, "noshed_stopped_early_at_s": 40.0,
        "source_batch_rows": {"spillway": 1000.0, "rate": 2000.0},
        "source_fixed_s": {"spillway": 0.5, "rate": 0.2},
        "source_per_row_us": {"spillway": 2.0, "rate": 1.0},
        "source_batch_rows_per_s": {"spillway": 90.0, "rate": 210.0},
        "source_batch_s": {"spillway": 1.0, "rate": 0.5}, "reader_rows_per_s_one_core": 9e6,
        "spark_bench_config": vars(sb.make_config(True)),
    }  # fmt: skip


def test_report_markdown_lists_every_figure_and_the_memory_guard():
    md = sb.report_markdown(_summary())
    for text in ("source_ratio", "p95 latency, BALANCE-SIC", "p95 latency, no shedding",
                 "utilisation", "memory guard", "spark_overload_latency.png"):  # fmt: skip
        assert text in md
    assert "| 0.5 |" in md and "| 30 |" in md


def test_source_speed_is_the_sustained_rate_of_the_fitted_batch_cost():
    batches = [{"rows": r, "duration_s": 0.3 + 1e-6 * r} for r in (2e5, 1e5, 4e5, 3e5)]
    cfg = sb.make_config(True)
    speed = sb.source_speed([{"rows": 700_000, "batch_s": 1.0, "batches": 4}], batches, cfg)
    assert speed["rows_per_s"] == pytest.approx(700_000.0)
    assert speed["per_row_us"] == pytest.approx(1.0) and speed["batch_rows_per_s"] == 700_000.0


def test_reader_speed_is_measured_outside_spark():
    cfg = sb.SparkBenchConfig(source_rate=1000.0, source_sources=2)
    assert sb.reader_rows_per_s(cfg, rows=2000, repeats=1) > 0


def test_overload_tables_and_plot(tmp_path):
    def run(lat):
        return {"results": _results([11, 12, 13], lat), "epoch_s": 1000.0,
                "history": [_rec(1.0, 900, 900)]}  # fmt: skip

    ov = {"shed": run([1.0, 1.0, 1.0]), "noshed": run([2.0, 4.0, 6.0])}
    sb._write_overload_tables(tmp_path, ov)
    lat = pd.read_csv(tmp_path / "spark_overload_latency.csv")
    assert lat.groupby("run").size().to_dict() == {"balance-sic": 3, "no shedding": 3}
    hist = pd.read_csv(tmp_path / "spark_overload_intervals.csv")
    assert "query_sic" not in hist and len(hist) == 2
    assert (tmp_path / "spark_overload_latency.png").read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------ checks


def _checks(summary: dict) -> dict:
    return {c.name: c for c in sb.spark_checks(summary)}


def _growing(first: float, slope: float, n: int = 40) -> dict:
    """Latency stats of a run whose results are produced every 3 s, latency ``first`` and
    growing by ``slope`` s per s."""
    t = [10.0 + 3 * i for i in range(n)]
    return sb.latency_stats(
        _results(t, [first + slope * (x - t[0]) for x in t]), epoch_s=1000.0, warmup_s=0.0
    )


def test_spark_checks_on_the_paper_shaped_run():
    s = _summary()
    s.update(latency_shed=_growing(4.0, 0.0), latency_noshed=_growing(9.5, 0.686),
             utilisation=1.035, source_ratio=0.479)  # fmt: skip
    c = _checks(s)
    for name in ("latency_grows_without_shedding", "latency_bounded_with_shedding",
                 "latency_p95_shed_below_noshed", "utilisation_ge_0.85"):  # fmt: skip
        assert c[name].passed, c[name].why
    ratio = c["source_ratio_ge_0.8"]
    assert ratio.failed and "cost per row in Spark 2 us (spillway) vs 1 us (rate)" in ratio.why


def test_latency_checks_fail_when_the_shedder_admits_more_than_the_node_processes():
    # A capacity estimate set too high: the shedding node falls behind like the unshed one.
    s = _summary()
    s.update(latency_shed=_growing(4.0, 0.3), latency_p95_shed_s=40.0)
    c = _checks(s)
    assert c["latency_bounded_with_shedding"].failed
    assert c["latency_p95_shed_below_noshed"].failed


def test_noshed_growth_fails_when_the_overload_was_not_real():
    # A calibration that measured too little capacity: "3x" of it fits the node, and the run
    # without shedding keeps up.
    s = _summary()
    s["latency_noshed"] = _growing(1.0, 0.001)
    assert _checks(s)["latency_grows_without_shedding"].failed


def test_utilisation_fails_when_the_capacity_is_set_too_high():
    hist = [_rec(float(t), 600, 600) for t in range(1, 11)]  # processes 600 of 1,000 per s
    s = _summary()
    s["utilisation"] = sb.processed_rate(hist, warmup_s=0.0, trigger_s=1.0) / 1000.0
    c = _checks(s)["utilisation_ge_0.85"]
    assert c.failed and c.why == "processed rate over the measured capacity 0.6 is not >= 0.85"


def test_source_ratio_fails_on_the_measured_per_row_costs():
    cfg = sb.make_config(True)
    ours = sb.source_speed(
        [{"rows": 1, "batch_s": 1.0, "batches": 1}],
        [{"rows": r, "duration_s": 0.17 + 0.94e-6 * r} for r in (1e5, 2e5, 4e5)], cfg,
    )  # fmt: skip
    theirs = sb.source_speed(
        [{"rows": 1, "batch_s": 1.0, "batches": 1}],
        [{"rows": r, "duration_s": 0.12 + 0.48e-6 * r} for r in (1e5, 2e5, 4e5)], cfg,
    )  # fmt: skip
    s = _summary()
    s["source_ratio"] = ours["rows_per_s"] / theirs["rows_per_s"]
    assert _checks(s)["source_ratio_ge_0.8"].failed
