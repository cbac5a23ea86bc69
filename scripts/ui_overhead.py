"""What the dashboard (with a browser connected) and the metrics endpoint cost a node.

Runs ``spillway run`` in interleaved pairs, same config and length: once plain, once with
``--ui --metrics-port`` while headless Chromium (Debian's, driven by Playwright's core) keeps
the dashboard open and a scraper reads ``/metrics`` every ``--scrape-s`` seconds. The pair's
order alternates (plain first, then watched first, ...) so a drift of the machine does not
favour one side. From each run's summary.json it takes the capacity measured from batch time
(``capacity_measured_tuples_per_s``: rows processed per second of micro-batch) and the
processed rate (``processed_tuples_per_s``), and reports per pair the relative difference
(watched - plain) / plain, with the mean and standard deviation over the pairs.

Run it under the shared lock (it measures)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/ui_overhead.py --pairs 3 \\
        --duration 60 --config scripts/ui_overhead_node.toml --out runs/ui-overhead

A run that fails (the default node's capacity measurement can, see BENCHMARKS.md) is reported
and run once more.

It writes ``runs.json`` (every run) and ``summary.md`` (the table) into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.request import urlopen

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
MEASURES = ("capacity_measured_tuples_per_s", "processed_tuples_per_s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[str], timeout_s: float = 120.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        try:
            urlopen(url, timeout=1).read()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def watch(proc: subprocess.Popen[str], ui: str, metrics: str, scrape_s: float) -> dict[str, Any]:
    """Keep the dashboard open in Chromium and scrape /metrics until ``proc`` ends."""
    from playwright.sync_api import sync_playwright

    scrapes = 0
    seen_t: set[str] = set()
    if not wait_up(ui, proc):
        return {"scrapes": 0, "page_updates": 0}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(ui)
        next_scrape = time.monotonic()
        while proc.poll() is None:
            if time.monotonic() >= next_scrape:
                try:
                    urlopen(metrics, timeout=2).read()
                    scrapes += 1
                except OSError:
                    pass
                next_scrape += scrape_s
            with contextlib.suppress(Exception):  # the page goes with the server at the end
                js = "() => document.querySelector('#node-node')?.dataset.t || ''"
                seen_t.add(str(page.evaluate(js)))
            time.sleep(0.5)
        browser.close()
    return {"scrapes": scrapes, "page_updates": len(seen_t - {"", "null"})}


def one_run(args: argparse.Namespace, out: Path, watched: bool) -> dict[str, Any]:
    cmd = [str(Path(sys.executable).with_name("spillway")), "run", "--duration", str(args.duration)]
    cmd += ["--seed", str(args.seed), "--out", str(out), "--overwrite", "--no-live"]
    if args.config:
        cmd += ["--config", args.config]
    extra: dict[str, Any] = {}
    if watched:
        ui_port, metrics_port = free_port(), free_port()
        cmd += ["--ui-port", str(ui_port), "--metrics-port", str(metrics_port)]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if watched:
        box: dict[str, Any] = {}
        t = threading.Thread(
            target=lambda: box.update(
                watch(
                    proc,
                    f"http://127.0.0.1:{ui_port}/",
                    f"http://127.0.0.1:{metrics_port}/metrics",
                    args.scrape_s,
                )
            )
        )
        t.start()
    stdout, stderr = proc.communicate()
    if watched:
        t.join()
        extra = box
    if proc.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        return {"watched": watched, "out": str(out), "failed": last}
    summary = json.loads((out / "summary.json").read_text())
    return {
        "watched": watched,
        "out": str(out),
        "wall_s": round(time.monotonic() - began, 1),
        **{m: summary[m] for m in MEASURES},
        "calibrated_capacity": (summary.get("calibration") or {}).get("capacity_tuples_per_s"),
        "intervals": summary["intervals"],
        **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", help="node config (default: spillway run's built-in mix)")
    ap.add_argument("--scrape-s", type=float, default=5.0, help="seconds between scrapes")
    ap.add_argument("--out", type=Path, default=Path("runs/ui-overhead"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(args.pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        pair = {}
        for watched in order:
            name = f"pair{i + 1}-{'watched' if watched else 'plain'}"
            r = one_run(args, args.out / name, watched)
            if "failed" in r:  # a run that failed is reported and run once more
                print(json.dumps(r), flush=True)
                r = one_run(args, args.out / f"{name}-again", watched)
                if "failed" in r:
                    raise SystemExit(f"{name} failed twice: {r['failed']}")
            print(json.dumps(r), flush=True)
            pair[watched] = r
        runs.append(pair)
    rows = []
    diffs: dict[str, list[float]] = {m: [] for m in MEASURES}
    for i, pair in enumerate(runs, start=1):
        cells = []
        for m in MEASURES:
            plain, watched = pair[False][m], pair[True][m]
            d = (watched - plain) / plain
            diffs[m].append(d)
            cells.append(f"{plain:,.0f} | {watched:,.0f} | {100 * d:+.1f} %")
        rows.append(f"| {i} | " + " | ".join(cells) + " |")
    lines = [
        "| pair | measured capacity plain | watched | difference | processed plain | watched "
        "| difference |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    for m in MEASURES:
        d = diffs[m]
        sd = statistics.stdev(d) if len(d) > 1 else float("nan")
        lines.append(
            f"\n{m}: mean difference {100 * statistics.mean(d):+.1f} %, "
            f"standard deviation {100 * sd:.1f} % over {len(d)} pairs"
        )
    (args.out / "runs.json").write_text(
        json.dumps([{"plain": p[False], "watched": p[True]} for p in runs], indent=2) + "\n"
    )
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
