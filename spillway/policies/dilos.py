"""DILoS's shedder: drop uniformly at random within each priority class (Pham §6.1.1).

In DILoS (Pham's thesis, Ch. 6) each class's load manager decides *how much* the class sheds;
its tuples are then dropped uniformly at random at the class's sources. On a spillway node
the ``dilos`` policy turns on the node's priority classes (``NodeConfig.class_control``: one
load manager per class, DILoS redistribution between them) and the controller asks this policy
once per class, over that class's backlog only, with that class's budget
(:mod:`spillway.spark.class_control`); within it the choice is
:class:`~spillway.policies.random_shed.RandomShedding`'s uniformly random subset.

Examples
--------
>>> from spillway.policies.base import Backlog
>>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[30, 0],
...             tuple_sic=[1 / 30, 0.1], query_sic=[0.0, 0.0])
>>> Dilos(seed=3).decide(b, 12).keep.tolist()
[12, 0]
"""

from __future__ import annotations

from typing import ClassVar

from spillway.policies.random_shed import RandomShedding


class Dilos(RandomShedding):
    """Uniformly random shedding of one class's tuples to that class's budget (module notes)."""

    name: ClassVar[str] = "dilos"
