"""The run report: every file, every summary key, numbers computed from the records."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from spillway.run_report import finite_jain, interval_rows, latency_target, write_run_report

from .conftest import finite, small_config, synthetic_run

SUMMARY_KEYS = {
    "policy",
    "duration_s",
    "jain",
    "capacity_tuples_per_s",
    "processed_tuples_per_s",
    "utilisation",
    "latency_bound_s",
    "latency_p95_max_s",
    "queries",
}
QUERY_KEYS = {"name", "kind", "sic_mean", "kept_fraction", "latency_p95_s", "rows_in", "rows_kept"}
PLOTS = ("sic.png", "kept.png", "latency.png", "jain.png", "capacity.png")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list]:
    cfg = small_config(policy="random", seed=5)
    records, snaps, results = synthetic_run(cfg, n=20)
    out = tmp_path_factory.mktemp("run")
    md = write_run_report(
        out, config=cfg, history=records, snapshot=snaps[-1], results=results, duration_s=20.0
    )
    assert md == out / "report.md"
    return out, json.loads((out / "summary.json").read_text()), records


def test_every_file_is_written(report: tuple[Path, dict, list]) -> None:
    out, _, _ = report
    for name in ("summary.json", "report.md", "intervals.csv", "results.csv", *PLOTS):
        assert (out / name).stat().st_size > 0, name
    for q in ("avg-gaussian", "top5-cluster", "cov-cluster"):
        with (out / "queries" / f"{q}.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 20
        assert set(rows[0]) == {
            "t_s",
            "sic",
            "sic_projected",
            "kept_fraction",
            "arrived",
            "kept",
            "latency_s",
        }
    for png in PLOTS:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_has_every_key(report: tuple[Path, dict, list]) -> None:
    _, s, _ = report
    assert set(s) >= SUMMARY_KEYS
    assert s["policy"] == "random" and s["duration_s"] == 20.0 and s["seed"] == 5
    assert [q["name"] for q in s["queries"]] == ["avg-gaussian", "top5-cluster", "cov-cluster"]
    for q in s["queries"]:
        assert set(q) >= QUERY_KEYS
        assert all(finite(q[k]) for k in QUERY_KEYS - {"name", "kind"})


def test_numbers_come_from_the_records(report: tuple[Path, dict, list]) -> None:
    _, s, records = report
    steady = [r for r in records if r.t - records[0].t >= 4.0]  # stw_s = 4
    cap = sum(r.capacity_tuples for r in steady)
    proc = sum(r.processed_tuples for r in steady)
    assert s["steady_from_s"] == steady[0].t
    batch = sum(r.batch_s for r in steady)
    assert s["utilisation"] == pytest.approx(batch / (0.8 * len(steady)))  # headroom 0.8, 1 s
    assert s["capacity_measured_tuples_per_s"] == pytest.approx(proc / batch)
    assert s["processed_tuples_per_s"] == pytest.approx(proc / len(steady))
    assert s["capacity_tuples_per_s"] == pytest.approx(cap / len(steady))  # 1 s intervals
    assert s["processed_tuples_per_s"] == pytest.approx(proc / len(steady))
    assert s["latency_bound_s"] == 4.0  # 3 triggers of 1 s + the 1 s window
    sic_means = [np.mean([r.query_sic[q["name"]] for r in steady]) for q in s["queries"]]
    assert [q["sic_mean"] for q in s["queries"]] == pytest.approx(sic_means)
    assert s["jain"] == pytest.approx(finite_jain(sic_means))
    assert s["jain"] < 1.0  # the synthetic queries keep different shares
    assert s["overloaded_intervals"] == len(steady)
    assert s["capacity_error_mean"] == pytest.approx(
        np.mean([abs(r.processed_tuples - r.capacity_tuples) / r.capacity_tuples for r in steady])
    )


def test_latency_from_result_windows_and_misses(report: tuple[Path, dict, list]) -> None:
    _, s, records = report
    by = {q["name"]: q for q in s["queries"]}
    # results of top5: 5 rows per window, one latency per window; windows from the 4th on
    lat = [r.query_latency_s["top5-cluster"] for r in records][4:]
    assert by["top5-cluster"]["latency_p95_s"] == pytest.approx(np.percentile(lat, 95))
    assert by["top5-cluster"]["windows"] == 20
    assert by["top5-cluster"]["latency_target_s"] == 4.0 and not by["top5-cluster"]["on_target"]
    assert by["cov-cluster"]["latency_target_s"] == 8.0 and by["cov-cluster"]["on_target"]
    assert s["latency_misses"] == ["top5-cluster"]
    assert s["latency_p95_max_s"] == max(q["latency_p95_s"] for q in s["queries"])


def test_kept_share_over_the_run_and_rows_from_final_snapshot(
    report: tuple[Path, dict, list],
) -> None:
    _, s, records = report
    steady = [r for r in records if r.t - records[0].t >= 4.0]
    for q in s["queries"]:
        kept = np.mean([r.query_kept[q["name"]] for r in steady])
        assert q["kept_fraction"] == pytest.approx(kept)
        assert q["rows_in"] > q["rows_kept"] > 0


def test_report_md_embeds_plots_and_numbers(report: tuple[Path, dict, list]) -> None:
    out, s, _ = report
    md = (out / "report.md").read_text()
    for png in PLOTS:
        assert f"]({png})" in md
    assert "Policy `random`" in md and "top5-cluster" in md
    assert f"{s['jain']:.4g}" in md  # headline table, as computed
    assert "Missed latency targets: top5-cluster." in md


def test_without_results_latency_comes_from_intervals(tmp_path: Path) -> None:
    cfg = small_config()
    records, snaps, _ = synthetic_run(cfg, n=8)
    write_run_report(
        tmp_path, config=cfg, history=records, snapshot=snaps[-1], results=None, duration_s=8
    )
    s = json.loads((tmp_path / "summary.json").read_text())
    lat = [r.query_latency_s["avg-gaussian"] for r in records if r.t - records[0].t >= 4.0]
    assert s["queries"][0]["latency_p95_s"] == pytest.approx(np.percentile(lat, 95))
    assert not (tmp_path / "results.csv").exists()


def test_empty_history_still_writes_a_report(tmp_path: Path) -> None:
    cfg = small_config()
    _, snaps, _ = synthetic_run(cfg, n=1)
    write_run_report(
        tmp_path, config=cfg, history=[], snapshot=snaps[0], duration_s=5, interrupted=True
    )
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["interrupted"] is True and s["intervals"] == 0
    assert s["utilisation"] is None and s["jain"] is None  # NaN is written as null
    assert "interrupted" in (tmp_path / "report.md").read_text()


def test_interval_rows_rates_use_the_time_between_intervals() -> None:
    cfg = small_config()
    records, _, _ = synthetic_run(cfg, n=3)
    rows = interval_rows(records, [q.name for q in cfg.queries], trigger_s=2.0)
    assert [r["span_s"] for r in rows] == [2.0, 1.0, 1.0]
    assert rows[0]["capacity_tuples_per_s"] == 500.0 and rows[1]["capacity_tuples_per_s"] == 1000.0


def test_finite_jain_bounds() -> None:
    assert finite_jain([0.2, 0.2, 0.2]) == pytest.approx(1.0)
    assert finite_jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert finite_jain([0.3, math.nan]) == 1.0
    assert math.isnan(finite_jain([math.nan]))


def test_latency_target_default_is_three_triggers_plus_window() -> None:
    cfg = small_config(trigger_s=0.5)
    assert [latency_target(q, cfg.trigger_s) for q in cfg.queries] == [2.5, 2.5, 8.0]


def test_latency_per_interval_from_result_windows_when_records_have_none(tmp_path: Path) -> None:
    cfg = small_config()
    records, snaps, results = synthetic_run(cfg, n=10, interval_latency=False)
    assert all(not r.query_latency_s for r in records)
    write_run_report(
        tmp_path, config=cfg, history=records, snapshot=snaps[-1], results=results, duration_s=10
    )
    with (tmp_path / "queries" / "top5-cluster.csv").open() as f:
        lat = [float(row["latency_s"]) for row in csv.DictReader(f)]
    # window k = [k-1, k) ends at interval k; its latency is 1 + 3.2 + 0.01 k
    assert lat == pytest.approx([4.2 + 0.01 * k for k in range(1, 11)])
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["queries"][1]["latency_p95_s"] == pytest.approx(
        np.percentile([4.2 + 0.01 * k for k in range(5, 11)], 95)
    )


def test_an_interval_cut_by_the_stop_is_left_out_of_the_rates(tmp_path: Path) -> None:
    cfg = small_config()
    records, snaps, _ = synthetic_run(cfg, n=10)
    cut = dataclasses.replace(records[-1], processed_tuples=0, batch_s=0.0)
    write_run_report(
        tmp_path, config=cfg, history=[*records[:-1], cut], snapshot=snaps[-1], duration_s=10
    )
    s = json.loads((tmp_path / "summary.json").read_text())
    kept = [r for r in records[:-1] if r.t - records[0].t >= 4.0]
    assert s["unfinished_intervals"] == 1 and s["intervals"] == 10
    assert s["utilisation"] == pytest.approx(
        sum(r.batch_s for r in kept) / (0.8 * cfg.trigger_s * len(kept))
    )
    assert "1 last interval(s) left out" in (tmp_path / "report.md").read_text()


def test_groups_and_missing_groups_of_per_group_decisions(tmp_path: Path) -> None:
    cfg = small_config()
    records, snaps, _ = synthetic_run(cfg, n=8)
    name = cfg.queries[0].name
    grouped = [
        dataclasses.replace(
            r,
            query_groups={name: 40 + i},
            query_groups_kept={name: 40 + i - i % 2},
            query_groups_unseen={name: 0.5 * i},
        )
        for i, r in enumerate(records)
    ]
    write_run_report(
        tmp_path, config=cfg, history=grouped, snapshot=snaps[-1], results=None, duration_s=8
    )
    q = json.loads((tmp_path / "summary.json").read_text())["queries"][0]
    steady = [i for i, r in enumerate(records) if r.t - records[0].t >= cfg.stw_s]
    assert q["groups_mean"] == pytest.approx(np.mean([40 + i for i in steady]))
    assert q["missing_groups_mean"] == pytest.approx(np.mean([i % 2 for i in steady]))
    assert q["unseen_groups_mean"] == pytest.approx(np.mean([0.5 * i for i in steady]))
    write_run_report(
        tmp_path, config=cfg, history=records, snapshot=snaps[-1], results=None, duration_s=8
    )
    plain = json.loads((tmp_path / "summary.json").read_text())["queries"][0]
    assert plain["groups_mean"] is None or math.isnan(plain["groups_mean"])


def test_priority_classes_go_into_the_summary_with_a_csv_and_a_headroom_plot(
    tmp_path: Path,
) -> None:
    from spillway.spark.class_control import ClassControl, ClassControlConfig

    cfg = small_config()
    records, snaps, _ = synthetic_run(cfg, n=3)
    cc = ClassControl(
        ClassControlConfig(manager="aurora", query_class=(1, 2, 3)), trigger_s=1.0, n_queries=3
    )
    for t in (1.0, 2.0):
        cc.decide(t=t, interval_s=1.0, loads=[0.2, 0.2, 0.2], arrived=[5, 5, 5],
                  queued_loads=[0.0] * 3)  # fmt: skip
    cc.note(arrived=[10, 10, 10], dropped=[0, 2, 5])
    cc.observe(0, rows=10, response_s=2.0)
    write_run_report(
        tmp_path, config=cfg, history=records, snapshot=snaps[-1], duration_s=3,
        classes=cc.summary(),
    )  # fmt: skip
    s = json.loads((tmp_path / "summary.json").read_text())
    c = s["classes"]["classes"]
    assert [c[k]["loss"] for k in ("1", "2", "3")] == [0.0, 0.2, 0.5]
    assert c["1"]["latency_p95_s"] == 2.0 and c["1"]["target_s"] == 3.0
    assert c["1"]["meets_target"] is True and c["2"]["latency_p95_s"] is None
    assert [p[0] for p in c["3"]["headroom"]] == [1.0, 2.0]
    with (tmp_path / "classes.csv").open() as f:
        assert [r["class"] for r in csv.DictReader(f)] == ["1", "2", "3"]
    assert (tmp_path / "headroom.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "report.md").read_text()
    assert "## Priority classes" in md and "](headroom.png)" in md
