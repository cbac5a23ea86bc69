"""load-managers: config errors and the report from measured records (no Spark)."""

from __future__ import annotations

import json

import pytest

from spillway.errors import ConfigError
from spillway.experiments import load_managers as lm


def _measured(scheme, rt_before, rt_after, kept=0.5, h=None, load=1.9):
    recs = [
        {"t": float(t), "processed": 100, "capacity": 0.8, "load": load,
         "response_time_s": rt_before if t < 25 else rt_after}
        for t in range(0, 50)
    ]  # fmt: skip
    arrived = [(float(t), 200, int(200 * kept)) for t in range(0, 50)]
    settings = {} if h is None else {"capacity": h}
    return {"scheme": scheme, "settings": settings, "rate": 9e5, "records": recs,
            "arrived": arrived}  # fmt: skip


def test_config_errors():
    with pytest.raises(ConfigError, match="schemes must name at least one"):
        lm.LoadManagersConfig(schemes=())
    with pytest.raises(ConfigError, match="warmup_s must be a finite number >= 0 and < 50"):
        lm.LoadManagersConfig(duration_s=50.0, warmup_s=50.0)
    with pytest.raises(ConfigError, match="load manager 'aurora' has no setting pole"):
        lm.LoadManagersConfig(schemes=(("aurora", {"pole": 0.5}),))


def test_report_from_measured_records(tmp_path):
    cfg = lm.make_config(quick=True)
    runs = [_measured("aurora", 1.0, 3.0, h=0.8), _measured("ctrl", 1.0, 2.5, h=0.8),
            _measured("ctrl", 2.5, 4.0, h=0.96), _measured("seamless", 1.0, 2.1),
            _measured("aloma", 1.0, 2.05)]  # fmt: skip
    tried = [{"round": 1, "rate_tuples_per_s": 5e5, "load_median": 0.8, "calibrated": True,
              "confirmed": False},
             {"round": 2, "rate_tuples_per_s": 1.25e6, "load_median": 1.9, "calibrated": False,
              "confirmed": True}]  # fmt: skip
    s = lm.EXPERIMENT.write(cfg, {"rate_runs": tried, "runs": runs}, tmp_path)
    assert s["rate_confirmed"] and s["rate_runs"][1]["load_median"] == 1.9
    runs = {lm.label(r): r for r in s["runs"]}
    assert list(runs) == ["aurora H 0.8 (tuned)", "ctrl H 0.8 (tuned)", "ctrl H 0.96 (+20 %)",
                          "seamless", "aloma"]  # fmt: skip
    assert set(runs["aloma"]) >= {"scheme", "workload", "target_s", "delay_violation_mean_s",
                                  "loss", "h", "h_vs_tuned"}  # fmt: skip
    assert runs["aloma"]["h"] == "auto" and runs["ctrl H 0.96 (+20 %)"]["h_vs_tuned"] == 0.2
    # D = 2 s; after warm-up (10 s): 15 intervals at 1.0 s, 25 at 2.05 s -> 25/40 · 0.05
    assert runs["aloma"]["delay_violation_mean_s"] == pytest.approx(0.03125, rel=1e-3)
    assert runs["aloma"]["loss"] == pytest.approx(0.5)
    assert runs["aloma"]["response_min_s"] == 1.0
    assert runs["aloma"]["load_median_before"] == 1.9
    verdicts = {c["name"]: c["verdict"] for c in s["checks"]}
    assert verdicts == {
        "every_run_overloaded": "pass",
        "aloma_violation_le_0.1D": "pass",
        "seamless_violation_le_0.1D": "pass",
        "ctrl_wrong_h_violates_more_than_aloma": "pass",
        "ctrl_wrong_h_violates_more_than_tuned": "pass",
        "aurora_tuned_h_misses_d": "pass",
        "aurora_violation_grows_with_h": "not applicable",
    }
    assert json.loads((tmp_path / "summary.json").read_text())["runs"][0]["workload"] == "flat"
    assert (tmp_path / "delay_violation.png").exists() and (tmp_path / "report.md").exists()
    assert "Finding the rate" in (tmp_path / "report.md").read_text()
    trace = (tmp_path / "intervals.csv").read_text().splitlines()
    assert len(trace) == 1 + 5 * 50 and trace[0].startswith("scheme,settings,t,")


