"""Uniform (random) shedding: every waiting tuple is shed with the same probability ``b``.

This is CoD's "state of the art" (CoD §IV-B, Alg. 1): the industrial practice that needs no
knowledge of the window's concept. Its Storm implementation draws one binomial trial per tuple
(P(shed) = b) at watermark time; here the same law is drawn once per lane,
``keep ~ Binomial(count, 1 - b)``, from the policy's seeded generator, so the cost is one
vectorised draw per lane and no Python loop over tuples.

Two ways to say how much to shed (CoD §III (c) leaves "how much" to the user):

- ``b`` set in the config: the paper's setting. The policy sheds a fraction ``b`` of every backlog
  it is given, whatever the capacity (the user switched shedding on and chose the rate), and
  :attr:`Uniform.sheds_always` tells the runtime to ask it at every interval, overloaded or not.
- ``b = None`` (default): the runtime's controller decides. ``b = 1 - capacity / total_cost``;
  the binomial draw is then fitted to the capacity by removing or adding uniformly random tuples
  (a multivariate hypergeometric draw, so the kept set stays a uniform sample), which honours the
  :class:`~spillway.policies.base.Policy` contract: never above capacity, everything admitted when
  it fits, and no spare capacity left that one more tuple would fit.

Examples
--------
>>> from spillway.policies.base import Backlog
>>> bl = Backlog(lane_query=[0, 0], lane_source=[0, 1], count=[5000, 5000],
...              tuple_sic=[1e-4, 1e-4], query_sic=[0.0])
>>> keep = Uniform(b=0.9, seed=1).decide(bl, capacity=1e9).keep
>>> bool(0.09 < keep.sum() / 10000 < 0.11)
True
>>> int(Uniform(seed=1).decide(bl, capacity=2500).keep.sum())
2500

References
----------
Katsipoulakis, Labrinidis, Chrysanthis, "Concept-Driven Load Shedding", §IV-B (Alg. 1), §VII.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spillway.errors import ConfigError
from spillway.policies.base import Admission, Backlog, Policy, PolicyConfig, admit_all
from spillway.policies.base import check_capacity as _check_capacity

__all__ = ["Uniform", "UniformConfig", "check_shed_fraction", "fit_to_capacity", "shed_fraction"]


def check_shed_fraction(b: float | None, name: str = "b") -> float | None:
    """Validate a shed fraction: None or a number in [0, 1].

    >>> check_shed_fraction(0.98)
    0.98
    >>> check_shed_fraction(1.5)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: b is the fraction of tuples shed and must be in [0, 1] (or None to take it from the capacity), got 1.5
    """
    if b is None:
        return None
    ok = isinstance(b, int | float) and not isinstance(b, bool) and np.isfinite(b)
    if not ok or not 0.0 <= float(b) <= 1.0:
        raise ConfigError(
            f"{name} is the fraction of tuples shed and must be in [0, 1] "
            f"(or None to take it from the capacity), got {b!r}"
        )
    return float(b)


def shed_fraction(b: float | None, backlog: Backlog, capacity: float) -> float:
    """The fraction to shed: ``b`` when given, else ``1 - capacity / total_cost`` (clipped to [0, 1]).

    >>> bl = Backlog(lane_query=[0], lane_source=[0], count=[100], tuple_sic=[0.01],
    ...              query_sic=[0.0])
    >>> shed_fraction(None, bl, 25.0), shed_fraction(0.5, bl, 25.0)
    (0.75, 0.5)
    """
    if b is not None:
        return float(b)
    total = backlog.total_cost
    if total <= 0:
        return 0.0
    return float(min(1.0, max(0.0, 1.0 - capacity / total)))


def _remove_uniform(
    keep: np.ndarray, removable: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Take ``n`` tuples out of ``removable`` (per lane) uniformly at random; returns new keep."""
    n = int(min(n, removable.sum()))
    if n <= 0:
        return keep
    return keep - rng.multivariate_hypergeometric(removable, n)


