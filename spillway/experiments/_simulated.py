"""What the simulator experiments share: verdicts, the THEMIS set-up, policy runs, the writer.

The experiments of THEMIS §7.2-§7.6 and DISSP §6.4 that need tens of nodes run on
:mod:`spillway.sim`. Each module keeps the experiment skeleton's split: a frozen config,
``measure(config)`` (the simulations), ``analyse(config, measured)`` (pure: values for
summary.json, :class:`Check` verdicts, tables, :class:`Figure` s, the report's prose) and
``run(config, out_dir)`` = :func:`write` of both.

:class:`Check`, :class:`Figure` and :class:`Analysis` have the names and fields of the shared
experiment skeleton (``spillway.experiments.checks`` / ``framework``, built on another
branch): a check's verdict is ``pass``, ``fail`` or ``not applicable`` (a claim that applies to
no case of the run, or holds by construction, says so and why, never "pass"). When that
skeleton lands these stand-ins give way to it: the experiment modules only need their imports
changed.

Examples
--------
>>> compare("jain_ge_0.97", 0.95, ">=", 0.97, what="Jain's index").as_dict()
{'name': 'jain_ge_0.97', 'verdict': 'fail', 'why': "Jain's index 0.95 is not >= 0.97"}
>>> every("fairer", [], none_why="no configuration ran").verdict
'not applicable'
"""

from __future__ import annotations

import dataclasses
import math
import operator
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.reporting import (
    bar_plot,
    line_plot,
    markdown_table,
    write_csv,
    write_report,
    write_summary,
)
from spillway.sim import Deployment, SimConfig, SimResult, simulate
from spillway.sim.workload import THEMIS_CAPACITY

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not applicable"
VERDICTS = (PASS, FAIL, NOT_APPLICABLE)
#: The two shedders THEMIS compares (§7.2), in report order.
POLICIES: tuple[str, ...] = ("balance-sic", "random")
#: Significant digits of the floats in summary.json and the report.
SIGNIFICANT = 4

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True, kw_only=True)
class Check:
    """One tested claim: its name, verdict (``pass``, ``fail``, ``not applicable``) and why."""

    name: str
    verdict: str
    why: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ConfigError(f"verdict must be one of {', '.join(VERDICTS)}; got {self.verdict!r}")

    @property
    def passed(self) -> bool:
        """The verdict is ``pass``."""
        return self.verdict == PASS

    def as_dict(self) -> dict[str, str]:
        """``{"name", "verdict", "why"}`` (an entry of summary.json's ``checks``)."""
        return {"name": self.name, "verdict": self.verdict, "why": self.why}


def num(x: Any, sig: int = SIGNIFICANT) -> str:
    """A number as reports show it (``sig`` significant digits; n/a when not measured).

    >>> num(0.123456), num(float("nan")), num(3), num(1234567.0)
    ('0.1235', 'n/a', '3', '1.235e+06')
    """
    if isinstance(x, bool) or x is None:
        return str(x) if x is not None else "n/a"
    if isinstance(x, int):
        return str(x)
    v = float(x)
    return f"{v:.{sig}g}" if math.isfinite(v) else "n/a"


def check(name: str, ok: bool, why: str) -> Check:
    """Pass when ``ok``, else fail."""
    return Check(name=name, verdict=PASS if ok else FAIL, why=why)


def not_applicable(name: str, why: str) -> Check:
    """A claim this run cannot test (no case applies, or it holds by construction)."""
    return Check(name=name, verdict=NOT_APPLICABLE, why=why)


def compare(name: str, value: Any, op: str, bound: Any, *, what: str = "") -> Check:
    """``value op bound`` as a check; a value that was not measured (None, NaN) fails."""
    if op not in _OPS:
        raise ConfigError(f"op must be one of {', '.join(_OPS)}; got {op!r}")
    label = what or name
    try:
        v, b = float(value), float(bound)
    except (TypeError, ValueError):
        v = b = math.nan
    if not (math.isfinite(v) and math.isfinite(b)):
        return Check(
            name=name, verdict=FAIL, why=f"{label} was not measured (needed {op} {num(bound)})"
        )
    ok = _OPS[op](v, b)
    return check(name, ok, f"{label} {num(v)} {op if ok else 'is not ' + op} {num(b)}")


