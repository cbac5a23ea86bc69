from __future__ import annotations

import argparse
import json
import math
import time
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from spillway.errors import ConfigError, InputDataError, UnknownNameError
from spillway.experiments import get_experiment
from spillway.experiments import spark_federation as sf
from spillway.federation.config import FederationConfig

QUERIES = ("local-a", "local-b", "local-c", "shared")
#: Capacities like those the nodes measured at the end of runs (EXPERIMENTS.md "Run 5").
CAPACITIES = {"a": 457_400.0, "b": 382_400.0, "c": 50_320.0}


def _calibration_timeline(keep_b: float | None = None) -> list[dict[str, Any]]:
    """A quick calibration's timeline: every node offered 800,000 tuples/s and keeping its
    capacity (:data:`CAPACITIES`) each second (b keeping ``keep_b`` of its input if given)."""
    return [
        {"elapsed_s": float(t), "arrived": {n: 800_000 * t for n in CAPACITIES},
         "kept": {n: int((800_000 * keep_b if n == "b" and keep_b else c) * t)
                  for n, c in CAPACITIES.items()}}
        for t in range(111)
    ]  # fmt: skip


def _load(path: Path) -> FederationConfig:
    return FederationConfig.from_dict(tomllib.loads(path.read_text()))


def _node_loads(fed: FederationConfig) -> dict[str, float]:
    """Tuples per second each node's sources send."""
    load = {n: 0.0 for n in fed.nodes}
    for q in fed.queries:
        for f in q.fragments:
            load[f.node] += f.sources * q.rate
    return load


def _run(mode: str, sic: tuple[float, ...], *, kept: float = 0.4, p95: float = 15.0) -> dict:
    """A run as ``measure`` returns it: the coordinator's SIC each second from 0 to 110 s (0
    before 30 s: no watermark yet), every node's p95 latency and kept share."""
    timeline = [
        {"elapsed_s": float(t), "sic": dict(zip(QUERIES, sic if t >= 30 else (0.0,) * 4,
                                                strict=True)),
         "jain": None, "latency_p95_s": {n: p95 for n in sf.NODES},
         "arrived": {n: 10_000 * t for n in sf.NODES},
         "kept": {n: int(10_000 * t * kept) for n in sf.NODES}}
        for t in range(111)
    ]  # fmt: skip
    nodes = {n: {"capacity_tuples_per_s": 2500.0} for n in sf.NODES}
    return {"mode": mode, "summary": {"nodes": nodes}, "timeline": timeline}


def _measured(**over: Any) -> dict[str, Any]:
    runs = {
        "coordinated": _run("coordinated", (0.34, 0.35, 0.33, 0.34)),
        "uncoordinated": _run("uncoordinated", (0.25, 0.36, 0.5, 0.37)),
        "random": _run("random", (0.24, 0.37, 0.52, 0.36)),
        **over,
    }
    return {"runs": list(runs.values())}


def test_the_report_of_three_runs_names_the_issues_values(tmp_path: Path) -> None:
    # the fixture's runs end at 110 s: measured from 60 s on, as the quick runs were before run 8
    cfg = replace(sf.make_config(quick=True), duration_s=110.0, warmup_s=60.0)
    summary = sf.EXPERIMENT.write(cfg, _measured(), tmp_path)
    # from 60 s (the warm-up) to 110 s: Jain over each query's mean SIC
    assert summary["jain_coordinated"] == pytest.approx(0.9997, abs=1e-4)
    assert summary["jain_uncoordinated"] == pytest.approx(0.9458, abs=1e-4)
    assert summary["jain_random"] < 0.95
    assert summary["runs"]["coordinated"]["samples"] == 51
    kill = summary["node_kill"]
    assert kill["verdict"] == "not applicable" and kill["why"].startswith("not run")
    assert kill["jain_survivors"] is None and kill["caught_up"] is None
    verdicts = {c["name"]: c["verdict"] for c in summary["checks"]}
    assert verdicts == {
        "jain_coordinated_ge_0.95": "pass",
        "coordinated_above_uncoordinated": "pass",
        "coordinated_above_random": "pass",
        "p95_latency_bounded_on_every_node": "pass",
        "every_node_overloaded": "pass",
        # these runs kept no node histories: no capacities to run the simulator at, and
        # none to tell when they settled
        "capacities_settled_before_measuring": "not applicable",
        "sim_sic_within_0.05": "not applicable",
        "sim_jain_within_0.02": "not applicable",
    }
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    report = (tmp_path / "report.md").read_text()
    assert "0.8525" in report and "30 s" in report  # the paper's Jain, the latency bound
    for f in ("jain.png", "query_sic.png", "jain_over_time.png", "timeline.csv", "nodes.csv"):
        assert (tmp_path / f).exists(), f


