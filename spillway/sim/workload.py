"""THEMIS's complex workload and fragment placements, as :class:`~spillway.sim.Deployment` s.

THEMIS §7 splits the complex queries (Table 1) into fragments that each connect to their own
sources and do the same processing incrementally: an AVG-all fragment reads 10 sources, a TOP-5
fragment 20 (10 machines' CPU and memory) and a COV fragment 2. AVG-all fragments form a tree
(a root aggregates the others' partial results); TOP-5 and COV fragments form a chain (the last
one outputs the result). TOP-5 emits 5 rows per window, the others 1. Each fragment of a query
runs on a different node.

Placements (where a query's ``k`` fragments run):

- ``random``: ``k`` distinct nodes drawn uniformly;
- ``zipf``: ``k`` distinct nodes drawn one after another with probability proportional to
  ``1 / rank^s`` (node 0 the most popular), THEMIS §7.3 "Fragments are deployed according to a
  Zipf distribution" and DISSP §6.1's skewed federated allocation;
- ``balanced``: the ``k`` nodes hosting the fewest fragments so far (ties at random), THEMIS
  Fig. 11's "each node has roughly the same load".

Kinds are dealt round-robin over the queries (equal thirds of AVG-all, TOP-5 and COV); the
number of fragments per query is fixed or uniform in a range (THEMIS Fig. 10's "mixed": 1-6).

Node capacity: THEMIS gives one absolute figure, in §7.2 (Fig. 8): with 528,000 tuples/s of
input the mean SIC of a single node fell to about 0.1, so a node processes about
:data:`THEMIS_CAPACITY` = 52,800 tuples/s of the complex workload. Every THEMIS experiment here
uses that capacity and Table 2's Emulab source rate (150 tuples/s in 3 batches of 50), so each
setup's overload follows from the paper's numbers of nodes, queries and fragments.

Examples
--------
>>> d = build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=(1, 6), seed=1))
>>> d.n_nodes, 1995 <= d.n_fragments <= 2005, sorted({q.kind for q in d.queries})
(18, True, ['avg_all', 'cov', 'top5'])
>>> z = build(WorkloadConfig(n_nodes=6, n_queries=300, fragments=2, placement="zipf"))
>>> load = np.bincount([f.node for q in z.queries for f in q.fragments], minlength=6)
>>> bool(load[0] > load[5])
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spillway.errors import ConfigError, UnknownNameError
from spillway.sim.deployment import Deployment, QuerySpec, chain, tree

#: Tuples/s one node processes (THEMIS §7.2: 528,000 tuples/s of input gave mean SIC ~0.1).
THEMIS_CAPACITY = 52_800.0


@dataclass(frozen=True, kw_only=True)
class KindSpec:
    """A query kind of the complex workload: sources per fragment, rows per window, shape."""

    sources: int
    rows_out: int
    shape: str


#: THEMIS §7 complex workload (Table 1), per fragment.
KINDS: dict[str, KindSpec] = {
    "avg_all": KindSpec(sources=10, rows_out=1, shape="tree"),
    "top5": KindSpec(sources=20, rows_out=5, shape="chain"),
    "cov": KindSpec(sources=2, rows_out=1, shape="chain"),
}
#: The complex workload's kinds, dealt round-robin.
COMPLEX: tuple[str, ...] = ("avg_all", "top5", "cov")
PLACEMENTS: tuple[str, ...] = ("random", "zipf", "balanced")


@dataclass(frozen=True, kw_only=True)
class WorkloadConfig:
    """How many queries of the complex workload, how fragmented and where they run.

    Parameters
    ----------
    n_nodes : int
    n_fragments : int or None
        Add queries until their fragments reach this total (THEMIS: "approximately 2,000",
        the default when neither this nor ``n_queries`` is given).
    n_queries : int or None
        Or exactly this many queries (give at most one of the two).
    fragments : int or (lo, hi)
        Fragments per query: fixed, or uniform in ``lo..hi`` (THEMIS "mixed": (1, 6)).
    kinds : tuple of str
        Kinds of :data:`KINDS`, dealt round-robin.
    placement : {"random", "zipf", "balanced"}
    zipf_s : float
        Zipf exponent of the ``zipf`` placement.
    capacity : float
        Tuples/s per node (default :data:`THEMIS_CAPACITY`).
    seed : int

    Examples
    --------
    >>> WorkloadConfig(n_nodes=3, fragments=4)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: fragments per query (up to 4) must not exceed n_nodes (3): each fragment of a query runs on a different node
    """

    n_nodes: int = 18
    n_fragments: int | None = None
    n_queries: int | None = None
    fragments: int | tuple[int, int] = (1, 6)
    kinds: tuple[str, ...] = COMPLEX
    placement: str = "random"
    zipf_s: float = 1.0
    capacity: float = THEMIS_CAPACITY
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.n_nodes, bool) or not isinstance(self.n_nodes, int) or self.n_nodes < 1:
            raise ConfigError(f"n_nodes must be an int >= 1, got {self.n_nodes!r}")
        if self.n_fragments is not None and self.n_queries is not None:
            raise ConfigError("give one of n_fragments and n_queries, not both")
        if self.n_fragments is None and self.n_queries is None:
            object.__setattr__(self, "n_fragments", 2000)
        for name in ("n_fragments", "n_queries"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
        f = self.fragments
        if (isinstance(f, tuple) and len(f) != 2) or (
            not isinstance(f, tuple) and (isinstance(f, bool) or not isinstance(f, int))
        ):
            raise ConfigError(f"fragments must be an int or a pair (lo, hi), got {f!r}")
        lo, hi = self.fragment_range
        bad_type = any(isinstance(v, bool) or not isinstance(v, int) for v in (lo, hi))
        if bad_type or lo < 1 or hi < lo:
            raise ConfigError(
                f"fragments must be an int >= 1 or a range (lo, hi) with 1 <= lo <= hi, got {self.fragments!r}"
            )
        if hi > self.n_nodes:
            raise ConfigError(
                f"fragments per query (up to {hi}) must not exceed n_nodes ({self.n_nodes}): each "
                "fragment of a query runs on a different node"
            )
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            raise UnknownNameError(f"kinds must be among {', '.join(KINDS)}; got {self.kinds!r}")
        if self.placement not in PLACEMENTS:
            raise UnknownNameError(
                f"placement must be one of {', '.join(PLACEMENTS)}; got {self.placement!r}"
            )
        if not (
            isinstance(self.zipf_s, int | float) and math.isfinite(self.zipf_s) and self.zipf_s >= 0
        ):
            raise ConfigError(f"zipf_s must be a finite number >= 0, got {self.zipf_s!r}")
        if not (
            isinstance(self.capacity, int | float)
            and math.isfinite(self.capacity)
            and self.capacity > 0
        ):
            raise ConfigError(
                f"capacity must be a finite number > 0 (tuples/s), got {self.capacity!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")

    @property
    def fragment_range(self) -> tuple[int, int]:
        """``(lo, hi)`` fragments per query."""
        f = self.fragments
        if isinstance(f, tuple):
            return (f[0], f[1])
        return (f, f)


def fragment_counts(config: WorkloadConfig, rng: np.random.Generator) -> list[int]:
    """Fragments of every query (see :class:`WorkloadConfig`).

    >>> fragment_counts(WorkloadConfig(n_fragments=10, fragments=3), np.random.default_rng(0))
    [3, 3, 3]
    """
    lo, hi = config.fragment_range
    if config.n_queries is not None:
        return [int(k) for k in rng.integers(lo, hi + 1, size=config.n_queries)]
    assert config.n_fragments is not None
    if lo == hi:
        return [lo] * max(1, round(config.n_fragments / lo))
    out: list[int] = []
    total = 0
    while total < config.n_fragments:
        k = int(rng.integers(lo, hi + 1))
        out.append(k)
        total += k
    return out


def place(counts: list[int], config: WorkloadConfig, rng: np.random.Generator) -> list[list[int]]:
    """Nodes of every query's fragments, by ``config.placement`` (distinct within a query).

    >>> cfg = WorkloadConfig(n_nodes=4, n_queries=4, fragments=2, placement="balanced")
    >>> nodes = place([2, 2, 2, 2], cfg, np.random.default_rng(0))
    >>> np.bincount(np.concatenate(nodes), minlength=4).tolist()
    [2, 2, 2, 2]
    """
    n = config.n_nodes
    out: list[list[int]] = []
    if config.placement == "zipf":
        w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** config.zipf_s
        p = w / w.sum()
        for k in counts:
            out.append([int(v) for v in rng.choice(n, size=k, replace=False, p=p)])
    elif config.placement == "balanced":
        load = np.zeros(n, dtype=np.int64)
        for k in counts:
            tie = rng.random(n)
            nodes = np.lexsort((tie, load))[:k]
            load[nodes] += 1
            out.append([int(v) for v in nodes])
    else:
        for k in counts:
            out.append([int(v) for v in rng.choice(n, size=k, replace=False)])
    return out


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    counts_rng, place_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2)
    )
    return counts_rng, place_rng


def build(config: WorkloadConfig) -> Deployment:
    """The deployment of ``config`` (see the module docstring)."""
    counts_rng, _ = _streams(config.seed)
    return build_from(fragment_counts(config, counts_rng), config)


def build_from(counts: Sequence[int], config: WorkloadConfig) -> Deployment:
    """The deployment of queries with the given fragment counts, placed and typed by ``config``
    (its ``n_fragments``, ``n_queries`` and ``fragments`` are not used).

    >>> d = build_from([1, 3, 3], WorkloadConfig(n_nodes=3, fragments=1, placement="balanced"))
    >>> [len(q.fragments) for q in d.queries], [q.kind for q in d.queries]
    ([1, 3, 3], ['avg_all', 'top5', 'cov'])
    >>> build_from([4], WorkloadConfig(n_nodes=3, fragments=1))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: every count must be an int in 1..3 (n_nodes), got 4
    """
    for k in counts:
        if (
            isinstance(k, bool)
            or not isinstance(k, int | np.integer)
            or not 1 <= k <= config.n_nodes
        ):
            raise ConfigError(
                f"every count must be an int in 1..{config.n_nodes} (n_nodes), got {k!r}"
            )
    _, place_rng = _streams(config.seed)
    nodes = place([int(k) for k in counts], config, place_rng)
    queries = []
    for i, where in enumerate(nodes):
        kind = config.kinds[i % len(config.kinds)]
        spec = KINDS[kind]
        make = tree if spec.shape == "tree" else chain
        queries.append(QuerySpec(kind=kind, fragments=make(where, spec.sources, spec.rows_out)))
    return Deployment(
        n_nodes=config.n_nodes, capacity=float(config.capacity), queries=tuple(queries)
    )


def offered_load(deployment: Deployment, rate: float) -> np.ndarray:
    """Source tuples per second arriving at each node at ``rate`` tuples/s per source (N,).

    >>> d = build(WorkloadConfig(n_nodes=2, n_queries=3, fragments=1, placement="balanced"))
    >>> int(offered_load(d, 150.0).sum())             # 10 + 20 + 2 sources at 150 t/s
    4800
    """
    load = np.zeros(deployment.n_nodes)
    for q in deployment.queries:
        for f in q.fragments:
            load[f.node] += f.sources * rate
    return load


__all__ = [
    "COMPLEX",
    "KINDS",
    "PLACEMENTS",
    "THEMIS_CAPACITY",
    "KindSpec",
    "WorkloadConfig",
    "build",
    "build_from",
    "fragment_counts",
    "offered_load",
    "place",
]
