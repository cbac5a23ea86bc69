"""dilos: config errors and the report from measured records (no Spark)."""

from __future__ import annotations

import json

import pytest

from spillway.errors import ConfigError
from spillway.experiments import dilos as dl


def _measured(config, manager, losses, rt=1.0, inp="SD_c", load=0.3, capacity=250.0, arrived=100):
    recs = [
        {"t": float(t), "class": c, "arrived": arrived, "dropped": int(arrived * losses[c - 1]),
         "processed": 50, "response_time_s": rt * c, "capacity": 0.1 * c, "load": load}
        for t in range(0, 40)
        for c in (1, 2, 3)
    ]  # fmt: skip
    return {"name": dl.run_name(config, manager, inp), "config": config, "manager": manager,
            "input": inp, "rate": 9e3, "capacity_tuples_per_s": capacity,
            "records": recs}  # fmt: skip


def test_config_errors():
    with pytest.raises(ConfigError, match="configs .* and managers must each name at least one"):
        dl.DilosExperimentConfig(managers=())
    with pytest.raises(ConfigError, match="configs .* and managers must each name at least one"):
        dl.DilosExperimentConfig(configs=(), pareto_configs=())
    with pytest.raises(ConfigError, match="pareto_configs must name configurations of none, "):
        dl.DilosExperimentConfig(pareto_configs=("dilos-shared",))
    with pytest.raises(ConfigError, match=r"class_rates needs one share per class \(3\)"):
        dl.DilosExperimentConfig(class_rates=(0.5, 0.5))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"class_rates\[2\] must be a finite number > 0"):
        dl.DilosExperimentConfig(class_rates=(0.5, 0.5, 0.0))
    with pytest.raises(ConfigError, match="pareto_epoch_s must be a finite number > 0"):
        dl.DilosExperimentConfig(pareto_epoch_s=0.0)
    with pytest.raises(ConfigError, match="warmup_s must be a finite number >= 0 and < 40"):
        dl.DilosExperimentConfig(duration_s=40.0, warmup_s=40.0)
    with pytest.raises(ConfigError, match="unknown load manager 'pid'"):
        dl.DilosExperimentConfig(managers=("pid",))


def test_each_configuration_maps_to_a_layout_and_sd_p_is_seeded_pareto():
    cfg = dl.make_config(quick=True, seed=4)
    layouts = {c: cfg.node("aurora", c).class_control() for c in cfg.configs}
    assert {c: (cc.layout, cc.dilos) for c, cc in layouts.items()} == {
        "none": ("none", False), "common": ("common", False),
        "separate": ("per-class", False), "dilos": ("per-class", True),
    }  # fmt: skip
    sd_p = cfg.node("aurora", "dilos", "SD_p")
    c3 = sd_p.queries[2]
    assert c3.profile_options["ranges"] == [[300 / 950, 800 / 950]]
    assert c3.profile_options["slot_s"] == cfg.trigger_s and sd_p.seed == 4
    assert sd_p.queries[0].profile_options["epoch_s"] == cfg.pareto_epoch_s
    assert cfg.runs()[-2:] == [("separate", "SD_p"), ("dilos", "SD_p")]


