"""The ``spillway`` command: ``run`` a node, reproduce an ``experiment``, ``bench`` the shedder.

``spillway run`` starts one node (a local Spark application) hosting a mix of the six THEMIS
queries, or the user's own queries from a TOML file, shows a live view while it runs and writes
a report folder (summary.json, CSV, PNG plots, report.md) whose path is the last line printed.

Exit codes: 0 success; 2 a configuration, input or usage error (one line ``spillway: error:
<message>`` on standard error, no traceback; every config error is found before Spark starts);
1 a run that started and failed (:class:`~spillway.errors.RunFailedError`: one line, and the
report folder says what ran and where it failed); 130 Ctrl-C (the node stops and the report of
what ran is written, also during the capacity measurement). A report folder that is not empty
is refused unless ``--overwrite`` is given. Long commands print progress lines on standard
error (:mod:`spillway.progress`); standard output carries the live view and the report path.
``spillway run --ui`` and ``--metrics-port`` also show the run on a web dashboard and as
Prometheus metrics, and Spark's console output goes to the report folder's ``spark.log``
(:mod:`spillway.watch`).

This module parses the command line and dispatches; the default node's queries live in
:mod:`spillway.workloads`, the benchmarks in :mod:`spillway.bench.command`, the experiments in
:mod:`spillway.experiments`.

Examples
--------
>>> cfg = default_node_config(seed=7)
>>> len(cfg.queries), cfg.overload, cfg.policy, cfg.seed
(15, 3.0, 'balance-sic', 7)
>>> sorted({q.kind for q in cfg.queries})
['avg', 'avg_all', 'count', 'cov', 'max', 'top5']
>>> main(["run", "--duration", "-1"])
2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import math
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from spillway import __version__
from spillway.bench.command import BENCHMARKS, run_benchmarks
from spillway.bench.command import EPILOG as BENCH_EPILOG
from spillway.config import NodeConfig, load_config
from spillway.errors import ConfigError, RunFailedError, SpillwayError, UnknownNameError
from spillway.federation.command import add_coordinator_command
from spillway.federation.up import add_federation_command
from spillway.kafka.cli import add_kafka_commands
from spillway.progress import to_stream
from spillway.run_exact import DEFAULT_BUDGET_ROWS
from spillway.sim.command import add_parser as add_simulate_parser
from spillway.sim.command import cmd_simulate
from spillway.status import IntervalRecord, NodeSnapshot
from spillway.watch import LOOPBACK, RunWatch, WatchOptions
from spillway.workloads import (
    DEFAULT_MASTER,
    DEFAULT_OVERLOAD,
    DEFAULT_POLICY,
    WORKLOADS,
    default_node_config,
)

#: Exit codes: 0 success, 1 the run failed, 2 usage, config or input error, 130 Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

DEFAULT_DURATION_S = 120.0
#: Spark's log level during ``spillway run``: its warnings go to ``spark.log`` in the report
#: folder, only errors to the terminal (:mod:`spillway.sparklog`).
RUN_LOG_LEVEL = "WARN"
#: The file in the report folder that holds Spark's whole console output.
SPARK_LOG = "spark.log"
TICK_S = 1.0


class RunnableNode(Protocol):
    """What ``spillway run`` needs from a node (``spillway.spark.node.Node`` provides it)."""

    def run(
        self,
        duration_s: float,
        on_tick: Callable[[NodeSnapshot], None] | None = None,
        tick_s: float = 1.0,
        before_stop: Callable[[Any], None] | None = None,
    ) -> None: ...

    def stop(self) -> None: ...

    def snapshot(self) -> NodeSnapshot: ...

    def history(self) -> list[IntervalRecord]: ...

    def results(self) -> Any: ...


NodeFactory = Callable[[NodeConfig], RunnableNode]


class UsageError(SpillwayError):
    """The command line itself is wrong (unknown option, missing argument, bad value)."""


def spark_node(config: NodeConfig) -> RunnableNode:
    """The default node factory: a :class:`spillway.spark.node.Node` on its own SparkSession,
    with Spark's log level at :data:`RUN_LOG_LEVEL`, keeping the SIC mass of every window for
    the after-run comparison with the exact answers (:mod:`spillway.run_exact`)."""
    from spillway.spark.node import Node

    node: RunnableNode = Node(config, log_level=RUN_LOG_LEVEL, keep_source_mass=True)
    return node


# --------------------------------------------------------------------------- registries
def _registry(module: str, attr: str) -> Mapping[str, Any] | None:
    """A name registry (``POLICIES``, ``EXPERIMENTS``), or None when it is not installed."""
    reg = getattr(importlib.import_module(module), attr, None)
    return reg if isinstance(reg, Mapping) else None


def _lookup(kind: str, name: str, registry: Mapping[str, Any] | None) -> Any:
    if registry is None or name not in registry:
        known = ", ".join(sorted(registry)) if registry else "(none registered)"
        raise UnknownNameError(f"unknown {kind} {name!r}; known: {known}")
    return registry[name]


def check_policy(name: str) -> None:
    """Raise :class:`UnknownNameError` unless ``name`` is in ``spillway.policies.POLICIES``."""
    _lookup("policy", name, _registry("spillway.policies", "POLICIES"))


# --------------------------------------------------------------------------- argument parsing
class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line :class:`UsageError` s (exit 2 in main) and
    whose descriptions and epilogs keep their line breaks. Subcommand parsers are of this class
    too (``add_subparsers`` makes them of the parent parser's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse calls this for every usage error
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return x


def _seed(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if x < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return x


def _port(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= x <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number in [0, 65535], got {text!r}")
    return x


def _utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


_MAIN_EPILOG = """\
examples:
  spillway run                                   # the THEMIS query mix at 3x overload, 120 s
  spillway run --policy random --duration 60 --out runs/random
  spillway run --config spillway/examples/node.toml   # your own queries, feeds and rates
  spillway experiment --help                     # lists the experiments
  spillway bench --quick --out runs/bench
  spillway simulate --nodes 18 --fragments 2000 --minutes 5 --out runs/sim
  spillway kafka up                              # a local Kafka broker; 'spillway kafka --help'
  spillway produce clicks --rate 10000           # a feed into a Kafka topic at a rate profile
  spillway coordinator spillway/examples/federation.toml   # a federation's query coordinator

