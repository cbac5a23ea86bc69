"""Every check of every experiment and benchmark can fail: the input on which each one does.

:data:`ROWS` lists, for every check name, a realistic measured input on which it fails, and
where it can be "not applicable" an input that makes it so (with its reason). A row either
carries that input here (``run``: the check function fed a measured record built by hand or by
the experiment's own pure ``measure`` on a tiny config; no Spark) or names the test of another
module that feeds it (``test``). Checks that hold by construction have no failing input on a
working set-up; :data:`BY_CONSTRUCTION` names them and their rows show them not applicable.

Three tests keep the list whole: every row's input gives its verdict; every check name, read
off a run that measured nothing (:data:`EMPTY`, on which no check may pass), has a failing row
(or is listed as by construction); and EXPERIMENTS.md's table "Every check and the input that
makes it fail" holds every row (:func:`table` prints it).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from spillway.bench.decision import decision_checks
from spillway.bench.kafka_bench import kafka_checks
from spillway.bench.spark_bench import spark_checks
from spillway.experiments import EXPERIMENTS
from spillway.experiments import _fed_sim as fsim
from spillway.experiments import cod_accuracy as ca
from spillway.experiments import cod_drift as cd
from spillway.experiments import cod_latency as cl
from spillway.experiments import cost_quality as cq
from spillway.experiments import crc_sensitivity as crc
from spillway.experiments import dilos as dl
from spillway.experiments import federated_fairness as ff
from spillway.experiments import fragment_mix as fm
from spillway.experiments import kafka_overload as ko
from spillway.experiments import load_managers as lm
from spillway.experiments import overhead as oh
from spillway.experiments import overload as ov
from spillway.experiments import related_work as rw
from spillway.experiments import scalability as sc
from spillway.experiments import shedding_interval as si
from spillway.experiments import sic_correlation as scor
from spillway.experiments import single_node_fairness as nf
from spillway.experiments import spark_federation as sf
from spillway.experiments import stw_validation as sv
from spillway.experiments import wan_burst as wb
from spillway.experiments.checks import FAIL, NOT_APPLICABLE, PASS, Check
from spillway.quality.concept import DriftSeries

HERE = "tests/experiments/test_checks_fail.py"
EXPERIMENTS_MD = Path(__file__).resolve().parents[2] / "EXPERIMENTS.md"
NA = NOT_APPLICABLE


@dataclass(frozen=True)
class Row:
    """One input and the verdict it gives one or more checks of an experiment or benchmark."""

    experiment: str
    checks: tuple[str, ...]
    verdict: str
    input: str
    run: Callable[[], Sequence[Check]] | None = None
    test: str = ""
    why: str = ""
    tag: str = ""

    @property
    def id(self) -> str:
        verdict = "fail" if self.verdict == FAIL else "na"
        return f"{self.experiment}:{self.checks[0]}:{verdict}{self.tag}"

    @property
    def node(self) -> str:
        return self.test or f"{HERE}::test_the_input_gives_its_verdict[{self.id}]"


def elsewhere(experiment: str, checks: str, verdict: str, words: str, test: str) -> Row:
    """A row whose input is fed by ``test`` (``file::function`` under tests/)."""
    return Row(experiment, tuple(checks.split()), verdict, words, test=f"tests/{test}")


# ---------------------------------------- cod-accuracy inputs
def _accuracy(**kw: object) -> list[Check]:
    """cod-accuracy's checks on what its own ``measure`` finds on a tiny config (3 windows)."""
    base: dict[str, object] = {
        "seeds": (0,), "windows": 3, "b_values": (0.98,), "scalar_b_values": (0.99,),
        "taxi_window_tuples": 6000, "tasks_window_tuples": 8000, "packets_window_tuples": 3000,
        "taxi_routes": 400, "sensitivity": (),
    }  # fmt: skip
    cfg = ca.CodAccuracyConfig(**{**base, **kw})  # type: ignore[arg-type]
    points = [p for w in cfg.workloads for p in ca._points(cfg, w, cfg.seeds[0])]
    return ca.checks_of(ca.cases_of(points, cfg), cfg)


