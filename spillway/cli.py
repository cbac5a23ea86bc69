"""The ``spillway`` command: ``run`` a node, reproduce an ``experiment``, ``bench`` the shedder.

``spillway run`` starts one node (a local Spark application) hosting a mix of the six THEMIS
queries, or the user's own queries from a TOML file, shows a live view while it runs and writes
a report folder (summary.json, CSV, PNG plots, report.md) whose path is the last line printed.

Every :class:`~spillway.errors.SpillwayError` (bad config, unknown name, unreadable file) and
every usage error becomes one line ``spillway: error: <message>`` on standard error and exit
code 2, without a traceback. Ctrl-C stops the node, writes the report of what ran, exits 130.

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
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from spillway import __version__
from spillway.config import NodeConfig, QuerySpec, load_config
from spillway.errors import ConfigError, SpillwayError, UnknownNameError
from spillway.live import LiveWriter
from spillway.status import IntervalRecord, NodeSnapshot

#: Exit codes: 0 success, 2 usage or input error, 130 interrupted (Ctrl-C).
EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 2, 130

DEFAULT_POLICY = "balance-sic"
DEFAULT_DURATION_S = 120.0
DEFAULT_OVERLOAD = 3.0
DEFAULT_MASTER = "local[2]"
#: Trigger (= shedding) interval of the default node. The node runs one Spark plan for all its
#: queries, and on ``local[2]`` that plan's fixed cost per micro-batch (six query kinds over 15
#: queries: about a second, more when other work shares the cores) would leave a 1 s interval
#: almost no budget for tuples. With 2 s the latency bound is 3 · 2 + 1 = 7 s.
DEFAULT_TRIGGER_S = 2.0
#: Spark's log level during ``spillway run``: warnings would garble the live view.
RUN_LOG_LEVEL = "ERROR"
TICK_S = 1.0


class RunnableNode(Protocol):
    """What ``spillway run`` needs from a node (``spillway.spark.node.Node`` provides it)."""

    def run(
        self,
        duration_s: float,
        on_tick: Callable[[NodeSnapshot], None] | None = None,
        tick_s: float = 1.0,
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
    with Spark's log level at :data:`RUN_LOG_LEVEL`."""
    from spillway.spark.node import Node

    node: RunnableNode = Node(config, log_level=RUN_LOG_LEVEL)
    return node


# --------------------------------------------------------------------------- default workload
#: Synthetic feeds of THEMIS §7 (mean 50) that the single-source aggregates read.
SYNTHETIC_FEEDS = ("gaussian", "uniform", "exponential", "mixed")

#: The built-in workloads of ``spillway run`` (without ``--config``).
WORKLOADS = ("themis", "grouped")

#: Policies whose default workload is ``grouped`` (they admit per group: CoD).
GROUPED_POLICIES = ("cod",)


def default_workload(policy: str | None) -> str:
    """The workload ``spillway run`` picks when none is asked: ``grouped`` for a policy that
    sheds per group (CoD), else the THEMIS mix.

    >>> default_workload("cod"), default_workload("balance-sic"), default_workload(None)
    ('grouped', 'themis', 'themis')
    """
    return "grouped" if policy in GROUPED_POLICIES else "themis"


def _themis_queries() -> list[QuerySpec]:
    queries = [
        QuerySpec(name=f"{kind}-{feed}", kind=kind, feed=feed, rate=400.0)
        for kind in ("avg", "max", "count")
        for feed in SYNTHETIC_FEEDS
    ]
    return queries + [
        QuerySpec(name="avg_all-cluster", kind="avg_all", feed="cluster", rate=400.0),
        QuerySpec(name="top5-cluster", kind="top5", feed="cluster", rate=20.0),
        QuerySpec(name="cov-cluster", kind="cov", feed="cluster", rate=400.0),
    ]


def _grouped_queries() -> list[QuerySpec]:
    from spillway.experiments.cod_latency import WORKLOADS as GROUPED

    return [
        QuerySpec(name=f"group_avg-{name}", kind="group_avg", feed=feed, feed_options=options,
                  sources=2, rate=rate, window_s=DEFAULT_TRIGGER_S)
        for (name, (feed, options, _)), rate in zip(GROUPED.items(), (2000.0, 1000.0),
                                                     strict=True)
    ]  # fmt: skip


