"""stw-validation (THEMIS §7 opening): config, statistics, checks, outputs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.experiments import stw_validation as sv


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"runs": ()}, "runs must be a non-empty tuple of StwRun"),
        ({"runs": (10.0,)}, "runs must be a non-empty tuple of StwRun"),
        ({"queries": 0}, "queries must be an int >= 1"),
        ({"rate": 0.0}, "rate must be a finite number > 0"),
        ({"capacity_factor": -1.0}, "capacity_factor must be a finite number > 0"),
        ({"warmup_s": 500.0}, "warmup_s .* must be below every run's duration_s"),
        ({"warm_s": 0.0}, "warm_s must be a finite number > 0"),
        ({"seed": -2}, "seed must be a non-negative int"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        sv.StwValidationConfig(**kwargs)


def test_stw_run_rejects_bad_lengths():
    with pytest.raises(ConfigError, match="stw_s must be a finite number > 0"):
        sv.StwRun(stw_s=0.0, duration_s=10.0)


def test_node_config_is_ten_underloaded_top5_queries():
    cfg = sv.make_config(quick=True, seed=1)
    node = sv.node_config(cfg, cfg.runs[1])
    assert node.stw_s == 100.0 and node.seed == 1
    assert [(q.kind, q.feed, q.n_sources, q.rate) for q in node.queries] == [
        ("top5", "cluster", 20, 20.0)
    ] * 10
    full = sv.make_config(quick=False, seed=0)
    assert [r.stw_s for r in full.runs] == [10.0, 100.0]
    assert all(r.duration_s == 300.0 for r in full.runs)


def _ticks(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {"t": float(i), "query": q, "sic": v, "kept_fraction": 1.0}
        for q, vals in values.items()
        for i, v in enumerate(vals)
    ]
    return pd.DataFrame(rows)


def test_stw_stats_mean_and_std_across_queries():
    ticks = _ticks({"a": [0.1, 1.0, 1.0], "b": [0.1, 0.96, 0.98]})
    s = sv.stw_stats(ticks, stw_s=1.0, warmup_s=0.0)  # t = 0 has not seen a whole STW
    assert s["sic_mean"] == pytest.approx(0.985)
    assert s["sic_std"] == pytest.approx(0.015)
    assert s["samples_per_query"] == 2 and s["from_s"] == 1.0
    assert s["kept_fraction"] == 1.0
    later = sv.stw_stats(ticks, stw_s=1.0, warmup_s=0.0, ready_s=1.0)  # STW after warm-up
    assert later["sic_mean"] == pytest.approx(0.99) and later["samples_per_query"] == 1
    assert later["from_s"] == 2.0


def _verdicts(stw):
    return {c.name: c for c in sv.checks(stw)}


def test_checks_on_the_paper_shaped_run():
    # 2026-11-26 paper-shaped run: lags 0.44 s and 0.42 s.
    full = [{"stw_s": 10.0, "sic_mean": 0.9558, "lag_mean_s": 0.44},
            {"stw_s": 100.0, "sic_mean": 0.9958, "lag_mean_s": 0.42}]  # fmt: skip
    c = _verdicts(full)
    assert c["means_in_range"].passed
    closer = c["longer_stw_closer_to_1"]
    assert closer.verdict == "not applicable" and "holds by construction" in closer.why
    assert "0.9558 at 10 s, 0.9958 at 100 s" in closer.why


def test_range_check_fails_when_the_result_lag_grows():
    # The quick run on a loaded machine: a 0.6 s result lag puts the 10 s STW at 0.9405.
    loaded = [{"stw_s": 10.0, "sic_mean": 0.9405, "lag_mean_s": 0.6},
              {"stw_s": 100.0, "sic_mean": 0.9956, "lag_mean_s": 0.44}]  # fmt: skip
    c = _verdicts(loaded)["means_in_range"]
    assert c.failed and c.why == "failed at STW 10 s: 0.9405 is outside [0.95, 1.02]"


def test_checks_without_the_result_table():
    c = _verdicts([{"stw_s": 10.0, "sic_mean": 0.97}, {"stw_s": 100.0, "sic_mean": 1.01}])
    assert c["means_in_range"].passed
    assert _verdicts([])["means_in_range"].verdict == "not applicable"


def test_write_outputs(tmp_path):
    cfg = sv.make_config(quick=True, seed=0)
    stw = []
    ticks = []
    for r, vals in zip(cfg.runs, ([0.97, 0.98], [1.0, 1.001]), strict=True):
        t = _ticks({"top5/0": vals * 60, "top5/1": vals * 60}).assign(stw_s=r.stw_s)
        ticks.append(t)
        s = sv.stw_stats(t, stw_s=r.stw_s, warmup_s=0.0)
        s.update(duration_s=r.duration_s, ready_s=0.0, input_rate=4000.0,
                 capacity_tuples_per_s=1e5, attempts=1)  # fmt: skip
        stw.append(s)
    measured = {"stw": stw, "ticks": pd.concat(ticks, ignore_index=True)}
    summary = sv.EXPERIMENT.write(cfg, measured, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert [s["stw_s"] for s in on_disk["stw"]] == [10.0, 100.0]
    assert {"stw_s", "sic_mean", "sic_std"} <= set(on_disk["stw"][0])
    assert [c["verdict"] for c in summary["checks"]] == ["pass", "not applicable"]
    report = (tmp_path / "report.md").read_text()
    assert "0.9700 ± 0.0064" in report and "1.0086 ± 0.0034" in report
    for png in ("stw_sic_over_time.png", "stw_mean_sic.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({png})" in report
    assert len(pd.read_csv(tmp_path / "points.csv")) == 4
    assert on_disk["stw"][1]["from_s"] == 100.0
