"""Print the single-node validation of the load managers (spillway.control.validation).

Usage: ``.venv/bin/python scripts/load_manager_validation.py [--seeds N] [--pattern on|on-off]``
or ``... --classes`` for the priority-class scenario.

One row per scheme: mean delay violation over the whole run and after re-learning (results
after 150 s), loss and the largest response time, as mean [min-max] over the seeds. With
``--classes``: per load manager, without and with DILoS, each class's loss, mean response time
and final capacity share.
"""

from __future__ import annotations

import argparse

from spillway.control.validation import (
    CLASS_LOADS,
    CLASS_TARGETS_S,
    RELEARNED_S,
    SCHEMES,
    TARGET_S,
    run_dilos,
    run_scheme,
)


def classes() -> None:
    print(
        f"3 classes, priorities 6/3/1, targets {'/'.join(f'{d:g}' for d in CLASS_TARGETS_S)} s, "
        f"loads {'/'.join(f'{x:g}' for x in CLASS_LOADS)} of capacity 1, 150 ms cycle, 150 s"
    )
    print("| manager | configuration | loss c1/c2/c3 | mean rt c1/c2/c3 (ms) | shares at end |")
    print("|---|---|---|---|---|")
    for name in ("aurora", "aloma", "seamless"):
        for dilos in (False, True):
            run = run_dilos(name, dilos=dilos)
            loss = "/".join(f"{c.loss:.3f}" for c in run.classes)
            rt = "/".join(f"{1000 * c.response_mean_s:.0f}" for c in run.classes)
            shares = "/".join(f"{t.share[-1]:.3f}" for t in run.traces)
            label = "DILoS" if dilos else "separate"
            print(f"| {name} | {label} | {loss} | {rt} | {shares} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pattern", choices=("on", "on-off"), default="on")
    parser.add_argument("--classes", action="store_true")
    parser.add_argument("--noise", type=float, default=0.02, help="load-statistic noise")
    args = parser.parse_args()
    if args.classes:
        classes()
        return
    print(
        f"D = {TARGET_S:g} s, T = 0.5 s, capacity 0.99 -> 0.66 at 100 s ({args.pattern}), "
        f"S_c input, 400 s, load noise {args.noise:g}, seeds 0..{args.seeds - 1}"
    )
    print(f"| scheme | violation (s) | violation after {RELEARNED_S:g} s (s) | loss | max rt (s) |")
    print("|---|---|---|---|---|")
    for scheme in SCHEMES:
        rows = [
            run_scheme(scheme, seed=s, pattern=args.pattern, load_noise=args.noise)
            for s in range(args.seeds)
        ]

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