def test_full_runs_sweep_aurora_and_ctrl_the_compared_runs_first():
    cfg = lm.make_config()
    hs = [(m, s.get("h_factor")) for m, s in cfg.schemes]
    assert sorted(f for m, f in hs if m == "aurora") == [0.625, 0.75, 0.875, 1.0, 1.125]
    assert sorted(f for m, f in hs if m == "ctrl") == [0.8, 0.95, 1.0, 1.05, 1.2]
    # the runs the checks compare run one after the other, before the rest of the sweeps
    assert hs[:5] == [("aurora", 1.0), ("ctrl", 1.0), ("ctrl", 1.2), ("aloma", None),
                      ("seamless", None)]  # fmt: skip
    assert cfg.target_s == 2.0 and cfg.duration_s == 200.0
    assert cfg.node("ctrl", {"h_factor": 1.2}, 0.9).load_manager_options == {"capacity": 1.08}
    with pytest.raises(ConfigError, match="h_factor must be"):
        lm.LoadManagersConfig(schemes=(("aurora", {"h_factor": -1.0}),))


def test_a_node_that_was_not_overloaded_tests_no_claim(tmp_path):
    """The paper-shaped run of 2026-11-28: at twice one calibration round's capacity every run
    measured a load under 1 and no response time reached D, so the violations compared zeros."""
    cfg = lm.make_config(quick=True)
    runs = [_measured("aurora", 1.2, 1.3, h=0.8, load=0.93), _measured("ctrl", 1.2, 1.3, h=0.8),
            _measured("ctrl", 1.2, 1.3, h=0.96, load=0.95), _measured("seamless", 1.2, 1.3),
            _measured("aloma", 1.2, 1.3, load=0.82)]  # fmt: skip
    tried = [{"round": 1, "rate_tuples_per_s": 1e6, "load_median": 0.8, "calibrated": True,
              "confirmed": False}]  # fmt: skip
    s = lm.EXPERIMENT.write(cfg, {"rate_runs": tried, "runs": runs}, tmp_path)
    assert not s["rate_confirmed"]
    verdicts = {c["name"]: c["verdict"] for c in s["checks"]}
    assert verdicts["every_run_overloaded"] == "fail"
    for name in (
        "aloma_violation_le_0.1D",
        "ctrl_wrong_h_violates_more_than_aloma",
        "ctrl_wrong_h_violates_more_than_tuned",
        "aurora_tuned_h_misses_d",
    ):
        assert verdicts[name] == "not applicable", name
    assert verdicts["seamless_violation_le_0.1D"] == "pass"  # its load was 1.9


def test_the_rate_is_rescaled_until_the_load_is_confirmed():
    # a node whose true capacity is 1.5 M tuples/s with a fixed 0.4 s of overhead per second:
    # proportional rescaling alone would stop short (0.4 + r / 1.5e6 is not proportional to r)
    points: list[tuple[float, float]] = []
    rate, ok = 6e5, False
    for _ in range(5):
        points.append((rate, 0.4 + rate / 1.5e6))
        rate, ok = lm.rate_step(points, 2.0, 0.1)
        if ok:
            break
    assert ok and len(points) == 3 and points[-1][1] == pytest.approx(2.0, abs=0.2)
    with pytest.raises(ConfigError, match="rate_runs must be"):
        lm.LoadManagersConfig(rate_runs=0)


def _holding_up_to(h_max):
    """A stand-in for ``_run_node``: Aurora without the job holds D (response 1 s) at an H up
    to ``h_max`` and misses it by 1.5 s above; each call is noted in ``ran``."""
    ran = []

    def run_node(config, cfg, spark, duration_s, background):
        h = cfg.load_manager_options.get("capacity")
        ran.append((cfg.load_manager, h, lm.input_rate(cfg), duration_s, background))
        rt = 1.0 if h is None or h <= h_max + 1e-9 else 3.5
        recs = [{"t": float(t), "processed": 10, "response_time_s": rt, "load": 1.9,
                 "capacity": h or 0.8} for t in range(60)]  # fmt: skip
        arrived = [(float(t), 20, 10) for t in range(60)]
        return {"rate": lm.input_rate(cfg), "records": recs, "arrived": arrived}

    return run_node, ran


