"""THEMIS Figs. 9, 11-14 and DISSP §6.4 on the simulator: checks fail on realistic inputs;
quick runs end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments import cost_quality as cq
from spillway.experiments import fragment_mix as fm
from spillway.experiments import scalability as sc
from spillway.experiments import shedding_interval as si
from spillway.experiments import wan_burst as wb


def verdicts(checks: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {c.name: c.verdict for c in checks}


# ---------------------------------------------------------------- shedding interval (Fig. 9)
def test_shedding_interval_checks() -> None:
    ok = [{"interval_ms": i, "jain_balance_sic": 0.99, "mean_sic_balance_sic": m}
          for i, m in ((125, 0.40), (250, 0.41), (1000, 0.43))]  # fmt: skip
    assert set(verdicts(si.checks(ok)).values()) == {"pass"}
    # a longer interval with stale updates: Jain falls and the mean drifts
    bad = [*ok[:2], {"interval_ms": 1000, "jain_balance_sic": 0.88, "mean_sic_balance_sic": 0.47}]
    assert verdicts(si.checks(bad)) == {
        "jain_ge_0.9_at_every_interval": "fail",
        "mean_sic_within_0.05_across_intervals": "fail",
    }
    one = verdicts(si.checks(ok[:1]))
    assert one["mean_sic_within_0.05_across_intervals"] == "not applicable"


def test_shedding_interval_config_errors() -> None:
    with pytest.raises(ConfigError, match="at least one shedding interval"):
        si.SheddingIntervalConfig(intervals_s=())
    with pytest.raises(ConfigError, match="window closes on a decision"):
        si.SheddingIntervalConfig(intervals_s=(0.4,))


# ---------------------------------------------------------------- fragment mix (Fig. 11)
def test_fragment_mix_counts() -> None:
    for share in (0.0, 0.25, 1.0):
        counts = fm.fragment_mix(share, 2000, seed=1)
        assert abs(sum(counts) - 2000) <= 3 and set(counts) <= {1, 3}
        assert counts.count(3) == round(share * len(counts))


def test_fragment_mix_check() -> None:
    def rows(js: list[float]) -> list[dict]:  # type: ignore[type-arg]
        return [
            {"share_3_fragment": s, "jain_balance_sic": j}
            for s, j in zip((0, 0.25, 0.5, 0.75, 1), js, strict=False)
        ]

    assert fm.checks(rows([0.95, 0.96, 0.955, 0.97, 0.98]))[0].verdict == "pass"  # one small dip
    assert fm.checks(rows([0.95, 0.94, 0.96, 0.95, 0.98]))[0].verdict == "fail"  # two dips
    assert fm.checks(rows([0.99, 0.95, 0.99, 0.99, 0.99]))[0].verdict == "fail"  # dip of 0.04
    assert fm.checks(rows([0.9]))[0].verdict == "not applicable"
    with pytest.raises(ConfigError, match="shares must be fractions"):
        fm.FragmentMixConfig(shares=(0.0, 1.5))
    with pytest.raises(ConfigError, match="shares must be increasing"):
        fm.FragmentMixConfig(shares=(0.5, 0.0))


# ---------------------------------------------------------------- scalability (Figs. 12-13)
def test_scalability_checks() -> None:
    def pts(key: str, xs: tuple, means: tuple, jains: tuple) -> list[dict]:  # type: ignore[type-arg]
        other = "queries" if key == "nodes" else "nodes"
        return [{key: x, other: 18, "mean_sic_balance_sic": m, "jain_balance_sic": j}
                for x, m, j in zip(xs, means, jains, strict=True)]  # fmt: skip

    good = {"nodes": pts("nodes", (6, 12, 18), (0.1, 0.2, 0.3), (0.95, 0.97, 0.99)),
            "queries": pts("queries", (250, 500), (0.4, 0.2), (0.99, 0.98))}  # fmt: skip
    # mean SIC rising with nodes and falling with queries is the arithmetic of a fixed capacity
    assert verdicts(sc.checks(good)) == {"mean_sic_rises_with_nodes": "not applicable",
                                         "mean_sic_falls_with_queries": "not applicable",
                                         "jain_ge_0.9_everywhere": "pass"}  # fmt: skip
    # Zipf skew: the busiest node saturates, more nodes stop helping and Jain falls
    bad = {"nodes": pts("nodes", (6, 12, 18), (0.1, 0.2, 0.2), (0.95, 0.85, 0.8)),
           "queries": pts("queries", (250, 500), (0.2, 0.25), (0.99, 0.98))}  # fmt: skip
    assert set(verdicts(sc.checks(bad)).values()) == {"fail"}
    assert "should hold by construction" in sc.checks(bad)[0].why
    with pytest.raises(ConfigError, match="increasing tuple"):
        sc.ScalabilityConfig(nodes=(12, 6))
    with pytest.raises(ConfigError, match="must not exceed n_nodes"):
        sc.ScalabilityConfig(nodes=(4, 8))


# ---------------------------------------------------------------- WAN and bursts (Fig. 14)
def test_wan_burst_checks() -> None:
    def row(setup: str, steps: int, mean: float, jain: float) -> dict:  # type: ignore[type-arg]
        return {"setup": setup, "delay_steps": steps, "mean_sic_balance_sic": mean,
                "jain_balance_sic": jain}  # fmt: skip

    rows = [row("lan", 1, 0.30, 0.999), row("wan", 1, 0.30, 0.999), row("wan_burst", 1, 0.16, 0.998),
            row("wan_burst_mean_kept", 1, 0.27, 0.999), row("wan_1s_burst_mean_kept", 4, 0.28, 0.85)]  # fmt: skip
    assert verdicts(wb.checks(rows)) == {
        "wan_burst_mean_sic_within_0.05_of_lan": "fail",
        "wan_latency_effect": "not applicable",
        "jain_ge_0.9_in_every_setup": "fail",
        "mean_kept_bursts_mean_sic_within_0.05_of_lan": "pass",
        "1s_delay_mean_sic_within_0.05_of_lan": "pass",
    }
    rows[1] = row("wan", 2, 0.20, 0.99)  # a delay that does cost another step
    assert verdicts(wb.checks(rows))["wan_latency_effect"] == "fail"
    with pytest.raises(UnknownNameError, match="must start with 'lan'"):
        wb.WanBurstConfig(setups=("wan",))


# ---------------------------------------------------------------- cost/quality (DISSP §6.4)
def test_cost_quality_trade_off_and_checks() -> None:
    # mean SIC falling as 1/N from the start: no cost advantage, no tipping point
    flat = cq.trade_off(
        [{"queries": n, "mean_sic_balance_sic": 54 / n} for n in (180, 240, 300, 360)]
    )
    assert flat[2]["gap"] == pytest.approx(0.0, abs=1e-12)
    v = verdicts(cq.checks(flat))
    assert v["cost_advantage_at_300"] == "fail" and v["tipping_point_within_range"] == "fail"
    # idle capacity at first (SIC falls slower than 1/N), then saturation
    means = {180: 0.60, 240: 0.52, 300: 0.45, 360: 0.36, 420: 0.30}
    pts = cq.trade_off([{"queries": n, "mean_sic_balance_sic": m} for n, m in means.items()])
    assert pts[2]["gap"] == pytest.approx(0.4 - 0.25)
    assert cq.tipping_point(pts) == 300
    assert verdicts(cq.checks(pts)) == {"cost_advantage_at_300": "pass",
                                        "tipping_point_within_range": "pass",
                                        "mean_sic_falls_as_queries_are_added": "not applicable"}  # fmt: skip
    assert cq.gap_zero_crossing(pts) is None  # the advantage never vanishes here
    later = cq.trade_off([*[{"queries": n, "mean_sic_balance_sic": m} for n, m in means.items()],
                          {"queries": 480, "mean_sic_balance_sic": 0.20}])  # fmt: skip
    assert later[-1]["gap"] < 0 and 420 < cq.gap_zero_crossing(later) < 480
    with pytest.raises(ConfigError, match="at least two increasing counts"):
        cq.CostQualityConfig(queries=(300,))


# ---------------------------------------------------------------- quick runs end to end
@pytest.mark.parametrize("module", [si, fm, sc, wb, cq], ids=lambda m: m.NAME)
def test_quick_runs(module, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = module.run(module.make_config(quick=True), tmp_path)
    assert s["experiment"] == module.NAME and s["checks"]
    assert (tmp_path / "report.md").exists() and (tmp_path / "summary.json").exists()
    assert sum(s["verdicts"].values()) == len(s["checks"])


@pytest.mark.slow
@pytest.mark.parametrize("module", [si, fm, sc, wb, cq], ids=lambda m: m.NAME)
def test_paper_shaped_runs(module, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert module.run(module.make_config(), tmp_path)["checks"]
