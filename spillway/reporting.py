"""Writing run and experiment outputs: summary.json, CSV tables, PNG plots and report.md.

Every run and experiment writes the same kinds of files through these helpers, so reports look
alike and nothing is written by hand.

Examples
--------
>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> write_summary(out, {"jain": 0.99}).name
'summary.json'
>>> write_csv(out / "points.csv", [{"sic": 0.5, "error": 0.1}]).name
'points.csv'
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def json_safe(x: Any) -> Any:
    """Turn numpy scalars/arrays and non-finite floats into JSON-safe values.

    >>> json_safe({"a": (np.float64(1.5), float("nan")), 2: np.arange(2)})
    {'a': [1.5, None], '2': [0, 1]}
    """
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return [json_safe(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def num(x: Any, sig: int = 4) -> str:
    """A number as a report shows it: ``sig`` significant digits, thousands separated.

    >>> num(0.955812345), num(2133916.37), num(-0.000265545), num(float("nan")), num(7)
    ('0.9558', '2,134,000', '-0.0002655', 'n/a', '7')
    """
    if x is None or isinstance(x, bool):
        return "n/a" if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    r = round_sig(v, sig)
    if abs(r) >= 10 ** (sig - 1):
        return f"{r:,.0f}"
    if abs(r) < 1e-4:
        return f"{r:.{sig - 1}e}"
    return f"{r:.{sig}g}"


def round_sig(x: float, sig: int = 4) -> float:
    """``x`` rounded to ``sig`` significant digits (non-finite values unchanged).

    >>> round_sig(0.99999999999988), round_sig(1.361838490488946, 3), round_sig(2133916.37)
    (1.0, 1.36, 2134000.0)
    """
    if not math.isfinite(x) or x == 0:
        return x
    return round(x, sig - 1 - math.floor(math.log10(abs(x))))


def rounded(x: Any, significant: int = 4) -> Any:
    """``x`` (JSON-safe, see :func:`write_summary`) with every float rounded to ``significant``
    digits: what a measurement on a shared 2-core machine can claim, never 16 digits of noise.

    >>> rounded({"jain": 0.99999999999988, "n": 3, "xs": [1.361838490488946, None]})
    {'jain': 1.0, 'n': 3, 'xs': [1.362, None]}
    """
    x = json_safe(x)
    if isinstance(x, dict):
        return {k: rounded(v, significant) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v, significant) for v in x]
    if isinstance(x, float):
        return round_sig(x, significant)
    return x


def write_summary(
    out_dir: Path | str, summary: Mapping[str, Any], *, significant: int | None = None
) -> Path:
    """Write ``summary.json`` (sorted keys, NaN/inf as null) and return its path.

    With ``significant`` every float is rounded to that many significant digits
    (:func:`rounded`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    data = json_safe(summary) if significant is None else rounded(summary, significant)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def write_csv(path: Path | str, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write dict rows to a CSV file (header = keys of the first row, in order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [dict(json_safe(r)) for r in rows]
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return path


def line_plot(
    path: Path | str,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    hlines: Mapping[str, float] | None = None,
    scatter: bool = False,
    ylim: tuple[float, float] | None = None,
) -> Path:
    """Plot named (x, y) series into a PNG with labelled axes and a legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for label, (xs, ys) in series.items():
        if scatter:
            ax.scatter(xs, ys, s=12, label=label, alpha=0.8)
        else:
            ax.plot(xs, ys, label=label, linewidth=1.4, marker="o" if len(xs) <= 12 else None)
    for label, y in (hlines or {}).items():
        ax.axhline(y, linestyle="--", color="grey", linewidth=1, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(True, alpha=0.3)
    if series or hlines:
        ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def bar_plot(
    path: Path | str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    xlabel: str = "",
) -> Path:
    """Grouped bars: one group of bars per entry of ``groups``, one bar per series in each.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "b.png"
    >>> bar_plot(out, ["mean", "p95"], {"a": [1.0, 2.0], "b": [0.5, 1.0]},
    ...          title="t", ylabel="s").exists()
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    width = 0.8 / max(len(series), 1)
    for i, (label, ys) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, list(ys), width=width, label=label)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    if series:
        ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub markdown table of dict rows; floats shown with 4 significant digits (:func:`num`).

    >>> print(markdown_table([{"a": 1, "b": 0.123456}]))
    | a | b |
    |---|---|
    | 1 | 0.1235 |
    """
    if not rows:
        return "_(no rows)_"
    cols = list(columns or rows[0].keys())

    def fmt(v: Any) -> str:
        return num(v) if isinstance(v, float | np.floating) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_report(out_dir: Path | str, title: str, sections: Sequence[tuple[str, str]]) -> Path:
    """Write ``report.md``: a title, then (heading, markdown body) sections in order.

    Embed a plot in a body with ``![caption](file.png)`` (paths relative to ``out_dir``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = [f"# {title}", ""]
    for heading, body in sections:
        parts += [f"## {heading}", "", body.strip(), ""]
    path = out / "report.md"
    path.write_text("\n".join(parts))
    return path