run, experiment, bench and simulate write a report folder (summary.json, CSV, PNG plots,
report.md) and print its path last. Errors are one line on stderr with exit code 2; 'spillway
COMMAND --help' for more.
"""

_RUN_EPILOG = """\
examples:
  spillway run
      the default node: AVG, MAX, COUNT over gaussian/uniform/exponential/mixed feeds and
      AVG-all, TOP-5, COV over the cluster feed; calibrates its capacity, then runs at 3x it
  spillway run --policy random --duration 60 --seed 3 --out runs/random-60s
  spillway run --policy cod
      CoD on grouped means (mean fare per route of the taxi feed, mean CPU per task class
      of the tasks feed): every group kept alive under overload and drift
  spillway run --config my_node.toml --overload 5     # a config file, overload overridden
  spillway run --no-live > run.log                    # plain periodic lines for logs
  spillway run --no-exact                             # skip the after-run exact answers
  spillway run --ui --metrics-port 9464
      a live web dashboard on 127.0.0.1 (its URL is printed) and Prometheus metrics at
      http://127.0.0.1:9464/metrics (docs/grafana/spillway.json is a Grafana dashboard)

The live view shows, per query: arrival rate, kept share, result SIC and p95 latency against
its target (MISS when missed); for the node: estimated capacity, processed rate, utilisation,
Jain's index; while the node measures its capacity, that measurement. Spark's start-up noise
and warnings go to spark.log in the report folder (--verbose shows them). Options given on the
command line override the config file. Ctrl-C stops the node early and still writes the report
of what ran.

