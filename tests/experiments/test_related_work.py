"""THEMIS §7.5: the FIT LP, the log-utility optimum and the checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.experiments import related_work as rw
from spillway.quality.metrics import jain_index


def test_lp_is_all_or_nothing_on_the_fit_setup() -> None:
    p = rw.problem(rw.simple_setup(60))
    a = rw.fit_lp(p)
    assert a.feasible
    full, zero = int((a.sic > 1 - 1e-6).sum()), int((a.sic < 1e-6).sum())
    assert full + zero >= 59  # at most one fractional per binding constraint (one binds)
    assert a.objective == pytest.approx(p.capacity[0])  # node 0 filled exactly


def test_log_utility_is_fair_on_identical_queries_and_optimal() -> None:
    p = rw.problem(rw.simple_setup(60))
    a = rw.log_utility(p)
    assert jain_index(a.sic) == pytest.approx(1.0, abs=1e-9)
    assert a.sic == pytest.approx(np.full(60, p.capacity[0] / p.rate.sum()), rel=1e-4)


def test_log_utility_beats_any_other_feasible_point() -> None:
    p = rw.problem(rw.complex_setup(rw.make_config(quick=True)))
    a = rw.log_utility(p)
    rng = np.random.default_rng(0)
    for _ in range(20):  # random feasible points never reach a higher sum of logs
        x = rng.random(p.rate.shape[0])
        x *= min(1.0, float(np.min(p.capacity / (p.node_matrix @ x))))
        y = p.query_matrix @ x / p.query_rate
        assert np.log(np.maximum(y, 1e-12)).sum() <= a.objective + 1e-6


def test_checks_fail_on_realistic_inputs() -> None:
    m = {"complex": {"jain_balance_sic": 0.95, "jain_log_utility": 0.99},
         "simple": {"jain_balance_sic": 0.55, "jain_lp": 0.59, "lp_full": 35, "lp_zero": 24, "lp_partial": 1}}  # fmt: skip
    v = {c.name: c.verdict for c in rw.checks(m)}
    assert v == {
        "jain_balance_sic_ge_0.97": "fail",
        "balance_sic_above_log_utility": "fail",
        "balance_sic_fairer_than_lp": "fail",
        "lp_serves_few_and_starves_the_rest": "not applicable",
    }


def test_quick_run(tmp_path: Path) -> None:
    s = rw.run(rw.make_config(quick=True), tmp_path)
    for key in ("jain_balance_sic", "jain_log_utility", "jain_lp"):
        assert 0 < s[key] <= 1
    assert s["simple"]["lp_full"] + s["simple"]["lp_zero"] + s["simple"]["lp_partial"] == 60


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="simple_queries must be an int"):
        rw.RelatedWorkConfig(simple_queries=0)
    with pytest.raises(ConfigError, match="complex_nodes must be an int >= 3"):
        rw.RelatedWorkConfig(complex_nodes=2)
    with pytest.raises(ConfigError, match="capacity must be"):
        rw.RelatedWorkConfig(capacity=-1.0)


@pytest.mark.slow
def test_paper_shaped_run(tmp_path: Path) -> None:
    assert rw.run(rw.make_config(), tmp_path)["checks"]
