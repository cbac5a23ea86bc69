"""single-node-fairness (THEMIS Fig. 8): config, per-run statistics, checks, outputs."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.experiments import single_node_fairness as nf
from spillway.experiments._spark_runs import LevelRun


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"levels": (4, 2)}, "levels must be strictly increasing"),
        ({"target_overload": 0}, "target_overload must be a finite number > 0"),
        ({"capacity_tuples_per_s": -5.0}, "capacity_tuples_per_s must be a finite number > 0"),
        ({"warmup_s": 40.0, "duration_s": 30.0}, "warmup_s must be below duration_s"),
        ({"headroom": 1.5}, r"headroom must be in \(0, 1\]"),
        ({"seed": 1.5}, "seed must be a non-negative int"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        nf.FairnessConfig(**kwargs)


def test_step_config_is_the_complex_workload():
    cfg = nf.make_config(quick=True, seed=3)
    node = nf.step_config(cfg, 2, scale=2.0)
    kinds = [q.kind for q in node.queries]
    assert kinds == ["avg_all", "top5", "cov"] * 2
    assert [q.n_sources for q in node.queries[:3]] == [10, 20, 2]
    assert all(q.rate == 800.0 and q.feed == "cluster" for q in node.queries)
    assert node.seed == 3 and node.overload is None


def test_the_capacity_is_measured_by_default_and_fixed_as_a_labelled_option():
    # measured by default (overload relative to the capacity the node measured)
    assert nf.make_config(quick=False).capacity_tuples_per_s is None
    assert nf.make_config(quick=True).capacity_tuples_per_s is None
    # the labelled fixed option: the paper's rates reach 0.1 at the top step
    cfg = nf.FairnessConfig(capacity_tuples_per_s=nf.FIXED_CAPACITY)
    assert nf.rate_scale(cfg, nf.FIXED_CAPACITY) == pytest.approx(1.0)
    # measured: a node that processes 5x more gets 5x the rates, for the same overload
    assert nf.rate_scale(cfg, 5 * nf.FIXED_CAPACITY) == pytest.approx(5.0)
    with pytest.raises(ConfigError, match="capacity must be a finite number > 0, got 0"):
        nf.rate_scale(cfg, 0.0)


def _ticks(values: dict[str, list[float]], t0: float = 0.0) -> pd.DataFrame:
    rows = []
    for q, vals in values.items():
        for i, v in enumerate(vals):
            rows.append({"t": t0 + i, "query": q, "kind": "top5", "sic": v, "kept_fraction": 0.3,
                         "latency_p95_s": 2.0, "arrival_rate": 1.0,
                         "capacity_tuples_per_s": 100.0, "processed_tuples_per_s": 95.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_run_stats_average_per_query_after_warmup():
    ticks = _ticks({"a": [0.0, 0.5, 0.5], "b": [1.0, 0.5, 0.3]})
    s = nf.run_stats(ticks, warmup_s=1.0)
    assert s["per_query"].to_dict() == {"a": 0.5, "b": 0.4}
    assert s["mean_sic"] == pytest.approx(0.45)
    assert s["std_sic"] == pytest.approx(0.05)
    assert s["jain"] == pytest.approx(0.81 / (2 * 0.41))
    assert s["samples"] == 2 and s["kept_fraction"] == pytest.approx(0.3)
    assert s["min_jain_samples"] == pytest.approx(0.64 / (2 * 0.34))


def test_run_stats_without_samples_is_nan():
    s = nf.run_stats(_ticks({"a": [0.5]}), warmup_s=5.0)
    assert math.isnan(s["jain"]) and math.isnan(s["jain_samples"]) and s["samples"] == 0


def _level(n: int, jbs: float, jr: float, mbs: float) -> dict:
    return {"queries": 3 * n, "input_rate": 12800.0 * n, "jain_balance_sic": jbs,
            "jain_random": jr, "mean_sic_balance_sic": mbs, "mean_sic_random": mbs,
            "std_sic_balance_sic": 0.01, "std_sic_random": 0.02}  # fmt: skip


def _verdicts(levels, **cfg):
    config = nf.make_config(quick=True) if not cfg else nf.FairnessConfig(**cfg)
    return {c.name: c for c in nf.checks(levels, config)}


def test_checks_on_a_run_like_the_quick_one():
    # The quick run's shape: both policies fair, random never below 0.95, SIC ~ 12,800 / load.
    levels = [
        _level(1, 1.0, 1.0, 1.007),
        _level(4, 1.0, 1.0, 0.252),
        _level(10, 1.0, 0.9998, 0.103),
    ]
    c = _verdicts(levels, capacity_tuples_per_s=nf.FIXED_CAPACITY)
    assert c["jain_balance_sic_ge_0.95"].passed
    assert "random shedding meets it too" in c["jain_balance_sic_ge_0.95"].why
    assert c["balance_sic_fairer_where_random_below_0.95"].verdict == "not applicable"
    assert "never fell below 0.95 (lowest 0.9998)" in c[
        "balance_sic_fairer_where_random_below_0.95"].why  # fmt: skip
    falls = c["mean_sic_falls"]
    assert falls.verdict == "not applicable" and "at 12,800 tuples/s" in falls.why
    assert "labelled option" in falls.why
    # the same numbers with the capacity measured: a real check, and it passes
    assert _verdicts(levels, capacity_tuples_per_s=None)["mean_sic_falls"].passed
    assert nf.random_below(levels) == 0


def _jain_of(per_query: dict[str, float]) -> dict:
    return nf.run_stats(_ticks({q: [v, v] for q, v in per_query.items()}), warmup_s=0.0)


def test_jain_check_fails_for_a_shedder_that_starves_the_costly_queries():
    # A cost-blind shedder that keeps the cheap AVG-all and COV tuples and starves TOP-5.
    starved = _jain_of({"avg_all/0": 0.3, "top5/0": 0.02, "cov/0": 0.3})
    fair = _jain_of({"avg_all/0": 0.3, "top5/0": 0.29, "cov/0": 0.31})
    assert starved["jain"] < 0.8 < fair["jain"]
    levels = [_level(1, fair["jain"], 0.99, 1.0), _level(4, starved["jain"], 0.99, 0.25)]
    c = _verdicts(levels)["jain_balance_sic_ge_0.95"]
    assert c.failed and c.why.startswith("failed at 12 queries:")


def test_fairer_check_fails_when_balance_sic_is_swapped_for_random():
    # Two random shedders with different seeds where random is unfair: the "balance-sic" run
    # is no fairer.
    levels = [_level(1, 0.99, 0.99, 1.0), _level(4, 0.91, 0.93, 0.25)]
    c = _verdicts(levels)["balance_sic_fairer_where_random_below_0.95"]
    assert c.failed and "12 queries: BALANCE-SIC's Jain 0.91 is not > 0.93" in c.why
    assert nf.random_below(levels) == 1


def test_mean_sic_check_is_real_with_a_measured_capacity():
    # With the capacity measured, the node's estimate can grow with load (bigger batches spread
    # the fixed cost), and SIC need not fall: then the check fails.
    flat = [_level(1, 0.99, 0.99, 0.40), _level(4, 0.99, 0.99, 0.42)]
    c = _verdicts(flat, capacity_tuples_per_s=None)["mean_sic_falls"]
    assert c.failed and c.why == "failed at 3 → 12 queries: mean SIC 0.42 is not < 0.4"
    falling = [_level(1, 0.99, 0.99, 0.9), _level(4, 0.99, 0.99, 0.3)]
    assert _verdicts(falling, capacity_tuples_per_s=None)["mean_sic_falls"].passed


def _run(ticks: pd.DataFrame) -> LevelRun:
    return LevelRun(results=pd.DataFrame(), exact=None, ticks=ticks, history=[], until_s=0.0,
                    epoch_s=0.0, ready_s=0.0, wall_s=1.0)  # fmt: skip


def test_level_record_has_the_issue_keys():
    cfg = nf.make_config(quick=True, seed=0)
    node = nf.step_config(cfg, 2, scale=1.0)
    t_bs = _ticks({"a": [0.5, 0.5], "b": [0.5, 0.5]})
    t_r = _ticks({"a": [0.2, 0.2], "b": [0.8, 0.8]})
    stats = {"balance-sic": nf.run_stats(t_bs, warmup_s=0), "random": nf.run_stats(t_r, warmup_s=0)}
    rec = nf.level_record(2, node, stats, {"balance-sic": _run(t_bs), "random": _run(t_r)})
    for key in ("queries", "input_rate", "jain_balance_sic", "jain_random",
                "mean_sic_balance_sic", "mean_sic_random", "std_sic_balance_sic",
                "std_sic_random"):  # fmt: skip
        assert key in rec
    assert rec["queries"] == 6 and rec["input_rate"] == nf.input_rate(node)
    assert rec["jain_balance_sic"] == 1.0
    assert rec["jain_random"] == pytest.approx(1.0 / (2 * 0.68))
    assert rec["capacity_tuples_per_s_balance_sic"] == 100.0


def test_write_outputs_writes_summary_csv_plots_and_report(tmp_path):
    cfg = nf.make_config(quick=True, seed=0)
    levels = [_level(n, 0.99, 0.97, 1.0 / n) for n in cfg.levels]
    for lv in levels:
        for p in ("balance_sic", "random"):
            for k in ("jain_samples", "min_jain_samples", "kept_fraction",
                      "capacity_tuples_per_s", "attempts"):  # fmt: skip
                lv[f"{k}_{p}"] = 0.5
    ticks = pd.concat(
        [
            _ticks({"avg_all/0": list(np.linspace(1, 0.1, 5))}).assign(queries_per_kind=n, policy=p)
            for n in cfg.levels
            for p in nf.POLICIES
        ],
        ignore_index=True,
    )
    points = [{"queries_per_kind": 1, "policy": "random", "query": "cov/0", "sic": 0.4}]
    measured = {"levels": levels, "points": points, "ticks": ticks, "calibration": None,
                "rate_scale": 1.0}  # fmt: skip
    summary = nf.EXPERIMENT.write(replace(cfg, capacity_tuples_per_s=nf.FIXED_CAPACITY),
                                  measured, tmp_path)  # fmt: skip
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["experiment"] == "single-node-fairness"
    assert [lv["queries"] for lv in on_disk["levels"]] == [3, 12, 30]
    # a fixed capacity (the labelled option): the falling mean SIC is arithmetic, not applicable
    assert [c["verdict"] for c in summary["checks"]] == ["pass", "not applicable",
                                                          "not applicable"]  # fmt: skip
    for name in ("levels.csv", "points.csv", "ticks.csv", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    report = (tmp_path / "report.md").read_text()
    for png in ("fig8a_mean_sic.png", "fig8b_jain.png", "fig8c_std_sic.png",
                "fig8d_sic_over_time.png"):  # fmt: skip
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({png})" in report
    assert "528,000" in report and "Paper vs this run" in report
    assert "What one node cannot test" in report