def test_report_from_measured_records(tmp_path):
    cfg = dl.make_config(quick=True)
    measured = [_measured("none", "aurora", (0.0, 0.0, 0.0), rt=4.0),
                _measured("common", "aurora", (0.3, 0.3, 0.3)),
                _measured("separate", "aurora", (0.0, 0.0, 0.8)),
                _measured("dilos", "aurora", (0.0, 0.1, 0.3)),
                _measured("separate", "aurora", (0.0, 0.0, 0.2), inp="SD_p"),
                _measured("dilos", "aurora", (0.0, 0.0, 0.1), inp="SD_p")]  # fmt: skip
    s = dl.EXPERIMENT.write(cfg, measured, tmp_path)
    by = {r["name"]: r for r in s["configs"]}
    assert by["dilos-aurora-SD_c"]["class_loss"] == {"1": 0.0, "2": 0.1, "3": 0.3}
    assert by["separate-aurora-SD_c"]["class_latency_p95_s"] == {"1": 1.0, "2": 2.0, "3": 3.0}
    assert by["dilos-aurora-SD_p"]["paper_class_loss"] == {"1": 0.0, "2": 0.0023, "3": 0.023}
    verdicts = {c["name"]: c["verdict"] for c in s["checks"]}
    assert verdicts == {
        "higher_class_never_loses_more": "pass",
        "class3_loss_lower_with_dilos": "pass",
        "class3_loss_lower_with_dilos_sd_p": "pass",
        "input_overloads_node": "pass",
        "dilos_and_separate_see_the_same_arrivals": "pass",
        "sd_c_overloads_only_class_3": "fail",  # equal class rates: class 2 at 1.33 x its share
        "no_manager_misses_class3_target": "not applicable",
        "higher_class_lower_latency": "not applicable",
    }
    assert by["none-aurora-SD_c"]["load_over_capacity"] == pytest.approx(0.9 / cfg.capacity)
    # 100 tuples/s per class against a measured capacity of 250 tuples/s
    assert by["none-aurora-SD_c"]["arrivals_over_capacity"] == pytest.approx(1.2)
    assert by["dilos-aurora-SD_c"]["class_arrivals_over_share"]["3"] == pytest.approx(4.0)
    report = (tmp_path / "report.md").read_text()
    assert "not reproduced: the Spark node has no operator sharing" in report
    assert "85.37" in report and "8.53" in report
    worse = [_measured("none", "aurora", (0.0, 0.0, 0.0), capacity=400.0),
             _measured("separate", "aurora", (0.0, 0.0, 0.2)),
             _measured("dilos", "aurora", (0.3, 0.1, 0.3), arrived=90),
             _measured("separate", "aurora", (0.0, 0.0, 0.1), inp="SD_p"),
             _measured("dilos", "aurora", (0.0, 0.0, 0.15), inp="SD_p")]  # fmt: skip
    verdicts = {c.name: c.verdict for c in dl.checks(cfg, [dl.summarise(cfg, m) for m in worse])}
    assert verdicts["higher_class_never_loses_more"] == "fail"
    assert verdicts["class3_loss_lower_with_dilos"] == "fail"
    assert verdicts["class3_loss_lower_with_dilos_sd_p"] == "fail"
    assert verdicts["input_overloads_node"] == "fail"  # 300 tuples/s against 400 measured
    assert verdicts["dilos_and_separate_see_the_same_arrivals"] == "fail"  # 90 against 100
    assert json.loads((tmp_path / "summary.json").read_text())["configs"][0]["name"]
    assert (tmp_path / "class_loss.png").exists() and (tmp_path / "report.md").exists()
    assert "dilos-aurora-SD_p" in (tmp_path / "records.csv").read_text()


def test_the_common_manager_and_no_manager_are_not_held_to_the_priority_order():
    cfg = dl.make_config(quick=True)
    runs = [dl.summarise(cfg, _measured("common", "aurora", (0.4219, 0.4215, 0.4224)))]
    (order,) = [c for c in dl.checks(cfg, runs) if c.name == "higher_class_never_loses_more"]
    assert order.verdict == "not applicable"


def test_sd_c_class_rates_follow_table_8s_premise():
    # Pham Table 8: with separate managers only class 3 sheds (classes 1 and 2 are under their
    # 60 % and 30 % shares). Before, SD_c gave the classes equal rates: at 2x the capacity
    # classes 1 and 2 were at 1.11 and 2.22 times their shares.
    cfg = dl.make_config(quick=True)
    for config in cfg.configs:
        rates = [q.rate for q in cfg.node("aurora", config, "SD_c").queries]
        shares = zip(rates, (0.6, 0.3, 0.1), strict=True)
        over_share = [cfg.overload * r / sum(rates) / s for r, s in shares]
        assert over_share[0] == pytest.approx(0.537, abs=1e-3)
        assert over_share[1] == pytest.approx(0.537, abs=1e-3)
        assert over_share[2] == pytest.approx(15.17, abs=0.01)
    sd_p = [q.rate for q in cfg.node("aurora", "dilos", "SD_p").queries]
    assert sd_p[0] == sd_p[1] == sd_p[2]  # SD_p: equal shares, Pham's ranges shape them
    with pytest.raises(ConfigError, match="overload must be a finite number > 0.583"):
        dl.DilosExperimentConfig(overload=0.5)


