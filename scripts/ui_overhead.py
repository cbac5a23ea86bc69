"""What the dashboard (with a browser connected) and the metrics endpoint cost a node.

Runs ``spillway run`` in interleaved pairs, same config, seed and length: once plain, once with
``--ui-port --metrics-port`` while headless Chromium (Debian's, driven by Playwright's core)
keeps the dashboard open and a scraper reads ``/metrics`` every ``--scrape-s`` seconds. The
pair's order alternates (plain first, then watched first, ...) so a drift of the machine does
not favour one side. Run it under the shared lock (it measures)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/ui_overhead.py --pairs 6 \\
        --duration 120 --out runs/ui-overhead

It writes ``runs.json`` (every run, the pairs left out with why) and ``summary.md`` (date,
commit, the table) into ``--out``; ``--table runs/ui-overhead/runs.json`` prints the summary
again.

The node (``scripts/ui_overhead_node.toml``) does fixed work
-------------------------------------------------------------
Fixed, constant rates (300,000 tuples/s) and a fixed seed, no capacity calibration (it would
measure a slightly different capacity each run and scale the rates by it): every run gets
exactly the same arrivals, and after its start the node admits them all, so both runs of a
pair process the same rows in the same micro-batches (about 600,000 rows each, in about 1 s
of every 2 s interval here: tens of batches a run). CPU taken from the node then shows as
slower batches.

Why not overloaded: the first version of this script ran the node at about 1.7 times what it
processes, so that CPU taken would show as fewer rows admitted. In trial runs (1 s trigger,
about 890,000 tuples/s arriving) the controller's cost model settled, from run to run, into
states that admitted very different amounts: one watched run processed 98,000 rows/s beside
428,000 in its plain pair, while the node used the same CPU in both (1.45 and 1.48 cores) and
the browser with the scraper 0.07 cores. A throughput difference there measures the learning,
not the dashboard. Why a 2 s trigger: at 1 s the node's fixed cost per batch is close to the
0.8 s budget and the controller made batches span one interval in one run and two in the next
(56 and 27 batches in 54 s of two plain trial runs), which moves rows per batch second by a
third (339,000 and 495,000).

What is compared
----------------
The verdict is **rows per second of micro-batch time** over the *same work* in both runs of a
pair (:func:`same_work`): the intervals, by feed time, from ``--settle-s`` (40) seconds after
the first one on in which both runs admitted everything that arrived (the same rows, at the
same time since the start). It is the run report's ``capacity_measured_tuples_per_s``
recomputed there, and the relative difference (watched - plain) / plain is the share of its
processing rate the node lost. The first 40 s are left out because the first batches are
slow (JVM warm-up, and Chromium starting beside it in the watched run) and the cost model
needs a while to forget them; a cost model left pessimistic by them can shed for a minute
more, and those intervals are not the same work. Batches keep getting faster for the whole
run (the JVM keeps compiling), which is why intervals are matched by time, not pooled. A pair
that shares fewer than ``--min-batches`` such batches is left out, listed, and run again.

CPU the dashboard takes while the node waits for its next interval costs this node nothing:
the batch times do not see it. :class:`CpuAccount` therefore also reports the CPU of each
side from ``/proc``: the node's process tree (driver with the dashboard's server thread, JVM,
Python workers), the browser with the scraper, and every other process. What watching took
in all (browser and scraper plus the node's extra CPU) over the machine's cores is what it
could take from a node that used every core.

The machine is shared: a run is *disturbed* when processes outside this script's own tree
used more than ``--foreign-max`` cores on average while it ran; such a pair is left out,
listed, and run again (at most ``--retries`` pairs left out in all). Before each run the
script waits (at most ``--quiet-wait-s``) until the other processes are quiet. A run that
fails is reported and run once more.
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

from spillway.procfs import TICKS, all_stats

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
#: The columns of ``intervals.csv`` a run keeps (in ``runs.json``).
COLUMNS = ("t_s", "span_s", "arrived_tuples", "admitted_tuples", "processed_tuples", "batch_s")


def finished(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """A run's ``intervals.csv`` rows as numbers, without the trailing intervals whose batch
    never finished (the node stopped during it)."""
    done = [{c: float(r[c]) for c in COLUMNS} for r in rows]
    while done and done[-1]["processed_tuples"] == 0 and done[-1]["batch_s"] == 0:
        done.pop()
    return done


def shed_share(rows: Sequence[Mapping[str, float]], settle_s: float) -> float:
    """Share of the tuples arriving from ``settle_s`` after the first interval on that the run
    shed (0: it processed all it was given).

    >>> rows = [{"t_s": t, "arrived_tuples": a, "admitted_tuples": k}
    ...         for t, a, k in [(2.0, 900, 100), (4.0, 100, 100), (6.0, 100, 60)]]
    >>> shed_share(rows, settle_s=2.0)
    0.2
    """
    if not rows:
        return math.nan
    part = [r for r in rows if r["t_s"] - rows[0]["t_s"] >= settle_s - 1e-9]
    arrived = sum(r["arrived_tuples"] for r in part)
    kept = sum(r["admitted_tuples"] for r in part)
    return (arrived - kept) / arrived if arrived > 0 else math.nan


def same_work(
    plain: Sequence[Mapping[str, float]], watched: Sequence[Mapping[str, float]], settle_s: float
) -> dict[str, float]:
    """The pair's comparison over the *same work*: the intervals (by feed time) from
    ``settle_s`` after the first one on in which both runs admitted everything that arrived,
    and in equal numbers, and both finished a batch. Per side, rows per second of micro-batch
    time over those intervals (the run report's ``capacity_measured_tuples_per_s``), the mean
    batch time, and the relative difference of the rates, (watched - plain) / plain.

    >>> row = lambda t, n, b, kept=None: {"t_s": t, "arrived_tuples": n,
    ...     "admitted_tuples": n if kept is None else kept, "processed_tuples": n, "batch_s": b}
    >>> plain = [row(2.0, 50, 4.0), row(4.0, 100, 0.5), row(6.0, 100, 0.5), row(8.0, 100, 0.4)]
    >>> watched = [row(2.0, 50, 5.0), row(4.0, 100, 0.5), row(6.0, 100, 0.6, kept=80),
    ...            row(8.0, 100, 0.6)]
    >>> {k: round(v, 3) for k, v in same_work(plain, watched, settle_s=2.0).items()}
    {'batches': 2, 'plain': 222.222, 'plain_batch_s': 0.45, 'watched': 181.818, 'watched_batch_s': 0.55, 'difference': -0.182}
    """
    t0 = min(rows[0]["t_s"] for rows in (plain, watched) if rows) if plain or watched else 0.0
    by_t = {r["t_s"]: r for r in watched}
    common = []
    for p in plain:
        w = by_t.get(p["t_s"])
        if w is None or p["t_s"] - t0 < settle_s - 1e-9:
            continue
        if all(
            r["admitted_tuples"] == r["arrived_tuples"] == p["arrived_tuples"] and r["batch_s"] > 0
            for r in (p, w)
        ):
            common.append((p, w))
    rows = sum(p["processed_tuples"] for p, _ in common)
    out: dict[str, float] = {"batches": len(common)}
    for i, side in enumerate(("plain", "watched")):
        batch = sum(pw[i]["batch_s"] for pw in common)
        out[side] = rows / batch if batch > 0 else math.nan
        out[f"{side}_batch_s"] = batch / len(common) if common else math.nan
    out["difference"] = (out["watched"] - out["plain"]) / out["plain"]
    return out


#: Student's t, one-sided 95 %, by degrees of freedom (more than 10: the normal's 1.645).
T95 = {
    1: 6.314,
    2: 2.920,
    3: 2.353,
    4: 2.132,
    5: 2.015,
    6: 1.943,
    7: 1.895,
    8: 1.860,
    9: 1.833,
    10: 1.812,
}


def mean_bounds(values: Sequence[float]) -> tuple[float, float, float, float]:
    """Mean, sample standard deviation and the one-sided 95 % lower and upper bounds of the
    mean (Student's t, ``len - 1`` degrees of freedom; NaN with fewer than two values).

    >>> [round(v, 4) for v in mean_bounds([0.01, 0.02, 0.03])]
    [0.02, 0.01, 0.0031, 0.0369]
    """
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, math.nan, math.nan, math.nan
    sd = statistics.stdev(values)
    half = T95.get(len(values) - 1, 1.645) * sd / math.sqrt(len(values))
    return mean, sd, mean - half, mean + half


def verdict(direct: Sequence[float], differences: Sequence[float], goal: float) -> str:
    """Whether watching cost the node less than ``goal`` (a share) of its capacity.

    ``differences``, per pair: (watched - plain) / plain of rows per second of micro-batch time
    over the same work: the node's capacity, measured; the cost of a pair is
    ``-difference``. The goal is met when the 95 % upper bound of the mean cost (Student's t)
    is below ``goal``, NOT met when the mean cost is ``goal`` or more, not shown between.

    ``direct``, per pair: the CPU watching took, as a share of the machine (the dashboard's
    and the endpoint's threads in the driver, as the node accounts them in ``summary.json``,
    plus the browser and the scraper from ``/proc``). It is reported beside the verdict, not
    in it: it is a floor of the cost, not the cost. On this machine the browser's wake-ups
    also slow the node's tasks beyond the CPU they take (BENCHMARKS.md §5: 1.9 % of the
    machine in CPU, 5.0 % in batch time).

    >>> verdict([], [], goal=0.05)
    'cost of watching: not measured (no pair counts)'
    >>> print(verdict([0.012, 0.014, 0.013], [-0.02, -0.01, 0.005], goal=0.05))
    cost of watching: mean 0.8 % of the node's capacity, standard deviation 1.3 %, pairs from -0.5 to 2.0 %, 0 of 3 pairs at 5 % or more, 95 % upper bound of the mean 3.0 %; CPU it took 1.3 % of the machine (pairs from 1.2 to 1.4 %); goal (below 5 %): met
    >>> print(verdict([0.019, 0.019, 0.021, 0.02], [-0.039, -0.04, -0.105, -0.017], goal=0.05))
    cost of watching: mean 5.0 % of the node's capacity, standard deviation 3.8 %, pairs from 1.7 to 10.5 %, 1 of 4 pairs at 5 % or more, 95 % upper bound of the mean 9.5 %; CPU it took 2.0 % of the machine (pairs from 1.9 to 2.1 %); goal (below 5 %): NOT met
    """
    if not differences:
        return "cost of watching: not measured (no pair counts)"
    cost = [-d for d in differences]
    mean, sd, _, upper = mean_bounds(cost)
    above = sum(1 for c in cost if c >= goal)
    if mean >= goal:
        met = "NOT met"
    elif upper < goal:
        met = "met"
    else:
        met = "not shown (the mean is below it, the spread too wide to tell)"
    cpu = (
        f"CPU it took {100 * statistics.mean(direct):.1f} % of the machine (pairs from "
        f"{100 * min(direct):.1f} to {100 * max(direct):.1f} %)"
        if direct
        else "CPU it took: not measured"
    )
    return (
        f"cost of watching: mean {100 * mean:.1f} % of the node's capacity, standard deviation "
        f"{100 * sd:.1f} %, pairs from {100 * min(cost):.1f} to {100 * max(cost):.1f} %, "
        f"{above} of {len(cost)} pairs at {100 * goal:g} % or more, 95 % upper bound of the "
        f"mean {100 * upper:.1f} %; {cpu}; goal (below {100 * goal:g} %): {met}"
    )


def direct_cost(watched: Mapping[str, Any], cores: int) -> float:
    """The CPU a watched run's watching took, as a share of the machine's ``cores``: its
    browser and scraper (``watcher_cores``) plus its servers' CPU in the driver
    (``serving_cpu_s`` over ``wall_s``).

    >>> direct_cost({"watcher_cores": 0.04, "serving_cpu_s": 1.2, "wall_s": 120.0}, cores=2)
    0.025
    """
    serving = float(watched.get("serving_cpu_s", math.nan)) / float(watched["wall_s"])
    return round((float(watched["watcher_cores"]) + serving) / cores, 6)


def pair_table(pairs: Sequence[Mapping[str, Any]], cores: int, goal: float = 0.05) -> list[str]:
    """The markdown table of ``pairs`` (``first``, ``same_work`` (:func:`same_work`),
    ``plain`` and ``watched`` as :func:`one_run` gives them), then the verdict
    (:func:`verdict`), the mean difference of the batch times and its standard deviation over
    the pairs, and the CPU each side took (``cores``: the machine's).

    >>> run = lambda node, watcher: {"shed_share": 0.0, "batches": 40, "node_cores": node,
    ...     "watcher_cores": watcher, "foreign_cores": 0.01, "wall_s": 100.0}
    >>> pair = lambda a, b: {"first": "plain", "plain": run(1.5, 0.0),
    ...     "watched": run(1.6, 0.1) | {"scrapes": 20, "page_updates": 100, "serving_cpu_s": 2.0},
    ...     "same_work": {"batches": 30, "plain": a, "watched": b, "plain_batch_s": 1.0,
    ...                   "watched_batch_s": a / b, "difference": (b - a) / a}}
    >>> lines = pair_table([pair(100.0, 98.0), pair(100.0, 96.0)], cores=2)
    >>> print(lines[2])
    | 1 | plain | 30 | 1.000 / 1.020 | 100 | 98 | -2.0 % | 0.0 / 0.0 % | 1.50 / 1.60 | 0.10 | 2.0 s | 6.0 % | 0.01 / 0.01 | 20 / 100 |
    >>> print("\\n".join(lines[-4:]))
    - rows per second of micro-batch time, watched against plain: mean difference -3.0 %, standard deviation 1.4 % over 2 pairs
    - CPU of the node: 1.50 cores plain, 1.60 watched (+0.10)
    - CPU of the browser and the scraper: 0.10 cores (5.0 % of the machine's 2)
    - CPU of the dashboard's and the endpoint's threads in the driver: 0.02 cores (1.0 % of the machine's 2)
    """
    lines = [
        "| pair | first | same batches | batch s plain / watched | rows per batch-s plain "
        "| watched | difference | shed plain / watched | node cores plain / watched "
        "| browser + scraper cores | servers' CPU in the driver | watching, % of the machine "
        "| other processes' cores plain / watched | scrapes / page updates |",
        "|---|---|" + "---:|" * 12,
    ]
    for i, pair in enumerate(pairs, start=1):
        plain, watched, c = pair["plain"], pair["watched"], pair["same_work"]
        cells = [
            str(i),
            str(pair["first"]),
            str(c["batches"]),
            f"{c['plain_batch_s']:.3f} / {c['watched_batch_s']:.3f}",
            f"{c['plain']:,.0f}",
            f"{c['watched']:,.0f}",
            f"{100 * c['difference']:+.1f} %",
            f"{100 * plain['shed_share']:.1f} / {100 * watched['shed_share']:.1f} %",
            f"{plain['node_cores']:.2f} / {watched['node_cores']:.2f}",
            f"{watched['watcher_cores']:.2f}",
            f"{watched.get('serving_cpu_s', math.nan):.1f} s",
            f"{100 * direct_cost(watched, cores):.1f} %",
            f"{plain['foreign_cores']:.2f} / {watched['foreign_cores']:.2f}",
            f"{watched.get('scrapes', 0)} / {watched.get('page_updates', 0)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    d = [p["same_work"]["difference"] for p in pairs]
    direct = [direct_cost(p["watched"], cores) for p in pairs]
    sd = statistics.stdev(d) if len(d) > 1 else math.nan
    node = [statistics.mean(p[side]["node_cores"] for p in pairs) for side in ("plain", "watched")]
    watcher = statistics.mean(p["watched"]["watcher_cores"] for p in pairs)
    serving = statistics.mean(
        p["watched"].get("serving_cpu_s", math.nan) / p["watched"]["wall_s"] for p in pairs
    )
    return [
        *lines,
        "",
        f"- {verdict(direct, d, goal)}",
        f"- rows per second of micro-batch time, watched against plain: mean difference "
        f"{100 * statistics.mean(d):+.1f} %, standard deviation {100 * sd:.1f} % over "
        f"{len(d)} pairs",
        f"- CPU of the node: {node[0]:.2f} cores plain, {node[1]:.2f} watched "
        f"({node[1] - node[0]:+.2f})",
        f"- CPU of the browser and the scraper: {watcher:.2f} cores "
        f"({100 * watcher / cores:.1f} % of the machine's {cores})",
        f"- CPU of the dashboard's and the endpoint's threads in the driver: {serving:.2f} cores "
        f"({100 * serving / cores:.1f} % of the machine's {cores})",
    ]


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

    HZ = TICKS

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
        procs = {s.pid: (s.ppid, s.start_ticks, s.cpu_s) for s in all_stats().values()}
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
    """Keep the dashboard open in Chromium and scrape /metrics until ``proc`` ends; every
    ``scrape_s`` seconds also read the feed time the page shows (how many it showed: the page
    kept updating). Nothing else touches the page, so the browser's CPU is the page's."""
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
                with contextlib.suppress(Exception):  # the page goes with the server at the end
                    js = "() => document.querySelector('#node-node')?.dataset.t || ''"
                    seen_t.add(str(page.evaluate(js)))
                next_scrape += scrape_s
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
        rows = finished(list(csv.DictReader(f)))
    return {
        "watched": watched,
        "out": str(out),
        "wall_s": round(wall, 1),
        "foreign_cores": cpu.cpu_s("other") / wall,
        "node_cores": cpu.cpu_s("node") / wall,
        "watcher_cores": cpu.cpu_s("watcher") / wall,
        "shed_share": shed_share(rows, args.settle_s),
        "batches": sum(1 for r in rows if r["batch_s"] > 0),
        "seed": summary["seed"],
        "intervals": summary["intervals"],
        "arrived_tuples_per_s": summary["arrived_tuples_per_s"],
        "summary_processed_tuples_per_s": summary["processed_tuples_per_s"],
        "summary_capacity_measured_tuples_per_s": summary["capacity_measured_tuples_per_s"],
        "serving_cpu_s": sum(summary.get("serving_cpu_s", {}).values()),
        **extra,
        "rows": rows,
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


def why_left_out(pair: Mapping[str, Any], foreign_max: float, min_batches: int) -> str | None:
    """Why ``pair`` does not count (None: it counts): another process disturbed one of its
    runs, or they share fewer than ``min_batches`` batches of the same work.

    >>> run = lambda foreign: {"foreign_cores": foreign}
    >>> pair = lambda a, b, n: {"plain": run(a), "watched": run(b), "same_work": {"batches": n}}
    >>> why_left_out(pair(0.01, 0.02, 30), 0.05, 10)
    >>> why_left_out(pair(0.30, 0.02, 30), 0.05, 10)
    'disturbed: other processes used 0.30 cores'
    >>> why_left_out(pair(0.01, 0.02, 4), 0.05, 10)
    'only 4 batches of the same work (both runs admitted all) after the start'
    """
    worst = max(pair["plain"]["foreign_cores"], pair["watched"]["foreign_cores"])
    if worst > foreign_max:
        return f"disturbed: other processes used {worst:.2f} cores"
    n = pair["same_work"]["batches"]
    if n < min_batches:
        return f"only {n} batches of the same work (both runs admitted all) after the start"
    return None


def report(record: Mapping[str, Any], cores: int) -> list[str]:
    """``summary.md`` of a ``runs.json`` record: its header, the table of the pairs that
    count and the pairs left out, with why."""
    goal = float(record.get("goal", 0.05))
    lines = [record["header"], "", *pair_table(record["pairs"], cores=cores, goal=goal)]
    lines += [f"- left out: {p['name']} ({p['left_out']})" for p in record["left_out"]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=6)
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
        "--min-batches",
        type=int,
        default=10,
        help="a pair is left out with fewer batches of the same work after the start",
    )
    ap.add_argument(
        "--quiet-wait-s",
        type=float,
        default=900.0,
        help="before each run, wait at most this long for other processes to go quiet",
    )
    ap.add_argument("--retries", type=int, default=6, help="pairs left out run again, at most")
    ap.add_argument(
        "--goal",
        type=float,
        default=0.05,
        help="the most of its capacity watching may cost the node (a share; 0.05 is 5 %%)",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/ui-overhead"))
    ap.add_argument(
        "--table", type=Path, metavar="RUNS.json", help="only print the summary of a runs.json"
    )
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    if args.table is not None:
        print("\n".join(report(json.loads(args.table.read_text()), cores)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    began = datetime.datetime.now(datetime.UTC)
    record: dict[str, Any] = {"header": "", "goal": args.goal, "pairs": [], "left_out": []}
    attempt = 0
    while len(record["pairs"]) < args.pairs:
        attempt += 1
        name = f"pair{attempt}"
        pair = run_pair(args, name, plain_first=len(record["pairs"]) % 2 == 0)
        pair["name"] = name
        pair["same_work"] = same_work(pair["plain"]["rows"], pair["watched"]["rows"], args.settle_s)
        why = why_left_out(pair, args.foreign_max, args.min_batches)
        if why is None:
            record["pairs"].append(pair)
        else:
            record["left_out"].append(pair | {"left_out": why})
            print(f"{name}: left out ({why})", flush=True)
            if len(record["left_out"]) > args.retries:
                raise SystemExit(f"{len(record['left_out'])} pairs left out: giving up")
        # written after every pair, in case the script is stopped
        (args.out / "runs.json").write_text(json.dumps(record, indent=2) + "\n")
    ended = datetime.datetime.now(datetime.UTC)
    record["header"] = (
        f"{began:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC, commit {git_commit()}: {args.pairs} pairs "
        f"of {args.duration:g} s runs of {args.config}, seed {record['pairs'][0]['plain']['seed']}, "
        f"figures from {args.settle_s:g} s after the first interval, /metrics scraped every "
        f"{args.scrape_s:g} s"
    )
    (args.out / "runs.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = report(record, cores)
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
