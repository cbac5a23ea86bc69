"""The shared experiment skeleton: its report folder, summary.json layout and rounding."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from spillway.errors import ConfigError
from spillway.experiments import EXPERIMENTS
from spillway.experiments.checks import compare, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure


@dataclass(frozen=True, kw_only=True)
class Cfg:
    rate: float = 1.0 / 3.0


def _analyse(cfg: Cfg, measured: list[float]) -> Analysis:
    return Analysis(
        values={"mean": sum(measured) / len(measured), "points": measured},
        checks=[compare("mean_ge_0.3", sum(measured) / len(measured), ">=", 0.3),
                not_applicable("by_construction", "arithmetic of the set-up")],
        tables={"points.csv": [{"i": i, "x": x} for i, x in enumerate(measured)]},
        figures=[Figure(file="points.png", title="points", xlabel="i", ylabel="x",
                        series={"x": (list(range(len(measured))), measured)},
                        paper="Fig. 1: the points rise"),
                 Figure(file="bars.png", title="bars", xlabel="", ylabel="x", groups=["a"],
                        bars={"x": [measured[0]]})],
        setup="Demo set-up.", paper="| paper | run |", notes="Demo notes.",
        sections=[("Extra", "More.")],
    )  # fmt: skip


DEMO: Experiment[Cfg, list[float]] = Experiment(
    name="demo", title="Demo (Fig. 1)", config_type=Cfg,
    measure=lambda c: [c.rate, 2 * c.rate, 0.123456789012345], analyse=_analyse,
)  # fmt: skip


def test_the_report_folder_has_every_part(tmp_path: Path):
    summary = DEMO.run(Cfg(), tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {
        "summary.json", "report.md", "points.csv", "points.png", "bars.png"
    }  # fmt: skip
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    assert summary["experiment"] == "demo" and summary["title"] == "Demo (Fig. 1)"
    assert summary["checks"][1] == {"name": "by_construction", "verdict": "not applicable",
                                    "why": "arithmetic of the set-up"}  # fmt: skip
    assert summary["verdicts"] == {"pass": 1, "fail": 0, "not applicable": 1}
    assert summary["measured_s"] >= 0
    report = (tmp_path / "report.md").read_text()
    headings = re.findall(r"^## (.+)$", report, flags=re.M)
    assert headings == ["Verdict", "Setup", "Paper vs this run", "Checks",
                        "Figures: the paper's beside this run's", "Extra",
                        "How this run differs from the paper", "Files"]  # fmt: skip
    assert "| Fig. 1: the points rise | ![points](points.png) |" in report
    assert "| n/a | `by_construction` | arithmetic of the set-up |" in report


def test_no_long_floats_in_summary_or_report(tmp_path: Path):
    DEMO.run(Cfg(), tmp_path)
    values = json.loads((tmp_path / "summary.json").read_text())
    assert values["points"] == [0.3333, 0.6667, 0.1235]
    assert values["config"]["rate"] == pytest.approx(1 / 3, abs=1e-14)  # as set, not measured
    measured = json.dumps({k: v for k, v in values.items() if k != "config"})
    # more than 6 significant digits (leading zeros do not count: a fast measure() takes
    # 0.0001482 s, which has 4)
    long_float = re.compile(r"\d\.0*[1-9]\d{6,}")
    assert not long_float.search(measured)
    assert not long_float.search((tmp_path / "report.md").read_text())


def test_write_needs_the_experiments_config_type(tmp_path: Path):
    with pytest.raises(ConfigError, match="demo needs a Cfg, got dict"):
        DEMO.write({"rate": 1.0}, [1.0], tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Figure(file="x.svg", title="", xlabel="", ylabel=""), "must name a .png"),
        (lambda: Figure(file="x.png", title="", xlabel="", ylabel="", bars={"a": [1.0]}),
         "bars need groups"),
        (lambda: Figure(file="x.png", title="", xlabel="", ylabel="", groups=["g"],
                        bars={"a": [1.0]}, series={"b": ([0.0], [1.0])}), "series or bars"),
        (lambda: Analysis(values={"checks": 1}, checks=[], setup="", paper="", notes=""),
         "reserves: checks"),
        (lambda: Analysis(values={}, checks=[not_applicable("a", ""), not_applicable("a", "")],
                          setup="", paper="", notes=""), "repeated: a"),
    ],
)  # fmt: skip
def test_bad_figures_and_analyses_are_refused(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_registered_experiment_is_built_on_the_skeleton(name):
    module = EXPERIMENTS[name]
    assert isinstance(module.EXPERIMENT, Experiment)
    assert module.EXPERIMENT.name == name
    assert isinstance(module.make_config(quick=True), module.EXPERIMENT.config_type)
