"""End to end against a REAL ``spillway run --ui --ui-port P --metrics-port M`` (a short run of
three queries on local Spark): the page in headless Chromium, the Prometheus endpoint scraped
during the run, the final figures against summary.json, and a quiet start.

One run serves the whole module: it starts in the background (a thread scrapes ``/metrics``
every half second while it runs), the browser test drives the page during the run, and the
last tests wait for the run's end. Screenshots go to the test's folder, or to
``SPILLWAY_SCREENSHOTS`` when set (the README's picture: ``SPILLWAY_SCREENSHOTS=docs/img``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.spark

DURATION_S = 30
QUERIES = ("latency-avg", "slow-count", "best-machines")
CONFIG = """\
policy = "uniform"
policy_options = { b = 0.4 }   # shed 40 % of every interval: shedding without a calibration
seed = 5
trigger_s = 1.0
stw_s = 4.0

[[query]]
name = "latency-avg"
kind = "avg"
feed = "gaussian"
rate = 2000.0

[[query]]
name = "slow-count"
kind = "count"
feed = "exponential"
rate = 1000.0
profile = "bursty"
window_s = 2.0

[[query]]
name = "best-machines"
kind = "top5"
feed = "cluster"
sources = 20
rate = 50.0
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urlopen(url, timeout=timeout) as r:
        return bytes(r.read())