def default_node_config(
    *,
    policy: str = DEFAULT_POLICY,
    seed: int = 0,
    overload: float | None = DEFAULT_OVERLOAD,
    master: str = DEFAULT_MASTER,
    workload: str | None = None,
) -> NodeConfig:
    """The node ``spillway run`` hosts without ``--config``.

    ``workload="themis"``: the THEMIS query mix (§7, Table 1): AVG, MAX and COUNT over each
    synthetic feed (gaussian, uniform, exponential, mixed; one source at 400 tuples/s each)
    and, over the data-centre ``cluster`` feed, AVG-all (10 sources at 400 t/s), TOP-5 (20
    sources at 20 t/s, as THEMIS Fig. 7) and COV (2 sources at 400 t/s).
    ``workload="grouped"``: CoD's grouped aggregates: the mean fare per route of the ``taxi``
    feed (2 sources at 2,000 t/s) and the mean CPU request per task class of the ``tasks``
    feed (2 sources at 1,000 t/s), with drifting group popularity (CoD §VII), over tumbling
    windows of one trigger interval, so each shedding decision sees exactly one window's
    group frequencies (CoD's concept).
    Default (None): :func:`default_workload` of the policy. Both run on a
    :data:`DEFAULT_TRIGGER_S` trigger; with ``overload`` set the node first measures its
    capacity, then scales every rate so the total arrival rate is ``overload`` times it.

    >>> [q.name for q in default_node_config().queries][-3:]
    ['avg_all-cluster', 'top5-cluster', 'cov-cluster']
    >>> [q.kind for q in default_node_config(policy="cod").queries]
    ['group_avg', 'group_avg']
    >>> default_node_config(workload="tpch")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: workload must be one of themis, grouped; got 'tpch'
    """
    workload = default_workload(policy) if workload is None else workload
    if workload not in WORKLOADS:
        raise UnknownNameError(f"workload must be one of {', '.join(WORKLOADS)}; got {workload!r}")
    queries = _themis_queries() if workload == "themis" else _grouped_queries()
    return NodeConfig(
        queries=tuple(queries),
        policy=policy,
        seed=seed,
        overload=overload,
        master=master,
        trigger_s=DEFAULT_TRIGGER_S,
    )


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
    """An ArgumentParser whose errors are one-line :class:`UsageError` s (exit 2 in main)."""

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


def _utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


