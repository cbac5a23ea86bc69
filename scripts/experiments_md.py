"""Write EXPERIMENTS.md from experiment report folders (spillway.experiments.digest).

Usage::

    .venv/bin/python scripts/experiments_md.py --out EXPERIMENTS.md --images docs/experiments \\
        --run runs/exp/cod-drift "spillway experiment cod-drift --out runs/exp/cod-drift" \\
        --run ...

Each ``--run DIR COMMAND`` pairs a report folder with the exact command that wrote it; the
sections follow in the order given, after the preamble (markdown: the machine, how the runs
were made): ``--preamble FILE``, or by default what ``--out`` holds before the line
:data:`MARK`. With ``--add`` the sections ``--out`` already holds after :data:`MARK` are
kept and the new ones follow them. Plots are copied under ``--images``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spillway.experiments.digest import section

#: The line after which the sections are written (what comes before is kept as the preamble).
MARK = "<!-- the sections below are written by scripts/experiments_md.py -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("EXPERIMENTS.md"))
    ap.add_argument("--images", type=Path, default=Path("docs/experiments"))
    ap.add_argument("--preamble", type=Path, default=None)
    ap.add_argument("--run", nargs=2, action="append", metavar=("DIR", "COMMAND"), required=True)
    ap.add_argument("--add", action="store_true", help="keep the sections --out holds")
    args = ap.parse_args()
    before, _, held = args.out.read_text().partition(MARK) if args.out.exists() else ("", "", "")
    preamble = args.preamble.read_text() if args.preamble is not None else before
    parts = [preamble.strip(), "", MARK, ""]
    if args.add and held.strip():
        parts += [held.strip(), ""]
    for run_dir, command in args.run:
        parts.append(section(run_dir, command, images=args.images, md_dir=args.out.parent))
    args.out.write_text("\n".join(parts).rstrip() + "\n")
    print(f"wrote {args.out} ({len(args.run)} experiments)")


if __name__ == "__main__":
    main()
