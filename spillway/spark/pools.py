"""Spark FAIR scheduler pools for priority classes: one pool per class, weighted by the class.

With ``NodeConfig.class_plans = "pools"`` a node with priority classes runs one streaming query
per class, each in its own FAIR scheduler pool whose weight is the class's weight (Pham QN-A:
6, 3, 1), so Spark's task scheduler shares the cores between the classes' micro-batches by
those weights when they run at once (docs/design.md, "Priority classes on the Spark node").

Spark reads the pools when the SparkContext starts: ``spark.scheduler.mode = FAIR`` and an
allocation file (``spark.scheduler.allocation.file``) naming the pools with their weights.
:func:`configure_pools` writes that file and adds both settings to a ``SparkSession.builder``
(as :func:`~spillway.spark.session.configure_spark` does; the caller still calls
``getOrCreate()``). A streaming query runs its jobs in the pool named by the local property
``spark.scheduler.pool`` of the thread that starts it: the query's execution thread inherits
the starting thread's local properties (Spark keeps them in an inheritable thread local), and
the ``foreachBatch`` function runs in that execution thread. :func:`check_pools` verifies that
a session (the node's own, or one given to it) is in FAIR mode and has every class's pool with
its weight: a pool missing from the allocation file would be created by Spark on first use
with weight 1, silently ignoring the class weights.

Examples
--------
>>> pool_names(3)
['spillway-class1', 'spillway-class2', 'spillway-class3']
>>> print(allocation_xml((6, 3, 1)).splitlines()[2])
  <pool name="spillway-class1"><schedulingMode>FIFO</schedulingMode><weight>6</weight><minShare>0</minShare></pool>
>>> import tempfile
>>> from types import SimpleNamespace
>>> conf = {}                                  # what the builder below was given
>>> builder = SimpleNamespace(config=lambda key, value: conf.update({key: value}) or builder)
>>> _ = configure_pools(builder, (2, 1), tempfile.mkdtemp())
>>> conf["spark.scheduler.mode"], Path(conf["spark.scheduler.allocation.file"]).name
('FAIR', 'spillway-pools.xml')
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.files import replace_text

#: The local property naming a job's FAIR scheduler pool.
POOL_PROPERTY = "spark.scheduler.pool"

#: The allocation file :func:`configure_pools` writes in its folder.
ALLOCATION_FILE = "spillway-pools.xml"


def pool_names(n_classes: int) -> list[str]:
    """The pools of classes 1 to ``n_classes``, class 1 first."""
    return [f"spillway-class{c}" for c in range(1, n_classes + 1)]


def allocation_xml(weights: Sequence[int]) -> str:
    """Spark's FAIR allocation file for the classes of ``weights`` (class 1 first): one pool
    per class with its weight, FIFO inside the pool (one streaming query runs there), no
    minimum share."""
    pools = [
        f'  <pool name="{name}"><schedulingMode>FIFO</schedulingMode><weight>{int(w)}</weight>'
        "<minShare>0</minShare></pool>"
        for name, w in zip(pool_names(len(weights)), weights, strict=True)
    ]
    return "\n".join(['<?xml version="1.0"?>', "<allocations>", *pools, "</allocations>", ""])


def configure_pools(builder: Any, weights: Sequence[int], folder: Path | str) -> Any:
    """Write the allocation file of ``weights`` in ``folder`` and set FAIR mode and that file
    on ``builder``; returns the builder (read when the SparkContext starts)."""
    path = Path(folder) / ALLOCATION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, allocation_xml(weights))
    builder = builder.config("spark.scheduler.mode", "FAIR")
    return builder.config("spark.scheduler.allocation.file", str(path.resolve()))


def check_pools(spark: Any, weights: Sequence[int]) -> None:
    """Raise :class:`~spillway.errors.ConfigError` unless ``spark`` runs the FAIR scheduler
    with every class's pool at its weight (module docstring).

    Raises
    ------
    ConfigError
        The session is not in FAIR mode, or a class's pool is missing or has another weight.
    """
    sc = spark.sparkContext
    mode = str(sc.getConf().get("spark.scheduler.mode", "FIFO")).upper()
    fix = (
        "start the session with spark.scheduler.mode=FAIR and an allocation file declaring "
        "them (spillway.spark.pools.configure_pools), or set class_plans = 'lanes'"
    )
    if mode != "FAIR":
        raise ConfigError(
            f"class_plans 'pools' runs each priority class in a FAIR scheduler pool, but the "
            f"session's spark.scheduler.mode is {mode}: {fix}"
        )
    jsc = sc._jsc.sc()
    for name, w in zip(pool_names(len(weights)), weights, strict=True):
        pool = jsc.getPoolForName(name)
        got = pool.get().weight() if pool.isDefined() else None
        if got != int(w):
            have = "missing" if got is None else f"weight {got}"
            raise ConfigError(
                f"class_plans 'pools' needs FAIR pool {name!r} with weight {int(w)}, the "
                f"session has it {have}: {fix}"
            )
