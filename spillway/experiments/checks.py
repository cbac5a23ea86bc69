"""Verdicts of experiments and benchmarks: a :class:`Check` says pass, fail or not applicable, and why.

Every claim an experiment or benchmark tests (a paper's "must show", a goal of a benchmark)
becomes one :class:`Check` evaluated on the run's own numbers. The verdict is one of three:

- ``"pass"``: the claim applies to this run and its numbers meet it;
- ``"fail"``: the claim applies and the numbers miss it, or a number it needs could not be
  measured (a run that produced nothing shows nothing);
- ``"not applicable"``: the comparison applies to no case of this run (random shedding never
  became unfair, no load step reached the SIC the claim is about), or it holds by construction
  (arithmetic of the set-up, not a measurement). ``why`` says which, so a reader never mistakes
  it for a pass.

The builders below keep that discipline in one place: :func:`compare` turns a value and a bound
into pass/fail (a missing value fails), :func:`every` combines per-case checks and is not
applicable when no case applies, :func:`not_applicable` records a claim that holds by
construction with its reason, and :func:`by_construction` one that the set-up makes true but
numbers could still break (not applicable while it holds, a failure when it does not).

Examples
--------
>>> compare("jain_ge_0.95", 0.97, ">=", 0.95, what="Jain's index").verdict
'pass'
>>> every("beats_random", [], none_why="random's Jain never fell below 0.95").as_dict()
{'name': 'beats_random', 'verdict': 'not applicable', 'why': "random's Jain never fell below 0.95"}
>>> counts([compare("a", 1.0, "<", 0.5), not_applicable("b", "arithmetic")])
{'pass': 0, 'fail': 1, 'not applicable': 1}
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spillway.errors import ConfigError
from spillway.reporting import num

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not applicable"
#: The three verdicts, in report order.
VERDICTS: tuple[str, ...] = (PASS, FAIL, NOT_APPLICABLE)

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}


@dataclass(frozen=True, kw_only=True)
class Check:
    """One tested claim of a run: its name, verdict and the reason in words.

    Parameters
    ----------
    name : identifier of the claim, stable across runs (summary.json, tests).
    verdict : ``"pass"``, ``"fail"`` or ``"not applicable"``.
    why : the numbers behind the verdict, or why the claim does not apply.

    >>> Check(name="x", verdict="maybe", why="")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: verdict must be one of pass, fail, not applicable; got 'maybe'
    """

    name: str
    verdict: str
    why: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ConfigError(f"verdict must be one of {', '.join(VERDICTS)}; got {self.verdict!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"name must be a non-empty string, got {self.name!r}")

    @property
    def passed(self) -> bool:
        """The verdict is ``"pass"``."""
        return self.verdict == PASS

    @property
    def failed(self) -> bool:
        """The verdict is ``"fail"``."""
        return self.verdict == FAIL

    def as_dict(self) -> dict[str, str]:
        """``{"name", "verdict", "why"}``: the entry of summary.json's ``checks`` list."""
        return {"name": self.name, "verdict": self.verdict, "why": self.why}


def check(name: str, ok: bool, why: str) -> Check:
    """Pass when ``ok``, else fail; ``why`` gives the numbers either way.

    >>> check("rows_within_20pct", False, "CoD 0.7 of Uniform's rows/s").verdict
    'fail'
    """
    return Check(name=name, verdict=PASS if ok else FAIL, why=why)


def not_applicable(name: str, why: str) -> Check:
    """A claim this run cannot test: it applies to no case, or holds by construction (``why``).

    >>> not_applicable("mean_sic_falls", "fixed capacity: SIC = capacity / load").verdict
    'not applicable'
    """
    return Check(name=name, verdict=NOT_APPLICABLE, why=why)


