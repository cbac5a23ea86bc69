"""``spillway federation up FED.toml`` and ``spillway federation node FED.toml --node NAME``.

``up`` runs a whole federation on this machine, every part a child process in its own process
group (so nothing it started survives it):

1. the Kafka broker of ``--kafka-dir`` (the one ``spillway kafka up`` uses by default) unless
   one runs there already (then it is left running at the end), and the federation's link
   topics, named for this run;
2. the query coordinator (``spillway coordinator``: loopback only, a fresh key in a state file
   readable by its owner only);
3. a node per ``[[nodes]]`` entry (``spillway federation node``: one Spark application each,
   ``local[1]`` by default, checkpoints in ``OUT/nodes/NAME``);

then redraws one view across the nodes every second (:mod:`spillway.federation.board`: per
query the coordinator's SIC, kept %, p95 latency at its root; Jain over the queries; a node the
coordinator no longer hears from is marked lost and the others keep shedding), until
``--duration`` seconds after every node is up, Ctrl-C or SIGTERM. It then stops the nodes
(SIGTERM: each finishes its batch and writes its results), the coordinator and the broker it
started, kills any process group still alive, and writes ``summary.json`` and ``report.md``
into ``--out``; ``timeline.jsonl`` holds the view's course, a line a second once every node is
up (:func:`timeline_entry`). ``--kill NODE@T[+R]`` crashes a node mid-run and restarts it
from its checkpoint (:mod:`spillway.federation.kill`): the kill, the restart, when the
coordinator saw it lost and alive again and when it had caught up go to ``summary.json``
(``kill``) and the timeline (``events``); ``pids.json`` names the new process. Each node
sheds with its ``[[nodes]]`` entry's ``policy`` and balances the coordinator's values unless
the file's ``[coordinator]`` says ``coordinated = false`` (:mod:`spillway.federation.config`).

``node`` runs one node (:mod:`spillway.spark.fed_node`): its fragments' sources and link
topics as the queries of one :class:`~spillway.spark.node.Node`, its upstream fragments'
results sent downstream through Kafka, its roots' results reported to the coordinator, a
heartbeat between them, its status in ``OUT/status.json`` every second.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="spillway")
>>> add_federation_command(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["federation", "up", "fed.toml", "--duration", "30", "--out", "o"])
>>> args.federation.name, args.duration, args.handler.__name__
('fed.toml', 30.0, 'cmd_up')
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError, ControlChannelError, RunFailedError
from spillway.federation.board import FederationView, federation_view, render
from spillway.federation.client import CoordinatorClient
from spillway.federation.config import FederationConfig, load_federation
from spillway.federation.cpu import CpuController, find_controller, limited_argv
from spillway.federation.kill import KillRecord, parse_kill
from spillway.federation.placement import LINK_PREFIX, all_topics
from spillway.federation.update import NodeUpdate
from spillway.files import replace_text
from spillway.quality.coordination import RETAIN_S
from spillway.reporting import json_safe

#: Seconds ``up`` waits for every node's Spark application to come up.
START_TIMEOUT_S = 300.0
#: Seconds a node gets to stop after SIGTERM before its process group is killed.
STOP_TIMEOUT_S = 60.0

_EPILOG = """\
examples:
  spillway federation up spillway/examples/federation.toml --duration 60 --out runs/fed
  spillway federation up spillway/examples/federation.toml --duration 90 --kill c@30+15 \
      --out runs/fed-kill

