"""Shedding policies: WHAT to shed when the node is overloaded.

A policy receives a :class:`~spillway.policies.base.Backlog` (the node's waiting tuples as
lanes, one per (query, source[, group]), with per-tuple SIC, per-query SIC secured so far and
optional per-tuple cost) and a capacity in the same unit as the cost, and returns an
:class:`~spillway.policies.base.Admission`: how many tuples of each lane to keep. The data
path decides which tuples of a lane those are. Policies are pure apart from their seeded random
generator: no Spark, no clock, no I/O.

Every policy in :data:`POLICIES` must:

- keep between 0 and ``count`` tuples of every lane, and never more than ``capacity`` in total
  cost; it may leave capacity unused only when no waiting tuple of any lane fits in it;
- keep everything when the whole backlog's cost fits the capacity;
- decide identically for the same config (seed) and the same sequence of inputs;
- reproduce its random state exactly through ``snapshot()`` / ``restore()``;
- take its settings as a frozen, keyword-only config dataclass (a ``PolicyConfig`` subclass)
  that round-trips through ``dataclasses.asdict``.

The shared test suite (``tests/policies/test_policy_contract.py``) runs these checks over every
name registered here. To add a policy, write its module and add one line to :data:`POLICIES`.

Examples
--------
>>> import numpy as np
>>> sorted(POLICIES)
['balance-sic', 'cod', 'dilos', 'random', 'uniform']
>>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[10, 30],
...             tuple_sic=[0.1, 1 / 30], query_sic=np.zeros(2))
>>> make_policy("balance-sic", seed=0).decide(b, 40).keep.tolist()
[10, 30]
>>> make_policy("fifo")
Traceback (most recent call last):
...
spillway.errors.UnknownNameError: unknown policy 'fifo'; known policies: balance-sic, cod, dilos, random, uniform
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from spillway.errors import ConfigError, UnknownNameError
from spillway.policies.balance_sic import BalanceSIC, BalanceSICConfig
from spillway.policies.base import Admission, Backlog, Policy, PolicyConfig
from spillway.policies.cod import CoD
from spillway.policies.dilos import Dilos
from spillway.policies.random_shed import RandomShedding
from spillway.policies.uniform import Uniform

#: Every registered policy by the name used in configs, the CLI and reports.
POLICIES: dict[str, type[Policy]] = {
    "random": RandomShedding,
    "balance-sic": BalanceSIC,
    "uniform": Uniform,
    "cod": CoD,
    "dilos": Dilos,
}


def make_policy(name: str, **settings: Any) -> Policy:
    """Build the policy registered as ``name`` with config fields given as keywords.

    Parameters
    ----------
    name : str
        A key of :data:`POLICIES`.
    **settings
        Fields of the policy's config class (e.g. ``seed=3``).

    Returns
    -------
    Policy

    Raises
    ------
    UnknownNameError
        When ``name`` is not registered.
    ConfigError
        When a setting is unknown to the policy's config or breaks its rules.

    Examples
    --------
    >>> make_policy("random", seed=3).config.seed
    3
    >>> make_policy("random", sed=3)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: policy 'random' has no setting sed; its settings are: seed
    """
    try:
        cls = POLICIES[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}"
        ) from None
    known = {f.name for f in fields(cls.config_class)} | {"config"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(
            f"policy {name!r} has no setting {', '.join(unknown)}; "
            f"its settings are: {', '.join(sorted(known - {'config'}))}"
        )
    return cls(**settings)


__all__ = [
    "POLICIES",
    "Admission",
    "Backlog",
    "BalanceSIC",
    "BalanceSICConfig",
    "Policy",
    "PolicyConfig",
    "RandomShedding",
    "make_policy",
]
