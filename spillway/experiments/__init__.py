"""Reproduced experiments: one module per paper figure, looked up by name in :data:`EXPERIMENTS`.

Every experiment is built on one skeleton (:mod:`spillway.experiments.framework`): a frozen
config → ``measure`` (Spark runs, a simulation, numpy over a feed) → ``analyse`` (values,
checks, tables, figures, prose) → one report folder written alike for all. The contract every
registered module keeps (the CLI relies on nothing else):

- a module docstring whose first line says which figure it reproduces, and ``DESCRIPTION``
  (one line, listed by ``spillway experiment --help``);
- a frozen, ``kw_only`` dataclass config class, validated in ``__post_init__`` (raising
  :class:`~spillway.errors.ConfigError` / :class:`~spillway.errors.UnknownNameError`);
- ``make_config(quick: bool = False, seed: int = 0) -> Config``: the full paper-shaped run, or
  with ``quick=True`` a smaller one that finishes in well under 4 minutes on 2 cores; ``seed``
  is the first seed (multi-seed experiments use ``seed, seed + 1, ...``);
- ``EXPERIMENT``: its :class:`~spillway.experiments.framework.Experiment` (name, title, config
  type, ``measure``, ``analyse``), and ``run(config, out_dir) -> dict`` calling
  ``EXPERIMENT.run``. It writes into ``out_dir`` (created if missing) ``summary.json`` (the
  returned dict: ``experiment``, ``title``, ``config``, the measured values under documented
  keys with every float rounded to 4 significant digits, ``checks``: a list of ``{name,
  verdict, why}`` with verdict ``"pass"``, ``"fail"`` or ``"not applicable"``
  (:mod:`spillway.experiments.checks`), ``verdicts``: how many of each, ``measured_s``), one or
  more CSV files with every measured point, PNG plots with labelled axes and legends, and
  ``report.md``: the verdicts, the set-up, the paper's values beside this run's, every check
  with its reason, each plot beside what the paper's figure shows, and honest notes on what
  differs. Every number comes from the run; nothing is hard-coded.

Every check can fail on a realistic run (``tests/experiments`` feeds each one such a run). A
claim that applies to no case of the run, or holds by construction, is reported
``"not applicable"`` with the reason, never ``"pass"``.

The CLI does exactly::

    module = EXPERIMENTS[name]                     # or get_experiment(name)
    config = module.make_config(quick=quick, seed=seed)
    summary = module.run(config, out_dir)          # then prints every check's verdict

A ``"fail"`` verdict is a finding of the run, not an error of the command: ``spillway
experiment`` prints it (``FAIL`` and the reason, and a count line) and exits 0, because the run
completed and its report holds the finding; a non-zero exit would make a finding look like a
crash and stop scripts that run several experiments in a row. It exits non-zero only when the
run cannot complete, with the codes of every ``spillway`` command (1 a run that failed, 2 a
bad name, config or input, 130 Ctrl-C). Scripts that gate on verdicts read ``verdicts`` (or
``checks``) in summary.json.

Registered:

- ``cod-drift`` (:mod:`~spillway.experiments.cod_drift`): CoD Fig. 2, concept distance and
  overlap between consecutive windows of the top-10 query on the taxi feed;
- ``cod-accuracy`` (:mod:`~spillway.experiments.cod_accuracy`): CoD Figs. 9-10, error of
  uniform and cod shedding on the taxi, tasks and packets workloads;
- ``cod-latency`` (:mod:`~spillway.experiments.cod_latency`): CoD Figs. 7-8, window latency and
  rows/s of normal processing, uniform and cod shedding of a grouped query on Spark;
- ``kafka-overload`` (:mod:`~spillway.experiments.kafka_overload`): user queries (the README's
  and a stream-stream join) over three Kafka topics at 3x the measured capacity, each window's
  error against the exact answer beside its SIC, and a replay from the checkpoint;
- ``overload`` (:mod:`~spillway.experiments.overload`): every policy at 3x and 10x overload on
  generated feeds and on Kafka topics produced live, beside plain Spark's Kafka source;
- ``sic-correlation`` (:mod:`~spillway.experiments.sic_correlation`): THEMIS Figs. 6-7 / DISSP
  §6, SIC against result error on Spark with a random shedder as load rises;
- ``single-node-fairness`` (:mod:`~spillway.experiments.single_node_fairness`): THEMIS Fig. 8,
  Jain's index of BALANCE-SIC and random shedding as queries are added;
- ``spark-federation`` (:mod:`~spillway.experiments.spark_federation`): THEMIS Fig. 4's
  situation on 3 Spark nodes (``spillway federation up``), coordinated BALANCE-SIC vs
  uncoordinated vs random under an unequal overload;
- ``stw-validation`` (:mod:`~spillway.experiments.stw_validation`): THEMIS §7, mean SIC of
  underloaded TOP-5 queries with a 10 s and a 100 s source time window;
- ``load-managers`` (:mod:`~spillway.experiments.load_managers`), ``dilos``
  (:mod:`~spillway.experiments.dilos`) and ``crc-sensitivity``
  (:mod:`~spillway.experiments.crc_sensitivity`): Pham §5.3, §6.2 and §6.2.4, load managers
  against a background job, DILoS against its baselines, and DILoS's loss as its capacity
  redistribution cycle changes.

Simulated federations (:mod:`spillway.sim`, no Spark; shared parts in
:mod:`~spillway.experiments._simulated`):

- ``federated-fairness`` (:mod:`~spillway.experiments.federated_fairness`): THEMIS Fig. 10,
  BALANCE-SIC vs random on 18 nodes with 1-6 fragments per query;
- ``shedding-interval`` (:mod:`~spillway.experiments.shedding_interval`): THEMIS Fig. 9;
- ``fragment-mix`` (:mod:`~spillway.experiments.fragment_mix`): THEMIS Fig. 11;
- ``scalability`` (:mod:`~spillway.experiments.scalability`): THEMIS Figs. 12-13;
- ``wan-burst`` (:mod:`~spillway.experiments.wan_burst`): THEMIS Fig. 14;
- ``related-work`` (:mod:`~spillway.experiments.related_work`): THEMIS §7.5, the FIT LP
  (HiGHS) and a log-utility optimum against BALANCE-SIC;
- ``overhead`` (:mod:`~spillway.experiments.overhead`): THEMIS §7.6, decision time;
- ``cost-quality`` (:mod:`~spillway.experiments.cost_quality`): DISSP §6.4, Fig. 6.11.

Examples
--------
>>> sorted(EXPERIMENTS)[:2]
['cod-accuracy', 'cod-drift']
>>> get_experiment("cod-drift").__name__
'spillway.experiments.cod_drift'
>>> get_experiment("fig99")
Traceback (most recent call last):
...
spillway.errors.UnknownNameError: experiment must be one of cod-accuracy, cod-drift, cod-latency, cost-quality, crc-sensitivity, dilos, federated-fairness, fragment-mix, kafka-overload, load-managers, overhead, overload, related-work, scalability, shedding-interval, sic-correlation, single-node-fairness, spark-federation, stw-validation, wan-burst; got 'fig99'
"""