def _kill_run(*, survivors: tuple[float, float], caught_up: bool = True) -> dict:
    """A kill run as ``measure`` returns it: c killed at 45 s, restarted at 60 s, heard again at
    80 s; local-c and shared frozen at the coordinator while c is down, then falling to 0.05."""
    run = _run(sf.KILL_MODE, (*survivors, 0.3, 0.3))
    for e in run["timeline"]:
        if e["elapsed_s"] >= 85:
            e["sic"].update({"local-c": 0.05, "shared": 0.05})
    run["summary"]["kill"] = {
        "node": "c", "killed_at_s": 45.0, "lost_seen_at_s": 49.0, "restarted_at_s": 60.0,
        "alive_again_at_s": 80.0, "caught_up_at_s": 81.0, "caught_up": caught_up,
        "catch_up": {"caught_up": caught_up, "partitions": {}, "sources": {}},
    }  # fmt: skip
    run["lost_sic"] = {"local-c": {"before": 0.3, "outage": 0.01},
                       "shared": {"before": 0.3, "outage": 0.02}}  # fmt: skip
    return run


def test_the_kill_run_gives_jain_among_the_survivors_and_the_catch_up(tmp_path: Path) -> None:
    cfg = sf.make_config(quick=True)
    summary = sf.EXPERIMENT.write(
        cfg, _measured(node_kill=_kill_run(survivors=(0.3, 0.32))), tmp_path
    )
    kill = summary["node_kill"]
    assert kill["verdict"] == "pass" and kill["survivors"] == ["local-a", "local-b"]
    assert kill["jain_survivors"] == pytest.approx(0.62**2 / 2 / (0.3**2 + 0.32**2), abs=1e-3)
    assert kill["caught_up"] is True and kill["caught_up_at_s"] == 81.0
    assert kill["lost_queries"]["shared"] == {
        "results_before": 0.3, "results_outage": 0.02, "coordinator_before": 0.3,
        "coordinator_min_after": 0.05,
    }  # fmt: skip
    assert "node_kill" not in summary["runs"]  # the kill run is not one of the compared modes
    verdicts = {c["name"]: c["verdict"] for c in summary["checks"]}
    assert {n: v for n, v in verdicts.items() if n.startswith("node_kill_")} == {
        "node_kill_jain_survivors_ge_0.95": "pass",
        "node_kill_jain_survivors_outage_ge_0.95": "pass",
        "node_kill_lost_fragments_show": "pass",
        "node_kill_seen_lost_and_alive_again": "pass",
        "node_kill_caught_up": "pass",
    }
    assert (tmp_path / "node_kill_sic.png").exists()
    # survivors apart and a node that did not catch up: both fail, and the verdict with them
    bad = _kill_run(survivors=(0.1, 0.4), caught_up=False)
    summary = sf.EXPERIMENT.write(cfg, _measured(node_kill=bad), tmp_path / "bad")
    verdicts = {c["name"]: c["verdict"] for c in summary["checks"]}
    assert verdicts["node_kill_jain_survivors_ge_0.95"] == "fail"
    assert verdicts["node_kill_caught_up"] == "fail"
    assert summary["node_kill"]["verdict"] == "fail"