After the run (once the streaming queries have stopped, so it never takes the node's cores
while it streams) the node recomputes every window with nothing shed and reports, per query,
the error beside the SIC of each window: error_mean and spearman_sic_error in summary.json,
groups and missing groups of grouped queries under every policy; the report says how long that
took. A run whose input exceeds --exact-rows tuples is recomputed in evenly spaced spans of
source time holding that many. --no-exact skips it.
"""


def _first_line(entry: Any) -> str:
    doc = getattr(entry, "DESCRIPTION", None) or getattr(entry, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _experiment_epilog() -> str:
    reg = _registry("spillway.experiments", "EXPERIMENTS") or {}
    names = sorted(reg)
    w = max(map(len, names), default=0)
    known = "\n".join(f"  {n:<{w}}  {_first_line(reg[n])}".rstrip() for n in names)
    known = known or "  (none registered)"
    name = names[0] if names else "NAME"
    return (
        "examples:\n"
        f"  spillway experiment {name} --quick --out runs/{name}\n"
        f"  spillway experiment {name} --seed 3\n\n"
        f"known experiments:\n{known}\n\n"
        "--quick runs a shortened version (minutes, fewer points) for a first look; without it\n"
        "the experiment runs at the size the paper used where the machine allows."
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``spillway`` argument parser (policy choices come from ``POLICIES``)."""
    parser = _Parser(
        prog="spillway",
        description="Quality-aware load shedding (SIC) for Spark Structured Streaming.",
        epilog=_MAIN_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"spillway {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    policies = _registry("spillway.policies", "POLICIES")
    run = sub.add_parser(
        "run",
        help="run a node under overload with a live view, then write its report",
        description="Run a spillway node on Spark under overload, show it live, write a report.",
        epilog=_RUN_EPILOG,
    )
    run.add_argument(
        "--policy",
        choices=sorted(policies) if policies else None,
        help=f"what to shed (default {DEFAULT_POLICY}, or the config file's)",
    )
    run.add_argument(
        "--duration",
        type=_positive_float,
        default=DEFAULT_DURATION_S,
        metavar="S",
        help=f"run length in seconds (default {DEFAULT_DURATION_S:g})",
    )
    run.add_argument(
        "--out", type=Path, metavar="DIR", help="report folder (default runs/run-<UTC time>)"
    )
    _overwrite_option(run)
    run.add_argument(
        "--config",
        type=Path,
        metavar="FILE.toml",
        help="node config with your own queries, feeds and rates (see spillway/examples/node.toml)",
    )
    run.add_argument("--seed", type=_seed, help="seed of feeds and policy (default 0)")
    run.add_argument(
        "--workload",
        choices=WORKLOADS,
        help="built-in queries without --config: themis (THEMIS Table 1 mix) or grouped (CoD's "
        "grouped means over the taxi and tasks feeds); default grouped for --policy cod, "
        "else themis",
    )
    run.add_argument(
        "--overload",
        type=_positive_float,
        metavar="X",
        help=f"scale rates to X times the measured capacity (default {DEFAULT_OVERLOAD:g}; "
        "with --config, the file's setting)",
    )
    run.add_argument(
        "--master", help=f"Spark master URL (default {DEFAULT_MASTER}, or the config file's)"
    )
    run.add_argument(
        "--no-live",
        action="store_true",
        help="plain periodic lines instead of the in-place view (automatic when not a terminal)",
    )
    run.add_argument(
        "--no-exact",
        action="store_true",
        help="skip the after-run exact answers (the keep-all batch job over the same input "
        "that gives every query's error beside its SIC)",
    )
    run.add_argument(
        "--exact-rows",
        type=_positive_float,
        default=DEFAULT_BUDGET_ROWS,
        metavar="N",
        help="tuples the after-run exact job re-reads at most (default "
        f"{DEFAULT_BUDGET_ROWS:,.0f}); a longer run's input is sampled in evenly spaced spans",
    )
    run.add_argument(
        "--ui",
        action="store_true",
        help="serve a live web dashboard (on 127.0.0.1; the URL is printed)",
    )
    run.add_argument(
        "--ui-port",
        type=_port,
        metavar="PORT",
        help="the dashboard's port (implies --ui; default 0: a free port)",
    )
    run.add_argument(
        "--ui-host",
        metavar="ADDR",
        help="serve the dashboard on this address instead of 127.0.0.1 (implies --ui; the "
        "dashboard has no login: anyone who can reach ADDR sees the run)",
    )
    run.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: a free port)",
    )
    run.add_argument(
        "--metrics-host",
        metavar="ADDR",
        help="serve the metrics on this address instead of 127.0.0.1",
    )
    run.add_argument(
        "--verbose",
        action="store_true",
        help="show all of Spark's console output (by default its start-up noise and warnings "
        "go only to spark.log in the report folder; errors are always shown)",
    )

    exp = sub.add_parser(
        "experiment",
        help="reproduce one of the papers' experiments",
        description="Run a registered experiment and write its report folder.",
        epilog=_experiment_epilog(),
    )
    exp.add_argument("name", metavar="NAME", help="experiment name (listed below)")
    exp.add_argument("--quick", action="store_true", help="a shortened run for a first look")
    exp.add_argument("--seed", type=_seed, default=0, help="seed (default 0)")
    exp.add_argument(
        "--out", type=Path, metavar="DIR", help="report folder (default runs/<NAME>-<UTC time>)"
    )
    _overwrite_option(exp)

    bench = sub.add_parser(
        "bench",
        help="measure the shedder's overheads",
        description="Benchmark spillway's decision path and write a report folder.",
        epilog=BENCH_EPILOG,
    )
    bench.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    bench.add_argument("--seed", type=_seed, default=0, help="seed (default 0)")
    bench.add_argument(
        "--only",
        action="append",
        choices=list(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable; one of {', '.join(BENCHMARKS)})",
    )
    bench.add_argument(
        "--out", type=Path, metavar="DIR", help="report folder (default runs/bench-<UTC time>)"
    )
    _overwrite_option(bench)
    _overwrite_option(add_simulate_parser(sub, positive=_positive_float, seed=_seed))
    add_kafka_commands(sub)  # kafka up|down|status|topics|fetch, produce: spillway/kafka/cli.py
    add_coordinator_command(sub)  # coordinator FED.toml: spillway/federation/command.py
    add_federation_command(sub)  # federation up|node FED.toml: spillway/federation/up.py
    return parser


