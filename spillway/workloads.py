"""The built-in workloads: the node ``spillway run`` hosts when no ``--config`` is given.

Two query mixes, picked by name (:data:`WORKLOADS`):

- ``themis``: the THEMIS query mix (§7, Table 1): AVG, MAX and COUNT over each synthetic feed
  and AVG-all, TOP-5 and COV over the data-centre ``cluster`` feed (15 queries).
- ``grouped``: CoD's grouped means (CoD §VII) over the ``taxi`` and ``tasks`` feeds, for the
  policies that shed per group (:data:`GROUPED_POLICIES`).

:func:`default_node_config` builds the :class:`~spillway.config.NodeConfig` of either, with the
defaults the command line shows in its help (:data:`DEFAULT_POLICY`, :data:`DEFAULT_OVERLOAD`,
:data:`DEFAULT_MASTER`, :data:`DEFAULT_TRIGGER_S`). Nothing here starts Spark.

Examples
--------
>>> cfg = default_node_config(policy="cod", seed=3)
>>> [(q.feed, q.sources, q.rate) for q in cfg.queries], cfg.trigger_s
([('taxi', 2, 2000.0), ('tasks', 2, 1000.0)], 2.0)
>>> cfg.policy, cfg.seed, cfg.overload, cfg.master
('cod', 3, 3.0, 'local[2]')
"""

from __future__ import annotations

from typing import Any

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import UnknownNameError

DEFAULT_POLICY = "balance-sic"
DEFAULT_OVERLOAD = 3.0
DEFAULT_MASTER = "local[2]"
#: Trigger (= shedding) interval of the default node. The node runs one Spark plan for all its
#: queries, and on ``local[2]`` that plan's fixed cost per micro-batch (six query kinds over 15
#: queries: about a second, more when other work shares the cores) would leave a 1 s interval
#: almost no budget for tuples. With 2 s the latency bound is 3 · 2 + 1 = 7 s.
DEFAULT_TRIGGER_S = 2.0

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


#: CoD's grouped workloads: name -> (feed, feed settings, what it stands in for). Route and
#: class counts are scaled so that one window's keep budget at b = 0.98 still holds every
#: group (the paper's windows hold 46K-320K tuples; these hold thousands to tens of thousands).
#: Used by the ``grouped`` workload and by ``spillway experiment cod-latency``.
GROUPED_FEEDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "taxi": (
        "taxi",
        {"n_routes": 300, "pool_routes": 20, "epoch_s": 10.0},
        "mean fare per route (DEBS 2015 taxi rides stand-in)",
    ),
    "tasks": (
        "tasks",
        {"epoch_s": 10.0},
        "mean CPU request per task class (Google cluster trace stand-in)",
    ),
}


def _grouped_queries() -> list[QuerySpec]:
    return [
        QuerySpec(name=f"group_avg-{name}", kind="group_avg", feed=feed, feed_options=options,
                  sources=2, rate=rate, window_s=DEFAULT_TRIGGER_S)
        for (name, (feed, options, _)), rate in zip(GROUPED_FEEDS.items(), (2000.0, 1000.0),
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