def test_the_warm_up_is_left_out_and_a_late_node_fails_the_bound(tmp_path: Path) -> None:
    cfg = sf.make_config(quick=True)
    slow = _run("random", (0.24, 0.37, 0.52, 0.36), p95=31.0)
    summary = sf.EXPERIMENT.write(cfg, _measured(random=slow), tmp_path)
    check = {c["name"]: c for c in summary["checks"]}["p95_latency_bounded_on_every_node"]
    assert check["verdict"] == "fail" and "random/a" in check["why"]
    # a run whose queries all read 0 throughout the measured part measures no Jain: it fails
    cold = _run("coordinated", (0.0, 0.0, 0.0, 0.0))
    cold["timeline"] = [e for e in cold["timeline"] if e["elapsed_s"] < cfg.warmup_s]
    summary = sf.EXPERIMENT.write(cfg, _measured(coordinated=cold), tmp_path / "cold")
    assert summary["jain_coordinated"] is None or math.isnan(summary["jain_coordinated"])
    assert {c["name"]: c["verdict"] for c in summary["checks"]}["jain_coordinated_ge_0.95"] == (
        "fail"
    )


def test_the_three_federation_files_differ_only_in_shedding(tmp_path: Path) -> None:
    cfg = sf.make_config(quick=True)
    feds = {m: sf.federation(cfg, m) for m in sf.MODES}
    for m, fed in feds.items():  # the file measure writes reads back as the same federation
        path = tmp_path / f"{m}.toml"
        path.write_text(sf._toml(fed))
        assert FederationConfig.from_dict(tomllib.loads(path.read_text())) == fed
    same = {m: {**f.to_dict(), "nodes": None, "coordinator": None} for m, f in feds.items()}
    assert same["coordinated"] == same["uncoordinated"] == same["random"]
    assert [feds[m].coordinated for m in sf.MODES] == [True, False, False]
    # the overload is unequal: a's load above b's above c's
    load = {n: 0.0 for n in sf.NODES}
    for q in feds["random"].queries:
        for f in q.fragments:
            load[f.node] += f.sources * q.rate
    assert load["a"] > load["b"] > load["c"]
    with pytest.raises(UnknownNameError, match="mode must be one of"):
        sf.federation(cfg, "fifo")
    with pytest.raises(ConfigError, match="warmup_s .* must be below duration_s"):
        replace(cfg, warmup_s=cfg.duration_s)
    assert get_experiment("spark-federation") is sf


@pytest.mark.slow  # about 6 minutes (three federations of 3 Spark nodes): `pytest -m slow`
@pytest.mark.spark
@pytest.mark.kafka
def test_the_quick_experiment_runs_end_to_end(tmp_path: Path) -> None:
    """The quick experiment shortened to 60 s runs measured from 40 s on: three federations of
    three Spark nodes on this machine, every run shedding (a node keeping < 90 %) and every
    node shedding in some run, every query with a value from the coordinator over the measured
    part. Verdicts are the run's findings (2026-11-27 14:14 UTC, 335 s wall: Jain coordinated
    0.9721, uncoordinated 0.6664, random 0.6704; node b kept 97 % in the uncoordinated run)."""
    cfg = replace(sf.make_config(quick=True), duration_s=60.0, warmup_s=40.0, modes=sf.MODES,
                  kill_at_s=20.0)  # the kill run is tested in tests/federation  # fmt: skip
    t0 = time.monotonic()
    summary = sf.run(cfg, tmp_path)
    took = time.monotonic() - t0
    for m in sf.MODES:
        run = summary["runs"][m]
        assert run["samples"] > 0, (m, run)
        assert set(run["sic"]) == set(QUERIES)
        assert all(0.0 < s <= 1.05 for s in run["sic"].values()), (m, run["sic"])
        assert any(k is not None and k < sf.MAX_KEPT for k in run["kept_fraction"].values()), (
            m, run["kept_fraction"]
        )  # fmt: skip
        assert 0.25 <= summary[f"jain_{m}"] <= 1.0
    for n in sf.NODES:  # every node shed in some run
        assert any((summary["runs"][m]["kept_fraction"][n] or 1.0) < sf.MAX_KEPT for m in sf.MODES)
    assert summary["node_kill"]["verdict"] == "not applicable"
    assert (tmp_path / "report.md").exists()
    print(f"quick spark-federation (60 s runs) took {took:.0f} s")


