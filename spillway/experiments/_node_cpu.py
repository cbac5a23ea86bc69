"""An experiment's node on cores of its own, with the input it reads outside them.

A Kafka experiment on one machine runs the node, the broker and the producers that feed it on
the same cores, so the node's capacity depends on how fast the producers send: measured on 2
cores, ``spillway produce`` took 0.30-0.76 cores at 50,000-300,000 tuples/s and the broker
0.12-0.21 (EXPERIMENTS.md, "Where a Kafka micro-batch's time goes"), and the node's fixed cost a
batch rose from 0.63 s to 1.1-1.6 s as the producers sped up. An overload of 10x then takes
the cores the node needed to be overloaded at all. A separate machine per node, as in the
papers, does not share its cores with its input.

:func:`node_on_cores` gives the node (this process, which runs the Spark driver's Python side,
and the Spark JVM with every Python worker it starts) a cgroup CPU quota of its own
(:mod:`spillway.federation.cpu`) and :data:`NODE_WEIGHT` times the default CPU weight (so
that the quota is the node's even when the input would take more), and yields the
``cgroup.procs`` file of a second group, without a quota and at :data:`INPUT_WEIGHT` of the
default weight: input processes (producers) start there
(:func:`~spillway.federation.cpu.limited_argv`), outside the quota. The broker is started
before the node enters its group, so it stays outside too. At the end every process of the
two groups goes back where this process came from, and the groups are removed.

>>> with node_on_cores(None, None) as home:
...     home is None
True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.federation.cpu import CpuController, find_controller
from spillway.procfs import process_tree

#: The node's group gets this many times the default CPU weight, so that nothing else on the
#: machine takes the cores of its quota.
NODE_WEIGHT = 10.0

#: The input's group (the producers: the world outside the node, which on its own machines
#: would not share the node's cores) gets this fraction of the default weight: it runs on what
#: the node and the broker leave.
INPUT_WEIGHT = 0.1


def jvm_pid(spark: Any) -> int:
    """The process id of ``spark``'s JVM."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


@contextlib.contextmanager
def node_on_cores(spark: Any, cores: float | None) -> Iterator[Path | None]:
    """This process and ``spark``'s JVM (with its children) on a quota of ``cores`` for the
    ``with`` block; yields the ``cgroup.procs`` file input processes start in (None, and no
    limit, when ``cores`` is None).

    Raises
    ------
    ConfigError
        ``cores`` was given and there is no writable cgroup CPU controller here.
    """
    if cores is None:
        yield None
        return
    controller = find_controller()
    if controller is None:
        raise ConfigError(
            f"a node limited to {cores:g} cores needs a writable cgroup CPU controller "
            "(root, or a delegated cgroup v2 subtree); none here"
        )
    me = os.getpid()
    home = controller.group_of(me)

    def emptied(group: Path) -> None:
        controller.move(controller.members(group), home)
        CpuController.remove_group(group)

    with contextlib.ExitStack() as undo:  # each group emptied and removed, last made first
        node = controller.make_group(f"spillway-node-{me}", cores)
        undo.callback(emptied, node)
        inputs = controller.make_group(f"spillway-input-{me}", None)
        undo.callback(emptied, inputs)
        controller.weigh(node, NODE_WEIGHT)
        controller.weigh(inputs, INPUT_WEIGHT)
        controller.move([me, *process_tree(jvm_pid(spark))], node)
        yield inputs / "cgroup.procs"


__all__ = ["INPUT_WEIGHT", "NODE_WEIGHT", "jvm_pid", "node_on_cores"]
