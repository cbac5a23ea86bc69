"""Backlog builders and checks shared by the policy tests."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from spillway.policies.base import Admission, Backlog

#: Relative slack for float sums of costs (a policy never goes over by more than rounding).
REL = 1e-9


def random_backlog(
    rng: np.random.Generator,
    n_queries: int,
    n_sources: int,
    *,
    costs: bool = False,
    ties: bool = False,
    zero_sic: bool = False,
    max_count: int = 30,
) -> Backlog:
    """A backlog with generic (tie-free) values unless ``ties`` puts every query at SIC 0."""
    lanes = n_queries * n_sources
    sic = rng.uniform(0.001, 0.1, lanes)
    if zero_sic:
        sic[rng.random(lanes) < 0.2] = 0.0
    return Backlog(
        lane_query=np.repeat(np.arange(n_queries), n_sources),
        lane_source=np.tile(np.arange(n_sources), n_queries),
        count=rng.integers(0, max_count + 1, lanes),
        tuple_sic=sic,
        query_sic=np.zeros(n_queries) if ties else rng.uniform(0.0, 0.5, n_queries),
        cost=rng.uniform(0.5, 2.0, lanes) if costs else None,
    )


def within_capacity(adm: Admission, b: Backlog, capacity: float) -> bool:
    return adm.kept_cost(b) <= capacity * (1 + REL) + 1e-12


def nothing_else_fits(adm: Admission, b: Backlog, capacity: float) -> bool:
    """No lane with tuples left has a tuple that fits the capacity left."""
    left = capacity - adm.kept_cost(b)
    waiting = b.count > adm.keep
    return not (waiting & (b.unit_cost <= left * (1 - REL) - 1e-12)).any()


def query_sic(b: Backlog, keep: np.ndarray) -> np.ndarray:
    return b.query_sic + Admission(keep=keep).query_gain(b)


def fig3_backlog() -> Backlog:
    """THEMIS Fig. 3: q1 20 tuples of 1/20, q2 30 of 1/30, q3 10 of 1/10, q4 10 of 1/20 (source
    A) and 20 of 1/40 (source B); every query starts at SIC 0 (THEMIS §5.1)."""
    return Backlog(
        lane_query=[0, 1, 2, 3, 3],
        lane_source=[0, 0, 0, 0, 1],
        count=[20, 30, 10, 10, 20],
        tuple_sic=[1 / 20, 1 / 30, 1 / 10, 1 / 20, 1 / 40],
        query_sic=np.zeros(4),
    )


#: Exact per-tuple SIC of the Fig. 3 lanes.
FIG3_SIC = [Fraction(1, 20), Fraction(1, 30), Fraction(1, 10), Fraction(1, 20), Fraction(1, 40)]


def fig3_query_sic(keep: np.ndarray) -> list[Fraction]:
    """Exact query SIC of a Fig. 3 admission."""
    out = [Fraction(0)] * 4
    for lane, q in enumerate([0, 1, 2, 3, 3]):
        out[q] += int(keep[lane]) * FIG3_SIC[lane]
    return out


def jain_exact(values: list[Fraction]) -> Fraction:
    """Jain's index with exact fractions (THEMIS §7.2)."""
    return sum(values, Fraction(0)) ** 2 / (len(values) * sum(v * v for v in values))