Everything listens on 127.0.0.1 only. Ctrl-C stops every process it started.
"""


def add_federation_command(sub: Any) -> None:
    """Add ``federation up`` and ``federation node`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "federation",
        help="run a federation of spillway nodes on this machine (THEMIS §6)",
        description="A federation file's nodes, coordinator and broker as processes.",
    )
    fsub = p.add_subparsers(dest="federation_command", required=True)
    up = fsub.add_parser(
        "up",
        help="start the broker (if needed), the coordinator and every node; one live view",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.add_argument("federation", type=Path, metavar="FED.toml", help="the federation file")
    up.add_argument("--duration", type=float, default=None, metavar="S",
                    help="stop S seconds after every node is up (default: at Ctrl-C)")  # fmt: skip
    up.add_argument("--out", type=Path, required=True, metavar="DIR",
                    help="where the report, logs and checkpoints go")  # fmt: skip
    up.add_argument("--master", default="local[1]", help="each node's Spark master")
    up.add_argument("--kafka-dir", type=Path, default=None, metavar="DIR",
                    help="the broker's folder (default: that of 'spillway kafka up')")  # fmt: skip
    up.add_argument("--kafka-port", type=int, default=0, metavar="PORT",
                    help="the broker's port when it is started here (default: a free one)")  # fmt: skip
    up.add_argument("--seed", type=int, default=0, metavar="N",
                    help="seed of the nodes' feeds and policies (node i gets N + i)")  # fmt: skip
    up.add_argument("--ui", action="store_true",
                    help="also show the run on the web dashboard, on 127.0.0.1 (its address is "
                    "printed): the federation's panel and one per node")  # fmt: skip
    up.add_argument("--ui-port", type=int, default=None, metavar="PORT",
                    help="the dashboard's port (implies --ui; default 0: a free port)")  # fmt: skip
    up.add_argument("--kill", default=None, metavar="NODE@T[+R]",
                    help="kill NODE's process group (SIGKILL, a crash) T s after every node is "
                    "up; with +R restart it R s later from its checkpoint "
                    "(spillway.federation.kill)")  # fmt: skip
    up.set_defaults(handler=cmd_up)
    node = fsub.add_parser("node", help="run one node of a federation (what 'up' starts)")
    node.add_argument("federation", type=Path, metavar="FED.toml")
    node.add_argument("--node", required=True, help="the node's name in the file")
    node.add_argument("--state", type=Path, required=True, metavar="FILE",
                      help="the coordinator's state file")  # fmt: skip
    node.add_argument("--out", type=Path, required=True, metavar="DIR")
    node.add_argument("--bootstrap", required=True, help="the Kafka cluster (host:port)")
    node.add_argument("--prefix", default=LINK_PREFIX, help="the link topics' prefix")
    node.add_argument("--master", default="local[1]")
    node.add_argument("--duration", type=float, default=None, metavar="S")
    node.add_argument("--seed", type=int, default=0, metavar="N",
                      help="seed of the node's feeds and policy")  # fmt: skip
    node.set_defaults(handler=cmd_node)


# ----------------------------------------------------------------------------- the node
def cmd_node(args: argparse.Namespace) -> int:
    """Run one node until SIGTERM, Ctrl-C or ``--duration``; returns 0 (1 if it failed)."""
    from spillway.events import ResultsEvent
    from spillway.federation.placement import node_links
    from spillway.federation.view import CoordinatorView
    from spillway.kafka.connection import KafkaConnection
    from spillway.quality.sic import StwConfig
    from spillway.spark.fed_node import (
        Heartbeat,
        LinkForwarder,
        RootReporter,
        node_config,
        node_status,
    )
    from spillway.spark.node import Node

    fed = load_federation(args.federation)
    name: str = args.node
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    conn = KafkaConnection(bootstrap_servers=args.bootstrap)
    cfg, local = node_config(
        fed, name, conn, prefix=args.prefix, master=args.master,
        checkpoint_dir=str(out / "checkpoint"), seed=args.seed,
    )  # fmt: skip
    stw = StwConfig(stw_s=fed.stw_s, slide_s=cfg.trigger_s)
    # the coordinator's Eq. 4 reflects this node's admissions up to each update's stw_end
    view = CoordinatorView([q.query_id for q in local], stw, stale_s=3 * cfg.trigger_s,
                           lag_s=cfg.trigger_s,
                           fragment_ids=[q.fragment_index for q in local],
                           history_s=fed.stw_s + RETAIN_S,
                           coordinated=fed.coordinated)  # fmt: skip
    reporter = RootReporter(
        CoordinatorClient.from_state(args.state, name), view,
        roots=[i for i, q in enumerate(local) if q.root],
    )  # fmt: skip
    outputs = node_links(fed, name, prefix=args.prefix).outputs
    forwarder = LinkForwarder(conn, outputs, local) if outputs else None
    node = Node(cfg, federation=reporter, log_level="ERROR")
    if forwarder is not None:  # every new batch of results, the upstream fragments' sent on
        node.observers.append(
            lambda _phase, ev: forwarder(ev) if isinstance(ev, ResultsEvent) else None
        )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    node.start()
    beat = Heartbeat(CoordinatorClient.from_state(args.state, name), view,
                     interval_s=fed.slide_s, progress=reporter.progress_report).start()  # fmt: skip
    t0 = time.monotonic()

    def status(final: bool) -> dict[str, Any]:
        return node_status(
            node, local, node=name, pid=os.getpid(), final=final,
            reports=reporter.reports, beats=beat.beats, view=view.counters(),
            forwarded_rows=0 if forwarder is None else forwarder.written,
            orphaned=[q.name for q, o in zip(local, view.orphaned(time.time()), strict=True) if o],
            listener_errors=node.store.listener_errors[:3], failure=node.failure,
        )  # fmt: skip

    try:
        while not stop.wait(1.0):
            replace_text(out / "status.json", json.dumps(status(False)))
            if node.failure is not None:
                break
            if args.duration is not None and time.monotonic() - t0 >= args.duration:
                break
        replace_text(out / "status.json", json.dumps(status(True)))
    finally:
        beat.stop()
        node.stop()
        if forwarder is not None:
            forwarder.close()
        reporter.client.close()
        node.results().to_csv(out / "results.csv", index=False)
        _write_history(out / "history.jsonl", node)
    if node.failure is not None:
        raise RunFailedError(f"node {name!r} failed: {node.failure.get('error', node.failure)}")
    return 0


# ----------------------------------------------------------------------------- up
class _Children:
    """Child processes, each in its own process group (a node's JVM goes with it)."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.argv: dict[str, list[str]] = {}
        #: Per child name, the cgroup it runs in (a CPU limit: :mod:`spillway.federation.cpu`).
        self.groups: dict[str, Path] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        """Start ``spillway ARGV`` as ``name`` (its output appended to ``LOGS/name.log``), in
        its cgroup when :attr:`groups` names one (a restart goes back into it)."""
        cmd = [sys.executable, "-m", "spillway.cli", *argv]
        if name in self.groups:
            cmd = limited_argv(cmd, self.groups[name] / "cgroup.procs")
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self.procs[name], self.argv[name] = proc, list(argv)
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL ``name``'s whole process group (a crash) and wait until it is gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()
        gone = time.monotonic() + 10.0
        while _group_alive(self.procs[name].pid) and time.monotonic() < gone:
            time.sleep(0.1)

    def stop(self, names: list[str], timeout_s: float) -> None:
        """SIGTERM ``names``, wait up to ``timeout_s``, then SIGKILL their whole groups."""
        for n in names:
            with contextlib.suppress(ProcessLookupError):
                self.procs[n].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for n in names:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[n].wait(max(deadline - time.monotonic(), 0.1))
        for n in names:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.procs[n].pid, signal.SIGKILL)  # anything left in its group
            self.procs[n].wait()
        gone = time.monotonic() + 10.0  # SIGKILL is delivered asynchronously
        while any(_group_alive(self.procs[n].pid) for n in names) and time.monotonic() < gone:
            time.sleep(0.1)

    def word(self, name: str) -> str | None:
        rc = self.procs[name].poll()
        return None if rc is None else f"exited {rc}"


def _write_history(path: Path, node: Any) -> None:
    """The node's decisions, one JSON line each (:class:`~spillway.status.IntervalRecord`:
    capacity, the cost model's fit, per query the projected SIC balanced and the kept share),
    then one line per plan with its measured micro-batches (rows, duration): what its capacity
    estimate was fitted on."""
    lines = [json.dumps(json_safe(dataclasses.asdict(r))) for r in node.controller.history()]
    for plan in node.controller.cost_estimates():
        lines.append(
            json.dumps(json_safe({"plan": plan, "batches": node.controller.batches(plan)}))
        )
    replace_text(path, "\n".join(lines) + "\n")


def _cpu_controller(fed: FederationConfig) -> CpuController | None:
    """The cgroup CPU controller the nodes' limits go in (None: no node is limited); a
    limit this process cannot set is refused, not ignored."""
    if all(c is None for c in fed.cpus):
        return None
    controller = find_controller()
    if controller is None:
        limited = ", ".join(n for n, c in zip(fed.nodes, fed.cpus, strict=True) if c is not None)
        raise ConfigError(
            f"nodes {limited} set cpu, which needs a writable cgroup CPU controller (root, or "
            "a delegated cgroup v2 subtree with cpu enabled); none found under /sys/fs/cgroup: "
            "run as a user who may create cgroups, or remove cpu from [[nodes]]"
        )
    return controller


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _wait_for(path: Path, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60.0
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-2:])
            raise RunFailedError(f"{what} did not start ({tail or 'no output'}); log: {log}")
        time.sleep(0.1)


def _running(status: dict[str, Any] | None) -> bool:
    """Whether a node has made its first shedding decision."""
    return bool(status and status.get("intervals"))


def _updates(clients: dict[str, CoordinatorClient]) -> dict[str, NodeUpdate | None]:
    got: dict[str, NodeUpdate | None] = {}
    for n, c in clients.items():
        try:
            got[n] = c.update()
        except ControlChannelError:
            got[n] = None
    return got


def _log_values(out: Path, view: FederationView) -> None:
    """Append the coordinator's values to ``OUT/updates.jsonl`` (checked against the results)."""
    with (out / "updates.jsonl").open("a") as seen:
        seen.write(json.dumps({q.name: [q.sic, q.stw_end] for q in view.queries}) + "\n")


def _clean(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def node_p95(status: dict[str, Any] | None) -> float | None:
    """A node's p95 latency (s): its slowest query's over the recent STW, None before any."""
    p95 = [lq["latency_p95_s"] for lq in (status or {}).get("queries", [])
           if lq.get("latency_p95_s") is not None]  # fmt: skip
    return max(p95) if p95 else None


def node_totals(status: dict[str, Any] | None) -> tuple[int, int]:
    """A node's tuples decided and kept since its start, over all its queries."""
    qs = (status or {}).get("queries", [])
    arrived = sum(int(lq.get("arrived_total") or 0) for lq in qs)
    return arrived, sum(int(lq.get("kept_total") or 0) for lq in qs)


def timeline_entry(
    view: FederationView, statuses: dict[str, dict[str, Any] | None], elapsed_s: float
) -> dict[str, Any]:
    """One line of ``OUT/timeline.jsonl``: seconds since every node was up, each query's SIC
    as the coordinator gave it (Eq. 4; None before any), Jain over them, and per node its p95
    latency (:func:`node_p95`) and the tuples it decided and kept so far (:func:`node_totals`).

    >>> from spillway.federation.board import QueryView
    >>> v = FederationView(queries=(QueryView(name="q", sic=0.5, kept_fraction=0.5,
    ...     latency_p95_s=2.0, sic_as_of=1.0, stw_end=0.5),), jain=1.0, lost_nodes=(),
    ...     nodes={"a": "running"})
    >>> st = {"queries": [{"latency_p95_s": 2.5, "arrived_total": 40, "kept_total": 10}]}
    >>> timeline_entry(v, {"a": st}, 3.04)  # doctest: +NORMALIZE_WHITESPACE
    {'elapsed_s': 3.0, 'sic': {'q': 0.5}, 'jain': 1.0, 'latency_p95_s': {'a': 2.5},
     'arrived': {'a': 40}, 'kept': {'a': 10}}
    """
    totals = {n: node_totals(st) for n, st in statuses.items()}
    return {
        "elapsed_s": round(elapsed_s, 1),
        "sic": {q.name: _clean(q.sic) for q in view.queries},
        "jain": _clean(view.jain),
        "latency_p95_s": {n: node_p95(st) for n, st in statuses.items()},
        "arrived": {n: a for n, (a, _) in totals.items()},
        "kept": {n: k for n, (_, k) in totals.items()},
    }


def root_results(
    fed: FederationConfig, out: Path, query: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A query's result rows as its root node stored them (``OUT/nodes/NAME/results.csv``, the
    root fragment's sources and link lanes): ``(window_start, sic, produced_at)``, seconds;
    None where the node left none.

    Raises
    ------
    ConfigError
        ``query`` is not one of the federation's.
    """
    import pandas as pd

    from spillway.spark.coordinator import unix_seconds

    q = next((q for q in fed.queries if q.name == query), None)
    if q is None:
        raise ConfigError(f"query must be one of {[q.name for q in fed.queries]}, got {query!r}")
    root = next(f for f in q.fragments if not f.to)
    path = out / "nodes" / root.node / "results.csv"
    rows = pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()
    if not rows.empty:
        rows = rows[rows["query"].isin([f"{q.name}.{root.name}", f"{q.name}.{root.name}.in"])]
    if rows.empty:
        return None
    start = unix_seconds(pd.to_datetime(rows["window_start"], utc=True))
    return start, rows["sic"].to_numpy(dtype=float), rows["produced_at"].to_numpy(dtype=float)


def results_sic(
    fed: FederationConfig,
    out: Path,
    stw_end: dict[str, float],
    history: Sequence[dict[str, Sequence[float]]] = (),
) -> dict[str, dict[str, float | None]]:
    r"""Eq. 4 recomputed from the root nodes' stored results (``OUT/nodes/NAME/results.csv``),
    apart from the coordinator, per query:

    - ``sic``: the SIC of all its root's result rows (however late they were produced) whose
      window starts in the STW the coordinator summed last (``[stw_end - STW, stw_end)``):
      what that STW holds in the end, so a coordinator that missed late results falls short
      of it;
    - ``max_stw_sic``: the most SIC any STW of source time holds over the whole run (at most
      1: every source tuple's information counted once);
    - ``max_gap``: over the coordinator's values seen during the run (``history``: per
      second, per query ``[sic, stw_end]``, what ``up`` writes to ``OUT/updates.jsonl``), the
      largest ``|sic - recomputed|`` (0: it never missed a result, however late; None without
      history), and ``checked``: how many values.

    None where the root's node left no results.

    >>> import tempfile
    >>> fed = FederationConfig.from_dict({"coordinator": {"stw_s": 2.0},
    ...     "nodes": [{"name": "a"}], "queries": [{"name": "q", "fragments": [
    ...         {"name": "root", "node": "a", "sources": 1}]}]})
    >>> out = Path(tempfile.mkdtemp()); (out / "nodes" / "a").mkdir(parents=True)
    >>> _ = (out / "nodes" / "a" / "results.csv").write_text(
    ...     "query,window_start,sic,produced_at\n"
    ...     "q.root,1970-01-01 00:00:10+00:00,0.5,12.5\n"
    ...     "q.root.in,1970-01-01 00:00:11+00:00,0.25,12.5\n"
    ...     "q.root,1970-01-01 00:00:12+00:00,0.5,16.0\n")
    >>> got = results_sic(fed, out, {"q": 12.0}, [{"q": [0.5, 12.0]}, {"q": [0.75, 12.0]}])
    >>> got["q"]
    {'sic': 0.75, 'max_stw_sic': 0.75, 'max_gap': 0.25, 'checked': 2}
    """
    got: dict[str, dict[str, float | None]] = {}
    for q in fed.queries:
        rows = root_results(fed, out, q.name)
        if rows is None:
            got[q.name] = {"sic": None, "max_stw_sic": None, "max_gap": None, "checked": 0}
            continue
        start, sic, _ = rows
        end = stw_end.get(q.name, math.nan)
        inside = (start >= end - fed.stw_s) & (start < end)
        order = np.argsort(start)
        t, cum = start[order], np.concatenate([[0.0], np.cumsum(sic[order])])
        upto = np.searchsorted(t, t + fed.stw_s, side="left")  # each STW from a window start
        per_stw = cum[upto] - cum[np.arange(t.size)]
        seen = np.array(
            [h[q.name] for h in history if q.name in h and np.isfinite(h[q.name]).all()]
        ).reshape(-1, 2)
        lo = np.searchsorted(t, seen[:, 1] - fed.stw_s, side="left")
        hi = np.searchsorted(t, seen[:, 1], side="left")
        gaps = np.abs(seen[:, 0] - (cum[hi] - cum[lo]))
        got[q.name] = {
            "sic": round(float(sic[inside].sum()), 4) if math.isfinite(end) else None,
            "max_stw_sic": round(float(per_stw.max()), 4),
            "max_gap": round(float(gaps.max()), 4) if gaps.size else None,
            "checked": int(gaps.size),
        }
    return got


def write_report(
    out: Path,
    fed: FederationConfig,
    view: FederationView,
    statuses: dict[str, dict[str, Any] | None],
    *,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.md`` into ``out``; returns the summary."""
    nodes: dict[str, Any] = {}
    for n in fed.nodes:
        st = statuses.get(n) or {}
        frags: dict[str, float] = {}  # what each fragment's own sources add to its query
        link_rows = 0
        for lq in st.get("queries", []):
            if lq["role"] == "sources" and lq.get("stw_sic") is not None:
                frags[lq["fragment"]] = round(lq["stw_sic"], 4)
            elif lq["role"] == "link":
                link_rows += int(lq.get("arrived_total") or 0)
        results = out / "nodes" / n / "results.csv"
        rows = max(len(results.read_text().splitlines()) - 1, 0) if results.exists() else 0
        arrived, kept = node_totals(st)
        p95 = node_p95(st)
        nodes[n] = {
            "policy": fed.policy_of(n),
            "cpu_cores": fed.cpu_of(n),  # its CPU limit (None: it shared the machine's cores)
            "state": view.nodes.get(n),
            "lost": n in view.lost_nodes,
            "result_rows": rows,
            "sources_sic": frags,
            "link_rows_in": link_rows,
            "reports": st.get("reports"),
            "heartbeats": st.get("beats"),
            "intervals": st.get("intervals"),
            "forwarded_rows": st.get("forwarded_rows"),
            "capacity_tuples_per_s": st.get("capacity_tuples_per_s"),
            "arrived": arrived,  # tuples decided since the start, every query of the node
            "kept_fraction": round(kept / arrived, 4) if arrived else None,
            "latency_p95_s": None if p95 is None else round(p95, 3),  # its slowest query's
            "orphaned": st.get("orphaned", []),  # queries of fragments it sheds whole
        }
    seen = out / "updates.jsonl"
    history = [json.loads(x) for x in seen.read_text().splitlines()] if seen.exists() else []
    check = results_sic(fed, out, {q.name: q.stw_end for q in view.queries}, history)
    summary = {
        **meta,
        "queries": {
            q.name: {
                "sic": _clean(q.sic),
                "kept_fraction": _clean(q.kept_fraction),
                "latency_p95_s": _clean(q.latency_p95_s),
                "sic_as_of": _clean(q.sic_as_of),
                "stw_end": _clean(q.stw_end),
                "sic_from_results": check[q.name]["sic"],
                "max_stw_sic_from_results": check[q.name]["max_stw_sic"],
                "max_gap_from_results": check[q.name]["max_gap"],
                "updates_checked": check[q.name]["checked"],
            }
            for q in view.queries
        },  # fmt: skip
        "jain": _clean(view.jain),
        "coordinated": fed.coordinated,
        "lost_nodes": list(view.lost_nodes),
        "nodes": nodes,
    }
    replace_text(out / "summary.json", json.dumps(summary, indent=2))
    lines = [
        "# spillway federation run",
        "",
        f"Federation file `{meta['federation']}`, {meta['duration_s']:.0f} s after every node "
        f"was up; made by `{meta['command']}`.",
        "",
        "```",
        render(view),
        "```",
        "",
        "| node | state | CPU (cores) | result rows | SIC its fragments' own sources add over "
        "an STW | link rows in | reports | heartbeats |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, d in nodes.items():
        frag = ", ".join(f"{f} {s:.3f}" for f, s in d["sources_sic"].items()) or "-"
        state = "lost" if d["lost"] else d["state"]
        cpu = "shared" if d["cpu_cores"] is None else f"{d['cpu_cores']:g}"
        lines.append(
            f"| {n} | {state} | {cpu} | {d['result_rows']} | {frag} | {d['link_rows_in']} | "
            f"{d['reports']} | {d['heartbeats']} |"
        )
    k = meta.get("kill")
    if k:
        lines += ["", f"Node `{k['node']}` killed at {k['killed_at_s']} s, seen lost at "
                  f"{k['lost_seen_at_s']} s, restarted at {k['restarted_at_s']} s, alive again at "
                  f"{k['alive_again_at_s']} s, caught up at {k['caught_up_at_s']} s (seconds after "
                  "every node was up; None: not reached)."]  # fmt: skip
    replace_text(out / "report.md", "\n".join(lines) + "\n")
    return summary