def fit_to_capacity(
    keep: np.ndarray,
    backlog: Backlog,
    capacity: float,
    rng: np.random.Generator,
    *,
    floor: np.ndarray | None = None,
    ceiling: np.ndarray | None = None,
    fill: bool = True,
) -> np.ndarray:
    """Adjust per-lane keep counts so their cost fits ``capacity`` (and fills it when ``fill``).

    Tuples are removed uniformly at random among those above ``floor`` (per lane, default 0), and
    added uniformly at random among the shed ones up to ``ceiling`` (per lane, default the lane's
    count), by multivariate hypergeometric draws, so a uniform sample stays uniform. Costs may differ between lanes: whole draws never remove more
    than the excess; the last few tuples are settled lane by lane (a loop over lanes, not tuples).
    If ``floor`` alone costs more than ``capacity`` the result is ``floor`` (an overrun the caller
    reports).

    >>> bl = Backlog(lane_query=[0, 0], lane_source=[0, 1], count=[50, 50],
    ...              tuple_sic=[0.01, 0.01], query_sic=[0.0])
    >>> rng = np.random.default_rng(0)
    >>> int(fit_to_capacity(np.array([40, 40]), bl, 60.0, rng).sum())
    60
    >>> int(fit_to_capacity(np.array([10, 10]), bl, 60.0, rng).sum())
    60
    """
    keep = np.asarray(keep, dtype=np.int64).copy()
    count = backlog.count if ceiling is None else np.minimum(backlog.count, ceiling)
    cost = backlog.unit_cost
    lo = np.zeros_like(keep) if floor is None else np.minimum(np.asarray(floor, np.int64), keep)
    kept_cost = float((keep * cost).sum())
    # --- trim: whole hypergeometric draws that cannot overshoot, then lane by lane.
    for _ in range(16):
        excess = kept_cost - capacity
        removable = keep - lo
        if excess <= 1e-12 or removable.sum() == 0:
            break
        cmax = float(cost[removable > 0].max())
        n = int(excess // cmax)
        if n < 1:
            break
        keep = _remove_uniform(keep, removable, n, rng)
        kept_cost = float((keep * cost).sum())
    excess = kept_cost - capacity
    if excess > 1e-12:
        lanes = rng.permutation(np.flatnonzero(keep > lo))
        for i in lanes:
            if excess <= 1e-12:
                break
            take = min(int(keep[i] - lo[i]), int(np.ceil(excess / cost[i] - 1e-12)))
            keep[i] -= take
            excess -= take * cost[i]
        kept_cost = float((keep * cost).sum())
    if not fill:
        return keep
    # --- fill: add uniformly random shed tuples while whole draws surely fit.
    for _ in range(16):
        spare = capacity - kept_cost
        addable = count - keep
        if spare <= 1e-12 or addable.sum() == 0:
            break
        cmax = float(cost[addable > 0].max())
        n = int(spare // cmax)
        if n < 1:
            break
        keep = keep + rng.multivariate_hypergeometric(addable, int(min(n, addable.sum())))
        kept_cost = float((keep * cost).sum())
    spare = capacity - kept_cost
    addable = count - keep
    if spare > 1e-12 and addable.sum() > 0:
        # Cheapest lanes first (random among equal costs) until not even one more tuple fits.
        cand = np.flatnonzero(addable > 0)
        cand = cand[rng.permutation(cand.size)]
        cand = cand[np.argsort(cost[cand], kind="stable")]
        for i in cand:
            if spare < cost[i] - 1e-12:
                break
            add = min(int(addable[i]), int(np.floor(spare / cost[i] + 1e-12)))
            keep[i] += add
            spare -= add * cost[i]
    return keep


@dataclass(frozen=True, kw_only=True)
class UniformConfig(PolicyConfig):
    """Settings of :class:`Uniform`.

    Parameters
    ----------
    seed : int
        Seed of the binomial draws.
    b : float or None
        Fraction of tuples shed, in [0, 1] (CoD §VII: "shed percentage parameter b"; kept
        fraction = 1 - b). None takes it from the capacity the runtime passes.

    >>> UniformConfig(b=0.98).b
    0.98
    >>> UniformConfig(b=-0.1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: b is the fraction of tuples shed and must be in [0, 1] (or None to take it from the capacity), got -0.1
    """

    b: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_shed_fraction(self.b)


class Uniform(Policy):
    """Shed every tuple with probability ``b``: ``keep ~ Binomial(count, 1 - b)`` per lane.

    With ``b = None`` the draw is fitted to the capacity (see the module docstring).

    Examples
    --------
    >>> from spillway.policies.base import Backlog
    >>> bl = Backlog(lane_query=[0], lane_source=[0], count=[1000], tuple_sic=[1e-3],
    ...              query_sic=[0.0])
    >>> a, b = Uniform(b=0.5, seed=7), Uniform(b=0.5, seed=7)
    >>> a.decide(bl, 0.0).keep.tolist() == b.decide(bl, 0.0).keep.tolist()
    True
    """

    name = "uniform"
    config_class = UniformConfig
    config: UniformConfig

    @property
    def sheds_always(self) -> bool:
        """A shed fraction ``b`` set by the user is applied at every interval (CoD §III (c)).

        >>> Uniform(b=0.5).sheds_always
        True
        """
        return self.config.b is not None

    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        """Admit a uniform random share ``1 - b`` of every lane (CoD Alg. 1)."""
        cap = _check_capacity(capacity)
        b = self.config.b
        if b is None and backlog.total_cost <= cap:
            return admit_all(backlog)
        frac = shed_fraction(b, backlog, cap)
        keep = self.rng.binomial(backlog.count, 1.0 - frac).astype(np.int64)
        if b is None:
            keep = fit_to_capacity(keep, backlog, cap, self.rng)
        return Admission(keep=keep)
