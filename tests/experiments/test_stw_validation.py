"""stw-validation's accounting of every Eq. 4 sample from the result table (no Spark)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.experiments import stw_validation as sv
from spillway.testing import ListFeed


def _windows(lags, *, stw_s, query="q", sic=None):
    """One 1 s window per second from 0, its result produced ``lag`` after the window's end."""
    t = np.arange(len(lags), dtype=float)
    produced = t + 1.0 + np.asarray(lags, dtype=float)
    assert (np.diff(produced) > 0).all()  # results in window order
    return pd.DataFrame(
        {
            "query": query,
            "t": t,
            "end": t + 1.0,
            "produced": produced,
            "sic": 1.0 / stw_s if sic is None else sic,
            "n_in": 400,
            "arrived": 400.0,
            "share": 1.0 / stw_s,
        }
    )


def _ticks(times, query="q", sic=1.0):
    return pd.DataFrame({"t": times, "query": query, "sic": sic, "kept_fraction": 1.0})


def test_a_steady_lag_cancels_in_eq4_but_not_under_themis_rule():
    # Results 2.3 s after their window ends, every window carrying 1/STW: Eq. 4 summed by
    # result time reads exactly 1 at any tick, THEMIS's rule (sources inside the STW too)
    # misses the 2.3 s not yet processed plus the window straddling the STW's start.
    win = _windows([2.3] * 60, stw_s=10.0)
    smp = sv.stw_samples(_ticks(np.arange(20.0, 50.0) + 0.6), win, stw_s=10.0)
    assert smp["eq4_recomputed"].to_numpy() == pytest.approx(1.0)
    assert smp["lag_change_s"].to_numpy() == pytest.approx(0.0)
    assert smp["themis_rule"].mean() == pytest.approx(1 - (2.3 + 0.5) / 10, abs=0.06)
    assert (smp["themis_rule"] < 0.8).all()


def test_eq4_is_one_minus_the_lag_change_over_the_stw():
    rng = np.random.default_rng(7)
    lags = np.cumsum(rng.uniform(-0.3, 0.3, 200)).clip(0.0, None) + 0.5
    lags = np.maximum.accumulate(np.arange(200) + lags) - np.arange(200) + 1e-6 * np.arange(200)
    for stw in (10.0, 100.0):
        win = _windows(lags, stw_s=stw)
        x = np.arange(stw + 5, 200.0) + 0.37
        smp = sv.stw_samples(_ticks(x), win, stw_s=stw)
        want = 1 - smp["lag_change_s"] / stw
        assert smp["eq4_recomputed"].to_numpy() == pytest.approx(want.to_numpy(), abs=1e-9)


def test_a_falling_lag_reads_above_one():
    # A backlog worked off: the lag falls from 6 s to 1 s over 10 windows, then holds.
    lags = np.concatenate([np.linspace(6.0, 1.0, 10), np.full(40, 1.0)])
    win = _windows(lags, stw_s=10.0)
    smp = sv.stw_samples(_ticks([14.5, 30.5]), win, stw_s=10.0)
    first, later = smp["eq4_recomputed"].tolist()
    assert first == pytest.approx(1.3) and later == pytest.approx(1.0)  # 13 windows in 10 s
    assert sv.settled_time(
        sv.stw_samples(_ticks(np.arange(8.0, 50.0) + 0.5), win, stw_s=10.0), ready_s=8.0
    ) == pytest.approx(11.5)


def test_settled_time_without_lags_is_ready():
    assert sv.settled_time(_ticks([1.0, 2.0]), ready_s=1.5) == 1.5
    empty = sv.stw_samples(_ticks([1.0, 2.0]), _windows([], stw_s=10.0), stw_s=10.0)
    assert empty["lag_s"].isna().all()
    assert sv.settled_time(empty, ready_s=1.5) == 1.5