def _dead_letter_counts(node: Any) -> dict[str, dict[str, int]] | None:
    """Per query reading a log, its records set aside (None for a node without them)."""
    dead = getattr(node, "dead_letters", None)
    return dead.counts() if dead is not None and hasattr(dead, "counts") else None


def _log_lag(node: Any) -> dict[str, dict[str, int]] | None:
    """Per query reading a log, its consumer lag per partition now (None when the node has
    no controller or the log cannot be read any more)."""
    try:
        ctl = getattr(node, "controller", None)
        return dict(ctl.log_lag()) if ctl is not None and hasattr(ctl, "log_lag") else None
    except SpillwayError:  # not started, or the broker is gone
        return None


def _overwrite_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace what the --out folder holds (a non-empty folder is refused without it)",
    )


# --------------------------------------------------------------------------- run
def _resolve_feed_paths(config: NodeConfig, base: Path) -> NodeConfig:
    """Relative paths in ``feed_options`` (keys ending in ``path``, e.g. a replay's ``path`` and
    ``rejects_path``) are taken relative to the config file's folder."""
    queries = []
    for q in config.queries:
        opts = {
            k: str((base / v).resolve())
            if k.endswith("path") and isinstance(v, str) and v and not Path(v).is_absolute()
            else v
            for k, v in q.feed_options.items()
        }
        queries.append(dataclasses.replace(q, feed_options=opts))
    return dataclasses.replace(config, queries=tuple(queries))


def node_config_from_args(args: argparse.Namespace) -> NodeConfig:
    """The node config of ``spillway run``: the file's (or the default mix) plus CLI overrides."""
    if args.config is not None:
        if args.workload is not None:
            raise UsageError("--workload picks built-in queries; it cannot be used with --config")
        cfg = load_config(
            args.config,
            policy=args.policy,
            seed=args.seed,
            overload=args.overload,
            master=args.master,
        )
        cfg = _resolve_feed_paths(cfg, Path(args.config).parent)
    else:
        cfg = default_node_config(
            policy=args.policy if args.policy is not None else DEFAULT_POLICY,
            seed=args.seed if args.seed is not None else 0,
            overload=args.overload if args.overload is not None else DEFAULT_OVERLOAD,
            master=args.master if args.master is not None else DEFAULT_MASTER,
            workload=args.workload,
        )
    check_policy(cfg.policy)
    cfg.check_feeds()  # every feed, profile and file checked before Spark starts
    return cfg


def _out_dir(path: Path | None, default_name: str, overwrite: bool = False) -> Path:
    """The report folder, created; a non-empty one is refused unless ``overwrite`` (then its
    contents are removed, so no file of an earlier run stays beside the new ones)."""
    out = path if path is not None else Path("runs") / default_name
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; pass a folder for the report")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"--out {str(out)!r} is not empty (it holds an earlier report); pass "
                "--overwrite to replace it, or choose another folder"
            )
        for child in out.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"--out {str(out)!r}: cannot create the report folder ({e.strerror or e}); "
            "pass a writable folder"
        ) from None
    return out


def _remove_if_empty(folder: Path) -> None:
    """Leave no empty report folder behind a run that failed before writing anything."""
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds on an empty folder