def test_measure_runs_federation_up_with_its_own_options_and_the_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``measure`` hands ``federation up`` the arguments its parser makes (every option it has,
    defaults included; a hand-built Namespace lacked ``--ui`` once ``up`` grew it, and the
    experiment failed before starting), and ``--kill`` in the kill run only. ``up`` and the
    broker are stand-ins here: what is checked is what they are given."""
    import contextlib

    import spillway.federation.up as up
    import spillway.testing

    @contextlib.contextmanager
    def broker(data_dir: Path):
        yield argparse.Namespace(data_dir=str(data_dir))

    seen: dict[str, argparse.Namespace] = {}

    def fake_up(args: argparse.Namespace) -> int:
        seen[args.out.name] = args
        assert args.ui is False and args.ui_port is None and args.master == "local[1]"
        args.out.mkdir(parents=True)
        kill = {"node": "c", "killed_wall": None, "restarted_wall": None}
        nodes = {n: {"capacity_tuples_per_s": 2 * c} for n, c in CAPACITIES.items()}
        (args.out / "summary.json").write_text(json.dumps({"duration_s": args.duration,
                                                           "kill": kill, "nodes": nodes}))  # fmt: skip
        lines = [json.dumps(e) for e in _calibration_timeline()]
        (args.out / "timeline.jsonl").write_text("\n".join(lines) + "\n")
        return 0

    monkeypatch.setattr(up, "cmd_up", fake_up)
    monkeypatch.setattr(spillway.testing, "running_broker", broker)
    monkeypatch.setattr(sf, "find_controller", lambda: object())  # cgroups may be made
    cfg = replace(sf.make_config(quick=True), runs_dir=str(tmp_path))
    got = sf.measure(cfg)
    assert [r["mode"] for r in got["runs"]] == list(sf.RUNS)
    # every node of every run limited to its own cores, and the record says so
    assert got["node_cpu"] == sf.NODE_CPU
    for m in (sf.CALIBRATION, *sf.RUNS):
        assert _load(tmp_path / f"{m}.toml").cpus == (sf.NODE_CPU,) * 3
    assert [seen[m].kill for m in sf.RUNS] == [None, None, None, "c@40+10"]
    # the calibration ran first, as long as a mode, the random federation at the probe rates
    assert seen[sf.CALIBRATION].duration == cfg.duration_s == 130.0
    probe = sf.federation(cfg, "random", sf.probe_rates(cfg))
    assert _load(tmp_path / "calibration.toml") == probe
    # and every mode ran at the levels times those capacities, not the configured rates
    for m in sf.RUNS:
        fed = _load(tmp_path / f"{m}.toml")
        assert _node_loads(fed) == pytest.approx(
            {n: lv * CAPACITIES[n] for n, lv in zip(sf.NODES, cfg.levels, strict=True)}
        )
    assert got["calibration"]["capacity_tuples_per_s"] == pytest.approx(CAPACITIES)
    assert got["rates"]["source"] == "measured"
    assert got["runs"][-1]["lost_sic"] == {
        "local-c": {"before": None, "outage": None}, "shared": {"before": None, "outage": None}
    }  # fmt: skip


def test_rates_bring_every_node_to_its_level_of_its_measured_capacity() -> None:
    cfg = sf.make_config(quick=True)
    rates = sf.derive_rates(CAPACITIES, cfg.levels, cfg.sources, cfg.shared_share)
    fed = sf.federation(cfg, "coordinated", rates)
    load = _node_loads(fed)
    level = {n: load[n] / CAPACITIES[n] for n in sf.NODES}
    assert level == pytest.approx(dict(zip(sf.NODES, cfg.levels, strict=True)))
    assert level["a"] > level["b"] > level["c"] > 1.0  # Fig. 4's unequal overload
    # shared: one rate on every node, shared_share of the least loaded node's input
    shared = next(q for q in fed.queries if q.name == "shared")
    assert cfg.sources * shared.rate == pytest.approx(cfg.shared_share * min(load.values()))
    assert all(r > 0 for r in rates.local)
    # any level, any shared part: the loads follow the capacities
    other = sf.derive_rates(CAPACITIES, (5.0, 1.2, 1.1), 4, 0.9)
    got = other.node_loads(4)
    assert {n: got[n] / CAPACITIES[n] for n in sf.NODES} == pytest.approx(
        {"a": 5.0, "b": 1.2, "c": 1.1}
    )
    assert 4 * other.shared == pytest.approx(0.9 * min(got.values()))


@pytest.mark.parametrize("bad", [None, 0.0, -5.0, math.nan, math.inf])
def test_rates_refuse_a_capacity_not_measured(bad: float | None) -> None:
    with pytest.raises(InputDataError, match="node c measured no capacity"):
        sf.derive_rates({**CAPACITIES, "c": bad})
    with pytest.raises(InputDataError, match="node b measured no capacity"):
        sf.derive_rates({"a": 1.0, "c": 1.0})
    with pytest.raises(ConfigError, match="levels must give 3"):
        sf.derive_rates(CAPACITIES, (2.0, 2.0))
    with pytest.raises(ConfigError, match="shared_share"):
        sf.derive_rates(CAPACITIES, shared_share=1.0)


def test_configured_rates_are_an_option_labelled_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rates = "configured"`` runs no calibration and the fixed rates; the report says so.
    The default measures them, and a calibration node that kept its input fails
    ``every_node_overloaded`` (its capacity an extrapolation, not a limit it met)."""
    cfg = replace(sf.make_config(quick=True), rates="configured")
    assert sf.make_config(quick=True).rates == "measured"
    assert _node_loads(sf.federation(cfg, "random")) == sf.configured_rates(cfg).node_loads(10)
    summary = sf.EXPERIMENT.write(cfg, _measured(), tmp_path / "configured")
    assert summary["input_rates"]["source"] == "configured"
    assert summary["input_rates"]["node_input_tuples_per_s"] == {
        "a": 600_000.0, "b": 420_000.0, "c": 300_000.0
    }  # fmt: skip
    assert "Rates configured" in (tmp_path / "configured" / "report.md").read_text()
    # measured: the calibration's figures and the rates they gave reach summary and report
    cfg = sf.make_config(quick=True)
    rates = sf.derive_rates(CAPACITIES, cfg.levels)
    cal = sf.calibration_values(
        cfg,
        {"nodes": {n: {"capacity_tuples_per_s": c} for n, c in CAPACITIES.items()}},
        _calibration_timeline(),
    )
    measured = {**_measured(), "calibration": cal,
                "rates": {"source": "measured", "local": list(rates.local),
                          "shared": rates.shared}}  # fmt: skip
    summary = sf.EXPERIMENT.write(cfg, measured, tmp_path / "measured")
    got = summary["input_rates"]
    assert got["source"] == "measured"
    assert got["calibration"]["capacity_tuples_per_s"] == pytest.approx(CAPACITIES, rel=1e-3)
    assert got["node_input_tuples_per_s"] == pytest.approx(  # the summary keeps 4 digits
        {n: lv * CAPACITIES[n] for n, lv in zip(sf.NODES, cfg.levels, strict=True)}, rel=1e-3
    )
    text = (tmp_path / "measured" / "report.md").read_text()
    assert "Rates measured" in text and "457,400" in text
    verdict = {c["name"]: c for c in summary["checks"]}["every_node_overloaded"]
    assert verdict["verdict"] == "pass" and "calibration/c" in verdict["why"]
    # a calibration node that kept 95 %: its capacity is no limit, the check fails on it
    bad = sf.calibration_values(cfg, {"nodes": {}}, _calibration_timeline(keep_b=0.95))
    cks = sf.checks(cfg, {}, bad)
    over = {c.name: c for c in cks}["every_node_overloaded"]
    assert over.verdict == "fail" and "calibration/b" in over.why