def test_window_table_sums_top5_rows_and_takes_the_feeds_counts():
    feed = ListFeed(
        times=[[0.1, 0.5, 1.2, 1.6, 2.2], [0.3, 1.4, 2.5, 2.7, 2.9]], values=[[1.0] * 5] * 2
    )
    res = pd.DataFrame(
        {
            "query": ["q"] * 5,
            "t": [0.0, 0.0, 1.0, 2.0, 2.0],
            "sic": [0.1, 0.1, 0.3, 0.2, 0.2],
            "n_in": [3, 3, 3, 4, 4],
            "produced_at": [1001.5, 1001.5, 1002.5, 1003.5, 1003.5],
        }
    )
    w = sv.window_table(res, epoch_s=1000.0, window_s=1.0, stw_s=2.0, feeds={"q": feed})
    assert list(w.columns) == list(sv.WINDOW_COLUMNS)
    assert w["sic"].tolist() == pytest.approx([0.2, 0.3, 0.4])
    assert w["produced"].tolist() == pytest.approx([1.5, 2.5, 3.5])
    assert w["arrived"].tolist() == [3.0, 3.0, 4.0]
    # window [0, 1): STW still young, counts extrapolated to 2 s: (2/4 + 1/2) / 2 sources;
    # window [2, 3): STW [1, 3): source 0 has 1 of 3, source 1 has 3 of 4.
    assert w["share"].tolist() == pytest.approx([0.5, 0.5, (1 / 3 + 3 / 4) / 2])
    no_feeds = sv.window_table(res, epoch_s=1000.0, window_s=1.0, stw_s=2.0)
    assert no_feeds["share"].isna().all()
    empty = sv.window_table(res.iloc[:0], epoch_s=0.0, window_s=1.0, stw_s=2.0)
    assert empty.empty and list(empty.columns) == list(sv.WINDOW_COLUMNS)


def test_accounting_stats_reports_matches_shedding_and_eq1():
    win = _windows([1.0] * 40, stw_s=10.0)
    win.loc[30, "n_in"] = 300  # a window that lost tuples: not an Eq. 1 check, counted as shed
    win.loc[30, "sic"] = 0.075
    win.loc[25, "sic"] = 0.1 * (1 + 1e-3)  # stamped 0.1 % too high
    ticks = _ticks(np.arange(20.0, 40.0) + 0.5)
    smp = sv.stw_samples(ticks, win, stw_s=10.0)
    smp["sic"] = smp["eq4_recomputed"]
    smp.loc[smp.index[-1], "sic"] = 0.5  # the coordinator disagreeing once
    a = sv.accounting_stats(smp, win, stw_s=10.0, from_s=20.0)
    assert a["eq4_match_share"] == pytest.approx(19 / 20)
    assert a["windows_shed"] == 1
    assert a["eq1_max_rel_err"] == pytest.approx(1e-3)
    assert a["lag_change_mean_s"] == pytest.approx(0.0)
    assert a["lag_prediction"] == pytest.approx(1.0)
    assert a["lag_mean_s"] == pytest.approx(1.5)


def test_query_feeds_are_the_nodes_feeds():
    cfg = sv.make_config(quick=True, seed=3)
    feeds = sv.query_feeds(sv.node_config(cfg, cfg.runs[0]))
    assert list(feeds) == [f"top5/{i}" for i in range(10)]
    assert feeds["top5/0"].count(10.0).tolist() == [200] * 20
    a = feeds["top5/0"].payload(0, np.arange(5))["value"]
    b = feeds["top5/1"].payload(0, np.arange(5))["value"]
    assert not np.array_equal(a, b)  # one seed per query, as the node derives them
    assert sv.query_feeds(sv.node_config(cfg, cfg.runs[0]), 2.0)["top5/0"].count(1.0)[0] == 40


def test_warm_session_must_be_a_bool():
    with pytest.raises(ConfigError, match="warm_session must be True or False, got 1"):
        sv.StwValidationConfig(warm_session=1)
    assert sv.make_config(quick=True).warm_session is True


def _measured(cfg):
    stats, ticks, windows = [], [], []
    for r, lag in zip(cfg.runs, (0.8, 1.1), strict=True):
        win = _windows([lag] * int(r.duration_s), stw_s=r.stw_s, query="top5/0")
        tk = _ticks(np.arange(1.0, r.duration_s) + 0.5, query="top5/0")
        smp = sv.stw_samples(tk, win, stw_s=r.stw_s)
        smp = smp.assign(coordinator_sic=smp["eq4_recomputed"], sic=smp["themis_rule"])
        settled = sv.settled_time(smp, 0.0)
        s = sv.stw_stats(smp, stw_s=r.stw_s, warmup_s=cfg.warmup_s, ready_s=settled)
        s.update(sv.accounting_stats(smp, win, stw_s=r.stw_s, from_s=s["from_s"]))
        s.update(ready_s=0.0, settled_s=settled, duration_s=r.duration_s, sampled_span_s=10.0,
                 attempts=1, capacity_tuples_per_s=4e4, input_rate=4e3, load_1m=1.0)  # fmt: skip
        stats.append(s)
        ticks.append(smp.assign(stw_s=r.stw_s))
        windows.append(win.assign(stw_s=r.stw_s))
    return {
        "stw": stats,
        "ticks": pd.concat(ticks, ignore_index=True),
        "windows": pd.concat(windows, ignore_index=True),
    }


