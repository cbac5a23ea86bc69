"""What ``spillway bench`` runs: the benchmark registry and the report folder it writes.

Each benchmark is a function ``fn(out_dir, *, quick, seed) -> BenchResult`` registered by name
in :data:`BENCHMARKS`. :func:`run_benchmarks` runs the selected ones in registry order and
writes ``summary.json`` (each benchmark's summary, plus the headline figures of
:func:`headline_keys` at the top level), one ``<name>.csv`` per benchmark and ``report.md``.
The command line (:mod:`spillway.cli`) only parses options, makes the folder and calls it.

- ``decision``: median time of one shedding decision of every registered policy, by backlog
  size (:mod:`spillway.bench.decision`; THEMIS §7.6). Pure Python, no Spark.
- ``kafka``: spillway reading a Kafka topic against Spark's own Kafka source
  (:mod:`spillway.bench.kafka_bench`). Starts a broker and Spark.
- ``spark``: source throughput against Spark's ``rate`` source, and p95 latency and
  utilisation under overload (:mod:`spillway.bench.spark_bench`). Starts Spark.

Examples
--------
>>> list(BENCHMARKS)
['decision', 'spark', 'kafka']
>>> row = {"queries": 10, "sources": 20, "median_ms": {"random": 0.08}, "fair_over_random": 1.1}
>>> headline_keys({"decision": BenchResult(summary={"results": [row]}, rows=[], markdown="")})
{'decision_ms': {'10x20': {'random': 0.08}}, 'fair_over_random': {'10x20': 1.1}}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spillway.errors import UnknownNameError
from spillway.progress import report

if TYPE_CHECKING:
    from spillway.experiments.checks import Check


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """What one benchmark hands back to ``spillway bench``.

    ``summary`` goes under the benchmark's name in summary.json, ``rows`` into ``<name>.csv``,
    ``markdown`` (which may embed PNGs the benchmark wrote into the folder) into report.md, and
    ``checks`` (its goals' verdicts, :mod:`spillway.experiments.checks`) into summary.json's
    ``checks`` list and the report's Checks section.

    >>> BenchResult(summary={"n": 1}, rows=[{"n": 1}], markdown="one row").rows
    [{'n': 1}]
    """

    summary: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]
    markdown: str
    checks: Sequence[Check] = ()


#: Backlog shapes (queries, sources per query) timed by the decision benchmark.
DECISION_SIZES = ((10, 20), (100, 20), (1000, 20))
DECISION_SIZES_QUICK = ((10, 20), (100, 20))

#: The help epilog of ``spillway bench``.
EPILOG = (
    "examples:\n"
    "  spillway bench --quick --out runs/bench\n"
    "  spillway bench --only decision\n\n"
    "benchmarks:\n"
    "  decision  median time of one shedding decision of every registered policy, by\n"
    "            backlog size (spillway.bench.decision; THEMIS §7.6)\n"
    "  spark     on Spark: rows/s of the spillway source vs the rate source, and p95\n"
    "            latency and utilisation at 3x overload with and without shedding\n"
    "            (spillway.bench.spark_bench; several minutes)\n"
    "  kafka     rows/s of spillway reading a Kafka topic (nothing shed) over Spark's own\n"
    "            Kafka source, same query, same log (kafka_ratio, kafka_baseline;\n"
    "            spillway.bench.kafka_bench; starts its own broker on 127.0.0.1)\n"
    "Writes summary.json, one CSV per benchmark and report.md; prints the report path."
)


def bench_decision(out: Path, *, quick: bool, seed: int) -> BenchResult:
    """Median time of one shedding decision of every registered policy, by backlog size.

    Calls :func:`spillway.bench.decision.measure_decision_ms` (THEMIS §7.6 compares the fair
    and the random shedder the same way) and plots milliseconds against lanes per policy.
    """
    from spillway.bench.decision import decision_checks, measure_decision_ms
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
    return BenchResult(summary=measured, rows=rows, markdown=text, checks=decision_checks(measured))


def bench_spark(out: Path, *, quick: bool, seed: int) -> BenchResult:
    """The Spark benchmarks: source rows/s vs Spark's ``rate`` source, and p95 latency and
    utilisation at 3x overload with balance-sic vs no shedding (:mod:`spillway.bench.spark_bench`).
    """
    from spillway.bench.spark_bench import figure_rows, report_markdown, spark_checks
    from spillway.bench.spark_bench import run as run_spark_bench

    summary = run_spark_bench(quick, out, seed)
    return BenchResult(
        summary=summary,
        rows=figure_rows(summary),
        markdown=report_markdown(summary),
        checks=spark_checks(summary),
    )


def bench_kafka(out: Path, *, quick: bool, seed: int) -> BenchResult:
    """spillway reading a Kafka topic (nothing shed) against Spark's own Kafka source: the same
    COUNT query over the same pre-filled log, side by side (:mod:`spillway.bench.kafka_bench`)."""
    from spillway.bench.kafka_bench import kafka_checks, report_markdown
    from spillway.bench.kafka_bench import run as run_kafka_bench

    summary = run_kafka_bench(quick, out, seed)
    rows = [
        {"source": name, **{k: v for k, v in summary[name].items()}}
        for name in ("spillway", "spark")
    ]
    return BenchResult(
        summary=summary, rows=rows, markdown=report_markdown(summary), checks=kafka_checks(summary)
    )


def headline_keys(done: Mapping[str, BenchResult]) -> dict[str, Any]:
    """The headline figures, lifted to the top level of ``summary.json``.

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
    if "kafka" in done:
        from spillway.bench.kafka_bench import SUMMARY_KEYS as KAFKA_KEYS

        top.update({k: done["kafka"].summary.get(k) for k in KAFKA_KEYS})
    return top


#: The benchmarks ``spillway bench`` runs, in this order: name -> function called as
#: ``fn(out_dir, quick=bool, seed=int) -> BenchResult``. A new benchmark registers here.
BENCHMARKS: dict[str, Callable[..., BenchResult]] = {
    "decision": bench_decision,
    "spark": bench_spark,
    "kafka": bench_kafka,
}


def run_benchmarks(
    out: Path, *, names: Iterable[str] | None = None, quick: bool, seed: int
) -> Path:
    """Run benchmarks into the existing folder ``out``; write their tables and a report.

    summary.json holds every benchmark's summary, the headline figures, ``checks`` (each
    benchmark's goals as ``{name, verdict, why}``) and ``verdicts``; every float is rounded to
    4 significant digits.

    Parameters
    ----------
    out : Path
        Report folder (must exist).
    names : iterable of str, optional
        Benchmarks to run (duplicates run once), in registry order of first mention; default
        every one in :data:`BENCHMARKS`.
    quick : bool
        Fewer sizes and repeats.
    seed : int
        Seed of every benchmark.

    Returns
    -------
    Path
        The ``report.md`` written.

    Raises
    ------
    UnknownNameError
        When a name is not in :data:`BENCHMARKS` (checked before anything runs).

    Examples
    --------
    >>> run_benchmarks(Path("."), names=["decison"], quick=True, seed=0)
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: unknown benchmark 'decison'; known: decision, spark, kafka
    """
    from spillway.experiments.checks import as_dicts, counts, markdown
    from spillway.reporting import write_csv, write_report, write_summary

    selected = list(dict.fromkeys(BENCHMARKS if names is None else names))
    for n in selected:
        if n not in BENCHMARKS:
            known = ", ".join(BENCHMARKS)
            raise UnknownNameError(f"unknown benchmark {n!r}; known: {known}")
    done = {}
    for i, n in enumerate(selected):
        report(f"benchmark {n} ({i + 1} of {len(selected)}) started")
        done[n] = BENCHMARKS[n](out, quick=quick, seed=seed)
        report(f"benchmark {n} done")
    for n, res in done.items():
        write_csv(out / f"{n}.csv", res.rows)
    checks = [c for res in done.values() for c in res.checks]
    write_summary(
        out,
        {
            "quick": quick,
            "seed": seed,
            "benchmarks": {n: res.summary for n, res in done.items()},
            **headline_keys(done),
            "checks": as_dicts(checks),
            "verdicts": counts(checks),
        },
        significant=4,
    )
    sections = [("Checks", markdown(checks))]
    sections += [(n, f"Table: `{n}.csv`.\n\n{res.markdown}") for n, res in done.items()]
    return write_report(out, "spillway benchmarks" + " (quick)" * quick, sections)