def test_pools_runs_are_compared_within_their_class_plans_and_by_latency():
    cfg = dl.DilosExperimentConfig(
        managers=("aurora",), configs=("separate", "dilos"), pareto_configs=(),
        class_plans=("lanes", "pools"),
    )  # fmt: skip
    assert cfg.node("aurora", "dilos", plans="pools").class_plans == "pools"
    with pytest.raises(ConfigError, match="class_plans must name each of lanes, pools, cqc at"):
        dl.DilosExperimentConfig(class_plans=("pools", "pools"))
    with pytest.raises(ConfigError, match="class_plans must name each of lanes, pools, cqc at"):
        dl.DilosExperimentConfig(class_plans=("fair",))

    def run(config, losses, rt, plans):
        m = _measured(config, "aurora", losses, rt=rt)
        return dict(m, plans=plans, name=dl.run_name(config, "aurora", "SD_c", plans))

    # lanes: DILoS beats separate on class 3; pools: it does not, and the p95 latencies of
    # the pools runs rise with the class (rt * class) in one and fall in the other
    measured = [run("separate", (0.0, 0.0, 0.8), 1.0, "lanes"),
                run("dilos", (0.0, 0.0, 0.3), 1.0, "lanes"),
                run("separate", (0.0, 0.0, 0.2), 1.0, "pools"),
                run("dilos", (0.0, 0.0, 0.3), -1.0, "pools")]  # fmt: skip
    checks = {c.name: c for c in dl.checks(cfg, [dl.summarise(cfg, m) for m in measured])}
    assert checks["class3_loss_lower_with_dilos"].verdict == "fail"
    assert checks["class3_loss_lower_with_dilos"].why.startswith("failed at aurora pools:")
    latency = checks["higher_class_lower_latency"]
    assert latency.verdict == "fail"
    assert "dilos-aurora-SD_c-pools class 1 vs 2" in latency.why
    assert "separate-aurora-SD_c-pools" not in latency.why  # that run's order holds
    lanes_only = [dl.summarise(cfg, m) for m in measured[:2]]
    assert {c.name: c.verdict for c in dl.checks(cfg, lanes_only)}[
        "higher_class_lower_latency"
    ] == "not applicable"


def _run(config, manager, loss3, inp="SD_p"):
    return {"name": dl.run_name(config, manager, inp), "config": config, "manager": manager,
            "input": inp, "class_loss": {"1": 0.0, "2": 0.0, "3": loss3}}  # fmt: skip


def test_class3_loss_is_not_compared_where_the_separate_managers_shed_nothing():
    # The paper-shaped run of 2026-11-29: on SD_p ALoMa's separate managers shed nothing of
    # class 3 (load / H 1.05), nor did DILoS; "0 is not < 0" failed a claim that had no case.
    cfg = dl.DilosExperimentConfig()
    both = [_run("separate", "aurora", 0.6038), _run("dilos", "aurora", 0.2842),
            _run("separate", "aloma", 0.0), _run("dilos", "aloma", 0.0)]  # fmt: skip
    c = dl._class3_lower(cfg, both, "SD_p", "class3_loss_lower_with_dilos_sd_p")
    assert c.verdict == "pass" and c.why.endswith("on SD_p 0.2842 < 0.6038")
    alone = dl._class3_lower(cfg, both[2:], "SD_p", "class3_loss_lower_with_dilos_sd_p")
    assert alone.verdict == "not applicable"
    assert alone.why == (
        "aloma: separate managers shed nothing of class 3 on SD_p: no loss for DILoS to lower"
    )
    worse = [_run("separate", "aloma", 0.0), _run("dilos", "aloma", 0.05)]
    assert dl._class3_lower(cfg, worse, "SD_p", "x").verdict == "not applicable"
    failing = [_run("separate", "aloma", 0.1), _run("dilos", "aloma", 0.1)]
    assert dl._class3_lower(cfg, failing, "SD_p", "x").verdict == "fail"


def test_cqc_runs_are_lanes_with_the_class_scheduler_and_check_class3_without_a_manager():
    cfg = dl.DilosExperimentConfig(
        managers=("aurora",), configs=("none", "separate"), pareto_configs=(),
        class_plans=("lanes", "cqc"),
    )  # fmt: skip
    node = cfg.node("aurora", "none", plans="cqc")
    assert (node.class_plans, node.class_scheduler) == ("lanes", "cqc")
    assert node.class_control().scheduler == "cqc"
    assert cfg.node("aurora", "none").class_control().scheduler == "none"

    def run(config, rt, plans):
        m = _measured(config, "aurora", (0.0, 0.0, 0.0 if config == "none" else 0.5), rt=rt)
        return dict(m, plans=plans, name=dl.run_name(config, "aurora", "SD_c", plans))

    def verdict(measured, name="no_manager_misses_class3_target"):
        runs = [dl.summarise(cfg, m) for m in measured]
        return {c.name: c for c in dl.checks(cfg, runs)}[name]

    # class 3's p95 is 3 x rt against D = 5 s: held back (rt 4) it misses, kept up (rt 1) not
    held = [run("none", 4.0, "lanes"), run("none", 4.0, "cqc"), run("separate", 1.0, "cqc")]
    assert verdict(held).verdict == "pass"
    assert "none-aurora-SD_c-cqc" in verdict(held).why
    kept_up = [run("none", 1.0, "cqc")]
    assert verdict(kept_up).verdict == "fail"
    lanes_only = [run("none", 4.0, "lanes")]
    assert verdict(lanes_only).verdict == "not applicable"
    # the classes of a cqc run share micro-batches: no latency order is compared
    assert verdict(held, "higher_class_lower_latency").verdict == "not applicable"
