"""The skeleton every experiment shares: config → measure → analyse → checks → report folder.

An experiment module holds only what is particular to it: its frozen config, a ``measure``
function (the expensive part: Spark runs, a simulation, numpy over a feed) and an ``analyse``
function that turns what was measured into an :class:`Analysis` (the values for summary.json,
the :class:`~spillway.experiments.checks.Check` verdicts, CSV tables, :class:`Figure` plots and
the report's prose). :class:`Experiment` ties them together and writes every report folder
alike (:func:`write_experiment`):

- ``summary.json``: ``experiment``, ``title``, ``config`` (as set), the analysis's values with
  every float rounded to :attr:`Experiment.significant` digits (4: what a run on a shared 2-core
  machine can claim), ``checks`` (a list of ``{name, verdict, why}``), ``verdicts`` (how many
  of each) and ``measured_s`` (wall time of ``measure``);
- one CSV per table, every measured point at full precision;
- one PNG per figure, with labelled axes and a legend;
- ``report.md``: the verdict line, the set-up, the paper's values beside this run's, the checks
  with their reasons, each figure beside what the paper's figure shows, further sections, and
  how the run differs from the paper.

``measure`` and ``analyse`` are separate so that the analysis, the checks and the report can be
tested on realistic measured data without running Spark (:meth:`Experiment.write`). The same
shape serves every kind of experiment: a Spark study's ``measure`` runs nodes
(:mod:`spillway.experiments._spark_runs`, one SparkSession per run), a simulator study's runs
the simulator, and a sweep over several configurations returns one record per configuration,
which ``analyse`` lists under a ``configs`` key and checks per configuration with
:func:`~spillway.experiments.checks.every` (not applicable when no configuration applies).

Examples
--------
>>> import tempfile
>>> from dataclasses import dataclass
>>> from spillway.experiments.checks import compare
>>> @dataclass(frozen=True, kw_only=True)
... class Cfg:
...     n: int = 3
>>> def measure(cfg):
...     return [i * i for i in range(cfg.n)]
>>> def analyse(cfg, squares):
...     return Analysis(
...         values={"squares": squares, "mean": sum(squares) / len(squares)},
...         checks=[compare("mean_ge_1", sum(squares) / len(squares), ">=", 1.0)],
...         tables={"squares.csv": [{"i": i, "sq": s} for i, s in enumerate(squares)]},
...         setup="Squares of 0 .. n - 1.", paper="_(no paper)_", notes="A demo.")
>>> demo = Experiment(name="demo", title="Demo", config_type=Cfg, measure=measure,
...                   analyse=analyse)
>>> s = demo.run(Cfg(), tempfile.mkdtemp())
>>> s["mean"], s["checks"], s["verdicts"]["pass"]
(1.667, [{'name': 'mean_ge_1', 'verdict': 'pass', 'why': 'mean_ge_1 1.667 >= 1'}], 1)
>>> demo.run({"n": 3}, tempfile.mkdtemp())
Traceback (most recent call last):
...
spillway.errors.ConfigError: demo needs a Cfg, got dict
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from spillway.errors import ConfigError
from spillway.experiments.checks import Check, as_dicts, counts, markdown, verdict_line
from spillway.progress import report
from spillway.reporting import (
    bar_plot,
    line_plot,
    num,
    rounded,
    write_csv,
    write_report,
    write_summary,
)

C = TypeVar("C")
M = TypeVar("M")

#: Significant digits of every measured float in summary.json.
SIGNIFICANT = 4


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One plot of a run, drawn into the report folder and shown beside the paper's figure.

    Parameters
    ----------
    file : PNG file name in the report folder.
    title, xlabel, ylabel : the plot's labels.
    series : line (or scatter) data, label → (xs, ys).
    bars : bar data, label → one value per entry of ``groups`` (instead of ``series``).
    groups : the bar groups.
    hlines : horizontal reference lines, label → y (a required bound, the paper's value).
    scatter : points instead of lines.
    ylim : y-axis range.
    paper : what the paper's corresponding figure shows (its number and values), set beside
        this plot in the report; empty when the paper has no such figure.

    >>> Figure(file="a.svg", title="t", xlabel="x", ylabel="y")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: file must name a .png file, got 'a.svg'
    """

    file: str
    title: str
    xlabel: str
    ylabel: str
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    bars: Mapping[str, Sequence[float]] = field(default_factory=dict)
    groups: Sequence[str] = ()
    hlines: Mapping[str, float] = field(default_factory=dict)
    scatter: bool = False
    ylim: tuple[float, float] | None = None
    paper: str = ""

    def __post_init__(self) -> None:
        if not self.file.endswith(".png") or "/" in self.file:
            raise ConfigError(f"file must name a .png file, got {self.file!r}")
        if self.bars and self.series:
            raise ConfigError(f"figure {self.file}: give series or bars, not both")
        if self.bars and not self.groups:
            raise ConfigError(f"figure {self.file}: bars need groups (one value per group)")

    def draw(self, out_dir: Path) -> Path:
        """Draw the PNG into ``out_dir``; returns its path."""
        if self.bars:
            return bar_plot(
                out_dir / self.file, list(self.groups), self.bars,
                title=self.title, ylabel=self.ylabel, xlabel=self.xlabel,
            )  # fmt: skip
        return line_plot(
            out_dir / self.file, self.series, title=self.title, xlabel=self.xlabel,
            ylabel=self.ylabel, hlines=dict(self.hlines) or None, scatter=self.scatter,
            ylim=self.ylim,
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """What an experiment's ``analyse`` hands to the writer: everything particular to the run.

    Parameters
    ----------
    values : measured values under the experiment's documented summary.json keys.
    checks : the verdict of every claim the run tests.
    tables : CSV file name → rows (a list of dicts or a pandas DataFrame).
    figures : the plots.
    setup : markdown: what ran (workload, sizes, settings) and how values are taken.
    paper : markdown: the paper's values beside this run's (a table, usually).
    notes : markdown: how this run differs from the paper, and what it cannot test.
    sections : further (heading, markdown) sections, placed after the figures.
    """

    values: Mapping[str, Any]
    checks: Sequence[Check]
    setup: str
    paper: str
    notes: str
    tables: Mapping[str, Any] = field(default_factory=dict)
    figures: Sequence[Figure] = ()
    sections: Sequence[tuple[str, str]] = ()

    def __post_init__(self) -> None:
        reserved = {"experiment", "title", "config", "checks", "verdicts", "measured_s"}
        clash = sorted(reserved & set(self.values))
        if clash:
            raise ConfigError(
                f"values must not use the keys summary.json reserves: {', '.join(clash)}"
            )
        names = [c.name for c in self.checks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"check names must be unique; repeated: {', '.join(dup)}")


@dataclass(frozen=True, kw_only=True)
class Experiment(Generic[C, M]):
    """One registered experiment: its name, title and the two functions particular to it.

    Parameters
    ----------
    name : registry name (``spillway experiment NAME``).
    title : report title, naming the paper's figure it reproduces.
    config_type : the frozen config dataclass ``run`` accepts.
    measure : ``measure(config) -> measured``: runs the experiment (Spark, simulation, numpy).
    analyse : ``analyse(config, measured) -> Analysis``: pure, no I/O.
    significant : significant digits of every measured float in summary.json.
    """

    name: str
    title: str
    config_type: type[C]
    measure: Callable[[C], M]
    analyse: Callable[[C, M], Analysis]
    significant: int = SIGNIFICANT

    def run(self, config: C, out_dir: Path | str) -> dict[str, Any]:
        """Measure, analyse and write the report folder ``out_dir``; returns the summary.

        Raises
        ------
        ConfigError
            ``config`` is not a :attr:`config_type`.
        """
        self.check_config(config)
        t0 = time.perf_counter()
        report(f"experiment {self.name}: measuring")
        measured = self.measure(config)
        report(f"experiment {self.name}: measured in {time.perf_counter() - t0:.0f} s, writing")
        return self.write(config, measured, out_dir, measured_s=time.perf_counter() - t0)

    def write(
        self, config: C, measured: M, out_dir: Path | str, *, measured_s: float | None = None
    ) -> dict[str, Any]:
        """Analyse what was measured and write the report folder; returns the summary."""
        self.check_config(config)
        return write_experiment(
            out_dir, self, config, self.analyse(config, measured), measured_s=measured_s
        )

    def check_config(self, config: Any) -> None:
        """Raise :class:`ConfigError` unless ``config`` is a :attr:`config_type`."""
        if not isinstance(config, self.config_type):
            raise ConfigError(
                f"{self.name} needs a {self.config_type.__name__}, got {type(config).__name__}"
            )


def _config_dict(config: Any) -> Any:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return config


def write_experiment(
    out_dir: Path | str,
    experiment: Experiment[Any, Any],
    config: Any,
    analysis: Analysis,
    *,
    measured_s: float | None = None,
) -> dict[str, Any]:
    """Write summary.json, the CSV tables, the figures and report.md; returns the summary.

    The summary returned is the one written (floats rounded, tuples as lists).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in analysis.tables.items():
        records = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
        write_csv(out / name, records)
    for fig in analysis.figures:
        fig.draw(out)
    body: dict[str, Any] = dict(analysis.values)
    body["checks"] = as_dicts(analysis.checks)
    body["verdicts"] = counts(analysis.checks)
    if measured_s is not None:
        body["measured_s"] = measured_s
    summary = {
        "experiment": experiment.name,
        "title": experiment.title,
        "config": rounded(_config_dict(config), 15),
        **rounded(body, experiment.significant),
    }
    write_summary(out, summary)
    write_report(out, experiment.title, _sections(analysis, measured_s, sorted(analysis.tables)))
    return summary


def _sections(
    analysis: Analysis, measured_s: float | None, tables: Sequence[str]
) -> list[tuple[str, str]]:
    sections = [
        ("Verdict", verdict_line(analysis.checks)),
        ("Setup", analysis.setup),
        ("Paper vs this run", analysis.paper),
        ("Checks", markdown(analysis.checks)),
    ]
    if analysis.figures:
        rows = ["| the paper's figure | this run |", "|---|---|"]
        rows += [
            f"| {(f.paper or '(no figure in the paper)').replace('|', '/')} | ![{f.title}]({f.file}) |"
            for f in analysis.figures
        ]
        sections.append(("Figures: the paper's beside this run's", "\n".join(rows)))
    sections += list(analysis.sections)
    sections.append(("How this run differs from the paper", analysis.notes))
    files = ["`summary.json`", *(f"`{t}`" for t in tables)]
    took = f"; measuring took {num(measured_s, 3)} s" if measured_s is not None else ""
    sections.append(("Files", f"Written with this report: {', '.join(files)}{took}."))
    return sections


__all__ = ["Analysis", "Experiment", "Figure", "SIGNIFICANT", "write_experiment"]
