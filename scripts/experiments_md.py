"""Write EXPERIMENTS.md from experiment report folders (spillway.experiments.digest).

Usage::

    .venv/bin/python scripts/experiments_md.py --out EXPERIMENTS.md --images docs/experiments \\
        --run runs/exp/cod-drift "spillway experiment cod-drift --out runs/exp/cod-drift" \\
        --run ...

Each ``--run DIR COMMAND`` pairs a report folder with the exact command that wrote it; the
sections follow in the order given, after the preamble read from ``--preamble`` (markdown: the
machine, how the runs were made). Plots are copied under ``--images``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spillway.experiments.digest import section


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("EXPERIMENTS.md"))
    ap.add_argument("--images", type=Path, default=Path("docs/experiments"))
    ap.add_argument("--preamble", type=Path, required=True)
    ap.add_argument("--run", nargs=2, action="append", metavar=("DIR", "COMMAND"), required=True)
    args = ap.parse_args()
    parts = [args.preamble.read_text().strip(), ""]
    for run_dir, command in args.run:
        parts.append(section(run_dir, command, images=args.images, md_dir=args.out.parent))
    args.out.write_text("\n".join(parts).rstrip() + "\n")
    print(f"wrote {args.out} ({len(args.run)} experiments)")


if __name__ == "__main__":
    main()