def _dashboard(fed: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    """The federation's boards and the dashboard serving them on 127.0.0.1
    (:mod:`spillway.federation.dashboard`); its address is printed."""
    from spillway.federation.dashboard import FederationBoards
    from spillway.telemetry.hub import Hub
    from spillway.ui.server import DashboardServer

    boards = FederationBoards(fed, duration_s=args.duration)
    server = DashboardServer(Hub(boards.boards), port=args.ui_port or 0)
    print(f"dashboard: {server.url}", flush=True)
    return boards, server


def _log_ends(conn: Any, fed: FederationConfig, node: str, prefix: str) -> dict[str, int]:
    """Every partition of ``node``'s input link topics: its end offset now (last stable)."""
    from spillway.federation.placement import node_links
    from spillway.kafka.admin import partition_offsets

    return {
        f"{po.topic}/{int(po.partition)}": int(po.latest)
        for link in node_links(fed, node, prefix=prefix).inputs
        for po in partition_offsets(conn, link.topic)
    }


def _kill_step(
    kill: KillRecord,
    elapsed: float,
    children: _Children,
    view: FederationView,
    statuses: dict[str, dict[str, Any] | None],
    conn: Any,
    fed: FederationConfig,
    prefix: str,
) -> list[dict[str, Any]]:
    """``--kill``'s second: kill or restart the node when due (:class:`KillRecord`), then
    note what the coordinator and the node's status show; the events for the timeline
    (``kill``, ``restart``, and when first seen: ``lost``, ``alive again``, ``caught up``)."""
    n = kill.plan.node
    events = []
    action = kill.due(elapsed)
    if action == "kill":
        children.kill(n)
        kill.note("kill", elapsed, wall=time.time())
    elif action == "restart":  # the same argv: it resumes from its checkpoint and offsets
        ends = _log_ends(conn, fed, n, prefix)
        kill.note("restart", elapsed, wall=time.time(), log_ends=ends)
        children.start(n, children.argv[n])
    if action is not None:
        events.append({"event": action, "node": n, "elapsed_s": round(elapsed, 1)})
        print(f"{action} {n} at {elapsed:.1f} s", flush=True)
    seen = (kill.lost_seen_at_s, kill.alive_again_at_s, kill.caught_up_at_s)
    kill.observe(elapsed, lost=n in view.lost_nodes, status=statuses.get(n))
    now = (kill.lost_seen_at_s, kill.alive_again_at_s, kill.caught_up_at_s)
    for word, before, after in zip(("lost", "alive again", "caught up"), seen, now, strict=True):
        if before is None and after is not None:  # what the run shows of the node, as it happens
            events.append({"event": word, "node": n, "elapsed_s": after})
    return events


def cmd_up(args: argparse.Namespace) -> int:
    """Run the federation (module docstring); prints the report's path last; returns 0."""
    from spillway.kafka import broker as brokers
    from spillway.kafka.admin import create_topic, delete_topics

    fed = load_federation(args.federation)  # a bad file stops here, nothing started
    if args.duration is not None and not args.duration > 0:
        raise ConfigError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if args.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {args.seed}")
    kill = None
    if getattr(args, "kill", None) is not None:
        kill = KillRecord(parse_kill(args.kill, fed.nodes, duration_s=args.duration))
    ui = bool(args.ui or args.ui_port is not None)
    if args.ui_port is not None and not 0 <= args.ui_port <= 65535:
        raise ConfigError(f"--ui-port must be a port number in [0, 65535], got {args.ui_port}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / "coordinator.json"
    if state_file.exists():
        raise ConfigError(
            f"--out {str(out)!r} holds a coordinator state file: a run may be going on there; "
            "pick another folder or remove it"
        )
    controller = _cpu_controller(fed)  # a limit that cannot be set stops here
    data_dir = (args.kafka_dir or brokers.default_data_dir()).expanduser().absolute()
    boards, server = _dashboard(fed, args) if ui else (None, None)
    try:
        running = brokers.read_state(data_dir)
        broker = running or brokers.start(
            brokers.BrokerConfig(data_dir=data_dir, port=args.kafka_port), die_with_parent=True
        )
    except BaseException:
        if server is not None:
            server.close()
        raise
    started_broker = running is None
    conn = broker.connection()
    prefix = f"{LINK_PREFIX}-{uuid.uuid4().hex[:8]}"
    topics = all_topics(fed, prefix=prefix)
    children = _Children(out / "logs")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    clients: dict[str, CoordinatorClient] = {}
    statuses: dict[str, dict[str, Any] | None] = {n: None for n in fed.nodes}
    view = federation_view(fed, {}, statuses)
    updates: dict[str, NodeUpdate | None] = {}
    fed_path = str(args.federation)
    t_up: float | None = None
    t_end = time.monotonic()
    tty = sys.stdout.isatty()
    failed: str | None = "the run stopped on an error: see the terminal and OUT/logs"
    try:
        for t, parts in topics.items():
            create_topic(conn, t, partitions=parts)
        if controller is not None:
            tag = f"spillway-{os.getpid()}-{prefix.rsplit('-', 1)[-1]}"
            children.groups = {
                n: controller.make_group(f"{tag}-{n}", c)
                for n, c in zip(fed.nodes, fed.cpus, strict=True)
                if c is not None
            }
        coord = children.start("coordinator", ["coordinator", fed_path, "--state", str(state_file)])
        _wait_for(state_file, coord, "the coordinator", out / "logs" / "coordinator.log")
        for n in fed.nodes:
            children.start(n, [
                "federation", "node", fed_path, "--node", n, "--state", str(state_file),
                "--out", str(out / "nodes" / n), "--bootstrap", broker.bootstrap,
                "--prefix", prefix, "--master", args.master,
                "--seed", str(args.seed + fed.node_index(n)),
            ])  # fmt: skip
        replace_text(out / "pids.json", json.dumps({k: p.pid for k, p in children.procs.items()}))
        clients = {n: CoordinatorClient.from_state(state_file, n, timeout_s=5.0) for n in fed.nodes}
        t0 = time.monotonic()
        last_print = 0.0
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(1.0):
                for n in fed.nodes:
                    statuses[n] = _read_json(out / "nodes" / n / "status.json") or statuses[n]
                words = {n: children.word(n) for n in fed.nodes}
                states = {n: w for n, w in words.items() if w is not None}
                updates = _updates(clients)
                view = federation_view(fed, updates, statuses, states)
                if boards is not None:
                    boards.update(view, statuses, t=time.time())
                _log_values(out, view)
                if children.word("coordinator") is not None:
                    raise RunFailedError(
                        f"the coordinator exited; log: {out / 'logs' / 'coordinator.log'}"
                    )
                if t_up is None:
                    if all(_running(statuses[n]) or words[n] for n in fed.nodes):
                        t_up = time.monotonic()
                    elif time.monotonic() - t0 > START_TIMEOUT_S:
                        raise RunFailedError(
                            f"the nodes did not come up within {START_TIMEOUT_S:g} s; logs in "
                            f"{out / 'logs'}"
                        )
                if all(words[n] for n in fed.nodes) and not (kill is not None and kill.down):
                    break  # every node ended (or failed): nothing left to show
                elapsed = None if t_up is None else time.monotonic() - t_up
                events = [] if kill is None or elapsed is None else _kill_step(
                    kill, elapsed, children, view, statuses, conn, fed, prefix
                )  # fmt: skip
                if elapsed is not None:  # the run's course, once every node is up
                    entry = timeline_entry(view, statuses, elapsed)
                    if events:
                        entry["events"] = events
                        pids = {k: p.pid for k, p in children.procs.items()}
                        replace_text(out / "pids.json", json.dumps(pids))
                    with (out / "timeline.jsonl").open("a") as line:
                        line.write(json.dumps(entry) + "\n")
                if tty:
                    sys.stdout.write("\x1b[H\x1b[2J" + render(view, elapsed_s=elapsed) + "\n")
                    sys.stdout.flush()
                elif time.monotonic() - last_print >= 10.0:
                    print(render(view, elapsed_s=elapsed), flush=True)
                    last_print = time.monotonic()
                if elapsed is not None and args.duration is not None and elapsed >= args.duration:
                    break
        t_end = time.monotonic()
        nodes = [n for n in fed.nodes if n in children.procs]
        children.stop(nodes, STOP_TIMEOUT_S)
        for n in nodes:
            statuses[n] = _read_json(out / "nodes" / n / "status.json") or statuses[n]
        if kill is not None:  # the catch-up as the node left it when it stopped
            kill.observe(t_end - (t_up or t_end), lost=False, status=statuses.get(kill.plan.node),
                         final=True)  # fmt: skip
        # the coordinator's values once every node's last batch reported (it still runs); the
        # nodes it lost as it last saw them running (once stopped, every node stops beating)
        live = max((u for u in updates.values() if u), key=lambda u: u.as_of, default=None)
        updates = {
            n: dataclasses.replace(u, lost_nodes=live.lost_nodes) if u and live else updates.get(n)
            for n, u in _updates(clients).items()
        }
        final = {n: children.word(n) or "running" for n in nodes}
        final = {n: "stopped" if w == "exited 0" else w for n, w in final.items()}
        view = federation_view(fed, updates, statuses, final)
        _log_values(out, view)
        if boards is not None:
            boards.update(view, statuses, t=time.time())
        failed = None
    finally:
        if boards is not None and server is not None:
            boards.finish(report=None if failed else str(out / "report.md"), error=failed)
            server.close()
        signal.signal(signal.SIGTERM, previous)
        for c in clients.values():
            c.close()
        children.stop(list(children.procs), STOP_TIMEOUT_S)
        for group in children.groups.values():
            CpuController.remove_group(group)
        state_file.unlink(missing_ok=True)
        with contextlib.suppress(Exception):
            delete_topics(conn, list(topics))
        if started_broker:
            brokers.stop(data_dir)
    duration = 0.0 if t_up is None else t_end - t_up
    meta: dict[str, Any] = {
        "federation": fed_path,
        "command": f"spillway federation up {fed_path} --out {out}"
        + ("" if args.duration is None else f" --duration {args.duration:g}")
        + (f" --seed {args.seed}" if args.seed else "")
        + ("" if kill is None else f" --kill {args.kill}"),
        "duration_s": round(duration, 1),
        "broker_started": started_broker,
        "node_exit": {n: p.returncode for n, p in children.procs.items()},
    }
    if kill is not None:
        meta["kill"] = kill.summary()
    write_report(out, fed, view, statuses, meta=meta)
    print(render(view, elapsed_s=duration))
    print(out / "report.md")
    return 0


__all__ = [
    "add_federation_command",
    "cmd_node",
    "cmd_up",
    "node_p95",
    "node_totals",
    "timeline_entry",
    "write_report",
]