def by_construction(name: str, held: bool, because: str, measured: str) -> Check:
    """A claim the set-up makes true: not applicable while it holds, a failure if it does not.

    A pass would only restate the arithmetic of the set-up (``because``); numbers that break
    it anyway are a finding (a fault, or a set-up that does not do what it says), so they fail
    rather than hide behind "not applicable". ``measured`` gives the numbers either way.

    >>> by_construction("sic_falls", True, "fixed capacity, so SIC ~ capacity / load",
    ...                 "mean SIC 0.5 -> 0.3").why
    'holds by construction: fixed capacity, so SIC ~ capacity / load (mean SIC 0.5 -> 0.3)'
    >>> by_construction("sic_falls", False, "fixed capacity", "mean SIC 0.5 -> 0.6").as_dict()
    {'name': 'sic_falls', 'verdict': 'fail', 'why': 'should hold by construction (fixed capacity) but does not: mean SIC 0.5 -> 0.6'}
    """
    if held:
        return not_applicable(name, f"holds by construction: {because} ({measured})")
    return Check(
        name=name, verdict=FAIL, why=f"should hold by construction ({because}) but does not: "
        f"{measured}"
    )  # fmt: skip


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def compare(
    name: str,
    value: Any,
    op: str,
    bound: Any,
    *,
    what: str = "",
    sig: int = 4,
) -> Check:
    """``value op bound`` as a check; a value that was not measured (None, NaN) fails.

    Parameters
    ----------
    name : the check's name.
    value : the measured value.
    op : one of ``>=``, ``>``, ``<=``, ``<``, ``==``.
    bound : the required bound (a number, or another measured value).
    what : what the value is, for ``why`` (e.g. "Jain's index at 30 queries").
    sig : significant digits shown.

    >>> compare("p95_below", 2.5, "<", 0.7, what="CoD p95 latency (s)").why
    'CoD p95 latency (s) 2.5 is not < 0.7'
    >>> compare("rho", float("nan"), "<=", -0.8, what="Spearman rho").as_dict()["why"]
    'Spearman rho was not measured (needed <= -0.8)'
    >>> compare("x", 1, "~", 2)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: op must be one of >=, >, <=, <, ==; got '~'
    """
    if op not in _OPS:
        raise ConfigError(f"op must be one of {', '.join(_OPS)}; got {op!r}")
    label = what or name
    if _missing(value):
        return Check(name=name, verdict=FAIL, why=f"{label} was not measured (needed {op} "
                     f"{num(bound, sig)})")  # fmt: skip
    if _missing(bound):
        return Check(name=name, verdict=FAIL, why=f"{label} {num(value, sig)}: the value it is "
                     f"compared with was not measured")  # fmt: skip
    ok = bool(_OPS[op](float(value), float(bound)))
    rel = op if ok else f"is not {op}"
    return check(name, ok, f"{label} {num(value, sig)} {rel} {num(bound, sig)}")


def within(name: str, value: Any, lo: float, hi: float, *, what: str = "", sig: int = 4) -> Check:
    """``lo <= value <= hi`` as a check; a value that was not measured fails.

    >>> within("stw_10", 0.9405, 0.95, 1.02, what="mean SIC at STW 10 s").why
    'mean SIC at STW 10 s 0.9405 is outside [0.95, 1.02]'
    """
    label = what or name
    if _missing(value):
        return Check(name=name, verdict=FAIL, why=f"{label} was not measured (needed in "
                     f"[{num(lo)}, {num(hi)}])")  # fmt: skip
    ok = lo <= float(value) <= hi
    rel = "is within" if ok else "is outside"
    return check(name, ok, f"{label} {num(value, sig)} {rel} [{num(lo)}, {num(hi)}]")