@dataclass
class LiveRun:
    """The running ``spillway run`` and what was seen of it."""

    proc: subprocess.Popen[str]
    out: Path
    ui: str
    metrics: str
    shots: Path
    scrapes: list[tuple[float, str]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""

    def finish(self, timeout_s: float = 120.0) -> int:
        if self.proc.returncode is None:
            self.stdout, self.stderr = self.proc.communicate(timeout=timeout_s)
        return int(self.proc.returncode)


def _scrape(run: LiveRun, stop: threading.Event) -> None:
    while not stop.is_set() and run.proc.poll() is None:
        with contextlib.suppress(URLError, OSError):
            run.scrapes.append((time.monotonic(), _get(run.metrics, 2.0).decode()))
        time.sleep(0.5)


def _start(folder: Path, args: list[str]) -> Iterator[LiveRun]:
    """``spillway run ARGS --ui --metrics-port`` in the background, scraped every half second
    while it runs; stopped (if still running) when the caller is done."""
    ui_port, metrics_port = _free_port(), _free_port()
    spillway = Path(sys.executable).with_name("spillway")
    cmd = [str(spillway), "run", *args, "--out", str(folder / "run"), "--no-live"]
    cmd += ["--ui", "--ui-port", str(ui_port), "--metrics-port", str(metrics_port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shots = Path(os.environ.get("SPILLWAY_SCREENSHOTS") or folder)
    shots.mkdir(parents=True, exist_ok=True)
    run = LiveRun(
        proc=proc,
        out=folder / "run",
        ui=f"http://127.0.0.1:{ui_port}/",
        metrics=f"http://127.0.0.1:{metrics_port}/metrics",
        shots=shots,
    )
    stop = threading.Event()
    scraper = threading.Thread(target=_scrape, args=(run, stop), daemon=True)
    scraper.start()
    try:
        yield run
    finally:
        stop.set()
        if proc.poll() is None:
            proc.terminate()
        run.finish(60)
        scraper.join(5)


@pytest.fixture(scope="module")
def live_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRun]:
    folder = tmp_path_factory.mktemp("live-run")
    config = folder / "node.toml"
    config.write_text(CONFIG)
    yield from _start(folder, ["--config", str(config), "--duration", str(DURATION_S)])


def _wait(predicate: Any, what: str, timeout_s: float = 90.0, run: LiveRun | None = None) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        if run is not None and run.proc.poll() is not None:
            run.finish()
            raise AssertionError(f"spillway run ended before {what}: {run.stderr[-2000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _api(run: LiveRun) -> dict[str, Any]:
    nodes = json.loads(_get(run.ui + "api/state"))["nodes"]
    return dict(nodes[0])


def _page_values(page: Any) -> dict[str, Any]:
    """What the page shows now: its snapshot time, and per query the text of every cell."""
    return dict(
        page.evaluate(
            """() => {
              const node = document.querySelector('#node-node');
              const rows = {};
              for (const tr of node.querySelectorAll('.queries tbody tr')) {
                const cells = {};
                for (const td of tr.querySelectorAll('td')) cells[td.dataset.field] = td.textContent;
                rows[tr.dataset.query] = cells;
              }
              const fig = {};
              for (const dd of node.querySelectorAll('.figures dd')) fig[dd.dataset.field] = dd.textContent;
              return {t: node.dataset.t, phase: node.dataset.phase, rows, fig};
            }"""
        )
    )


def _same_moment(
    run: LiveRun, page: Any, read: Callable[[Any], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the page shows (``read(page)``) and the node's state at the same snapshot time.

    Tried for up to 30 s: the page gets each snapshot a moment after the node's state has it,
    and on a loaded machine 40 tries in a row (about 6 s) once all fell in that moment."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        before = read(page)
        state = _api(run)
        after = read(page)
        if before["t"] == after["t"] and float(after["t"]) == state["t"]:
            return after, state
        time.sleep(0.1)
    raise AssertionError("the page never showed the node's latest snapshot")


def _shows(text: str, value: float | None, digits: int) -> bool:
    """Whether ``text`` is ``value`` rounded to ``digits`` decimals (``-`` when unknown)."""
    first = text.split()[0]
    if value is None:
        return first == "-"
    shown = float(first.replace(",", ""))
    return abs(shown - value) <= 0.5 * 10.0**-digits + 1e-9


def test_the_dashboard_shows_the_live_run_and_matches_the_node(
    live_run: LiveRun, page: Any
) -> None:
    run = live_run

    def ui_up() -> bool:
        try:
            return b"spillway dashboard" in _get(run.ui, 1.0)
        except (URLError, OSError):
            return False

    _wait(ui_up, "the dashboard to answer", run=run)
    page.goto(run.ui)
    page.locator("#node-node").wait_for()
    page.wait_for_function(
        "() => document.querySelector('#node-node')?.dataset.phase === 'running'", timeout=90_000
    )
    page.wait_for_function(
        "() => document.querySelectorAll('.queries tbody tr').length === 3", timeout=30_000
    )
    first = _page_values(page)
    assert list(first["rows"]) == list(QUERIES)  # every query, in config order
    # wait for every query's first results (Spark's first micro-batches start its workers)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.queries td[data-field="sic"]')]
                   .every(td => td.dataset.value !== 'null')""",
        timeout=60_000,
    )

    # the same moment seen by the page and by the node's own state (and by /metrics)
    shown, state = _same_moment(run, page, _page_values)
    for q in state["queries"]:
        cells = shown["rows"][q["name"]]
        kept = None if q["kept_fraction"] is None else 100 * q["kept_fraction"]
        assert _shows(cells["sic"], q["sic"], 3), (q, cells)
        assert _shows(cells["kept_fraction"], kept, 1), (q, cells)
        assert _shows(cells["arrival_rate"], q["arrival_rate"], 0), (q, cells)
        assert _shows(cells["latency_p95_s"], q["latency_p95_s"], 2), (q, cells)
        assert _shows(cells["latency_target_s"], q["latency_target_s"], 2), (q, cells)
        assert cells["error"] == "n/a"
    assert _shows(shown["fig"]["capacity_tuples_per_s"], state["capacity_tuples_per_s"], 0)
    assert _shows(shown["fig"]["jain"], state["jain"], 3)
    page.screenshot(path=str(run.shots / "dashboard-matched.png"), full_page=True)

    # the numbers change as the run goes
    t0 = float(shown["t"])
    page.wait_for_function(
        f"() => Number(document.querySelector('#node-node')?.dataset.t) >= {t0 + 3}", timeout=30_000
    )
    later = _page_values(page)
    changed = [
        (q, f)
        for q in QUERIES
        for f in ("sic", "kept_fraction", "arrival_rate", "latency_p95_s")
        if later["rows"][q][f] != shown["rows"][q][f]
    ]
    changed += [f for f in later["fig"] if later["fig"][f] != shown["fig"][f]]
    assert changed, "no figure changed in 3 s of the run"
    page.wait_for_function("() => document.querySelectorAll('.uplot').length === 3")
    page.screenshot(path=str(run.shots / "dashboard.png"), full_page=True)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_metrics_scraped_during_the_run_end_as_summary_json_says(live_run: LiveRun) -> None:
    run = live_run
    assert run.finish() == 0, run.stderr[-3000:]
    running = [_samples(t) for _, t in run.scrapes if 'phase="running"} 1.0' in t]
    done = [_samples(t) for _, t in run.scrapes if 'phase="done"} 1.0' in t]
    assert len(running) >= 5, f"{len(run.scrapes)} scrapes, {len(running)} while running"
    assert done, "no scrape after the run ended (the endpoint closes after the report)"
    node = ("node", "node")

    # during the run: every query's SIC and the capacity (NaN until known), counters that grow
    for s in running:
        assert {k for k in s if k[0] == "spillway_query_sic"} == {
            ("spillway_query_sic", (node, ("query", q))) for q in QUERIES
        }
    last = running[-1]
    for q in QUERIES:
        assert 0.0 <= last[("spillway_query_sic", (node, ("query", q)))] <= 1.02
    assert last[("spillway_capacity_tuples_per_second", (node,))] > 0

    def total(s: dict[Any, float], name: str) -> float:
        return sum(v for k, v in s.items() if k[0] == name)

    # the first scrapes of the run phase may come before its first decision (nothing shed yet)
    shed = [total(s, "spillway_tuples_shed_total") for s in running]
    assert shed == sorted(shed) and shed[-1] > shed[0] >= 0, shed

    # at the end: the endpoint's figures are the report's
    final = done[-1]
    summary = json.loads((run.out / "summary.json").read_text())
    snap = summary["final_snapshot"]
    assert final[("spillway_capacity_tuples_per_second", (node,))] == pytest.approx(
        snap["capacity_tuples_per_s"], rel=1e-12
    )
    assert final[("spillway_jain_index", (node,))] == pytest.approx(snap["jain"], rel=1e-12)
    assert final[("spillway_snapshot_time_seconds", (node,))] == pytest.approx(snap["t"])
    assert final[("spillway_intervals_total", (node,))] == summary["intervals"]
    # what serving the page and the scrapes took in the driver, measured per server
    serving = summary["serving_cpu_s"]
    assert set(serving) == {"dashboard", "metrics"} and all(v > 0 for v in serving.values())
    for q in summary["queries"]:
        per_interval = pd.read_csv(run.out / "queries" / f"{q['name']}.csv")
        arrived = sum(
            v
            for k, v in final.items()
            if k[0] == "spillway_tuples_arrived_total" and ("query", q["name"]) in k[1]
        )
        kept = sum(
            v
            for k, v in final.items()
            if k[0] == "spillway_tuples_kept_total" and ("query", q["name"]) in k[1]
        )
        assert arrived == per_interval["arrived"].sum() > 0, q["name"]
        assert kept == per_interval["kept"].sum(), q["name"]
        windows = final[("spillway_result_latency_seconds_count", (node, ("query", q["name"])))]
        assert windows == q["windows"] > 0, q["name"]
        ratio = final[("spillway_query_kept_ratio", (node, ("query", q["name"])))]
        assert 0.45 < ratio < 0.75, q["name"]  # uniform with b = 0.4
    sources = {dict(k[1])["source"] for k in final if k[0] == "spillway_tuples_shed_total"}
    assert sources == {str(i) for i in range(20)}  # best-machines has 20 sources


def test_the_start_is_quiet_and_spark_log_holds_everything(live_run: LiveRun) -> None:
    run = live_run
    assert run.finish() == 0
    screen = run.stdout + run.stderr
    for noise in (
        "log4j profile",
        "resolves to a loopback address",
        "NativeCodeLoader",
        "incubator modules",
        "Setting default log level",
    ):
        assert noise not in screen, noise
    log = (run.out / "spark.log").read_text()
    assert "Using Spark's default log4j profile" in log and "resolves to a loopback" in log
    lines = run.stdout.splitlines()
    assert lines[0].startswith("spillway: 3 queries, policy uniform")
    assert lines[1] == f"spillway: dashboard at {run.ui}"
    assert lines[2] == f"spillway: Prometheus metrics at {run.metrics}"
    assert lines[-1] == str(run.out / "report.md")
    assert math.isfinite(json.loads((run.out / "summary.json").read_text())["sic_mean"])


# ------------------------------------------------------------------ priority classes
CLASSES_TOML = Path(__file__).resolve().parents[2] / "spillway" / "examples" / "classes.toml"
CLASS_QUERIES = {"1": ["c1-avg"], "2": ["c2-max"], "3": ["c3-count"]}
CLASS_DURATION_S = 25


@pytest.fixture(scope="module")
def class_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRun]:
    """The shipped classes example (DILoS, three classes), shortened, without the exact job."""
    folder = tmp_path_factory.mktemp("class-run")
    args = ["--config", str(CLASSES_TOML), "--duration", str(CLASS_DURATION_S), "--no-exact"]
    yield from _start(folder, args)


def _page_classes(page: Any) -> dict[str, Any]:
    """What the class panel shows now: the snapshot time, per class every cell's text."""
    return dict(
        page.evaluate(
            """() => {
              const node = document.querySelector('#node-node');
              const rows = {};
              for (const tr of node.querySelectorAll('.class-table tbody tr')) {
                const cells = {};
                for (const td of tr.querySelectorAll('td')) cells[td.dataset.field] = td.textContent;
                rows[tr.dataset.class] = cells;
              }
              return {t: node.dataset.t, rows, visible: !node.querySelector('.classes').hidden};
            }"""
        )
    )


def test_the_class_panel_shows_every_class_as_the_node_does(class_run: LiveRun, page: Any) -> None:
    run = class_run

    def running() -> bool:
        try:
            return bool(_api(run)["phase"] == "running")
        except (URLError, OSError):
            return False

    _wait(running, "the run phase", timeout_s=150, run=run)
    page.goto(run.ui)
    page.wait_for_function(
        "() => document.querySelectorAll('.class-table tbody tr').length === 3", timeout=60_000
    )
    # every class's results known (p95 latency), and half the run gone (shedding, when the
    # calibration measured the machine's capacity: a busy machine measures less, sheds nothing)
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('.class-table td[data-field="latency_p95_s"]')]
                   .every(td => td.dataset.value !== 'null')
                  && Number(document.querySelector('#node-node').dataset.t) >= {CLASS_DURATION_S // 2}""",
        timeout=60_000,
    )
    shown, state = _same_moment(run, page, _page_classes)
    assert shown["visible"]
    assert {str(c["class"]): c["queries"] for c in state["classes"]} == CLASS_QUERIES
    assert [c["latency_target_s"] for c in state["classes"]] == [3.0, 4.0, 5.0]  # D x 1 s
    for c in state["classes"]:
        cells = shown["rows"][str(c["class"])]
        assert cells["queries"] == ", ".join(c["queries"])
        pct = {k: None if c[k] is None else 100 * c[k] for k in ("kept_fraction", "loss", "share")}
        assert _shows(cells["kept_fraction"], pct["kept_fraction"], 1), (c, cells)
        assert _shows(cells["loss"], pct["loss"], 1), (c, cells)
        assert _shows(cells["share"], pct["share"], 1), (c, cells)
        assert _shows(cells["latency_p95_s"], c["latency_p95_s"], 2), (c, cells)
        assert _shows(cells["latency_target_s"], c["latency_target_s"], 2), (c, cells)
        assert _shows(cells["headroom"], c["headroom"], 3), (c, cells)
        assert c["headroom"] > 0 and 0 <= c["kept_fraction"] <= 1
        assert cells["class_status"] == ("on target" if c["on_target"] else "MISS")
    page.wait_for_function("() => document.querySelectorAll('.uplot').length === 6")
    page.screenshot(path=str(run.shots / "dashboard-classes.png"), full_page=True)


def test_the_class_metrics_match_the_node_s_status_and_report(class_run: LiveRun) -> None:
    run = class_run
    assert run.finish() == 0, run.stderr[-3000:]
    running = [_samples(t) for _, t in run.scrapes if 'phase="running"} 1.0' in t]
    done = [_samples(t) for _, t in run.scrapes if 'phase="done"} 1.0' in t]
    assert len(running) >= 5 and done, f"{len(run.scrapes)} scrapes, {len(running)} running"
    node = ("node", "node")

    def by_class(s: dict[Any, float], name: str) -> dict[str, float]:
        return {dict(k[1])["class"]: v for k, v in s.items() if k[0] == name}

    last = running[-1]
    assert set(by_class(last, "spillway_class_kept_ratio")) == set(CLASS_QUERIES)
    assert all(v > 0 for v in by_class(last, "spillway_class_headroom").values())
    info = {
        (dict(k[1])["query"], dict(k[1])["class"])
        for k in last
        if k[0] == "spillway_query_class_info"
    }
    assert info == {(q, k) for k, qs in CLASS_QUERIES.items() for q in qs}
    arrived = [sum(by_class(s, "spillway_class_tuples_arrived_total").values()) for s in running]
    assert arrived == sorted(arrived) and arrived[-1] > 0

    # at the end: the endpoint's class figures are the final snapshot's, and its counters the
    # report's class loss
    final = done[-1]
    summary = json.loads((run.out / "summary.json").read_text())
    report = summary["classes"]["classes"]
    for c in summary["final_snapshot"]["classes"]:
        k = str(c["class"])
        lab = (("class", k), node)
        for metric, key in (
            ("spillway_class_kept_ratio", "kept_fraction"),
            ("spillway_class_headroom", "headroom"),
            ("spillway_class_share_ratio", "share"),
            ("spillway_class_latency_p95_seconds", "latency_p95_s"),
            ("spillway_class_latency_target_seconds", "latency_target_s"),
        ):
            want = math.nan if c[key] is None else c[key]
            assert final[(metric, lab)] == pytest.approx(want, rel=1e-12, nan_ok=True), metric
        assert final[("spillway_class_tuples_arrived_total", lab)] == report[k]["arrived"] > 0
        assert final[("spillway_class_tuples_shed_total", lab)] == report[k]["dropped"]
        assert c["loss"] == pytest.approx(report[k]["loss"])