def _stop_quietly(node: RunnableNode) -> None:
    with contextlib.suppress(SpillwayError):
        node.stop()


def _banner(cfg: NodeConfig, duration_s: float) -> str:
    if cfg.overload is not None:
        load = (
            f"first measuring its capacity (at least {cfg.calibrate_s:g} s, progress below), "
            f"then {duration_s:g} s at {cfg.overload:g}x it"
        )
    else:
        load = f"{duration_s:g} s at the configured rates"
    return (
        f"spillway: {len(cfg.queries)} queries, policy {cfg.policy}, master {cfg.master}: "
        f"{load}; Ctrl-C stops early and still writes the report"
    )


def _what_ran(node: RunnableNode) -> tuple[list[IntervalRecord], NodeSnapshot, Any]:
    """The node's history, snapshot and results; empty ones when it never got past its start
    (a failure or Ctrl-C while it measured its capacity)."""
    try:
        return node.history(), node.snapshot(), node.results()
    except SpillwayError:
        return (
            [],
            NodeSnapshot(
                t=0.0,
                capacity_tuples_per_s=math.nan,
                processed_tuples_per_s=math.nan,
                jain=math.nan,
            ),
            None,
        )


def _classes(node: RunnableNode, steady_s: float) -> dict[str, Any] | None:
    """The priority classes' summary (``dilos`` policy), latencies from ``steady_s`` into the
    run on (one STW, as the queries' p95), or None without classes."""
    try:
        cc = getattr(getattr(node, "controller", None), "class_control", None)
    except SpillwayError:
        return None  # it never started
    return None if cc is None else dict(cc.summary(steady_s=steady_s))


def watch_options(args: argparse.Namespace, out: Path) -> WatchOptions:
    """How ``spillway run`` shows its node (:mod:`spillway.watch`), from its options."""
    ui = bool(args.ui or args.ui_port is not None or args.ui_host is not None)
    return WatchOptions(
        live=False if args.no_live else None,
        ui=ui,
        ui_host=args.ui_host or LOOPBACK,
        ui_port=args.ui_port or 0,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host or LOOPBACK,
        spark_log=out / SPARK_LOG,
        verbose=args.verbose,
    )


def cmd_run(args: argparse.Namespace, node_factory: NodeFactory) -> int:
    """``spillway run``: start the node, show it, stop it, write the report, print its path.

    Returns :data:`EXIT_OK`, :data:`EXIT_INTERRUPTED` (Ctrl-C) or :data:`EXIT_FAILED` (the run
    failed: the report says where); configuration errors (a busy port too) raise before
    anything starts.
    """
    cfg = node_config_from_args(args)
    out = _out_dir(args.out, f"run-{_utc_stamp()}", overwrite=args.overwrite)
    watch = RunWatch(cfg, watch_options(args, out), duration_s=args.duration)
    try:
        watch.__enter__()
    except SpillwayError:
        _remove_if_empty(out)
        raise
    try:
        return _run_watched(args, cfg, out, watch, node_factory)
    finally:
        watch.__exit__(None, None, None)