def _grouped(w: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{w}_b0.98_{n}" for n in names)


KEEP_ONE = ("error_cod_keep_one_le_0.1", "error_uniform_ge_4x_cod_keep_one",
            "missing_groups_cod_keep_one_zero")  # fmt: skip
ALL_GROUPED = ("error_cod_le_0.1", "error_uniform_ge_4x_cod", "missing_groups_cod_zero",
               *KEEP_ONE)  # fmt: skip


# ---------------------------------------- other inputs
def _load_managers(*runs: tuple[str, float | None, float, float], load: float = 1.9,
                   before: float = 0.0, tuning: tuple[tuple[float, float], ...] = ()
                   ) -> list[Check]:  # fmt: skip
    """load-managers' checks on runs given as (scheme, H off the tuned one or None when
    untuned, mean delay violation s, loss), each at median ``load`` before the background job,
    its violation ``before`` the job and the mean one after it; the tuned H is 0.8, measured by
    ``tuning`` runs ((H, mean violation) each; none: configured)."""
    rs = [
        {"scheme": k, "h": "auto" if e is None else 0.8 * (1 + e), "h_vs_tuned": e,
         "delay_violation_mean_s": v, "delay_violation_before_s": before,
         "delay_violation_after_s": v, "loss": x, "load_median_before": load}
        for k, e, v, x in runs
    ]  # fmt: skip
    tuned = [{"h": h, "delay_violation_mean_s": v} for h, v in tuning]
    return lm.checks(lm.make_config(quick=True), rs, tuned)


def _drift_no_sweep() -> list[Check]:
    cfg = cd.CodDriftConfig(sweep=())
    feed = DriftSeries(distance=np.array([0.3, 0.2, 0.4]), overlap=np.array([0.7, 0.8, 0.6]))
    m = {"feed": feed, "sweep": {}, "rides_per_premium_route_per_slide": 30.0, "data": None}
    return list(cd.analyse(cfg, m).checks)


def _federated(zipf_jain_random: float) -> list[dict[str, object]]:
    """The 18-node mixed configuration under both placements (a 60 s simulated run's values)."""
    return [
        {"name": "mixed", "placement": p, "jain_balance_sic": jb, "jain_random": jr,
         "std_balance_sic": sb, "std_random": sr, "mean_sic_balance_sic": mb,
         "mean_sic_random": mr}
        for p, jb, jr, sb, sr, mb, mr in (
            ("random", 0.9985, 0.8073, 0.008, 0.074, 0.205, 0.151),
            ("zipf", 0.9899, zipf_jain_random, 0.019, 0.124, 0.185, 0.139),
        )
    ]  # fmt: skip


def _wan(**mean_sic: float) -> list[dict[str, object]]:
    """The five setups of Fig. 14 (lan's mean SIC 0.30), with some setups' mean SIC changed;
    a setup set to NaN did not run."""
    base = {"lan": 0.30, "wan": 0.30, "wan_burst": 0.28, "wan_burst_mean_kept": 0.29,
            "wan_1s_burst_mean_kept": 0.29, **mean_sic}  # fmt: skip
    return [
        {"setup": s, "delay_steps": 4 if s == "wan_1s_burst_mean_kept" else 1,
         "mean_sic_balance_sic": m, "jain_balance_sic": 0.99}
        for s, m in base.items() if not math.isnan(m)
    ]  # fmt: skip


def _cost_quality(means: dict[int, float]) -> list[Check]:
    return cq.checks(cq.trade_off([{"queries": n, "mean_sic_balance_sic": m}
                                   for n, m in means.items()]))  # fmt: skip


def _spark_fed(
    jain: tuple[float, float, float] = (0.97, 0.93, 0.93),
    p95_c: float = 18.0,
    kept_c: float = 0.5,
) -> list[Check]:
    """spark-federation's checks on three runs' figures: Jain of coordinated, uncoordinated and
    random, node c's worst p95 latency (s) and kept share in every run (a and b: 15 s, 0.3)."""
    values = {
        m: {"jain": j, "latency_p95_s": {"a": 15.0, "b": 15.0, "c": p95_c},
            "kept_fraction": {"a": 0.3, "b": 0.3, "c": kept_c}}
        for m, j in zip(sf.MODES, jain, strict=True)
    }  # fmt: skip
    return sf.checks(sf.make_config(quick=True), values)


def _kill(**over: object) -> list[Check]:
    """spark-federation's kill checks on a kill run's figures (a passing run but ``over``)."""
    base: dict[str, object] = {
        "jain_survivors": 0.97, "jain_survivors_outage": 0.96, "lost_seen_at_s": 47.0,
        "alive_again_at_s": 80.0, "caught_up": True, "caught_up_at_s": 81.0,
        "lost_queries": {"local-c": {"results_before": 0.3, "results_outage": 0.02},
                         "shared": {"results_before": 0.25, "results_outage": 0.05}},
    }  # fmt: skip
    return sf.kill_checks({**base, **over})


SIC_AVG = (
    "experiments/test_themis_sic_correlation.py::"
    "test_avg_below_count_fails_on_values_near_zero_and_is_not_applicable_without_low_sic"
)

ROWS: list[Row] = [
    # ---------------------------------------- cod-drift
    elsewhere("cod-drift", "feed_distance_mean_within_0.05_of_configured", FAIL,
              "the taxi stand-in at 60 rides/s (under one ride per premium route per slide): "
              "configured drift 0, measured 0.22",
              "experiments/test_cod_experiments.py::"
              "test_cod_drift_feed_checks_fail_on_a_feed_too_thin_for_its_drift"),
    elsewhere("cod-drift", "feed_sweep_within_0.05_of_configured", FAIL,
              "the same thin feed at sweep setting 0.1: measured 0.22",
              "experiments/test_cod_experiments.py::"
              "test_cod_drift_feed_checks_fail_on_a_feed_too_thin_for_its_drift"),
    Row("cod-drift", ("feed_sweep_within_0.05_of_configured",), NA,
        "a run whose sweep holds no setting other than the main drift",
        run=_drift_no_sweep, why="no drift setting other than the main one"),
    elsewhere("cod-drift", "distance_mean_near_paper_0.3", FAIL,
              "a replayed ride file whose top-10 routes change by 10 % per window",
              "experiments/test_cod_experiments.py::"
              "test_cod_drift_measures_a_replayed_ride_file_against_the_paper"),
    elsewhere("cod-drift", "distance_mean_near_paper_0.3", NA,
              "no ride file replayed (the stand-in's drift is its own setting)",
              "experiments/test_cod_experiments.py::test_cod_drift_smoke"),
    # ---------------------------------------- cod-accuracy
    elsewhere("cod-accuracy", "taxi_b0.98_error_cod_le_0.1 taxi_b0.98_missing_groups_cod_zero "
              "taxi_cod_b0.98_below_uniform_b0.5", FAIL,
              "taxi windows of 6,000 rides over 3,000 routes: far more routes per window than "
              "the 120-tuple budget at b = 0.98",
              "experiments/test_cod_experiments.py::"
              "test_cod_accuracy_checks_fail_when_windows_hold_more_groups_than_the_budget"),
    elsewhere("cod-accuracy", "tasks_b0.98_error_uniform_ge_4x_cod", FAIL,
              "GCM's real 4 task classes: Uniform at b = 0.98 never loses a class",
              "experiments/test_cod_experiments.py::test_cod_accuracy_ratio_fails_with_few_groups"),
    Row("cod-accuracy", ("taxi_b0.98_error_uniform_ge_4x_cod",), FAIL,
        "taxi with 100 routes in 20,000-ride windows (the budget holds every route) and fares "
        "spread within a route with CV 0.3: CoD's error 0.19, Uniform's 0.58",
        run=lambda: _accuracy(workloads=("taxi",), taxi_fare_cv=0.3, taxi_routes=100,
                              taxi_window_tuples=20000)),  # fmt: skip
    Row("cod-accuracy", _grouped("tasks", *ALL_GROUPED[:5]), FAIL,
        "tasks with 2,000 classes of Zipf s = 1.0 popularity in 8,000-tuple windows (more "
        "classes per window than the 160-tuple budget) and CPU requests spread with CV 1.0 "
        "within a class: CoD misses classes at the budget, keep-one's error 0.27",
        run=lambda: _accuracy(workloads=("tasks",), tasks_classes=2000, tasks_zipf_s=1.0,
                              tasks_cpu_cv=1.0)),  # fmt: skip
    Row("cod-accuracy", _grouped("taxi", *KEEP_ONE[:2]), FAIL,
        "taxi with 3,000 routes in 6,000-ride windows and fares spread with CV 1.0 within a "
        "route: keep-one's one-ride estimates miss by 0.21, Uniform at its 16.5 % by 0.75",
        run=lambda: _accuracy(workloads=("taxi",), taxi_fare_cv=1.0, taxi_routes=3000)),
    Row("cod-accuracy", (*_grouped("taxi", "missing_groups_cod_zero"),
                         *_grouped("tasks", "missing_groups_cod_zero")), NA,
        "windows whose 2 % budget holds a tuple of every group (taxi: 100 routes in 20,000 "
        "rides; tasks: the default 40 classes): zero missing groups by construction",
        run=lambda: _accuracy(taxi_routes=100, taxi_window_tuples=20000),
        why="holds by construction"),
    Row("cod-accuracy", (*_grouped("taxi", *KEEP_ONE), *_grouped("tasks", *KEEP_ONE)), NA,
        "the same windows: keep-one keeps what CoD at the budget keeps",
        run=lambda: _accuracy(taxi_routes=100, taxi_window_tuples=20000),
        why="keep-one kept what CoD at the budget kept"),  # fmt: skip
    Row("cod-accuracy", (*_grouped("taxi", *ALL_GROUPED), *_grouped("tasks", *ALL_GROUPED),
                         "taxi_cod_b0.98_below_uniform_b0.5"), NA,
        "b_values without 0.98, the paper's shed fraction",
        run=lambda: _accuracy(b_values=(0.9,)), why="in b_values"),  # fmt: skip
    Row("cod-accuracy", (*_grouped("taxi", *KEEP_ONE), *_grouped("tasks", *KEEP_ONE)), NA,
        "variants without the keep-one-per-group variant",
        run=lambda: _accuracy(variants=("uniform", "cod")), why="was not in variants",
        tag=":no-variant"),
    Row("cod-accuracy", ("packets_abs_diff_le_0.02",), NA,
        "any scalar run: with one query CoD keeps 1 − b of the window as Uniform does",
        run=lambda: _accuracy(workloads=("packets",)), why="holds by construction"),
    # ---------------------------------------- cod-latency
    elsewhere("cod-latency", "latency_below_normal", FAIL,
              "4,000 tuples/s, where a micro-batch's fixed cost dominates: Uniform 0.46 s vs "
              "normal 0.45 s", "experiments/test_cod_latency.py::"
              "test_latency_check_fails_when_the_batch_fixed_cost_dominates"),
    elsewhere("cod-latency", "cod_rows_within_20pct_of_uniform", FAIL,
              "CoD's per-group selection at 60 % of Uniform's rows/s",
              "experiments/test_cod_latency.py::"
              "test_rows_check_fails_when_cods_group_selection_is_slow"),
    elsewhere("cod-latency", "latency_below_normal cod_rows_within_20pct_of_uniform", NA,
              "no workload measured", "experiments/test_cod_latency.py::"
              "test_a_missing_mode_fails_and_no_run_is_not_applicable"),
    # ---------------------------------------- dilos
    elsewhere("dilos", "higher_class_never_loses_more class3_loss_lower_with_dilos "
              "class3_loss_lower_with_dilos_sd_p input_overloads_node "
              "dilos_and_separate_see_the_same_arrivals sd_c_overloads_only_class_3", FAIL,
              "class 1 loses 0.3 against class 2's 0.1 with DILoS; class 3 loses 0.3 with "
              "DILoS against 0.2 with separate managers on SD_c, 0.15 against 0.1 on SD_p; "
              "300 tuples/s arrive against a measured capacity of 400; DILoS's classes get "
              "90 tuples/s against the separate managers' 100; on SD_c class 2's arrivals are "
              "1.33 x its 30 % share of the measured capacity",
              "experiments/test_dilos.py::test_report_from_measured_records"),
    Row("dilos", ("higher_class_never_loses_more", "class3_loss_lower_with_dilos",
                  "class3_loss_lower_with_dilos_sd_p", "input_overloads_node",
                  "dilos_and_separate_see_the_same_arrivals", "sd_c_overloads_only_class_3"), NA,
        "no run measured", lambda: dl.checks(dl.make_config(quick=True), []),
        why="no ", tag="-empty"),
    Row("dilos", ("class3_loss_lower_with_dilos_sd_p",), NA,
        "the paper-shaped run of 2026-11-29 with ALoMa: its separate managers shed nothing of "
        "class 3 on SD_p (load / H 1.05), so there was no loss for DILoS to lower",
        lambda: [dl._class3_lower(dl.DilosExperimentConfig(), [
            {"config": c, "manager": "aloma", "input": "SD_p", "class_loss": {"3": 0.0}}
            for c in ("separate", "dilos")], "SD_p", "class3_loss_lower_with_dilos_sd_p")],
        why="shed nothing of class 3", tag="-nothing-shed"),
    Row("dilos", ("higher_class_lower_latency",), NA,
        "any run: the classes are lanes of one plan and share micro-batches",
        lambda: dl.checks(dl.make_config(quick=True), []), why="share micro-batches"),
    Row("dilos", ("no_manager_misses_class3_target",), NA,
        "runs without CQC's class scheduler: with nothing shed none holds class 3 back in the "
        "one plan", lambda: dl.checks(dl.make_config(quick=True), []),
        why="no class scheduler"),
    elsewhere("dilos", "no_manager_misses_class3_target", FAIL,
              "a run without a load manager on CQC whose class 3 kept up: p95 3 s against "
              "D = 5 s", "experiments/test_dilos.py::"
              "test_cqc_runs_are_lanes_with_the_class_scheduler_and_check_class3_without_a_manager"),
    # ---------------------------------------- crc-sensitivity
    elsewhere("crc-sensitivity", "loss_lowest_at_crc_le_2 higher_class_never_loses_more "
              "input_overloads_node", FAIL,
              "the lowest loss at a CRC of 10 cycles; class 1 loses 0.3 against class 2's 0.2 "
              "at 5 cycles; 300 tuples/s arrive against a measured capacity of 400",
              "experiments/test_crc_sensitivity.py::test_report_from_measured_records"),
    elsewhere("crc-sensitivity", "loss_lowest_at_crc_le_2", NA,
              "no run shed anything; or only CRCs of 5 and 10 cycles ran",
              "experiments/test_crc_sensitivity.py::"
              "test_nothing_shed_or_no_short_crc_is_not_applicable"),
    Row("crc-sensitivity", ("higher_class_never_loses_more", "input_overloads_node"), NA,
        "no run measured", lambda: crc.checks([]), why="no run measured"),
    # ---------------------------------------- load-managers
    Row("load-managers", ("aloma_violation_le_0.1D", "seamless_violation_le_0.1D"), FAIL,
        "ALoMa and SEaMLeSS 0.5 s over D = 2 s on average",
        run=lambda: _load_managers(("aloma", None, 0.5, 0.4), ("seamless", None, 0.5, 0.4))),
    Row("load-managers", ("ctrl_wrong_h_violates_more_than_aloma",), FAIL,
        "CTRL (H +20 %) 0.1 s of violation, ALoMa 0.5 s",
        run=lambda: _load_managers(("ctrl", 0.2, 0.1, 0.4), ("aloma", None, 0.5, 0.4))),
    Row("load-managers", ("aloma_violation_le_0.1D", "ctrl_wrong_h_violates_more_than_aloma"),
        NA, "ALoMa did not run", run=lambda: _load_managers(("ctrl", 0.2, 0.1, 0.4)),
        tag="-missing"),
    Row("load-managers", ("ctrl_wrong_h_violates_more_than_tuned",), FAIL,
        "CTRL (H +20 %) 0.03 s of violation, CTRL at the tuned H 0.1 s (a diagnostic quick run's "
        "CTRL gave 0.03 s at H 0.96)",
        run=lambda: _load_managers(("ctrl", 0.2, 0.03, 0.55), ("ctrl", 0.0, 0.1, 0.6))),
    Row("load-managers", ("ctrl_wrong_h_violates_more_than_tuned",), NA,
        "CTRL ran at H +20 % only", run=lambda: _load_managers(("ctrl", 0.2, 0.1, 0.4)),
        why="CTRL's at the tuned H run missing"),
    Row("load-managers", ("aurora_tuned_h_misses_d",), FAIL,
        "Aurora at the H right before the job (tuning: 0.8 held, 0.85 did not) 0.04 s over D "
        "after the job starts (under 0.1·D = 0.2 s)",
        run=lambda: _load_managers(("aurora", 0.0, 0.04, 0.4),
                                   tuning=((0.8, 0.0), (0.85, 1.5)))),
    Row("load-managers", ("aurora_tuned_h_misses_d",), NA,
        "the paper-shaped run of 2026-11-29: a configured H of 0.8 held D with room to spare "
        "(Aurora held it at 0.9 too); tuning runs that stop at an H that holds",
        run=lambda: _load_managers(("aurora", 0.0, 0.004, 0.49),
                                   tuning=((0.8, 0.0), (0.85, 0.0))),
        why="did not bracket the tuned H", tag="-unbracketed"),
    Row("load-managers", ("aurora_tuned_h_misses_d",), NA,
        "Aurora at the tuned H 0.6 s over D before the job already",
        run=lambda: _load_managers(("aurora", 0.0, 3.0, 0.4), before=0.6),
        why="did not hold D before the job in this run", tag="-wrong-before"),
    Row("load-managers", ("aurora_violation_grows_with_h",), FAIL,
        "Aurora's sweep: 0.9 s of violation at H 0.5, 0.2 s at H 0.9",
        run=lambda: _load_managers(("aurora", -0.375, 0.9, 0.6), ("aurora", 0.125, 0.2, 0.3))),
    Row("load-managers", ("aurora_violation_grows_with_h",), NA,
        "Aurora at one H (a quick run)", run=lambda: _load_managers(("aurora", 0.0, 0.9, 0.4)),
        why="no Aurora H sweep"),
    Row("load-managers", ("every_run_overloaded",), FAIL,
        "the paper-shaped run of 2026-11-28: at twice one calibration round's capacity the "
        "runs' median load before the background job was 0.69-1.02",
        run=lambda: _load_managers(("aurora", 0.0, 0.0, 0.0), ("aloma", None, 0.0, 0.0),
                                   load=0.71)),
    Row("load-managers", ("aloma_violation_le_0.1D", "ctrl_wrong_h_violates_more_than_aloma",
                          "aurora_tuned_h_misses_d", "aurora_violation_grows_with_h"), NA,
        "the same runs: no response time reached D because nothing was overloaded",
        run=lambda: _load_managers(("aurora", -0.375, 0.0, 0.39), ("aurora", 0.0, 0.0, 0.1),
                                   ("aloma", None, 0.0, 0.0), ("ctrl", 0.2, 0.0, 0.03),
                                   load=0.71),
        why="not overloaded, so its delay violation tests nothing", tag="-calm"),
    # ---------------------------------------- kafka-overload
    *(elsewhere("kafka-overload", name, verdict, words,
                "experiments/test_kafka_overload.py::"
                "test_every_check_fails_or_does_not_apply_on_its_own_input")
      for name, verdict, words in (
          ("latency_within_bound", FAIL, "p95 result latency 20 s against the 8 s bound"),
          ("overload_reached_80pct", FAIL, "arrivals 1.5x the measured capacity at level 3x"),
          ("kept_near_capacity", FAIL,
           "a node that kept every tuple, or 0.7 % (kept fraction 1.0 or 0.007 at level 3x, "
           "outside [0.5, 1.25]/3)"),
          ("error_falls_with_sic", FAIL, "a query whose window error rises with SIC"),
          ("error_falls_with_sic", NA, "window SIC spanning under 0.05"),
          ("replay_identical", FAIL, "a replayed batch that differs from the first run's"),
          ("replay_identical", NA, "the replay did not run"),
      )),  # fmt: skip
    # ---------------------------------------- overload
    elsewhere("overload", "batch_below_trigger latency_within_bound overload_reached_80pct "
              "kept_near_capacity", FAIL,
              "one run of several with a 1.3 s mean batch at a 1 s trigger, a 9 s p95 latency "
              "over a 4 s bound, 1.5x measured at level 3x, or 0.45 % or 94 % kept at level 3x "
              "(outside [0.5, 1.25]/3)",
              "experiments/test_overload.py::test_each_check_fails_on_a_run_that_breaks_it"),
    elsewhere("overload", "batch_below_trigger latency_within_bound overload_reached_80pct "
              "kept_near_capacity", NA,
              "no run measured",
              "experiments/test_overload.py::test_each_check_fails_on_a_run_that_breaks_it"),
    elsewhere("overload", "plain_spark_lag_grows", FAIL,
              "plain Spark's consumer lag 1,000 then 1,100 rows (not growing)",
              "experiments/test_overload.py::test_plain_spark_lag_must_grow"),
    elsewhere("overload", "plain_spark_lag_grows", NA, "plain Spark not run",
              "experiments/test_overload.py::test_each_check_fails_on_a_run_that_breaks_it"),
    # ---------------------------------------- sic-correlation
    elsewhere("sic-correlation", "rho_within_limits", FAIL,
              "a COUNT query scaled back by 1 / kept share: its error no longer falls with SIC",
              "experiments/test_themis_sic_correlation.py::"
              "test_rho_check_passes_for_a_plain_count_and_fails_for_a_rescaled_one"),
    elsewhere("sic-correlation", "rho_within_limits", NA, "no COUNT, TOP-5 or COV case",
              SIC_AVG),
    elsewhere("sic-correlation", "avg_below_count_at_sic_le_0.8", FAIL,
              "the cluster feed's idle CPU near 0: AVG error 0.9 vs COUNT 0.5 at SIC 0.5",
              SIC_AVG),
    elsewhere("sic-correlation", "avg_below_count_at_sic_le_0.8", NA,
              "no load step at SIC <= 0.8",
              SIC_AVG),
    # ---------------------------------------- single-node-fairness
    elsewhere("single-node-fairness", "jain_balance_sic_ge_0.95", FAIL,
              "a cost-blind shedder that starves the TOP-5 queries",
              "experiments/test_themis_fairness.py::"
              "test_jain_check_fails_for_a_shedder_that_starves_the_costly_queries"),
    Row("single-node-fairness", ("jain_balance_sic_ge_0.95",), NA, "no load step measured",
        run=lambda: nf.checks([], nf.make_config(quick=True)), why="no load step"),
    elsewhere("single-node-fairness", "balance_sic_fairer_where_random_below_0.95", FAIL,
              "balance-sic swapped for random (two random shedders, random's Jain 0.93)",
              "experiments/test_themis_fairness.py::"
              "test_fairer_check_fails_when_balance_sic_is_swapped_for_random"),
    elsewhere("single-node-fairness", "balance_sic_fairer_where_random_below_0.95 mean_sic_falls",
              NA, "the quick run's shape: random's Jain never below 0.95; a fixed capacity",
              "experiments/test_themis_fairness.py::test_checks_on_a_run_like_the_quick_one"),
    elsewhere("single-node-fairness", "mean_sic_falls", FAIL,
              "a measured capacity that grows with load: mean SIC 0.40 then 0.42",
              "experiments/test_themis_fairness.py::"
              "test_mean_sic_check_is_real_with_a_measured_capacity"),
    # ---------------------------------------- spark-federation
    Row("spark-federation", ("jain_coordinated_ge_0.95",), FAIL,
        "coordinated BALANCE-SIC at Jain 0.93 (a node's results too late for the coordinator's "
        "values to steer it)", run=lambda: _spark_fed(jain=(0.93, 0.9, 0.9))),
    Row("spark-federation", ("coordinated_above_uncoordinated", "coordinated_above_random"),
        FAIL, "coordinated 0.96, uncoordinated and random 0.97",
        run=lambda: _spark_fed(jain=(0.96, 0.97, 0.97))),
    Row("spark-federation", ("coordinated_above_uncoordinated", "coordinated_above_random"),
        NA, "uncoordinated and random already at Jain 0.995 (an overload equal on every node)",
        run=lambda: _spark_fed(jain=(0.999, 0.995, 0.995)), why="already fair"),
    Row("spark-federation", ("p95_latency_bounded_on_every_node",), FAIL,
        "node c's p95 latency 41 s over the 30 s bound (3 STWs)",
        run=lambda: _spark_fed(p95_c=41.0)),
    Row("spark-federation", ("every_node_overloaded",), FAIL,
        "node c kept 95 % of its arrivals (not overloaded)", run=lambda: _spark_fed(kept_c=0.95)),
    Row("spark-federation", ("p95_latency_bounded_on_every_node", "every_node_overloaded"), NA,
        "no run measured", run=lambda: sf.checks(sf.make_config(quick=True), {}),
        why="no run measured"),
    Row("spark-federation", ("node_kill_jain_survivors_ge_0.95",), FAIL,
        "node c killed: the survivors local-a and local-b at Jain 0.90 after the kill",
        run=lambda: _kill(jain_survivors=0.9)),
    Row("spark-federation", ("node_kill_jain_survivors_outage_ge_0.95",), FAIL,
        "node c killed: the survivors at Jain 0.90 while it was down",
        run=lambda: _kill(jain_survivors_outage=0.9)),
    Row("spark-federation", ("node_kill_lost_fragments_show",), FAIL,
        "shared's results hold 0.20 per STW over the outage against 0.25 before (the restarted "
        "node kept its backlog)",
        run=lambda: _kill(lost_queries={"shared": {"results_before": 0.25,
                                                   "results_outage": 0.2}})),
    Row("spark-federation", ("node_kill_lost_fragments_show",), NA,
        "the killed node hosted no fragment", run=lambda: _kill(lost_queries={}),
        why="no query had a fragment"),
    Row("spark-federation", ("node_kill_seen_lost_and_alive_again",), FAIL,
        "the restarted node never reached the coordinator again",
        run=lambda: _kill(alive_again_at_s=None)),
    Row("spark-federation", ("node_kill_caught_up",), FAIL,
        "the restarted node's committed offsets 2 short of its link's end at the restart",
        run=lambda: _kill(caught_up=False)),
    elsewhere("spark-federation", "sim_sic_within_0.05", FAIL,
              "run 9's random run simulated at twice its nodes' measured capacities: every "
              "query 0.2 or more above Spark's SIC",
              "experiments/test_fed_sim.py::test_capacities_off_by_2x_fail_the_sic_check"),
    elsewhere("spark-federation", "sim_jain_within_0.02", FAIL,
              "run 9's random run simulated with node c at twice its measured capacity: Jain "
              "below 0.9 against Spark's 0.96",
              "experiments/test_fed_sim.py::test_one_node_off_by_2x_fails_the_jain_check"),
    Row("spark-federation", ("sim_sic_within_0.05", "sim_jain_within_0.02"), NA,
        "a run that kept no node histories (no capacities to simulate it at)",
        run=lambda: fsim.sim_checks({"coordinated": "the run kept no node histories"}),
        why="no node histories"),
    elsewhere("spark-federation", "capacities_settled_before_measuring", FAIL,
              "node b's capacity climbing until 100 s of a part measured from 60 s (settled "
              "from 76 s); unmarked probes (1.5 x every fourth decision) read as unsettled",
              "experiments/test_spark_federation.py::"
              "test_a_node_still_climbing_when_the_part_starts_fails_the_settled_check"),
    Row("spark-federation", ("capacities_settled_before_measuring",), NA,
        "runs that kept no node histories (nothing tells when a node settled)",
        run=lambda: _spark_fed(), why="no node's decisions were kept"),
    # ---------------------------------------- stw-validation
    elsewhere("stw-validation", "means_in_range", FAIL,
              "a 0.6 s result lag on a loaded machine: 0.9405 at STW 10 s",
              "experiments/test_themis_stw.py::test_range_check_fails_when_the_result_lag_grows"),
    elsewhere("stw-validation", "means_in_range", NA, "no STW measured",
              "experiments/test_themis_stw.py::test_checks_without_the_result_table"),
    elsewhere("stw-validation", "longer_stw_closer_to_1", NA,
              "any run: the value is about 1 − lag / STW",
              "experiments/test_themis_stw.py::test_checks_on_the_paper_shaped_run"),
    # ---------------------------------------- federated-fairness
    elsewhere("federated-fairness", "mixed_jain_ratio_ge_1.33 higher_jain_in_every_config "
              "lower_std_in_every_config", FAIL,
              "the measured 18-node run: ratio 1.24 (random placement), a tie at one fragment "
              "per query", "experiments/test_federated_fairness.py::"
              "test_checks_fail_on_a_realistic_run"),
    Row("federated-fairness", ("mixed_jain_ratio_zipf_ge_1.33",), FAIL,
        "random shedding's Jain 0.80 under Zipf placement: ratio 1.24",
        run=lambda: ff.checks(_federated(0.80))),
    elsewhere("federated-fairness", "mixed_jain_ratio_zipf_ge_1.33", NA,
              "the mixed configuration not run with Zipf placement",
              "experiments/test_federated_fairness.py::"
              "test_checks_pass_when_balance_sic_wins_everywhere"),
    elsewhere("federated-fairness", "mean_sic_not_lower_in_every_config", FAIL,
              "BALANCE-SIC's mean SIC 0.25 vs random's 0.26 (3 fragments, Zipf)",
              "experiments/test_federated_fairness.py::test_lower_mean_sic_fails"),
    Row("federated-fairness", ("higher_jain_in_every_config", "lower_std_in_every_config",
                               "mean_sic_not_lower_in_every_config"), NA,
        "no configuration ran", run=lambda: ff.checks([]), why="no configuration ran"),  # fmt: skip
    # ---------------------------------------- shedding-interval
    elsewhere("shedding-interval", "jain_ge_0.9_at_every_interval "
              "mean_sic_within_0.05_across_intervals", FAIL,
              "a 1,000 ms interval with stale updates: Jain 0.88, mean SIC 0.47 vs 0.40",
              "experiments/test_sim_studies.py::test_shedding_interval_checks"),
    elsewhere("shedding-interval", "mean_sic_within_0.05_across_intervals", NA,
              "one interval run", "experiments/test_sim_studies.py::test_shedding_interval_checks"),
    Row("shedding-interval", ("jain_ge_0.9_at_every_interval",), NA, "no interval ran",
        run=lambda: si.checks([]), why="no interval ran"),
    # ---------------------------------------- fragment-mix
    elsewhere("fragment-mix", "jain_non_decreasing_in_share", FAIL,
              "Jain's index dipping twice, or once by 0.04, as the share grows",
              "experiments/test_sim_studies.py::test_fragment_mix_check"),
    elsewhere("fragment-mix", "jain_non_decreasing_in_share", NA, "one share run",
              "experiments/test_sim_studies.py::test_fragment_mix_check"),
    # ---------------------------------------- scalability
    elsewhere("scalability", "mean_sic_rises_with_nodes mean_sic_falls_with_queries "
              "jain_ge_0.9_everywhere", FAIL,
              "Zipf skew: the busiest node saturates, mean SIC 0.2 at 12 and 18 nodes, Jain "
              "0.8", "experiments/test_sim_studies.py::test_scalability_checks"),
    elsewhere("scalability", "mean_sic_rises_with_nodes mean_sic_falls_with_queries", NA,
              "mean SIC rising with nodes and falling with queries (fixed capacity: arithmetic)",
              "experiments/test_sim_studies.py::test_scalability_checks"),
    Row("scalability", ("jain_ge_0.9_everywhere",), NA, "no point ran",
        run=lambda: sc.checks({"nodes": [], "queries": []}), why="no point ran"),
    # ---------------------------------------- wan-burst
    elsewhere("wan-burst", "wan_burst_mean_sic_within_0.05_of_lan wan_latency_effect "
              "jain_ge_0.9_in_every_setup", FAIL,
              "bursts at mean SIC 0.16 vs lan's 0.30; a WAN delay costing a step (0.20); Jain "
              "0.85 at a 1 s delay", "experiments/test_sim_studies.py::test_wan_burst_checks"),
    elsewhere("wan-burst", "wan_latency_effect", NA,
              "both delays round to one shedding interval",
              "experiments/test_sim_studies.py::test_wan_burst_checks"),
    Row("wan-burst", ("mean_kept_bursts_mean_sic_within_0.05_of_lan",
                      "1s_delay_mean_sic_within_0.05_of_lan"), FAIL,
        "bursts kept at their mean rate reading 0.22, and 0.21 with a 1 s delay, vs lan's 0.30",
        run=lambda: wb.checks(_wan(wan_burst_mean_kept=0.22, wan_1s_burst_mean_kept=0.21)),
    ),  # fmt: skip
    Row("wan-burst", ("wan_burst_mean_sic_within_0.05_of_lan",
                      "mean_kept_bursts_mean_sic_within_0.05_of_lan",
                      "1s_delay_mean_sic_within_0.05_of_lan"), NA,
        "the burst setups not run",
        run=lambda: wb.checks(_wan(wan_burst=math.nan, wan_burst_mean_kept=math.nan,
                                   wan_1s_burst_mean_kept=math.nan)),
        why="setup did not run"),  # fmt: skip
    Row("wan-burst", ("jain_ge_0.9_in_every_setup",), NA, "no setup ran",
        run=lambda: wb.checks([]), why="no setup ran"),
    # ---------------------------------------- related-work
    elsewhere("related-work", "jain_balance_sic_ge_0.97 balance_sic_above_log_utility "
              "balance_sic_fairer_than_lp", FAIL,
              "BALANCE-SIC at Jain 0.95 below the log-utility optimum's 0.99, and 0.55 vs the "
              "LP's 0.59", "experiments/test_related_work.py::"
              "test_checks_fail_on_realistic_inputs"),
    elsewhere("related-work", "lp_serves_few_and_starves_the_rest", NA,
              "any run: an optimal vertex of the LP serves queries fully or not at all",
              "experiments/test_related_work.py::test_checks_fail_on_realistic_inputs"),
    # ---------------------------------------- overhead
    elsewhere("overhead", "fair_over_random_le_1.5", FAIL,
              "BALANCE-SIC's decide() 1.8x random's",
              "experiments/test_overhead.py::"
              "test_check_fails_when_the_fair_shedder_is_much_slower"),
    # ---------------------------------------- cost-quality
    elsewhere("cost-quality", "cost_advantage_at_300 tipping_point_within_range", FAIL,
              "mean SIC falling as 1/N from the first step (no idle capacity)",
              "experiments/test_sim_studies.py::test_cost_quality_trade_off_and_checks"),
    Row("cost-quality", ("cost_advantage_at_300",), NA, "300 queries not run",
        run=lambda: _cost_quality({180: 0.6, 240: 0.5, 360: 0.35}), why="300 queries did not run"),
    Row("cost-quality", ("mean_sic_falls_as_queries_are_added",), FAIL,
        "idle capacity at the first steps: mean SIC 1.0 at 180 and 240 queries",
        run=lambda: _cost_quality({180: 1.0, 240: 1.0, 300: 0.8}),
        why="should hold by construction"),  # fmt: skip
    elsewhere("cost-quality", "mean_sic_falls_as_queries_are_added", NA,
              "mean SIC falling at every step (fixed capacity: arithmetic)",
              "experiments/test_sim_studies.py::test_cost_quality_trade_off_and_checks"),
    # ---------------------------------------- benchmarks
    elsewhere("bench decision", "fair_over_random_le_1.5", FAIL,
              "BALANCE-SIC's exact mode (Algorithm 1 one iteration at a time)",
              "bench/test_decision.py::"
              "test_fair_over_random_fails_for_algorithm_1_run_iteration_by_iteration"),
    elsewhere("bench decision", "fair_over_random_le_1.5", NA, "random timed alone",
              "bench/test_decision.py::"
              "test_fair_over_random_is_not_applicable_without_both_policies"),
    elsewhere("bench kafka", "kafka_ratio_ge_0.8", FAIL, "spillway at half Spark's rows/s",
              "bench/test_kafka_bench.py::"
              "test_the_ratio_check_fails_below_the_goal_and_when_unmeasured"),
    elsewhere("bench spark", "latency_grows_without_shedding", FAIL,
              "a calibration that measured too little capacity: the unshed run keeps up",
              "bench/test_spark_bench.py::test_noshed_growth_fails_when_the_overload_was_not_real"),
    elsewhere("bench spark", "latency_bounded_with_shedding latency_p95_shed_below_noshed", FAIL,
              "a capacity estimate set too high: the shedding node falls behind",
              "bench/test_spark_bench.py::"
              "test_latency_checks_fail_when_the_shedder_admits_more_than_the_node_processes"),
    elsewhere("bench spark", "utilisation_ge_0.85", FAIL,
              "a capacity set too high: 600 of 1,000 tuples/s processed",
              "bench/test_spark_bench.py::"
              "test_utilisation_fails_when_the_capacity_is_set_too_high"),
    elsewhere("bench spark", "source_ratio_ge_0.8", FAIL,
              "the measured per-row costs: 0.94 us (spillway) vs 0.48 us (rate)",
              "bench/test_spark_bench.py::test_source_ratio_fails_on_the_measured_per_row_costs"),
]  # fmt: skip

#: Checks that hold by construction on a working set-up: no realistic input fails them, and
#: their rows show them not applicable.
BY_CONSTRUCTION: dict[str, tuple[str, ...]] = {
    "cod-accuracy": ("taxi_b0.98_missing_groups_cod_keep_one_zero",
                     "tasks_b0.98_missing_groups_cod_keep_one_zero", "packets_abs_diff_le_0.02"),
    "stw-validation": ("longer_stw_closer_to_1",),
    "related-work": ("lp_serves_few_and_starves_the_rest",),
    "dilos": ("higher_class_lower_latency",),
}  # fmt: skip

#: Every experiment's and benchmark's checks on a run that measured nothing.
EMPTY: dict[str, Callable[[], Sequence[Check]]] = {
    "cod-drift": lambda: (
        cd.feed_checks(
            cd.CodDriftConfig(), DriftSeries(distance=np.array([]), overlap=np.array([])), []
        )
        + [cd.paper_check(cd.CodDriftConfig(), None)]
    ),
    "cod-accuracy": lambda: ca.checks_of([], ca.CodAccuracyConfig()),
    "cod-latency": lambda: cl.checks([]),
    "kafka-overload": lambda: ko.checks(ko.make_config(quick=True), {}),
    "load-managers": lambda: lm.checks(lm.make_config(quick=True), []),
    "dilos": lambda: dl.checks(dl.make_config(quick=True), []),
    "crc-sensitivity": lambda: crc.checks([]),
    "overload": lambda: ov.checks({}),
    "sic-correlation": lambda: scor.checks([], []),
    "single-node-fairness": lambda: nf.checks([], nf.FairnessConfig(capacity_tuples_per_s=None)),
    "spark-federation": lambda: [
        *sf.checks(sf.make_config(quick=True), {}),
        *sf.kill_checks({}),
        *fsim.sim_checks({}),
    ],
    "stw-validation": lambda: sv.checks([]),
    "federated-fairness": lambda: ff.checks([]),
    "shedding-interval": lambda: si.checks([]),
    "fragment-mix": lambda: fm.checks([]),
    "scalability": lambda: sc.checks({"nodes": [], "queries": []}),
    "wan-burst": lambda: wb.checks([]),
    "related-work": lambda: rw.checks(
        {
            "complex": {"jain_balance_sic": math.nan, "jain_log_utility": math.nan},
            "simple": {
                "jain_balance_sic": math.nan,
                "jain_lp": math.nan,
                "lp_full": 0,
                "lp_zero": 0,
                "lp_partial": 0,
            },
        }
    ),  # fmt: skip
    "overhead": lambda: oh.checks({"fair_over_random": math.nan}),
    "cost-quality": lambda: cq.checks([]),
    "bench decision": lambda: decision_checks({"results": []}),
    "bench kafka": lambda: kafka_checks({}),
    "bench spark": lambda: spark_checks({}),
}


def test_rows_have_distinct_ids() -> None:
    ids = [r.id for r in ROWS if r.run is not None]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", [r for r in ROWS if r.run is not None], ids=lambda r: r.id)
def test_the_input_gives_its_verdict(row: Row) -> None:
    assert row.run is not None
    got = {c.name: c for c in row.run()}
    for name in row.checks:
        assert got[name].verdict == row.verdict, (name, got[name].why)
        assert row.why in got[name].why, (name, got[name].why)


@pytest.mark.parametrize("experiment", sorted(EMPTY))
def test_a_run_that_measured_nothing_passes_no_check(experiment: str) -> None:
    found = EMPTY[experiment]()
    assert found and not [c.name for c in found if c.verdict == PASS]


def test_every_check_has_an_input_on_which_it_fails() -> None:
    assert {e for e in EMPTY if not e.startswith("bench ")} == set(EXPERIMENTS)
    fails = {(r.experiment, n) for r in ROWS if r.verdict == FAIL for n in r.checks}
    shown_na = {(r.experiment, n) for r in ROWS if r.verdict == NA for n in r.checks}
    for experiment, run in EMPTY.items():
        names = {c.name for c in run()}
        always = set(BY_CONSTRUCTION.get(experiment, ()))
        assert always <= names, (experiment, always - names)
        no_fail = {(experiment, n) for n in names - always} - fails
        assert not no_fail, f"checks without an input on which they fail: {sorted(no_fail)}"
        no_na = {(experiment, n) for n in always} - shown_na
        assert not no_na, f"by-construction checks without their input: {sorted(no_na)}"
    listed = {(r.experiment, n) for r in ROWS for n in r.checks}
    named = {(e, c.name) for e, run in EMPTY.items() for c in run()}
    assert listed <= named, f"rows naming no check: {sorted(listed - named)}"


def test_every_test_named_by_a_row_exists() -> None:
    for row in ROWS:
        if row.test:
            path, func = row.test.split("::")
            module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
            assert callable(getattr(module, func, None)), row.test


def table() -> str:
    """EXPERIMENTS.md's table: one line per row (checks, verdict, input in words, test)."""
    lines = [
        "| experiment | check | verdict | the input, in words | test |",
        "|---|---|---|---|---|",
    ]
    for r in ROWS:
        names = "<br>".join(f"`{n}`" for n in r.checks)
        lines.append(f"| `{r.experiment}` | {names} | {r.verdict} | {r.input} | `{r.node}` |")
    return "\n".join(lines)


def test_experiments_md_lists_every_row() -> None:
    text = EXPERIMENTS_MD.read_text()
    missing = [line for line in table().splitlines() if line not in text]
    assert not missing, "EXPERIMENTS.md must hold the table:\n" + table()
