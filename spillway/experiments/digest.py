"""EXPERIMENTS.md from experiment report folders: the paper beside this machine's run.

Every ``spillway experiment`` run writes a report folder (:mod:`spillway.experiments.framework`):
``summary.json`` and ``report.md``. :func:`section` turns one such folder, with the command
that produced it, into one section of EXPERIMENTS.md: the command, when the run finished,
whether it was paper-shaped or quick, and the report's :data:`SECTIONS` (verdict, setup, the
paper's values beside this run's, checks, the paper's figures beside this run's plots, how
the run differs) copied verbatim, headings one level down, plot links pointing at copies of
the plots. Nothing is typed by hand. ``scripts/experiments_md.py`` writes the whole file.

Examples
--------
>>> import json, pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "summary.json").write_text(json.dumps({"experiment": "demo", "title": "Demo",
...                                                 "measured_s": 12.3}))
>>> _ = (d / "report.md").write_text("# Demo\\n\\n## Verdict\\n\\n1 pass\\n\\n"
...                                  "## Paper vs this run\\n\\n| a |\\n|---|\\n| 1 |\\n")
>>> text = section(d, "spillway experiment demo --quick --out runs/demo")
>>> print(text.splitlines()[0])
## Demo (`demo`): quick run, not paper-shaped
>>> "### Paper vs this run" in text and "measuring took 12.3 s" in text
True
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.reporting import num

#: The report.md sections copied, in this order (a missing one is left out).
SECTIONS = (
    "Verdict",
    "Setup",
    "Paper vs this run",
    "Checks",
    "Figures: the paper's beside this run's",
    "How this run differs from the paper",
)

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def report_sections(text: str) -> dict[str, str]:
    """The ``## `` sections of a report.md, heading to body.

    >>> report_sections("# T\\n\\n## A\\n\\nx\\n### sub\\ny\\n## B\\n\\nz\\n")
    {'A': 'x\\n### sub\\ny', 'B': 'z'}
    """
    out: dict[str, str] = {}
    heading = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            if heading is not None:
                out[heading] = "\n".join(lines).strip()
            heading, lines = line[3:].strip(), []
        elif heading is not None:
            lines.append(line)
    if heading is not None:
        out[heading] = "\n".join(lines).strip()
    return out


def _load(run_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    files = [run_dir / "summary.json", run_dir / "report.md"]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(
            f"run_dir must be a report folder written by `spillway experiment` (summary.json "
            f"and report.md), got {str(run_dir)!r} without {', '.join(missing)}; run the "
            "experiment first"
        )
    return json.loads(files[0].read_text()), report_sections(files[1].read_text())


def section(
    run_dir: Path | str,
    command: str,
    *,
    images: Path | str | None = None,
    md_dir: Path | str = ".",
) -> str:
    """One EXPERIMENTS.md section for the report folder ``run_dir`` made by ``command``.

    Parameters
    ----------
    run_dir : the experiment's report folder.
    command : the command that wrote it (shown verbatim; ``--quick`` marks a quick run).
    images : folder to copy the plots into (``images/<experiment>/``); None keeps the links
        as they are.
    md_dir : folder of the markdown file the section goes into (plot links are relative to it).

    Raises
    ------
    ConfigError
        ``run_dir`` is not a report folder, or ``command`` is empty.
    """
    run_dir = Path(run_dir)
    if not command.strip():
        raise ConfigError("command must be the command that wrote the run, got an empty string")
    summary, parts = _load(run_dir)
    name = summary.get("experiment", run_dir.name)
    shape = "quick run, not paper-shaped" if "--quick" in command.split() else "paper-shaped run"
    done = datetime.fromtimestamp((run_dir / "summary.json").stat().st_mtime, UTC)
    took = summary.get("measured_s")
    lines = [
        f"## {summary.get('title', name)} (`{name}`): {shape}",
        "",
        f"Command: `{command}`  ",
        f"Finished {done:%Y-%m-%d %H:%M} UTC"
        + (f"; measuring took {num(took, 3)} s." if took is not None else "."),
        "",
    ]
    for heading in SECTIONS:
        body = parts.get(heading)
        if not body:
            continue
        body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.MULTILINE)
        if images is not None:
            body = _copy_images(body, run_dir, Path(images) / name, Path(md_dir))
        lines += [f"### {heading}", "", body, ""]
    return "\n".join(lines)


def _copy_images(body: str, run_dir: Path, target: Path, md_dir: Path) -> str:
    target.mkdir(parents=True, exist_ok=True)

    def link(m: re.Match[str]) -> str:
        src = run_dir / m.group(2)
        if not src.is_file():
            return m.group(0)
        shutil.copyfile(src, target / src.name)
        rel = os.path.relpath(target / src.name, md_dir)
        return f"![{m.group(1)}]({Path(rel).as_posix()})"

    return _IMAGE.sub(link, body)


__all__ = ["SECTIONS", "report_sections", "section"]
