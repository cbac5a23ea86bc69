"""What the dashboard (with a browser connected) and the metrics endpoint cost a node.

Runs ``spillway run`` in interleaved pairs, same config, seed and length: once plain, once with
``--ui-port --metrics-port`` while headless Chromium (Debian's, driven by Playwright's core)
keeps the dashboard open and a scraper reads ``/metrics`` every ``--scrape-s`` seconds. The
pair's order alternates (plain first, then watched first, ...) so a drift of the machine does
not favour one side. Run it under the shared lock (it measures)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/ui_overhead.py --pairs 4 \\
        --duration 120 --config scripts/ui_overhead_node.toml --out runs/ui-overhead

It writes ``runs.json`` (every run, with the pairs left out) and ``summary.md`` (the table,
date and commit) into ``--out``.

The node (``scripts/ui_overhead_node.toml``)
--------------------------------------------
Fixed rates and a fixed seed, no capacity calibration: every run gets exactly the same
arrivals (a calibration would measure a slightly different capacity each run and scale the
rates by it). The rates are about twice what the node processes on this machine, so it sheds
all run long and the controller admits, every 1 s interval, what its cost model says the node
can process: the node works at its capacity, in tens of micro-batches a minute.

What is compared, and why
-------------------------
The verdict is **rows processed per second of wall time** over the *measured part* of the
run: the finished intervals from ``--settle-s`` seconds after the first one to the end
(:func:`figures`). That is the node's throughput at its capacity, which is what the dashboard
could take from it: CPU that the page, the browser or the scraper take while a micro-batch
runs makes the batch slower, the cost model sees it and the controller admits fewer rows; CPU
they take while the node waits for its next interval (the ``headroom`` left free) costs the
node nothing, and rightly counts nothing. ``--settle-s`` leaves out the start, where the
cost model is still forgetting the first, slow micro-batches (JVM warm-up): in trial runs
the admitted rate was still climbing 30 s after the first interval, and the run report's own
steady part (from one STW on) includes that climb.

The second figure is **rows per second of micro-batch time** over the same part (the run
report's ``capacity_measured_tuples_per_s``, recomputed there): how fast a batch runs. It
says where a cost shows, but it also moves with the batch size the controller chose (a batch's
fixed cost is spread over more rows in a larger batch), so it is reported, not judged.

The machine is shared: a run is *disturbed* when processes outside this script's own tree
used more than ``--foreign-max`` cores on average while it ran (:class:`CpuAccount`, from
``/proc``); a pair with a disturbed run is left out, listed, and run again (at most
``--retries`` times in all). Before each run the script waits (at most ``--quiet-wait-s``)
until the other processes are quiet. A run that fails is reported and run once more.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
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
#: The figures compared (keys of :func:`figures`), the first one the verdict.
MEASURES = ("processed_per_batch_s", "processed_per_wall_s")
LABELS = {
    "processed_per_batch_s": "rows per s of micro-batch time",
    "processed_per_wall_s": "rows processed per s of wall time",
}


def figures(rows: Sequence[Mapping[str, str]], settle_s: float) -> dict[str, float]:
    """The compared figures from a run's ``intervals.csv`` rows over its measured part: the
    finished intervals from ``settle_s`` after the first one on. ``shed_share`` is the share
    of the tuples that arrived there that the node shed (0: it processed the same work as
    any other run of the config).

    >>> rows = [{"t_s": t, "span_s": "1.0", "arrived_tuples": a, "admitted_tuples": p,
    ...          "processed_tuples": p, "batch_s": b}
    ...         for t, a, p, b in [("5", "90", "10", "4.0"), ("6", "100", "100", "0.5"),
    ...                            ("7", "300", "300", "0.5"), ("8", "300", "0", "0.0")]]
    >>> f = figures(rows, settle_s=1.0)
    >>> f["processed_per_batch_s"], f["processed_per_wall_s"], f["batch_s_mean"], f["shed_share"]
    (400.0, 200.0, 0.5, 0.0)
    >>> f["measured_s"], f["batches"]
    (2.0, 2)
    """
    done = list(rows)
    while done and float(done[-1]["processed_tuples"]) == 0 and float(done[-1]["batch_s"]) == 0:
        done.pop()  # never finished: the node stopped during it
    t0 = float(done[0]["t_s"]) if done else 0.0
    part = [r for r in done if float(r["t_s"]) - t0 >= settle_s - 1e-9]
    span = sum(float(r["span_s"]) for r in part)
    processed = sum(float(r["processed_tuples"]) for r in part)
    batch = sum(float(r["batch_s"]) for r in part)
    arrived = sum(float(r["arrived_tuples"]) for r in part)
    batches = sum(1 for r in part if float(r["batch_s"]) > 0)
    ratio = lambda a, b: a / b if b > 0 else math.nan  # noqa: E731
    return {
        "processed_per_batch_s": ratio(processed, batch),
        "processed_per_wall_s": ratio(processed, span),
        "batch_s_mean": ratio(batch, batches),
        "shed_share": ratio(arrived - sum(float(r["admitted_tuples"]) for r in part), arrived),
        "measured_s": span,
        "batches": batches,
    }


def pair_table(pairs: Sequence[Mapping[str, Mapping[str, Any]]], cores: int) -> list[str]:
    """The markdown table of ``pairs`` (``{"first": ..., "plain": run, "watched": run}``, each
    run as :func:`one_run` gives it), then per measure the mean relative difference
    (watched - plain) / plain and its standard deviation over the pairs, and the mean CPU the
    node and the browser with the scraper took (``cores``: the machine's).

    >>> run = lambda x, node, watcher: {"processed_per_batch_s": x, "processed_per_wall_s": 50.0,
    ...     "shed_share": 0.0, "batches": 60, "node_cores": node, "watcher_cores": watcher,
    ...     "foreign_cores": 0.01}
    >>> pair = lambda a, b: {"first": "plain", "plain": run(a, 1.5, 0.0),
    ...     "watched": run(b, 1.6, 0.1) | {"scrapes": 20, "page_updates": 100}}
    >>> lines = pair_table([pair(100.0, 98.0), pair(100.0, 96.0)], cores=2)
    >>> print(lines[2])
    | 1 | plain | 100 | 98 | -2.0 % | 50 / 50 | 0.0 / 0.0 % | 60 / 60 | 1.50 / 1.60 | 0.10 | 0.01 / 0.01 | 20 / 100 |
    >>> print("\\n".join(lines[-4:]))
    - rows per s of micro-batch time: mean difference -3.0 %, standard deviation 1.4 % over 2 pairs
    - rows processed per s of wall time: mean difference +0.0 %, standard deviation 0.0 % over 2 pairs
    - CPU of the node: 1.50 cores plain, 1.60 watched (+0.10)
    - CPU of the browser and the scraper: 0.10 cores (5.0 % of the machine's 2)
    """
    diffs: dict[str, list[float]] = {m: [] for m in MEASURES}
    lines = [
        "| pair | first | rows per batch-s plain | watched | difference | processed/s plain / "
        "watched | shed plain / watched | batches plain / watched | node cores plain / watched "
        "| browser + scraper cores | other processes' cores plain / watched "
        "| scrapes / page updates |",
        "|---|---|" + "---:|" * 10,
    ]
    for i, pair in enumerate(pairs, start=1):
        plain, watched = pair["plain"], pair["watched"]
        for m in MEASURES:
            diffs[m].append((watched[m] - plain[m]) / plain[m])
        m = MEASURES[0]
        cells = [
            str(i),
            str(pair["first"]),
            f"{plain[m]:,.0f}",
            f"{watched[m]:,.0f}",
            f"{100 * diffs[m][-1]:+.1f} %",
            f"{plain['processed_per_wall_s']:,.0f} / {watched['processed_per_wall_s']:,.0f}",
            f"{100 * plain['shed_share']:.1f} / {100 * watched['shed_share']:.1f} %",
            f"{plain['batches']} / {watched['batches']}",
            f"{plain['node_cores']:.2f} / {watched['node_cores']:.2f}",
            f"{watched['watcher_cores']:.2f}",
            f"{plain['foreign_cores']:.2f} / {watched['foreign_cores']:.2f}",
            f"{watched.get('scrapes', 0)} / {watched.get('page_updates', 0)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for m in MEASURES:
        d = diffs[m]
        sd = statistics.stdev(d) if len(d) > 1 else math.nan
        lines.append(
            f"- {LABELS[m]}: mean difference {100 * statistics.mean(d):+.1f} %, "
            f"standard deviation {100 * sd:.1f} % over {len(d)} pairs"
        )
    node = [statistics.mean(p[side]["node_cores"] for p in pairs) for side in ("plain", "watched")]
    lines.append(
        f"- CPU of the node: {node[0]:.2f} cores plain, {node[1]:.2f} watched "
        f"({node[1] - node[0]:+.2f})"
    )
    watcher = statistics.mean(p["watched"]["watcher_cores"] for p in pairs)
    lines.append(
        f"- CPU of the browser and the scraper: {watcher:.2f} cores "
        f"({100 * watcher / cores:.1f} % of the machine's {cores})"
    )
    return lines


class CpuAccount:
    """CPU seconds used while it runs, split by process tree.

    ``node``: the ``spillway run`` process ``node_pid`` and its descendants (driver, JVM,
    Python workers); ``watcher``: the rest of this script's tree (Playwright's driver,
    Chromium, the scraper); ``other``: every other process (kernel threads left out). A
    process keeps its tree when its parent ends before it (the JVM outlives its driver).
    ``/proc`` is sampled every ``every_s`` seconds; a process counts from its first sample, or
    from its start when it started after this did, to its last sample (one that lives less
    than ``every_s`` can be missed).
    """

    HZ = os.sysconf("SC_CLK_TCK")

    def __init__(self, own_pid: int, every_s: float = 0.5) -> None:
        self.own_pid, self.every_s = own_pid, every_s
        self.node_pid: int | None = None
        self._stop = threading.Event()
        self._first: dict[tuple[int, int], float] = {}
        self._last: dict[tuple[int, int], tuple[str, float]] = {}
        with open("/proc/uptime") as f:
            self._born = float(f.read().split()[0]) * self.HZ
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        procs: dict[int, tuple[int, int, float]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            rest = stat[stat.rindex(")") + 2 :].split()
            ppid, start = int(rest[1]), int(rest[19])
            procs[int(name)] = (ppid, start, (int(rest[11]) + int(rest[12])) / self.HZ)
        for pid, (ppid, start, cpu) in procs.items():
            if pid == 2 or ppid == 2:
                continue  # kernel threads
            tree, p = "other", pid
            while p > 1 and p in procs:
                if p == self.node_pid:
                    tree = "node"
                    break
                if p == self.own_pid:
                    tree = "watcher"
                    break
                p = procs[p][0]
            key = (pid, start)
            if key not in self._first:
                self._first[key] = 0.0 if start >= self._born else cpu
            elif tree == "other" and self._last[key][0] != "other":
                tree = self._last[key][0]  # orphaned when its parent ended: still its tree
            self._last[key] = (tree, cpu)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every_s)

    def __enter__(self) -> CpuAccount:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def cpu_s(self, tree: str) -> float:
        """CPU seconds of ``tree`` (``node``, ``watcher`` or ``other``) so far."""
        return sum(c - self._first[k] for k, (t, c) in self._last.items() if t == tree)


def wait_quiet(limit: float, timeout_s: float, window_s: float = 10.0) -> float:
    """Wait (at most ``timeout_s``) until processes outside this script's tree use less than
    ``limit`` cores over ``window_s``; the last load seen, in cores."""
    end = time.monotonic() + timeout_s
    while True:
        with CpuAccount(os.getpid()) as cpu:
            time.sleep(window_s)
        load = cpu.cpu_s("other") / window_s
        if load < limit or time.monotonic() >= end:
            return load
        print(f"other processes use {load:.2f} cores: waiting", flush=True)


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
    cmd += ["--config", args.config, "--out", str(out), "--overwrite", "--no-live", "--no-exact"]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    extra: dict[str, Any] = {}
    if watched:
        ui_port, metrics_port = free_port(), free_port()
        cmd += ["--ui-port", str(ui_port), "--metrics-port", str(metrics_port)]
    wait_quiet(args.foreign_max, args.quiet_wait_s)
    began = time.monotonic()
    with CpuAccount(os.getpid()) as cpu:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cpu.node_pid = proc.pid
        if watched:
            box: dict[str, Any] = {}
            urls = (f"http://127.0.0.1:{ui_port}/", f"http://127.0.0.1:{metrics_port}/metrics")
            t = threading.Thread(target=lambda: box.update(watch(proc, *urls, args.scrape_s)))
            t.start()
        stdout, stderr = proc.communicate()
        if watched:
            t.join()
            extra = box
    wall = time.monotonic() - began
    if proc.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        return {"watched": watched, "out": str(out), "failed": last}
    summary = json.loads((out / "summary.json").read_text())
    with (out / "intervals.csv").open() as f:
        measured = figures(list(csv.DictReader(f)), args.settle_s)
    return {
        "watched": watched,
        "out": str(out),
        "wall_s": round(wall, 1),
        "foreign_cores": cpu.cpu_s("other") / wall,
        "node_cores": cpu.cpu_s("node") / wall,
        "watcher_cores": cpu.cpu_s("watcher") / wall,
        **measured,
        "seed": summary["seed"],
        "intervals": summary["intervals"],
        "arrived_tuples_per_s": summary["arrived_tuples_per_s"],
        "summary_processed_tuples_per_s": summary["processed_tuples_per_s"],
        "summary_capacity_measured_tuples_per_s": summary["capacity_measured_tuples_per_s"],
        **extra,
    }


def run_pair(args: argparse.Namespace, name: str, plain_first: bool) -> dict[str, Any]:
    pair: dict[str, Any] = {"first": "plain" if plain_first else "watched"}
    for watched in (False, True) if plain_first else (True, False):
        side = "watched" if watched else "plain"
        r = one_run(args, args.out / f"{name}-{side}", watched)
        if "failed" in r:  # a run that failed is reported and run once more
            print(json.dumps(r), flush=True)
            r = one_run(args, args.out / f"{name}-{side}-again", watched)
            if "failed" in r:
                raise SystemExit(f"{name} {side} failed twice: {r['failed']}")
        print(json.dumps(r), flush=True)
        pair[side] = r
    return pair


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--seed", type=int, help="seed of feeds and policy (default: the config's)")
    ap.add_argument("--config", default="scripts/ui_overhead_node.toml", help="node config")
    ap.add_argument("--scrape-s", type=float, default=5.0, help="seconds between scrapes")
    ap.add_argument(
        "--settle-s",
        type=float,
        default=40.0,
        help="seconds after the first interval left out of the figures",
    )
    ap.add_argument(
        "--foreign-max",
        type=float,
        default=0.05,
        help="a run is disturbed when other processes used more cores than this on average",
    )
    ap.add_argument(
        "--quiet-wait-s",
        type=float,
        default=900.0,
        help="before each run, wait at most this long for other processes to go quiet",
    )
    ap.add_argument("--retries", type=int, default=4, help="disturbed pairs run again, at most")
    ap.add_argument("--out", type=Path, default=Path("runs/ui-overhead"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = datetime.datetime.now(datetime.UTC)
    pairs: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    attempt = 0
    while len(pairs) < args.pairs:
        attempt += 1
        name = f"pair{attempt}"
        pair = run_pair(args, name, plain_first=len(pairs) % 2 == 0)
        pair["name"] = name
        worst = max(pair["plain"]["foreign_cores"], pair["watched"]["foreign_cores"])
        if worst > args.foreign_max:
            left_out.append(pair)
            print(f"{name}: disturbed (other processes used {worst:.2f} cores); left out")
            if len(left_out) > args.retries:
                raise SystemExit(f"{len(left_out)} pairs disturbed: the machine is not quiet")
            continue
        pairs.append(pair)
        (args.out / "runs.json").write_text(  # so far, in case the script is stopped
            json.dumps({"pairs": pairs, "left_out": left_out}, indent=2) + "\n"
        )
    ended = datetime.datetime.now(datetime.UTC)
    lines = [
        f"{began:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC, commit {git_commit()}: {args.pairs} pairs of "
        f"{args.duration:g} s runs of {args.config}, seed {pairs[0]['plain']['seed']}, figures from "
        f"{args.settle_s:g} s after the first interval, /metrics scraped every "
        f"{args.scrape_s:g} s",
        "",
        *pair_table(pairs, cores=os.cpu_count() or 1),
    ]
    if left_out:
        names = ", ".join(
            f"{p['name']} ({max(p['plain']['foreign_cores'], p['watched']['foreign_cores']):.2f}"
            " cores)"
            for p in left_out
        )
        lines.append(f"- left out as disturbed by other processes: {names}")
    (args.out / "runs.json").write_text(
        json.dumps({"pairs": pairs, "left_out": left_out}, indent=2) + "\n"
    )
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
