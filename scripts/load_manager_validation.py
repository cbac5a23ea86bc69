"""Print the single-node validation of the load managers (spillway.control.validation).

Usage: ``.venv/bin/python scripts/load_manager_validation.py [--seeds N] [--pattern on|on-off]``

One row per scheme: mean delay violation over the whole run and after re-learning (results
after 150 s), loss and the largest response time, as mean [min-max] over the seeds.
"""

from __future__ import annotations

import argparse

from spillway.control.validation import RELEARNED_S, SCHEMES, TARGET_S, run_scheme


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pattern", choices=("on", "on-off"), default="on")
    args = parser.parse_args()
    print(
        f"D = {TARGET_S:g} s, T = 0.5 s, capacity 0.99 -> 0.66 at 100 s ({args.pattern}), "
        f"S_c input, 400 s, seeds 0..{args.seeds - 1}"
    )
    print(f"| scheme | violation (s) | violation after {RELEARNED_S:g} s (s) | loss | max rt (s) |")
    print("|---|---|---|---|---|")
    for scheme in SCHEMES:
        rows = [run_scheme(scheme, seed=s, pattern=args.pattern) for s in range(args.seeds)]

        def cell(values: list[float], digits: int) -> str:
            mean = sum(values) / len(values)
            return f"{mean:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"

        print(
            f"| {scheme} | {cell([r.violation_s for r in rows], 3)} "
            f"| {cell([r.violation_relearned_s for r in rows], 3)} "
            f"| {cell([r.loss for r in rows], 3)} | {cell([r.response_max_s for r in rows], 1)} |"
        )


if __name__ == "__main__":
    main()
