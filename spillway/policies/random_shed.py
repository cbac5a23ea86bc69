"""Random shedding: THEMIS's baseline, which "discards arbitrary tuples" (THEMIS §2.3, §7.1).

When the backlog fits the capacity everything is admitted. Otherwise the policy admits a
uniformly random subset of the waiting tuples that fills the capacity, blind to SIC and to
queries: every waiting tuple is equally likely to be kept.

- Equal costs (``cost`` None, or one value for every lane): ``floor(capacity / cost)`` tuples
  drawn without replacement from all waiting tuples, i.e. per-lane keeps from the multivariate
  hypergeometric distribution over the lane counts.
- Unequal costs (generalisation): the tuples are visited in a uniformly random order and each
  is admitted if it still fits the remaining capacity (random-order first fit). It is drawn in
  a few hypergeometric rounds, exactly: each round draws the next ``m`` tuples of the order
  from the lanes still open (a lane whose tuple no longer fits is skipped for good). When the
  ``m`` tuples fit together they are all admitted; otherwise only the first
  ``floor(left / max cost)`` of them (a nested draw, they always fit) and the rest of the
  round's tuples come next in the order. ``m`` is sized to fit with high probability, so a
  decision takes a handful of rounds. With equal costs this is the single draw above.

References
----------
THEMIS (seed 001) §2.3 ("random shedding [33] that discards arbitrary tuples"), §7.1-§7.2 and
§7.6 (the random shedder is the fairness and overhead baseline).

Examples
--------
>>> import numpy as np
>>> b = Backlog(lane_query=[0, 1], lane_source=[0, 0], count=[30, 10],
...             tuple_sic=[1 / 30, 0.1], query_sic=[0.0, 0.0])
>>> keep = RandomShedding(seed=7).decide(b, 20).keep
>>> int(keep.sum()), bool((keep <= b.count).all())
(20, True)
>>> RandomShedding(seed=7).decide(b, 50).keep.tolist()
[30, 10]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from spillway.policies.base import (
    Admission,
    Backlog,
    Policy,
    PolicyConfig,
    admit_all,
    check_capacity,
)


def random_fill(
    count: np.ndarray, cost: np.ndarray, capacity: float, rng: np.random.Generator
) -> np.ndarray:
    """Per-lane keeps of a uniformly random first-fit admission (see the module notes).

    Parameters
    ----------
    count : int array (L,)
        Waiting tuples per lane.
    cost : float array (L,)
        Cost of one tuple of each lane (> 0).
    capacity : float
        Cost budget.
    rng : numpy Generator
        Source of randomness.

    Returns
    -------
    int array (L,)
        Kept tuples per lane, ``0 <= keep <= count``, total cost ``<= capacity``.

    Examples
    --------
    >>> keep = random_fill(np.array([5, 5]), np.array([1.0, 3.0]), 7.5, np.random.default_rng(0))
    >>> bool((keep * [1.0, 3.0]).sum() <= 7.5), bool((keep <= 5).all())
    (True, True)
    """
    keep = np.zeros(count.shape[0], dtype=np.int64)
    left = float(capacity)
    # The random order is consumed segment by segment; within a segment it is uniform.
    segments = [count.astype(np.int64, copy=True)]
    while segments:
        open_ = (segments[0] > 0) & (cost <= left)
        if not open_.any():
            segments.pop(0)
            continue
        avail = np.where(open_, segments[0], 0)
        n = int(avail.sum())
        widest = float(cost[open_].max())
        safe = min(n, _fit(left, widest))  # this many tuples fit whatever they are
        chunk_size = safe
        if safe < n:  # try a longer chunk that fits with high probability
            mean = float((avail * cost).sum()) / n
            sd = float(np.sqrt((avail * (cost - mean) ** 2).sum() / n))
            chunk_size = min(n, max(safe, int((left - 4.0 * sd * np.sqrt(left / mean)) / mean)))
        chunk = _draw(avail, chunk_size, n, rng)
        segments[0] -= chunk
        if float((chunk * cost).sum()) > left:
            # It does not all fit: admit its first `safe` tuples (a nested uniform draw); the
            # rest of the chunk comes next in the order, before anything still in the segment.
            head = _draw(chunk, safe, chunk_size, rng)
            segments.insert(0, chunk - head)
            chunk = head
        keep += chunk
        left -= float((chunk * cost).sum())
    return keep


def _draw(avail: np.ndarray, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` of the ``n`` tuples counted in ``avail``, without replacement, counted per lane."""
    if m * 32 < n:  # few tuples: pick them by position (O(m)) instead of lane by lane (O(L))
        picked = rng.choice(n, size=m, replace=False, shuffle=False)
        lanes = np.searchsorted(np.cumsum(avail), picked, side="right")
        return np.bincount(lanes, minlength=avail.shape[0])
    return rng.multivariate_hypergeometric(avail, m)


def _fit(left: float, cost: float) -> int:
    n = int(left // cost)
    while n > 0 and n * cost > left:
        n -= 1
    return n


class RandomShedding(Policy):
    """Keep a uniformly random subset of the waiting tuples that fills the capacity.

    The THEMIS baseline shedder (§7.1): blind to SIC and to queries. Seeded; see the module
    notes for unequal per-lane costs.

    Parameters
    ----------
    config : PolicyConfig, optional
        Or ``seed=...`` as a keyword.

    Examples
    --------
    >>> import numpy as np
    >>> b = Backlog(lane_query=[0, 0, 1], lane_source=[0, 1, 0], count=[10, 10, 20],
    ...             tuple_sic=[0.05, 0.05, 0.05], query_sic=np.zeros(2))
    >>> a = RandomShedding(seed=1).decide(b, 8)
    >>> int(a.keep.sum())
    8
    >>> a.keep.tolist() == RandomShedding(seed=1).decide(b, 8).keep.tolist()
    True
    """

    name: ClassVar[str] = "random"
    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig

    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Admit everything if it fits, else a uniformly random subset that fills ``capacity``."""
        cap = check_capacity(capacity)
        if (backlog.total_count if backlog.cost is None else backlog.total_cost) <= cap:
            return admit_all(backlog)
        return Admission(keep=random_fill(backlog.count, backlog.unit_cost, cap, self.rng))