def every(name: str, parts: Iterable[Check], *, none_why: str) -> Check:
    """Fail if any case fails, pass if all applicable cases pass, not applicable if none applies."""
    applied = [p for p in parts if p.verdict != NOT_APPLICABLE]
    if not applied:
        return not_applicable(name, none_why)
    bad = [p for p in applied if p.verdict == FAIL]
    shown = bad or applied
    text = "; ".join(f"{p.name}: {p.why}" for p in shown)
    return check(name, not bad, ("failed at " if bad else "") + text)


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One plot: line ``series`` (label → (xs, ys)) or ``bars`` (label → one value per group),
    with the paper's figure described in ``paper``."""

    file: str
    title: str
    xlabel: str
    ylabel: str
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    bars: Mapping[str, Sequence[float]] = field(default_factory=dict)
    groups: Sequence[str] = ()
    hlines: Mapping[str, float] = field(default_factory=dict)
    paper: str = ""

    def draw(self, out: Path) -> Path:
        """Write the PNG into ``out``."""
        if self.bars:
            return bar_plot(out / self.file, list(self.groups), self.bars, title=self.title,
                            ylabel=self.ylabel, xlabel=self.xlabel)  # fmt: skip
        return line_plot(out / self.file, self.series, title=self.title, xlabel=self.xlabel,
                         ylabel=self.ylabel, hlines=dict(self.hlines) or None)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """What ``analyse`` returns: summary values, checks, tables, figures and the report's prose."""

    values: Mapping[str, Any]
    checks: Sequence[Check]
    setup: str
    paper: str
    notes: str
    tables: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    figures: Sequence[Figure] = ()
    sections: Sequence[tuple[str, str]] = ()