def test_measure_tunes_h_then_runs_every_scheme_at_the_rate_found_and_says_so(monkeypatch):
    """The plumbing of measure (Spark replaced): tuning runs without the job from the
    confirmed rate run's H (0.8, held) up to the first H that misses D (0.95), then every
    scheme once, with the background job, at the rate find_rate returned and its H read
    against the tuned 0.9; each run reports when it is done."""
    stopped, said = [], []

    class _Spark:
        def stop(self):
            stopped.append(True)

    run_node, ran = _holding_up_to(0.9)
    tried = [{"round": 1, "rate_tuples_per_s": 1e6, "load_median": 2.0, "calibrated": True,
              "delay_violation_mean_s": 0.0, "confirmed": True}]  # fmt: skip
    monkeypatch.setattr(lm, "experiment_spark", lambda app_name: _Spark())
    monkeypatch.setattr(lm, "find_rate", lambda config, spark: (2.5e6, tried))
    monkeypatch.setattr(lm, "_run_node", run_node)
    monkeypatch.setattr(lm, "report", said.append)
    cfg = lm.make_config(quick=True)
    out = lm.measure(cfg)
    assert out["rate_runs"] == tried and stopped == [True]
    assert [(r["h"], r["held"], r["rate_run"]) for r in out["tuning"]] == [
        (0.8, True, True),
        (0.85, True, False),
        (0.9, True, False),
        (0.95, False, False),
    ]
    assert out["tuned_h"] == 0.9
    tuning, schemes = ran[:3], ran[3:]
    assert [(m, h, d, bg) for m, h, _, d, bg in tuning] == [
        ("aurora", h, cfg.rate_run_s, False) for h in (0.85, 0.9, 0.95)
    ]
    assert all(rate == pytest.approx(2.5e6) for _, _, rate, _, _ in ran)
    assert all(bg for *_, bg in schemes)
    assert [(m, h) for m, h, *_ in schemes] == [
        ("aurora", 0.9),
        ("ctrl", 0.9),
        ("ctrl", 1.08),
        ("aloma", None),
        ("seamless", None),
    ]
    assert said[-1] == "load-managers: run 5 of 5 (seamless) done"
    assert "load-managers: run 3 of 5 (ctrl H 1.08 (+20 %)) done" in said
    s = lm.analyse(cfg, out).values
    assert s["tuned_h"] == 0.9 and s["tuned_h_bracketed"]


def test_tuning_steps_down_from_an_h_that_misses_and_runs_the_first_when_unconfirmed(
    monkeypatch,
):
    run_node, ran = _holding_up_to(0.7)
    monkeypatch.setattr(lm, "_run_node", run_node)
    monkeypatch.setattr(lm, "report", lambda _: None)
    cfg = lm.make_config()
    unconfirmed = [{"confirmed": False, "delay_violation_mean_s": 0.0}]
    tuned, tuning = lm.tune_h(cfg, None, 1e6, unconfirmed)
    assert [(r["h"], r["held"], r["rate_run"]) for r in tuning] == [
        (0.8, False, False),
        (0.75, False, False),
        (0.7, True, False),
    ]
    assert tuned == 0.7 and lm.tuned_of([(0.8, 1.5), (0.75, 1.5), (0.7, 0.0)], 0.2, 0.05) == {
        "tuned_h": 0.7,
        "bracketed": True,
    }
    none = lm.tune_h(lm.LoadManagersConfig(tune_runs=0), None, 1e6, unconfirmed)
    assert none == (0.8, []) and len(ran) == 3


@pytest.mark.parametrize(
    ("load_costs", "background", "frozen"),
    [("pre-job", True, [0.3]), ("fitted", True, []), ("pre-job", False, [])],
)
def test_the_load_costs_freeze_when_the_background_job_starts(
    monkeypatch, load_costs, background, frozen
):
    """``_run_node`` (Spark and the burner replaced): with ``load_costs`` = pre-job a run with
    the background job freezes its node's load costs at the job's start, feed time
    ``background_start_s``; a rate run (no job) and a ``fitted`` run never do."""
    import contextlib
    import time

    import spillway.spark.node as node_module

    at = []

    class _Controller:
        load_control = type("LC", (), {"records": []})()

        def __init__(self):
            self.t0 = time.monotonic() - 0.1  # the node started 0.1 s into feed time

        def feed_time(self):
            return time.monotonic() - self.t0

        def freeze_load_costs(self):
            at.append(round(self.feed_time(), 1))

    class _Node:
        rate_scale = 1.0

        def __init__(self, cfg, spark):
            self.controller = _Controller()

        def start(self):
            pass

        def history(self):
            return []

        def stop(self):
            pass

    class _Burner:
        def __init__(self, schedule):
            pass

        def start(self, epoch):
            return contextlib.nullcontext()

        def cpu_seconds(self):
            return 0.0

    monkeypatch.setattr(node_module, "Node", _Node)
    monkeypatch.setattr(lm, "BackgroundLoad", _Burner)
    cfg = lm.LoadManagersConfig(duration_s=1.0, warmup_s=0.0, background_start_s=0.3,
                                background_period_s=0.2, load_costs=load_costs)  # fmt: skip
    node_cfg = cfg.node("aurora", {"capacity": 0.8})
    lm._run_node(cfg, node_cfg, None, 0.5, background=background)
    assert at == frozen
    with pytest.raises(ConfigError, match="load_costs must be one of pre-job, fitted"):
        lm.LoadManagersConfig(load_costs="cpu")
