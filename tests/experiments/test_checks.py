"""Check verdicts and their builders: pass, fail, not applicable, and why."""

from __future__ import annotations

import math

import pytest

from spillway.errors import ConfigError
from spillway.experiments import checks as ck


def test_check_rejects_an_unknown_verdict_and_an_empty_name():
    with pytest.raises(ConfigError, match="verdict must be one of pass, fail, not applicable"):
        ck.Check(name="x", verdict="ok", why="")
    with pytest.raises(ConfigError, match="name must be a non-empty string, got ''"):
        ck.Check(name="", verdict="pass", why="")


def test_compare_passes_fails_and_fails_when_not_measured():
    assert ck.compare("a", 0.97, ">=", 0.95).passed
    low = ck.compare("a", 0.94, ">=", 0.95, what="Jain's index")
    assert low.failed and low.why == "Jain's index 0.94 is not >= 0.95"
    for missing in (math.nan, None, "n/a"):
        c = ck.compare("a", missing, "<=", -0.8, what="rho")
        assert c.failed and c.why == "rho was not measured (needed <= -0.8)"
    no_bound = ck.compare("a", 1.0, "<", math.nan, what="p95 (s)")
    assert no_bound.failed and "the value it is compared with was not measured" in no_bound.why
    with pytest.raises(ConfigError, match="op must be one of"):
        ck.compare("a", 1.0, "!=", 2.0)


def test_within_names_the_interval():
    assert ck.within("m", 0.97, 0.95, 1.02).passed
    out = ck.within("m", 1.03, 0.95, 1.02, what="mean SIC")
    assert out.failed and out.why == "mean SIC 1.03 is outside [0.95, 1.02]"
    assert ck.within("m", math.nan, 0.95, 1.02).failed


def test_every_fails_on_one_case_and_is_not_applicable_without_cases():
    ok = ck.compare("3 queries", 0.99, ">=", 0.95)
    bad = ck.compare("30 queries", 0.90, ">=", 0.95)
    skip = ck.not_applicable("12 queries", "random stayed fair")
    assert ck.every("j", [ok, skip], none_why="-").passed
    c = ck.every("j", [ok, bad, skip], none_why="-")
    assert c.failed and c.why == "failed at 30 queries: 0.9 is not >= 0.95"
    empty = ck.every("j", [skip], none_why="random never fell below 0.95")
    assert empty.verdict == ck.NOT_APPLICABLE and empty.why == "random never fell below 0.95"


def test_counts_lines_and_round_trip():
    found = [ck.check("a", True, "1 >= 0"), ck.check("b", False, "x"), ck.not_applicable("c", "y")]
    assert ck.counts(found) == {"pass": 1, "fail": 1, "not applicable": 1}
    assert ck.from_dicts(ck.as_dicts(found)) == found
    assert ck.from_dicts(None) == [] and ck.from_dicts("pass") == []
    lines = ck.console_lines(found)
    assert lines == ["PASS  a: 1 >= 0", "FAIL  b: x", "n/a   c: y",
                     "checks: 1 pass, 1 FAIL, 1 not applicable"]  # fmt: skip
    table = ck.markdown([ck.check("a|b", False, "p | q")])
    assert "| FAIL | `a|b` | p / q |" in table
    assert ck.markdown([]) == "_(no checks)_"