def rounded(x: Any, sig: int = SIGNIFICANT) -> Any:
    """``x`` with every float rounded to ``sig`` significant digits (for summary.json).

    >>> rounded({"a": 0.123456, "b": [1.0000001, 2], "c": "x"})
    {'a': 0.1235, 'b': [1.0, 2], 'c': 'x'}
    """
    if isinstance(x, Mapping):
        return {k: rounded(v, sig) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [rounded(v, sig) for v in x]
    if isinstance(x, float) and math.isfinite(x) and x != 0:
        return round(x, sig - 1 - math.floor(math.log10(abs(x))))
    return x


def write(out_dir: Path | str, *, name: str, title: str, config: Any, analysis: Analysis,
          measured_s: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Write summary.json, the CSV tables, the figures and report.md; returns the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for file, table in analysis.tables.items():
        write_csv(out / file, table)
    for fig in analysis.figures:
        fig.draw(out)
    counts = {v: sum(c.verdict == v for c in analysis.checks) for v in VERDICTS}
    summary: dict[str, Any] = {
        "experiment": name,
        "title": title,
        "config": dataclasses.asdict(config),
        **rounded(dict(analysis.values)),
        "checks": [c.as_dict() for c in analysis.checks],
        "verdicts": counts,
    }
    if measured_s is not None:
        summary["measured_s"] = round(measured_s, 1)
    write_summary(out, summary)
    verdict = (
        f"checks: {counts[PASS]} pass, {counts[FAIL]} FAIL, {counts[NOT_APPLICABLE]} not applicable"
    )
    rows = [f"| {'PASS' if c.verdict == PASS else 'FAIL' if c.verdict == FAIL else 'n/a'} | `{c.name}` | "
            f"{c.why.replace('|', '/')} |" for c in analysis.checks]  # fmt: skip
    figs = ["| the paper's figure | this run |", "|---|---|"] + [
        f"| {(f.paper or '(no figure in the paper)').replace('|', '/')} | ![{f.title}]({f.file}) |"
        for f in analysis.figures
    ]
    sections = [
        ("Verdict", verdict),
        ("Setup", analysis.setup),
        ("Paper vs this run", analysis.paper),
        ("Checks", "\n".join([verdict, "", "| verdict | check | why |", "|---|---|---|", *rows])),
    ]
    if analysis.figures:
        sections.append(("Figures: the paper's beside this run's", "\n".join(figs)))
    sections += list(analysis.sections)
    sections.append(("How this run differs from the paper", analysis.notes))
    files = ", ".join(["`summary.json`", *(f"`{t}`" for t in sorted(analysis.tables))])
    took = f"; measuring took {measured_s:.0f} s" if measured_s is not None else ""
    sections.append(("Files", f"Written with this report: {files}{took}."))
    write_report(out, title, sections)
    return summary


def run_experiment(config: Any, out_dir: Path | str, *, name: str, title: str,
                   measure: Callable[[Any], Any], analyse: Callable[[Any, Any], Analysis]
                   ) -> dict[str, Any]:  # fmt: skip
    """``measure`` then ``analyse`` and :func:`write`; returns the summary."""
    t0 = time.perf_counter()
    measured = measure(config)
    return write(out_dir, name=name, title=title, config=config,
                 analysis=analyse(config, measured), measured_s=time.perf_counter() - t0)  # fmt: skip


def run_policies(deployment: Deployment, config: SimConfig,
                 policies: Sequence[str] = POLICIES) -> dict[str, SimResult]:  # fmt: skip
    """The same deployment and input under each policy (only the shedder differs)."""
    return {p: simulate(deployment, dataclasses.replace(config, policy=p)) for p in policies}


def slug(policy: str) -> str:
    """``balance-sic`` → ``balance_sic`` (summary.json key suffixes)."""
    return policy.replace("-", "_")


def policy_values(results: Mapping[str, SimResult]) -> dict[str, Any]:
    """Jain, mean and std of SIC (and more) per policy, keyed ``<stat>_<policy>``.

    ``jain_*``, ``mean_sic_*``, ``std_*`` (population std of per-query SIC), ``iqr_*``,
    ``range_90_*``, ``jain_per_sample_*``, ``min_sic_*``, ``derived_shed_share_*`` (share of
    the rows sent between fragments that the receiving node shed: upstream work wasted),
    ``wall_s_*``.
    """
    out: dict[str, Any] = {}
    for p, r in results.items():
        s = r.summary()
        k = slug(p)
        out[f"jain_{k}"] = s["jain"]
        out[f"mean_sic_{k}"] = s["mean_sic"]
        out[f"std_{k}"] = s["std_sic"]
        out[f"iqr_{k}"] = s["iqr_sic"]
        out[f"range_90_{k}"] = s["range_90_sic"]
        out[f"min_sic_{k}"] = s["min_sic"]
        out[f"jain_per_sample_{k}"] = s["jain_per_sample_mean"]
        acc = r.accounting
        out[f"derived_shed_share_{k}"] = (
            acc.derived_shed / acc.derived_delivered if acc.derived_delivered else 0.0
        )
        out[f"wall_s_{k}"] = r.wall_s
    return out


def themis_setup(sim: SimConfig) -> str:
    """The settings every THEMIS simulation shares, in words."""
    return (
        f"Simulated with `spillway.sim` (the same policies, cost model, overload detector and SIC "
        f"accounting as the Spark runtime). Every node processes {THEMIS_CAPACITY:,.0f} tuples/s "
        "(THEMIS §7.2: 528,000 tuples/s of input left a node at mean SIC about 0.1); every source "
        f"sends {sim.source_rate:g} tuples/s in batches of {sim.batch_size} (Table 2, Emulab). "
        f"Shedding interval {sim.interval_s * 1000:g} ms = STW slide, STW {sim.stw_s:g} s, "
        f"windows of {sim.window_s:g} s, {sim.data_delay_s * 1000:g} ms between nodes and to the "
        f"coordinator, coordinator updates every interval, {sim.duration_s:g} s per run; a "
        f"query's SIC is its Eq. 4 value sampled every {sim.sample_s:g} s and averaged from "
        f"{sim.warmup_s:g} s on. Both policies see identical input (same seed); only the shedder "
        "differs."
    )


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A markdown table of ``rows`` (floats with 4 significant digits)."""
    return markdown_table(list(rows), list(columns))


__all__ = [
    "FAIL",
    "NOT_APPLICABLE",
    "PASS",
    "POLICIES",
    "Analysis",
    "Check",
    "Figure",
    "check",
    "compare",
    "every",
    "not_applicable",
    "num",
    "policy_values",
    "rounded",
    "run_experiment",
    "run_policies",
    "slug",
    "themis_setup",
    "write",
]