_MAIN_EPILOG = """\
examples:
  spillway run                                   # the THEMIS query mix at 3x overload, 120 s
  spillway run --policy random --duration 60 --out runs/random
  spillway run --config spillway/examples/node.toml   # your own queries, feeds and rates
  spillway experiment --help                     # lists the experiments
  spillway bench --quick --out runs/bench

Each command writes a report folder (summary.json, CSV, PNG plots, report.md) and prints its
path last. Errors are one line on stderr with exit code 2; 'spillway COMMAND --help' for more.
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

The live view shows, per query: arrival rate, kept share, result SIC and p95 latency against
its target (MISS when missed); for the node: estimated capacity, processed rate, utilisation,
Jain's index. Options given on the command line override the config file. Ctrl-C stops the
node early and still writes the report of what ran.
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


def _bench_epilog() -> str:
    return (
        "examples:\n"
        "  spillway bench --quick --out runs/bench\n"
        "  spillway bench --only decision\n\n"
        "benchmarks:\n"
        "  decision  median time of one shedding decision of every registered policy, by\n"
        "            backlog size (spillway.bench.decision; THEMIS §7.6)\n"
        "Writes summary.json, one CSV per benchmark and report.md; prints the report path."
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``spillway`` argument parser (policy choices come from ``POLICIES``)."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="spillway",
        description="Quality-aware load shedding (SIC) for Spark Structured Streaming.",
        epilog=_MAIN_EPILOG,
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"spillway {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    policies = _registry("spillway.policies", "POLICIES")
    run = sub.add_parser(
        "run",
        help="run a node under overload with a live view, then write its report",
        description="Run a spillway node on Spark under overload, show it live, write a report.",
        epilog=_RUN_EPILOG,
        formatter_class=fmt,
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

    exp = sub.add_parser(
        "experiment",
        help="reproduce one of the papers' experiments",
        description="Run a registered experiment and write its report folder.",
        epilog=_experiment_epilog(),
        formatter_class=fmt,
    )
    exp.add_argument("name", metavar="NAME", help="experiment name (listed below)")
    exp.add_argument("--quick", action="store_true", help="a shortened run for a first look")
    exp.add_argument("--seed", type=_seed, default=0, help="seed (default 0)")
    exp.add_argument(
        "--out", type=Path, metavar="DIR", help="report folder (default runs/<NAME>-<UTC time>)"
    )

    bench = sub.add_parser(
        "bench",
        help="measure the shedder's overheads",
        description="Benchmark spillway's decision path and write a report folder.",
        epilog=_bench_epilog(),
        formatter_class=fmt,
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
    return parser


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
    return cfg


def _out_dir(path: Path | None, default_name: str) -> Path:
    out = path if path is not None else Path("runs") / default_name
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


def cmd_run(args: argparse.Namespace, node_factory: NodeFactory) -> int:
    """``spillway run``: start the node, show it, stop it, write the report, print its path."""
    from spillway.run_report import write_run_report

    cfg = node_config_from_args(args)
    out = _out_dir(args.out, f"run-{_utc_stamp()}")
    view = LiveWriter(sys.stdout, duration_s=args.duration, live=False if args.no_live else None)
    load = (
        f"first {cfg.calibrate_s:g} s measuring capacity, then {args.duration:g} s at "
        f"{cfg.overload:g}x it"
        if cfg.overload is not None
        else f"{args.duration:g} s at the configured rates"
    )
    view.note(
        f"spillway: {len(cfg.queries)} queries, policy {cfg.policy}, master {cfg.master}: "
        f"{load}; Ctrl-C stops early and still writes the report"
    )
    interrupted = False
    try:
        node = node_factory(cfg)
    except SpillwayError:
        _remove_if_empty(out)
        raise
    try:
        node.run(args.duration, on_tick=view.update, tick_s=TICK_S)
    except KeyboardInterrupt:
        interrupted = True
        view.note("spillway: interrupted, stopping the node and writing the report of what ran")
        _stop_quietly(node)
    except SpillwayError:
        _stop_quietly(node)
        _remove_if_empty(out)
        raise
    try:
        history, snapshot, results = node.history(), node.snapshot(), node.results()
    except SpillwayError:
        if not interrupted:
            raise
        _remove_if_empty(out)
        view.note("spillway: interrupted before the run started (while measuring capacity)")
        return EXIT_INTERRUPTED
    report = write_run_report(
        out,
        config=cfg,
        history=history,
        snapshot=snapshot,
        results=results,
        duration_s=args.duration,
        interrupted=interrupted,
    )
    print(report)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


# --------------------------------------------------------------------------- experiment
def cmd_experiment(args: argparse.Namespace) -> int:
    """``spillway experiment NAME``: run the module ``EXPERIMENTS[NAME]`` and print its report.

    The module contract (``spillway.experiments``): ``config = make_config(quick=, seed=)``,
    then ``run(config, out_dir)`` writes summary.json, CSV, plots and report.md into ``out_dir``.
    """
    module = _lookup("experiment", args.name, _registry("spillway.experiments", "EXPERIMENTS"))
    config = module.make_config(quick=args.quick, seed=args.seed)
    out = _out_dir(args.out, f"{args.name}-{_utc_stamp()}")
    module.run(config, out)
    report = out / "report.md"
    print(report if report.exists() else out)
    return EXIT_OK


# --------------------------------------------------------------------------- bench
@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchResult:
    """What one benchmark hands back to ``spillway bench``.

    ``summary`` goes under the benchmark's name in summary.json, ``rows`` into ``<name>.csv``,
    ``markdown`` (which may embed PNGs the benchmark wrote into the folder) into report.md.
    """

    summary: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]
    markdown: str


#: Backlog shapes (queries, sources per query) timed by the decision benchmark.
DECISION_SIZES = ((10, 20), (100, 20), (1000, 20))
DECISION_SIZES_QUICK = ((10, 20), (100, 20))


def bench_decision(out: Path, *, quick: bool, seed: int) -> BenchResult:
    """Median time of one shedding decision of every registered policy, by backlog size.

    Calls :func:`spillway.bench.decision.measure_decision_ms` (THEMIS §7.6 compares the fair
    and the random shedder the same way) and plots milliseconds against lanes per policy.
    """
    from spillway.bench.decision import measure_decision_ms
    from spillway.policies import POLICIES
    from spillway.reporting import line_plot, markdown_table

    measured = measure_decision_ms(
        policies=sorted(POLICIES),
        sizes=DECISION_SIZES_QUICK if quick else DECISION_SIZES,
        repeats=7 if quick else 21,
        seed=seed,
    )
    rows = [
        {
            **{k: r[k] for k in ("queries", "sources", "lanes", "tuples", "capacity")},
            **{f"ms_{p}": ms for p, ms in r["median_ms"].items()},
            "fair_over_random": r["fair_over_random"],
        }
        for r in measured["results"]
    ]
    lanes = [float(r["lanes"]) for r in measured["results"]]
    plot = line_plot(
        out / "decision.png",
        {
            p: (lanes, [r["median_ms"][p] for r in measured["results"]])
            for p in measured["policies"]
        },
        title="Time of one shedding decision (median)",
        xlabel="lanes in the backlog (queries x sources)",
        ylabel="ms per decision",
    )
    text = (
        f"Median of {measured['repeats']} timed `decide` calls per policy and backlog (capacity "
        f"a third of the backlog, seed {seed}); `fair_over_random` is balance-sic over random "
        f"(THEMIS §7.6 reports +11%).\n\n{markdown_table(rows)}\n\n![decision time]({plot.name})"
    )
    return BenchResult(summary=measured, rows=rows, markdown=text)


#: The benchmarks ``spillway bench`` runs, in this order: name -> function called as
#: ``fn(out_dir, quick=bool, seed=int) -> BenchResult``. Extension point: the Spark
#: benchmarks (source throughput, latency under overload) register here the same way.
def bench_spark(out: Path, *, quick: bool, seed: int) -> BenchResult:
    """The Spark benchmarks: source rows/s vs Spark's ``rate`` source, and p95 latency and
    utilisation at 3x overload with balance-sic vs no shedding (:mod:`spillway.bench.spark_bench`).
    """
    from spillway.bench.spark_bench import figure_rows, report_markdown
    from spillway.bench.spark_bench import run as run_spark_bench

    summary = run_spark_bench(quick, out, seed)
    return BenchResult(
        summary=summary, rows=figure_rows(summary), markdown=report_markdown(summary)
    )


def headline_keys(done: Mapping[str, BenchResult]) -> dict[str, Any]:
    """The figures issue 3 names, lifted to the top level of ``summary.json``.

    ``decision_ms`` maps ``"<queries>x<sources>"`` to the median ms per policy;
    ``fair_over_random`` maps the same keys to balance-sic / random.
    """
    from spillway.bench.spark_bench import SUMMARY_KEYS

    top: dict[str, Any] = {}
    if "decision" in done:
        results = done["decision"].summary["results"]
        size = [f"{r['queries']}x{r['sources']}" for r in results]
        top["decision_ms"] = {k: r["median_ms"] for k, r in zip(size, results, strict=True)}
        top["fair_over_random"] = {
            k: r["fair_over_random"] for k, r in zip(size, results, strict=True)
        }
    if "spark" in done:
        top.update({k: done["spark"].summary.get(k) for k in SUMMARY_KEYS})
    return top


BENCHMARKS: dict[str, Callable[..., BenchResult]] = {
    "decision": bench_decision,
    "spark": bench_spark,
}


def cmd_bench(args: argparse.Namespace) -> int:
    """``spillway bench``: run the selected benchmarks, write their tables and a report."""
    from spillway.reporting import write_csv, write_report, write_summary

    out = _out_dir(args.out, f"bench-{_utc_stamp()}")
    names = list(dict.fromkeys(args.only or BENCHMARKS))
    done = {n: BENCHMARKS[n](out, quick=args.quick, seed=args.seed) for n in names}
    for n, res in done.items():
        write_csv(out / f"{n}.csv", res.rows)
    write_summary(
        out,
        {
            "quick": args.quick,
            "seed": args.seed,
            "benchmarks": {n: res.summary for n, res in done.items()},
            **headline_keys(done),
        },
    )
    sections = [(n, f"Table: `{n}.csv`.\n\n{res.markdown}") for n, res in done.items()]
    print(write_report(out, "spillway benchmarks" + " (quick)" * args.quick, sections))
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
        return cmd_bench(args)
    except SpillwayError as e:
        print("spillway: error: " + " ".join(str(e).split()), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("spillway: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