def test_report_accounts_for_the_measured_values(tmp_path):
    cfg = sv.make_config(quick=True)
    summary = sv.EXPERIMENT.write(cfg, _measured(cfg), tmp_path)
    # the coordinator's Eq. 4 reads 1 whatever the STW; THEMIS's rule misses about lag / STW
    assert [s["coordinator_sic_mean"] for s in summary["stw"]] == pytest.approx([1.0, 1.0])
    for s in summary["stw"]:
        assert s["sic_mean"] == pytest.approx(s["themis_rule_mean"])
        assert s["sic_mean"] == pytest.approx(1 - s["lag_mean_s"] / s["stw_s"], abs=0.01)
    verdicts = {c["name"]: c["verdict"] for c in summary["checks"]}
    assert verdicts["longer_stw_closer_to_1"] == "not applicable"
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert {"themis_rule_mean", "lag_change_mean_s", "eq4_match_share", "settled_s"} <= set(
        on_disk["stw"][0]
    )
    windows = pd.read_csv(tmp_path / "windows.csv")
    assert set(windows["stw_s"]) == {10.0, 100.0}
    assert {"eq4_recomputed", "themis_rule", "lag_s"} <= set(pd.read_csv(tmp_path / "ticks.csv"))
    assert (tmp_path / "stw_result_lag.png").read_bytes()[:4] == b"\x89PNG"
    report = (tmp_path / "report.md").read_text()
    assert "## Where the measured values come from" in report
    assert "](stw_result_lag.png)" in report
    m = [f"measured {s['sic_mean']:.4f}" for s in summary["stw"]]
    assert m[0] in report and m[1] in report
    assert "Longer STW closer to 1: yes" in report


def test_report_without_the_result_table_says_so(tmp_path):
    cfg = sv.make_config(quick=True)
    measured = _measured(cfg)
    for s in measured["stw"]:
        for k in ("lag_change_mean_s", "themis_rule_mean"):
            s.pop(k)
    measured["ticks"] = measured["ticks"].drop(columns=list(sv.SAMPLE_COLUMNS))
    del measured["windows"]
    sv.EXPERIMENT.write(cfg, measured, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "was not analysed" in report
    assert not (tmp_path / "windows.csv").exists()
    assert not (tmp_path / "stw_result_lag.png").exists()


def test_every_configured_run_is_measured_after_the_warm_node(monkeypatch):
    from spillway.experiments._spark_runs import TICK_COLUMNS, LevelRun

    streamed = []

    def fake_run_level(node, *, duration_s, **_):
        streamed.append(duration_s)
        ticks = pd.DataFrame(
            [{c: 0.0 for c in TICK_COLUMNS} | {"t": t, "query": q.name, "sic": 1.0,
                                              "kept_fraction": 1.0}
             for t in (20.0, 21.0) for q in node.queries]
        )  # fmt: skip
        return LevelRun(results=pd.DataFrame(), exact=None, ticks=ticks, history=[],
                        until_s=0.0, epoch_s=0.0, ready_s=1.0, wall_s=duration_s)  # fmt: skip

    monkeypatch.setattr(sv, "run_level", fake_run_level)
    # the warm node streams as long as the first run: that run is still measured
    cfg = sv.StwValidationConfig(
        runs=(sv.StwRun(stw_s=10.0, duration_s=30.0), sv.StwRun(stw_s=100.0, duration_s=150.0)),
        warm_s=30.0,
    )
    got = sv.run_stws(cfg, spark=object())
    assert streamed == [30.0, 30.0, 150.0]
    assert [s["stw_s"] for s in got["stw"]] == [10.0, 100.0]
    streamed.clear()
    sv.run_stws(replace(cfg, warm_session=False), spark=object())
    assert streamed == [30.0, 150.0]