from __future__ import annotations

from types import ModuleType

from spillway.errors import UnknownNameError
from spillway.experiments import (
    cod_accuracy,
    cod_drift,
    cod_latency,
    cost_quality,
    crc_sensitivity,
    dilos,
    federated_fairness,
    fragment_mix,
    kafka_overload,
    load_managers,
    overhead,
    overload,
    related_work,
    scalability,
    shedding_interval,
    sic_correlation,
    single_node_fairness,
    spark_federation,
    stw_validation,
    wan_burst,
)

#: Registry: experiment name → module (see the module docstring for the contract).
EXPERIMENTS: dict[str, ModuleType] = {
    "cod-drift": cod_drift,
    "cod-accuracy": cod_accuracy,
    "cod-latency": cod_latency,
    "kafka-overload": kafka_overload,
    "load-managers": load_managers,
    "dilos": dilos,
    "crc-sensitivity": crc_sensitivity,
    "overload": overload,
    "sic-correlation": sic_correlation,
    "single-node-fairness": single_node_fairness,
    "spark-federation": spark_federation,
    "stw-validation": stw_validation,
    "federated-fairness": federated_fairness,
    "shedding-interval": shedding_interval,
    "fragment-mix": fragment_mix,
    "scalability": scalability,
    "wan-burst": wan_burst,
    "related-work": related_work,
    "overhead": overhead,
    "cost-quality": cost_quality,
}


def get_experiment(name: str) -> ModuleType:
    """The experiment module registered under ``name``.

    Raises
    ------
    UnknownNameError
        ``name`` is not in :data:`EXPERIMENTS`.
    """
    if not isinstance(name, str) or name not in EXPERIMENTS:
        raise UnknownNameError(
            f"experiment must be one of {', '.join(sorted(EXPERIMENTS))}; got {name!r}"
        )
    return EXPERIMENTS[name]


__all__ = ["EXPERIMENTS", "get_experiment"]