def every(name: str, parts: Iterable[Check], *, none_why: str) -> Check:
    """One check over several cases: fail if any case fails, not applicable if none applies.

    ``parts`` are per-case checks (their names label the cases). Cases that are themselves
    "not applicable" do not count; with no case left the result is "not applicable" with
    ``none_why``. ``why`` lists the failing cases, or every case when all pass.

    >>> parts = [compare("30 queries", 0.97, ">=", 0.95), compare("3 queries", 0.9, ">=", 0.95)]
    >>> c = every("jain_ge_0.95", parts, none_why="no step ran")
    >>> c.verdict, c.why
    ('fail', 'failed at 3 queries: 0.9 is not >= 0.95')
    >>> every("x", [not_applicable("a", "n/a")], none_why="nothing to compare").verdict
    'not applicable'
    """
    applied = [p for p in parts if p.verdict != NOT_APPLICABLE]
    if not applied:
        return not_applicable(name, none_why)
    bad = [p for p in applied if p.failed]
    if bad:
        return Check(
            name=name,
            verdict=FAIL,
            why="failed at " + "; ".join(f"{p.name}: {_short(p)}" for p in bad),
        )
    return Check(name=name, verdict=PASS, why="; ".join(f"{p.name}: {_short(p)}" for p in applied))


def _short(c: Check) -> str:
    """A per-case reason without its leading label (the case name stands for it)."""
    for sep in (": ", " "):
        if c.why.startswith(c.name + sep):
            return c.why[len(c.name) + len(sep) :]
    return c.why


def counts(checks: Iterable[Check]) -> dict[str, int]:
    """How many checks have each verdict (every verdict present, in report order)."""
    out = dict.fromkeys(VERDICTS, 0)
    for c in checks:
        out[c.verdict] += 1
    return out


def as_dicts(checks: Iterable[Check]) -> list[dict[str, str]]:
    """The ``checks`` list of summary.json."""
    return [c.as_dict() for c in checks]


def from_dicts(items: Any) -> list[Check]:
    """Checks back from summary.json's ``checks`` list (anything else gives no checks).

    >>> from_dicts([{"name": "a", "verdict": "pass", "why": "1 >= 0"}])[0].passed
    True
    >>> from_dicts({"old_style": True})
    []
    """
    if not isinstance(items, Sequence) or isinstance(items, str):
        return []
    out = []
    for it in items:
        if isinstance(it, Mapping) and {"name", "verdict", "why"} <= set(it):
            out.append(Check(name=str(it["name"]), verdict=str(it["verdict"]), why=str(it["why"])))
    return out


#: How each verdict is shown in reports and on the console.
LABELS: dict[str, str] = {PASS: "PASS", FAIL: "FAIL", NOT_APPLICABLE: "n/a"}


def verdict_line(checks: Sequence[Check]) -> str:
    """One line: how many checks passed, failed and did not apply.

    >>> verdict_line([check("a", True, ""), check("b", False, ""), not_applicable("c", "")])
    'checks: 1 pass, 1 FAIL, 1 not applicable'
    >>> verdict_line([])
    'checks: none'
    """
    if not checks:
        return "checks: none"
    c = counts(checks)
    return f"checks: {c[PASS]} pass, {c[FAIL]} FAIL, {c[NOT_APPLICABLE]} not applicable"


def console_lines(checks: Sequence[Check]) -> list[str]:
    """What the CLI prints: one line per check (``PASS``/``FAIL``/``n/a``, name, why), then
    :func:`verdict_line`.

    >>> print("\\n".join(console_lines([check("rho", False, "rho -0.5 is not <= -0.8")])))
    FAIL  rho: rho -0.5 is not <= -0.8
    checks: 0 pass, 1 FAIL, 0 not applicable
    """
    lines = [f"{LABELS[c.verdict]:<4}  {c.name}: {c.why}" for c in checks]
    return [*lines, verdict_line(checks)]


def markdown(checks: Sequence[Check]) -> str:
    """The checks as a markdown table (verdict, check, why) with the verdict line above.

    >>> print(markdown([not_applicable("x", "holds by construction")]))
    checks: 0 pass, 0 FAIL, 1 not applicable
    <BLANKLINE>
    | verdict | check | why |
    |---|---|---|
    | n/a | `x` | holds by construction |
    """
    if not checks:
        return "_(no checks)_"
    rows = [f"| {LABELS[c.verdict]} | `{c.name}` | {c.why.replace('|', '/')} |" for c in checks]
    return "\n".join(
        [verdict_line(checks), "", "| verdict | check | why |", "|---|---|---|", *rows]
    )