def _run_watched(
    args: argparse.Namespace,
    cfg: NodeConfig,
    out: Path,
    watch: RunWatch,
    node_factory: NodeFactory,
) -> int:
    from spillway.run_exact import ExactOutcome, ExactStep
    from spillway.run_report import write_run_report

    watch.note(_banner(cfg, args.duration))
    for line in watch.addresses():
        watch.note(line)
    interrupted = False
    failed: RunFailedError | None = None
    step = None if args.no_exact else ExactStep(budget_rows=args.exact_rows)
    try:
        node = node_factory(cfg)
    except SpillwayError:
        _remove_if_empty(out)
        raise
    watch.attach(node)
    try:
        node.run(args.duration, on_tick=watch.tick, tick_s=TICK_S, before_stop=step)
    except KeyboardInterrupt:
        interrupted = True
        watch.note("spillway: interrupted, stopping the node and writing the report of what ran")
        _stop_quietly(node)
    except RunFailedError as e:
        failed = e
        _stop_quietly(node)
    except SpillwayError:
        _stop_quietly(node)
        _remove_if_empty(out)
        raise
    history, snapshot, results = _what_ran(node)
    if step is not None and step.snapshot is not None:
        snapshot = step.snapshot  # when the streaming stopped, not after the exact job
    if step is None:
        exact = ExactOutcome.skipped("--no-exact was given")
    elif step.outcome is None:
        exact = ExactOutcome.skipped("the run did not finish (interrupted or failed)")
    else:
        exact = step.outcome
    failure = getattr(node, "failure", None)
    if failed is not None and failure is None:
        failure = {"plan": None, "phase": "start", "after_batch": None, "error": str(failed)}
    error = " ".join(str(failed).split()) if failed is not None else None
    watch.finished(snapshot if history else None, error=error)
    report = write_run_report(
        out,
        config=cfg,
        history=history,
        snapshot=snapshot,
        results=results,
        duration_s=args.duration,
        interrupted=interrupted,
        failure=failure if failed is not None else None,
        calibration=getattr(node, "calibration", None),
        feeds_end_s=getattr(node, "feeds_end_s", None),
        exact=exact,
        dead_letters=_dead_letter_counts(node),
        log_lag=_log_lag(node),
        serving_cpu_s=watch.serving_cpu_s(),
        classes=_classes(node, cfg.stw_s),
    )
    watch.finished(snapshot if history else None, report=str(report), error=error)
    print(report)
    if failed is not None:
        print("spillway: error: " + str(error), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


# --------------------------------------------------------------------------- experiment
def cmd_experiment(args: argparse.Namespace) -> int:
    """``spillway experiment NAME``: run the module ``EXPERIMENTS[NAME]`` and print its report.

    The module contract (``spillway.experiments``): ``config = make_config(quick=, seed=)``,
    then ``run(config, out_dir)`` writes summary.json, CSV, plots and report.md into ``out_dir``.
    Prints every check's verdict (``PASS``/``FAIL``/``n/a`` and why), then the report's path.
    A ``FAIL`` is a finding of a completed run, not an error: the exit code stays 0.
    """
    module = _lookup("experiment", args.name, _registry("spillway.experiments", "EXPERIMENTS"))
    config = module.make_config(quick=args.quick, seed=args.seed)
    out = _out_dir(args.out, f"{args.name}-{_utc_stamp()}", overwrite=args.overwrite)
    with to_stream(sys.stderr):
        summary = module.run(config, out)
    _print_checks(summary)
    report = out / "report.md"
    print(report if report.exists() else out)
    return EXIT_OK


def _print_checks(summary: Any) -> None:
    """Print every check's verdict and the count line (a FAIL is a finding: exit code 0)."""
    from spillway.experiments.checks import console_lines, from_dicts

    checks = from_dicts(summary.get("checks") if isinstance(summary, Mapping) else None)
    if checks:
        print("\n".join(console_lines(checks)))


# --------------------------------------------------------------------------- bench
def cmd_bench(args: argparse.Namespace) -> int:
    """``spillway bench``: run the selected benchmarks into the report folder, print every
    check's verdict and the report's path (:func:`spillway.bench.command.run_benchmarks` does
    the work; a FAIL is a finding, the exit code stays 0)."""
    out = _out_dir(args.out, f"bench-{_utc_stamp()}", overwrite=args.overwrite)
    with to_stream(sys.stderr):
        path = run_benchmarks(out, names=args.only, quick=args.quick, seed=args.seed)
    _print_checks(json.loads((out / "summary.json").read_text()))
    print(path)
    return EXIT_OK


# --------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None, *, node_factory: NodeFactory | None = None) -> int:
    """Run the ``spillway`` command line; returns the exit code.

    Parameters
    ----------
    argv : arguments without the program name (default ``sys.argv[1:]``).
    node_factory : builds the node ``spillway run`` drives (default :func:`spark_node`); tests
        pass a replaying double.
    """
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:  # --help and --version
            return int(e.code or 0) if not isinstance(e.code, str) else EXIT_ERROR
        if args.command == "run":
            return cmd_run(args, node_factory or spark_node)
        if args.command == "experiment":
            return cmd_experiment(args)
        if args.command == "simulate":
            out = _out_dir(args.out, f"simulate-{_utc_stamp()}", overwrite=args.overwrite)
            print(cmd_simulate(args, out))
            return EXIT_OK
        if getattr(args, "handler", None) is not None:  # commands registered with a handler
            return int(args.handler(args))
        return cmd_bench(args)
    except RunFailedError as e:
        print("spillway: error: " + " ".join(str(e).split()), file=sys.stderr)
        return EXIT_FAILED
    except SpillwayError as e:
        print("spillway: error: " + " ".join(str(e).split()), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("spillway: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
