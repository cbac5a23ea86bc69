"""The simulator experiments' shared verdicts and writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spillway.errors import ConfigError
from spillway.experiments._simulated import (
    Analysis,
    Check,
    Figure,
    compare,
    every,
    not_applicable,
    rounded,
    write,
)


def test_compare_fails_on_unmeasured_values_and_on_the_wrong_side() -> None:
    assert compare("x", 0.5, ">=", 0.97).verdict == "fail"
    assert compare("x", float("nan"), ">=", 0.97).verdict == "fail"
    assert "was not measured" in compare("x", None, "<", 1.0).why
    assert compare("x", 0.99, ">=", 0.97).verdict == "pass"
    with pytest.raises(ConfigError, match="op must be one of"):
        compare("x", 1, "~", 2)


def test_every_needs_an_applicable_case() -> None:
    na = not_applicable("a", "holds by construction")
    assert every("all", [na], none_why="nothing").verdict == "not applicable"
    mixed = every("all", [compare("a", 1, ">", 0), compare("b", 0, ">", 1)], none_why="-")
    assert mixed.verdict == "fail" and mixed.why.startswith("failed at b")
    with pytest.raises(ConfigError, match="verdict must be one of"):
        Check(name="x", verdict="maybe", why="")


def test_write_produces_the_report_folder(tmp_path: Path) -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Cfg:
        n: int = 1

    analysis = Analysis(
        values={"jain": 0.123456789, "rows": [{"a": 1.000000001}]},
        checks=[compare("jain_ge_0.9", 0.123456789, ">=", 0.9), not_applicable("b", "by construction")],
        setup="s", paper="p", notes="n",
        tables={"t.csv": [{"a": 1.0}]},
        figures=[Figure(file="f.png", title="t", xlabel="x", ylabel="y", series={"s": ([1], [2])}),
                 Figure(file="g.png", title="t", xlabel="x", ylabel="y", bars={"s": [1.0]}, groups=["g"])],
    )  # fmt: skip
    s = write(tmp_path, name="demo", title="Demo", config=Cfg(), analysis=analysis, measured_s=1.0)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["jain"] == 0.1235 and on_disk["rows"][0]["a"] == 1.0
    assert on_disk["verdicts"] == {"pass": 0, "fail": 1, "not applicable": 1} == s["verdicts"]
    report = (tmp_path / "report.md").read_text()
    assert "checks: 0 pass, 1 FAIL, 1 not applicable" in report and "![t](f.png)" in report
    for f in ("t.csv", "f.png", "g.png"):
        assert (tmp_path / f).exists()
    assert rounded({"x": [0.0, float("nan")]})["x"][0] == 0.0