def test_without_cgroups_the_nodes_run_unlimited_and_the_report_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = replace(sf.make_config(quick=True), rates="configured", modes=("random",),
                  runs_dir=str(tmp_path))  # fmt: skip
    monkeypatch.setattr(sf, "find_controller", lambda: None)
    seen: list[sf.SparkFederationConfig] = []
    monkeypatch.setattr(sf, "federation", lambda c, *a: seen.append(c) or (_ for _ in ()).throw(
        RuntimeError("stop here")))  # fmt: skip
    with pytest.raises(RuntimeError, match="stop here"):
        sf.measure(cfg)
    assert [c.node_cpu for c in seen] == [None]  # the federation files set no cpu
    used = sf.configured_rates(cfg)
    assert "no CPU limit" in sf._setup(cfg, used, None, None)
    assert "limited to 0.5 cores" in sf._setup(cfg, used, None, 0.5)
    with pytest.raises(ConfigError, match="node_cpu must be a number of cores > 0"):
        replace(cfg, node_cpu=0.0)


def _climbing(until_s: float, *, probes: bool = False, marked: bool = True) -> list[dict]:
    """A node's decisions every 2 s (20,000 tuples each, as `_run`'s timeline counts them):
    capacity climbing linearly to 100,000 tuples at ``until_s``, then flat; with ``probes``
    every fourth decision admits 1.5 times that, ``marked`` as a probe or not."""
    return [
        {"t": float(t), "arrived_tuples": 20_000, "query_arrived": {},
         "capacity_tuples": 1e5 * min(1.0, t / until_s) * (1.5 if probes and t % 8 == 0 else 1),
         "probe": marked and probes and t % 8 == 0}
        for t in range(0, 110, 2)
    ]  # fmt: skip


