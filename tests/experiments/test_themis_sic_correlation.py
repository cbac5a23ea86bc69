"""sic-correlation (THEMIS Figs. 6-7): config, point extraction, Spearman per case, outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments import sic_correlation as sc


def _frame(kind: str, qid: int, values: list, sic: list, t0: float = 10.0, ranks=None):
    n = len(values)
    t = [t0 + i for i in range(n)]
    return pd.DataFrame(
        {
            "query_id": qid,
            "kind": kind,
            "window_start": pd.to_datetime(t, unit="s", utc=True),
            "rank": ranks if ranks is not None else [1] * n,
            "value": values,
            "sic": sic,
            "t": t,
        }
    )


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"levels": (2, 1)}, "levels must be strictly increasing"),
        ({"levels": ()}, "levels must be strictly increasing"),
        ({"levels": (0, 1)}, "levels must be strictly increasing"),
        ({"rate": -1.0}, "rate must be a finite number > 0"),
        ({"capacity_queries": 0}, "capacity_queries must be a finite number > 0"),
        ({"warmup_s": 30.0, "duration_s": 20.0}, "warmup_s must be below duration_s"),
        ({"seed": -1}, "seed must be a non-negative int"),
        ({"spread_replicas": 0}, "spread_replicas must be an int >= 1"),
        ({"datasets": (), "cov_datasets": (), "top5": False}, "at least one case"),
        ({"exact_span_s": 0.0}, "exact_span_s must be a finite number > 0"),
        ({"calibrate_s": -3.0}, "calibrate_s must be a finite number > 0"),
        ({"fixed_capacity": "yes"}, "fixed_capacity must be True or False"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        sc.SicCorrelationConfig(**kwargs)


def test_config_rejects_unknown_dataset():
    with pytest.raises(UnknownNameError, match="datasets must name feeds among"):
        sc.SicCorrelationConfig(datasets=("gaussian", "planetlab"))


def test_quick_and_full_configs_differ_in_size():
    quick, full = sc.make_config(quick=True, seed=4), sc.make_config(quick=False, seed=4)
    assert quick.seed == full.seed == 4
    assert len(quick.levels) < len(full.levels)
    assert quick.duration_s < full.duration_s == 300.0


def test_cases_cover_the_paper_workload():
    cfg = sc.make_config(quick=True, seed=0)
    labels = [c.label for c in sc.cases(cfg)]
    for kind in ("avg", "max", "count"):
        for d in sc.DATASETS:
            assert f"{kind}/{d}" in labels
    top5 = next(c for c in sc.cases(cfg) if c.kind == "top5")
    assert (top5.sources, top5.rate, top5.dataset) == (20, 20.0, "cluster")
    assert top5.feed_options == {}
    cov = [c for c in sc.cases(cfg) if c.kind == "cov"]
    assert all(c.sources == 2 and c.rate == 400.0 for c in cov)


def test_level_config_hosts_n_queries_per_case_at_fixed_capacity():
    cfg = sc.make_config(quick=True, seed=2)
    node, of = sc.level_config(cfg, 3)
    assert len(node.queries) == 3 * sum(c.replicas for c in sc.cases(cfg)) == len(of)
    assert {c.replicas for c in of if c.kind in ("top5", "cov")} == {cfg.spread_replicas}
    assert {c.replicas for c in of if c.kind in ("avg", "max", "count")} == {1}
    assert node.seed == 2 and node.stw_s == cfg.stw_s
    names = [q.name for q in node.queries]
    assert len(set(names)) == len(names)
    for q, case in zip(node.queries, of, strict=True):
        assert (q.kind, q.feed, q.n_sources, q.rate) == (
            case.kind,
            case.dataset,
            case.sources,
            case.rate,
        )
    load = sum(q.rate * q.n_sources for q in node.queries)
    assert load / sc.capacity_tuples_per_s(cfg) == pytest.approx(3 / cfg.capacity_queries)


# ------------------------------------------------------------------------------ points


def test_compared_windows_drop_the_warmup_and_keep_every_closed_window():
    # run_level's exact answers end at the last window the run closed: a closed window after
    # the last shed one lost everything to shedding and counts (it used to be cut off)
    shed = _frame("avg", 0, [1.0, 2.0, 3.0], [0.1] * 3, t0=0.0)
    exact = _frame("avg", 0, [1.0, 2.0, 3.0, 4.0, 5.0], [0.1] * 5, t0=0.0)
    s, e = sc.compared_windows(shed, exact, "avg", warmup_s=1.0)
    assert s["t"].tolist() == [1.0, 2.0]
    assert e["t"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_compared_windows_without_shed_rows_count_every_exact_window():
    exact = _frame("avg", 0, [1.0], [0.1])
    s, e = sc.compared_windows(exact.iloc[0:0], exact, "avg", warmup_s=0.0)
    assert s.empty and len(e) == 1
    w = sc.level_windows(s, e, [sc.Case(kind="avg", dataset="gaussian", sources=1, rate=1.0)],
                         level=1, stw_s=10.0, window_s=1.0, warmup_s=0.0)  # fmt: skip
    assert w[["sic", "error", "used"]].values.tolist() == [[0.0, 1.0, True]]


def _point(shed, exact, cases, level=1, per_query=False):
    w = sc.level_windows(shed, exact, cases, level=level, stw_s=10.0, window_s=1.0, warmup_s=0)
    return sc.aggregate(w, per_query=per_query)


def test_avg_point_is_mean_relative_error_and_scaled_sic():
    exact = _frame("avg", 0, [50.0, 40.0], [0.1, 0.1])
    shed = _frame("avg", 0, [55.0, 40.0], [0.05, 0.03])
    case = sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0)
    (p,) = _point(shed, exact, [case], level=3)
    assert p["error"] == pytest.approx((0.1 + 0.0) / 2)
    assert p["sic"] == pytest.approx(0.4)  # mean window SIC 0.04 x STW/window 10
    assert (p["level"], p["query"], p["dataset"], p["windows"], p["missing"]) == (
        3,
        "avg",
        "gaussian",
        2,
        0,
    )


def test_count_point_skips_exact_zero_windows_and_counts_missing_as_error_1():
    exact = _frame("count", 0, [100.0, 0.0, 80.0, 90.0], [0.1] * 4)
    shed = _frame("count", 0, [50.0, 0.0, 40.0, 45.0], [0.05] * 4)
    shed = shed[shed["t"] != 12.0]  # window 12 lost every tuple: no shed row, SIC 0
    case = sc.Case(kind="count", dataset="uniform", sources=1, rate=400.0)
    (p,) = _point(shed, exact, [case])
    assert p["windows"] == 3 and p["missing"] == 1
    assert p["error"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert p["sic"] == pytest.approx((0.5 + 0.0 + 0.5) / 3)


def test_count_query_whose_answer_is_always_zero_gives_no_point():
    exact = _frame("count", 0, [0.0, 0.0], [0.1] * 2)
    case = sc.Case(kind="count", dataset="cluster", sources=1, rate=400.0)
    assert _point(exact, exact, [case]) == []


def test_top5_point_is_mean_kendall_distance():
    ranks = [1, 2, 3, 4, 5]
    exact = pd.concat(
        [
            _frame("top5", 0, [1.0, 2.0, 3.0, 4.0, 5.0], [0.02] * 5, t0=10.0, ranks=ranks),
            _frame("top5", 0, [1.0, 2.0, 3.0, 4.0, 5.0], [0.02] * 5, t0=11.0, ranks=ranks),
        ]
    )
    exact["t"] = [10.0] * 5 + [11.0] * 5
    exact["window_start"] = pd.to_datetime(exact["t"], unit="s", utc=True)
    shed = exact.copy()
    swapped = (shed["t"] == 11.0) & shed["rank"].isin([1, 2])
    shed.loc[swapped, "value"] = [2.0, 1.0]
    shed["sic"] = 0.01
    case = sc.Case(kind="top5", dataset="cluster", sources=20, rate=20.0)
    (p,) = _point(shed, exact, [case])
    one_swap = 1 / (25 + 0.5 * 20)
    assert p["error"] == pytest.approx(one_swap / 2)
    assert p["sic"] == pytest.approx(0.5)


def test_cov_point_is_rms_around_exact_relative_to_exact_spread():
    exact = _frame("cov", 0, [2.0, -2.0, 2.0], [0.1] * 3)
    shed = _frame("cov", 0, [1.0, -3.0, np.nan], [0.05] * 3)
    case = sc.Case(kind="cov", dataset="gaussian", sources=2, rate=400.0)
    (p,) = _point(shed, exact, [case])
    assert p["error"] == pytest.approx(1.0 / 2.0)
    assert p["windows"] == 2


def test_cov_point_scales_out_the_size_of_the_covariances():
    case = sc.Case(kind="cov", dataset="gaussian", sources=2, rate=400.0)
    errs = []
    for k in (1.0, 100.0):
        exact = _frame("cov", 0, [2.0 * k, 1.0 * k], [0.1] * 2)
        shed = _frame("cov", 0, [1.0 * k, 2.0 * k], [0.05] * 2)
        (p,) = _point(shed, exact, [case])
        errs.append(p["error"])
    assert errs[0] == pytest.approx(errs[1])


def test_step_points_pool_queries_of_a_case_and_query_points_keep_them_apart():
    cases = [
        sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0),
        sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0),
        sc.Case(kind="avg", dataset="mixed", sources=1, rate=400.0),
    ]
    exact = pd.concat([_frame("avg", i, [10.0], [0.1]) for i in range(3)])
    shed = pd.concat(
        [
            _frame("avg", 0, [9.0], [0.05]),
            _frame("avg", 1, [13.0], [0.03]),
            _frame("avg", 2, [12.0], [0.05]),
        ]  # fmt: skip
    )
    steps = _point(shed, exact, cases)
    assert [(p["case"], round(p["error"], 6), p["queries"]) for p in steps] == [
        ("avg/gaussian", 0.2, 2),
        ("avg/mixed", 0.2, 1),
    ]
    assert steps[0]["sic"] == pytest.approx(0.4)
    per_q = _point(shed, exact, cases, per_query=True)
    assert [(p["query_id"], round(p["error"], 6)) for p in per_q] == [(0, 0.1), (1, 0.3), (2, 0.2)]


def test_windows_of_a_step_without_exact_answers_are_empty():
    case = sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0)
    exact = _frame("avg", 0, [10.0], [0.1])
    w = sc.level_windows(exact, exact.iloc[0:0], [case], level=1, stw_s=10, window_s=1,
                         warmup_s=0)  # fmt: skip
    assert w.empty and list(w.columns) == list(sc.WINDOW_COLUMNS)
    assert sc.aggregate(w) == []


# ------------------------------------------------------------------------------ analysis


def _points(case: str, pairs) -> list[dict]:
    kind, dataset = case.split("/")
    return [
        {"case": case, "query": kind, "dataset": dataset, "level": lvl, "sic": s, "error": e}
        for lvl, s, e in pairs
    ]


def test_spearman_per_case_and_limits():
    cfg = sc.SicCorrelationConfig(datasets=("uniform",), cov_datasets=(), top5=False)
    pts = _points("count/uniform", [(1, 0.9, 0.1), (2, 0.5, 0.5), (4, 0.2, 0.8)])
    pts += _points("avg/uniform", [(1, 0.9, 0.01), (2, 0.5, 0.005), (4, 0.2, 0.02)])
    pts += _points("max/uniform", [(1, 0.9, 0.0)])
    per_q = _points("count/uniform", [(1, 0.9, 0.2), (1, 0.8, 0.1), (4, 0.2, 0.8)])
    summaries = sc.case_summaries(pts, sc.cases(cfg), per_q)
    by = {(c["query"], c["dataset"]): c for c in summaries}
    assert by[("count", "uniform")]["spearman_rho_per_query"] == pytest.approx(-0.5)
    assert by[("count", "uniform")]["n_query_points"] == 3
    assert by[("count", "uniform")]["spearman_rho"] == -1.0
    assert by[("count", "uniform")]["ok"] is True
    assert by[("avg", "uniform")]["limit"] is None and by[("avg", "uniform")]["ok"] is None
    assert math.isnan(by[("max", "uniform")]["spearman_rho"])  # one point: undefined
    assert by[("count", "uniform")]["points"] == [[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]]


def test_a_count_case_that_does_not_track_sic_fails():
    cfg = sc.SicCorrelationConfig(datasets=("gaussian",), cov_datasets=(), top5=False)
    pts = _points("count/gaussian", [(1, 0.9, 0.5), (2, 0.5, 0.1), (4, 0.2, 0.6)])
    (count,) = [c for c in sc.case_summaries(pts, sc.cases(cfg)) if c["query"] == "count"]
    assert count["spearman_rho"] > -0.8 and count["ok"] is False


def test_avg_vs_count_compares_steps_at_sic_up_to_08():
    pts = _points("avg/mixed", [(1, 0.95, 0.001), (2, 0.5, 0.6)])
    pts += _points("count/mixed", [(1, 0.95, 0.05), (2, 0.5, 0.5)])
    rows = sc.avg_vs_count(pts)
    assert [(r["level"], r["ok"]) for r in rows] == [(2, False)]  # step 1 is above SIC 0.8


def test_count_error_against_one_minus_sic():
    pts = _points("count/uniform", [(1, 0.5, 0.52), (2, 0.25, 0.7)])
    assert sc.count_vs_one_minus_sic(pts) == pytest.approx(0.05)
    assert math.isnan(sc.count_vs_one_minus_sic(_points("avg/uniform", [(1, 0.5, 0.1)])))


def _count_windows(level, keep, rescale):
    """A COUNT query's result windows at one load step: the shed count of ``keep`` of 400
    tuples, or that count scaled back by 1 / keep (an unbiased estimate), with a little
    sampling noise."""
    n = 4
    exact = _frame("count", 0, [400.0] * n, [0.1] * n)
    noise = np.array([1.01, 0.99, 1.02, 0.98])
    value = 400.0 * keep * noise * ((1 / keep) if rescale else 1.0)
    shed = _frame("count", 0, list(value), [0.1 * keep] * n)
    case = sc.Case(kind="count", dataset="uniform", sources=1, rate=400.0)
    w = sc.level_windows(shed, exact, [case], level=level, stw_s=10.0, window_s=1.0, warmup_s=0)
    return w


def _rho_check(rescale):
    windows = pd.concat([_count_windows(n, k, rescale) for n, k in
                         [(1, 1.0), (2, 0.5), (4, 0.25), (8, 0.125)]], ignore_index=True)  # fmt: skip
    cfg = sc.SicCorrelationConfig(datasets=("uniform",), cov_datasets=(), top5=False)
    rows = sc.case_summaries(sc.aggregate(windows), sc.cases(cfg))
    return sc.checks(rows, sc.avg_vs_count(sc.aggregate(windows)))[0]


def test_rho_check_passes_for_a_plain_count_and_fails_for_a_rescaled_one():
    assert _rho_check(rescale=False).passed  # error = 1 - SIC: rho = -1
    # A COUNT scaled back by the kept share has only sampling noise left: its error no longer
    # falls as SIC rises.
    c = _rho_check(rescale=True)
    assert c.failed and c.why.startswith("failed at count/uniform:")


def test_avg_below_count_fails_on_values_near_zero_and_is_not_applicable_without_low_sic():
    # An idle machine's CPU in the cluster feed averages a fraction of a percent, so AVG's
    # relative error blows up above COUNT's.
    pts = _points("avg/cluster", [(2, 0.5, 0.9)]) + _points("count/cluster", [(2, 0.5, 0.5)])
    (c,) = [k for k in sc.checks([], sc.avg_vs_count(pts)) if k.name.startswith("avg_below")]
    assert c.failed and "cluster step 2 (SIC 0.5): AVG error 0.9 is not < 0.5" in c.why
    high = _points("avg/uniform", [(1, 0.95, 0.01)]) + _points("count/uniform", [(1, 0.95, 0.05)])
    (c,) = [k for k in sc.checks([], sc.avg_vs_count(high)) if k.name.startswith("avg_below")]
    assert c.verdict == "not applicable"
    assert sc.checks([], [])[0].verdict == "not applicable"  # no COUNT, TOP-5 or COV case


# ------------------------------------------------------------------------------ outputs


def test_write_outputs_writes_summary_csv_plots_and_report(tmp_path):
    cfg = sc.make_config(quick=True, seed=0)
    slope = {"avg": 0.02, "max": 0.05, "count": 1.0, "top5": 0.3, "cov": 0.8}
    metric = {"avg": "mare", "max": "mare", "count": "mare", "top5": "topk_distance",
              "cov": "cov_error"}  # fmt: skip
    rows = []
    for qid, case in enumerate(sc.cases(cfg)):
        for lvl, sic in zip(cfg.levels, (1.0, 0.8, 0.4, 0.2), strict=True):
            err = slope[case.kind] * (1 - sic) + 0.001 * lvl
            for w in range(3):
                rows.append({"level": lvl, "query_id": qid, "case": case.label,
                             "query": case.kind, "dataset": case.dataset,
                             "window_start": pd.Timestamp(w, unit="s", tz="UTC"), "sic": sic,
                             "exact": 1.0, "shed": 1.0 - err if case.kind != "top5" else [1.0],
                             "error": err if case.kind != "cov" else err * (-1) ** w,
                             "metric": metric[case.kind], "used": True})  # fmt: skip
    windows = pd.DataFrame(rows)
    steps = [{"level": n, "queries": n * 17, "input_rate": 1.0, "overload": 1.0,
              "kept_fraction": 1.0, "ready_s": 3.0, "result_rows": 10, "exact_rows": 10,
              "wall_s": 1.0} for n in cfg.levels]  # fmt: skip
    summary = sc.EXPERIMENT.write(cfg, (windows, steps), tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["experiment"] == "sic-correlation"
    case = on_disk["cases"][0]
    assert {"query", "dataset", "spearman_rho", "points"} <= set(case)
    assert len(case["points"]) == len(cfg.levels)
    assert summary["checks"] == [
        {"name": "rho_within_limits", "verdict": "pass", "why": summary["checks"][0]["why"]},
        {"name": "avg_below_count_at_sic_le_0.8", "verdict": "pass",
         "why": summary["checks"][1]["why"]},
    ]  # fmt: skip
    for name in ("points.csv", "query_points.csv", "windows.csv", "steps.csv", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    for png in ("fig6a_avg.png", "fig6b_count.png", "fig6c_max.png", "fig7a_top5.png",
                "fig7b_cov.png"):  # fmt: skip
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({png})" in (tmp_path / "report.md").read_text()
    report = (tmp_path / "report.md").read_text()
    assert "Paper vs this run" in report and "How this run differs" in report
    assert "THEMIS Fig. 6b (COUNT)" in report
    assert "250 ms" in report and "PlanetLab" in report
    assert len(pd.read_csv(tmp_path / "windows.csv")) == len(windows)
    assert len(pd.read_csv(tmp_path / "points.csv")) == len(sc.cases(cfg)) * len(cfg.levels)
