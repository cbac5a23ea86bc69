"""The Policy interface: a backlog snapshot and a capacity in, an admission out.

A node's input buffer is described as *lanes*. A lane is one (query, source[, group]) stream of
waiting tuples that share one per-tuple SIC value (THEMIS Eq. 1) and one per-tuple cost. A policy
decides how many tuples of every lane to admit; the rest are shed. Which tuples of a lane are
admitted is decided later, deterministically, by the data path (all tuples of a lane carry the
same SIC, so THEMIS's "highest SIC first" is a choice between lanes, not within one).

Units are the caller's: ``capacity`` and ``cost`` share one unit (tuples when ``cost`` is None,
seconds of executor time when the node controller passes fitted per-tuple costs).

Examples
--------
>>> import numpy as np
>>> b = Backlog(
...     lane_query=np.array([0, 1]),
...     lane_source=np.array([0, 0]),
...     count=np.array([10, 30]),
...     tuple_sic=np.array([0.1, 1 / 30]),
...     query_sic=np.zeros(2),
... )
>>> b.n_lanes, b.n_queries, int(b.total_count), float(b.total_cost)
(2, 2, 40, 40.0)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from spillway.errors import ConfigError


def _as(arr: Any, dtype: type, name: str, n: int | None) -> np.ndarray:
    out: np.ndarray = np.ascontiguousarray(arr, dtype=dtype)
    if out.ndim != 1:
        raise ConfigError(f"Backlog.{name} must be one-dimensional, got shape {out.shape}")
    if n is not None and out.shape[0] != n:
        raise ConfigError(f"Backlog.{name} must have one entry per lane ({n}), got {out.shape[0]}")
    return out


@dataclass(frozen=True, kw_only=True, eq=False)
class Backlog:
    """A snapshot of a node's waiting tuples, one entry per lane.

    Parameters
    ----------
    lane_query : int array (L,)
        Index of the lane's query into ``query_sic``.
    lane_source : int array (L,)
        Source id of the lane (unique within its query).
    count : int array (L,)
        Tuples waiting in the lane (arrived and not yet admitted or shed).
    tuple_sic : float array (L,)
        SIC of each waiting tuple of the lane (THEMIS Eq. 1).
    query_sic : float array (Q,)
        SIC each query has already secured over its source time window, *before* this backlog:
        the coordinator's result SIC projected with the node's own recent admissions (THEMIS §6).
    cost : float array (L,) or None
        Cost of admitting one tuple of the lane, in the unit of ``capacity``; None means 1.
    lane_group : int array (L,) or None
        Group key of the lane, for policies that admit per group (CoD).
    stats : mapping of name to float array (L,)
        Optional per-lane statistics of the waiting tuples (e.g. ``"mean"``, ``"var"`` of the
        value column), for policies that look at content (CoD scalar concept).
    """

    lane_query: np.ndarray
    lane_source: np.ndarray
    count: np.ndarray
    tuple_sic: np.ndarray
    query_sic: np.ndarray
    cost: np.ndarray | None = None
    lane_group: np.ndarray | None = None
    stats: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        q = _as(self.lane_query, np.int64, "lane_query", None)
        n = q.shape[0]
        object.__setattr__(self, "lane_query", q)
        object.__setattr__(self, "lane_source", _as(self.lane_source, np.int64, "lane_source", n))
        object.__setattr__(self, "count", _as(self.count, np.int64, "count", n))
        object.__setattr__(self, "tuple_sic", _as(self.tuple_sic, np.float64, "tuple_sic", n))
        object.__setattr__(self, "query_sic", _as(self.query_sic, np.float64, "query_sic", None))
        if self.cost is not None:
            object.__setattr__(self, "cost", _as(self.cost, np.float64, "cost", n))
        if self.lane_group is not None:
            object.__setattr__(self, "lane_group", _as(self.lane_group, np.int64, "lane_group", n))
        object.__setattr__(
            self,
            "stats",
            {k: _as(v, np.float64, f"stats[{k!r}]", n) for k, v in dict(self.stats).items()},
        )
        if n and (q.min() < 0 or q.max() >= self.query_sic.shape[0]):
            raise ConfigError(
                f"Backlog.lane_query must index query_sic (0..{self.query_sic.shape[0] - 1}), "
                f"got values in [{q.min()}, {q.max()}]"
            )
        if n and self.count.min() < 0:
            raise ConfigError(f"Backlog.count must be >= 0, got {self.count.min()}")
        if n and (self.tuple_sic.min() < 0 or not np.isfinite(self.tuple_sic).all()):
            raise ConfigError("Backlog.tuple_sic must be finite and >= 0")
        if (
            self.cost is not None
            and n
            and (self.cost.min() <= 0 or not np.isfinite(self.cost).all())
        ):
            raise ConfigError("Backlog.cost must be finite and > 0 (None means 1 per tuple)")

    @property
    def n_lanes(self) -> int:
        """Number of lanes L."""
        return int(self.count.shape[0])

    @property
    def n_queries(self) -> int:
        """Number of queries Q (the length of ``query_sic``)."""
        return int(self.query_sic.shape[0])

    @property
    def unit_cost(self) -> np.ndarray:
        """Per-tuple cost of every lane (ones when ``cost`` is None)."""
        return np.ones(self.n_lanes) if self.cost is None else self.cost

    @property
    def total_count(self) -> int:
        """All waiting tuples."""
        return int(self.count.sum())

    @property
    def total_cost(self) -> float:
        """Cost of admitting everything."""
        return float((self.count * self.unit_cost).sum())


@dataclass(frozen=True, kw_only=True, eq=False)
class Admission:
    """A policy's decision: how many tuples of each lane to admit.

    Parameters
    ----------
    keep : int array (L,)
        Admitted tuples per lane, ``0 <= keep <= count``; the rest of the lane is shed.
    """

    keep: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep", np.ascontiguousarray(self.keep, dtype=np.int64))

    def kept_cost(self, backlog: Backlog) -> float:
        """Cost of what is admitted, in the unit of the capacity."""
        return float((self.keep * backlog.unit_cost).sum())

    def query_gain(self, backlog: Backlog) -> np.ndarray:
        """SIC each query gains from this admission (Q,)."""
        return np.bincount(
            backlog.lane_query, weights=self.keep * backlog.tuple_sic, minlength=backlog.n_queries
        )


@dataclass(frozen=True, kw_only=True)
class PolicyConfig:
    """Settings every policy has. Subclass it (frozen, kw_only) for a policy's own settings.

    Parameters
    ----------
    seed : int
        Seed of the policy's random generator (tie-breaks, random shedding).
    """

    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")


class Policy(ABC):
    """Decides WHAT to shed. Subclasses implement :meth:`decide` and are pure apart from their RNG.

    Every policy must:

    - never admit more than a lane holds, nor more than ``capacity`` in total cost (it may admit
      less only when the remaining capacity cannot fit one more tuple of any lane);
    - admit everything when the backlog's total cost fits the capacity;
    - give the same decisions for the same config (seed) and the same sequence of inputs;
    - let :meth:`snapshot` / :meth:`restore` reproduce its random state exactly.

    Three read-only properties tell the runtime what a decision needs (all False by default):
    :attr:`needs_groups` (one lane per group), :attr:`needs_stats` (value statistics per lane)
    and :attr:`sheds_always` (decide at every interval, overloaded or not).
    """

    name: ClassVar[str] = "policy"
    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig

    def __init__(self, config: PolicyConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = self.config_class(**overrides)
        elif overrides:
            raise ConfigError("pass either a config or keyword settings, not both")
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        self.config = config
        self.rng = np.random.default_rng(config.seed)

    @abstractmethod
    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Admit tuples of ``backlog`` within ``capacity`` (same unit as ``backlog.cost``)."""

    @property
    def needs_groups(self) -> bool:
        """Whether the policy admits per group: the runtime must give it one lane per
        (query, source, group), with :attr:`Backlog.lane_group` the tuples' ``key``, and carry
        its per-group keep counts to the data path (CoD's grouped and join concepts).

        False by default: lanes are (query, source) streams and one keep count per lane is
        all the data path needs.

        >>> from spillway.policies.cod import CoD
        >>> CoD(kind="grouped").needs_groups, CoD(kind="scalar").needs_groups
        (True, False)
        """
        return False

    @property
    def needs_stats(self) -> bool:
        """Whether the policy reads :attr:`Backlog.stats` ``"mean"`` and ``"var"`` (the value
        column's mean and population variance over each lane's waiting tuples), which cost the
        runtime a payload scan of the backlog (CoD's scalar concept). False by default.

        >>> from spillway.policies.cod import CoD
        >>> CoD(kind="scalar").needs_stats, CoD(kind="join").needs_stats
        (True, False)
        """
        return False

    @property
    def sheds_always(self) -> bool:
        """Whether the user fixed how much to shed (a shed fraction such as ``b = 0.98``, CoD
        §III (c)): the runtime then asks the policy at every interval, not only when its
        overload detector finds the node overloaded. False by default: the policy is asked
        only under overload, with the capacity as its budget.

        >>> from spillway.policies.uniform import Uniform
        >>> Uniform(b=0.98).sheds_always, Uniform().sheds_always
        (True, False)
        """
        return False

    def snapshot(self) -> dict[str, Any]:
        """The policy's mutable state (its random generator), picklable."""
        return {"rng": self.rng.bit_generator.state}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot`."""
        self.rng.bit_generator.state = snapshot["rng"]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


def admit_all(backlog: Backlog) -> Admission:
    """The admission that keeps everything (used when the node is not overloaded).

    >>> import numpy as np
    >>> b = Backlog(lane_query=[0], lane_source=[0], count=[5], tuple_sic=[0.2], query_sic=[0.0])
    >>> admit_all(b).keep.tolist()
    [5]
    """
    return Admission(keep=backlog.count.copy())


def check_capacity(capacity: float) -> float:
    """Validate a capacity value and return it as a float.

    >>> check_capacity(3)
    3.0
    """
    c = float(capacity)
    if not np.isfinite(c) or c < 0:
        raise ConfigError(f"capacity must be a finite number >= 0, got {capacity!r}")
    return c
