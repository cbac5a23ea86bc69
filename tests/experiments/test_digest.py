"""EXPERIMENTS.md sections from report folders written by the experiment skeleton."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError
from spillway.experiments import digest
from spillway.experiments.checks import compare
from spillway.experiments.framework import Analysis, Experiment, Figure


def _write(out):
    def measure(cfg):
        return [1.0, 2.0]

    def analyse(cfg, xs):
        return Analysis(
            values={"xs": xs},
            checks=[compare("grows", xs[1], ">", xs[0])],
            tables={"points.csv": [{"x": x} for x in xs]},
            figures=[Figure(file="xs.png", title="xs", xlabel="i", ylabel="x",
                            series={"run": ([0, 1], xs)}, paper="Fig. 1: x grows")],
            setup="two points",
            paper="| measure | paper | this run |\n|---|---|---|\n| x | 2 | 2 |",
            notes="- nothing differs\n### a sub-heading",
        )  # fmt: skip

    exp = Experiment(name="demo", title="Demo figure", config_type=dict, measure=measure,
                     analyse=analyse)  # fmt: skip
    exp.run({}, out)


def test_a_section_copies_the_report_and_its_plots(tmp_path):
    run = tmp_path / "runs" / "demo"
    _write(run)
    text = digest.section(run, "spillway experiment demo --out runs/demo",
                          images=tmp_path / "docs" / "exp", md_dir=tmp_path)  # fmt: skip
    assert text.startswith("## Demo figure (`demo`): paper-shaped run\n")
    assert "Command: `spillway experiment demo --out runs/demo`" in text
    assert "### Verdict" in text and "### Paper vs this run" in text
    assert "| x | 2 | 2 |" in text
    assert "#### a sub-heading" in text  # the report's headings go one level down
    assert "### Setup" in text and "### Checks" in text and "`grows`" in text
    assert "### Files" not in text  # the report folder's own file list stays behind
    assert "![xs](docs/exp/demo/xs.png)" in text
    assert (tmp_path / "docs" / "exp" / "demo" / "xs.png").stat().st_size > 0


def test_a_folder_that_is_not_a_report_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="run_dir must be a report folder .* without"):
        digest.section(tmp_path, "spillway experiment demo")
    _write(tmp_path / "demo")
    with pytest.raises(ConfigError, match="command must be the command that wrote the run"):
        digest.section(tmp_path / "demo", "  ")