def test_a_node_still_climbing_when_the_part_starts_fails_the_settled_check(
    tmp_path: Path,
) -> None:
    # measured from 60 s: node b's capacity climbs until 100 s (settled, within 25 % of its
    # level, from 76 s), the others' until 30 s (settled from 28 s), probing every fourth
    # decision
    cfg = replace(sf.make_config(quick=True), duration_s=110.0, warmup_s=60.0)

    def measured(b_until: float, marked: bool = True) -> dict[str, Any]:
        run = _run("random", (0.24, 0.37, 0.52, 0.36))
        run["histories"] = {
            "a": _climbing(30.0, probes=True, marked=marked),
            "b": _climbing(b_until),
            "c": _climbing(30.0, probes=True, marked=marked),
        }
        return {"runs": [run]}

    def settled(m: dict[str, Any]) -> tuple[dict, str, str]:
        summary = sf.EXPERIMENT.write(cfg, m, tmp_path)
        c = next(c for c in summary["checks"]
                 if c["name"] == "capacities_settled_before_measuring")  # fmt: skip
        return summary["runs"]["random"]["settled_s"], c["verdict"], c["why"]

    at, verdict, why = settled(measured(b_until=100.0))
    assert verdict == "fail" and why.startswith("failed at random/b: ") and "random/a" not in why
    assert at["b"] > 60.0 > max(at["a"], at["c"])
    assert settled(measured(b_until=40.0))[1] == "pass"
    # the probes' spikes (1.5 x, beyond 25 % of the level) read as unsettled if not marked
    at, verdict, why = settled(measured(b_until=40.0, marked=False))
    assert verdict == "fail" and at["a"] > 100.0, at
    assert "capacity_settled_s" in (tmp_path / "nodes.csv").read_text()


def test_the_measured_part_starts_once_the_nodes_capacities_settled() -> None:
    """Run 8's nodes (EXPERIMENTS.md "Runs 7 and 8"): each node's capacity per decision climbed
    for over a minute after its first batch; the quick runs' measured part must start after
    that climb in all but the slowest of the 12 node runs (the old 60 s caught none settled)."""
    data = json.loads((Path(__file__).parent / "data" / "fed_run8_capacity.json").read_text())
    since_first = {
        name: sf.settled_at([(t - xs[0][0], c) for t, c in xs])
        for name, xs in data["series"].items()
    }
    cfg = sf.make_config(quick=True)
    late = sorted(name for name, s in since_first.items() if s > cfg.warmup_s)
    assert len(late) <= 1, (cfg.warmup_s, since_first)
    assert cfg.duration_s - cfg.warmup_s >= 40.0
