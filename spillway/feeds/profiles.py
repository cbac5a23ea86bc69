"""Arrival-rate profiles: when tuple ``i`` of source ``s`` arrives, as a pure function.

A profile gives each source a rate ``λ_s(t)`` (tuples/s) and its integral ``Λ_s(t)``. Tuple ``i``
of source ``s`` arrives at ``a_i = Λ_s⁻¹(i + φ_s)``, with a per-source phase ``φ_s`` in (0, 1)
hashed from the seed (so sources do not tick in lock-step), and the number of tuples that arrived
in ``[0, t)`` is ``N_s(t) = max(0, ⌈Λ_s(t) − φ_s⌉)``: an int, non-decreasing in ``t``, and
``N_s(a_i + ε) > i`` for any ``ε > 0`` (up to float rounding). At a constant rate ``r``,
``N_s(t) = r·t`` whenever ``r·t`` is a whole number.

Profiles (``rate`` is always the long-run mean per source unless a profile says otherwise):

- ``constant``: ``λ = rate``;
- ``step``: ``λ = rate`` before ``times[0]``, then ``rate · factors[k]`` from ``times[k]`` on
  (factors are relative to ``rate``, not cumulative; e.g. DILoS S_c: ``times=[10],
  factors=[1.75]`` for 200 → 350 t/s); the long-run mean is the last level; with
  ``period_s`` the pattern repeats every ``period_s`` (the last level lasts until then) and
  the long-run mean is the time-weighted mean of one period;
- ``bursty``: THEMIS §7.4, "10% of the time at 10× the rate". Time is cut into slots of
  ``slot_s``; each (source, slot) is a burst with probability ``fraction`` (a hash of seed,
  source and slot: deterministic, independent across sources), bursting slots run at
  ``factor ×`` the base rate. With ``normalise=True`` (default) the base rate is
  ``rate / (1 − fraction + fraction · factor)`` so the long-run mean is ``rate`` (base =
  ``rate / 1.9`` at the defaults); with ``normalise=False`` the base rate is ``rate`` (the
  paper's setting) and the long-run mean is ``1.9 · rate``;
- ``pareto``: heavy-tailed per-slot rates (DILoS SD_p: "Pareto per control period"): each
  (source, slot) rate is drawn from a Pareto law of shape ``alpha`` bounded to
  ``[low, spread · low]``, with ``low`` chosen so the mean is ``rate``;
- ``pareto_ranges``: per-slot Pareto rates whose bounds ``[low, high]`` (relative to ``rate``)
  change every ``epoch_s`` through a list of ranges (Pham SD_p: classes 2 and 3 in one fixed
  range, class 1's range changing every 50 s);
- ``trace``: a packet-trace-like rate pattern (a synthetic stand-in for the LBL-PKT-4 TCP
  trace rate of Pham's S_r, Fig. 7): slow swings, per-slot burstiness and rare sudden peaks.

Slot profiles keep ``Λ`` at block boundaries (64 slots), extended lazily and recomputed from
hashes inside a block, so ``count(t)`` costs O(sources · 64) and memory stays small for hundreds
of sources over hours. Caches are not pickled.

Examples
--------
>>> p = make_profile("constant", n_sources=2, rate=400.0, seed=1)
>>> p.count(1.0).tolist(), p.count(2.5).tolist()
([400, 400], [1000, 1000])
>>> b = make_profile("bursty", n_sources=300, rate=100.0, seed=1)
>>> round(float(b.count(600.0).mean() / 600.0), -1)   # long-run mean: the rate
100.0
>>> t = b.arrival_time(5, np.arange(1000))
>>> bool((b.count(float(t[-1]) + 1e-9)[5] == 1000) and (np.diff(t) > 0).all())
True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds import hashing
from spillway.feeds.options import (
    check_index,
    check_source,
    check_time,
    construct,
    count_of,
    in_range,
    positive,
    seed_of,
)

_BLOCK = 64  # slots per cached block of a slot profile
_CHUNK = 1 << 22  # hashed rates computed at once when extending the cache


class Profile(ABC):
    """Arrival process of ``n_sources`` sources; subclasses give ``Λ_s`` and its inverse.

    Parameters
    ----------
    n_sources : number of sources.
    rate : mean tuples per second per source (see each profile for the exact meaning).
    seed : seed of the hashed phases and slot draws.
    """

    name: ClassVar[str] = "profile"

    def __init__(self, *, n_sources: int, rate: float, seed: int = 0) -> None:
        self.n_sources = count_of("n_sources", n_sources)
        self.rate = positive("rate", rate)
        self.seed = seed_of(seed)
        self.phase = hashing.uniform(self.seed, "profile.phase", np.arange(self.n_sources), 0)

    @property
    @abstractmethod
    def mean_rate(self) -> float:
        """Long-run mean tuples per second of one source."""

    @abstractmethod
    def cumulative(self, t: float) -> np.ndarray:
        """``Λ_s(t)`` of every source (expected tuples by ``t >= 0``): float (n_sources,)."""

    @abstractmethod
    def inverse(self, source: int, y: np.ndarray) -> np.ndarray:
        """Times ``t`` with ``Λ_source(t) = y`` for ``y >= 0``: float array like ``y``."""

    def count(self, t: float) -> np.ndarray:
        """Tuples of every source that arrived in ``[0, t)``: int64 (n_sources,)."""
        t = check_time(t)
        if t <= 0:
            return np.zeros(self.n_sources, dtype=np.int64)
        n = np.ceil(self.cumulative(t) - self.phase)
        return np.maximum(n, 0).astype(np.int64)

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        """Arrival time (s) of tuples ``index`` of ``source``; increasing in the index."""
        s = check_source(self.n_sources, source)
        idx = check_index(index)
        return self.inverse(s, idx + self.phase[s])

    def options(self) -> dict[str, Any]:
        """The profile's own settings (for reports)."""
        return {}

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}(n_sources={self.n_sources}, rate={self.rate}{opts})"


class ConstantProfile(Profile):
    """Every source at ``rate`` tuples/s.

    >>> ConstantProfile(n_sources=1, rate=10.0).arrival_time(0, np.arange(3)).round(3).tolist()
    [0.083, 0.183, 0.283]
    """

    name = "constant"

    @property
    def mean_rate(self) -> float:
        return self.rate

    def cumulative(self, t: float) -> np.ndarray:
        return np.full(self.n_sources, self.rate * t)

    def inverse(self, source: int, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64) / self.rate


class StepProfile(Profile):
    """Rate ``rate`` until ``times[0]``, then ``rate · factors[k]`` from ``times[k]`` on.

    Parameters
    ----------
    times : increasing times (s, > 0) at which the rate changes.
    factors : the rate from each time on, relative to ``rate`` (> 0).
    period_s : if given (above the last time), the pattern starts again every ``period_s``.

    >>> p = StepProfile(n_sources=1, rate=200.0, times=[10.0], factors=[1.75])
    >>> p.count(10.0).tolist(), p.count(12.0).tolist()   # 200·10, then + 350·2
    ([2000], [2700])
    >>> r = StepProfile(n_sources=1, rate=100.0, times=[10.0], factors=[3.0], period_s=20.0)
    >>> r.count(20.0).tolist(), r.count(25.0).tolist(), r.mean_rate   # 100·10 + 300·10, + 100·5
    ([4000], [4500], 200.0)
    >>> r.arrival_time(0, np.array([3999, 4000])).round(2).tolist()   # the second period's first
    [20.0, 20.01]
    """

    name = "step"

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        seed: int = 0,
        times: Sequence[float] = (),
        factors: Sequence[float] = (),
        period_s: float | None = None,
    ) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed)
        ts = [positive(f"step times[{i}]", v) for i, v in enumerate(times)]
        fs = [positive(f"step factors[{i}]", v) for i, v in enumerate(factors)]
        if len(ts) != len(fs):
            raise ConfigError(
                f"step profile needs one factor per time, got {len(ts)} times and {len(fs)} factors"
            )
        if any(b <= a for a, b in zip(ts, ts[1:], strict=False)):
            raise ConfigError(f"step times must be strictly increasing, got {ts}")
        self.times, self.factors = tuple(ts), tuple(fs)
        self.period_s = None if period_s is None else positive("step period_s", period_s)
        if self.period_s is not None and ts and self.period_s <= ts[-1]:
            raise ConfigError(
                f"step period_s ({self.period_s:g}) must be above the last time ({ts[-1]:g})"
            )
        self._knots = np.array([0.0, *ts])
        self._rates = self.rate * np.array([1.0, *fs])
        self._cum = np.concatenate([[0.0], np.cumsum(np.diff(self._knots) * self._rates[:-1])])
        # Λ over one period (infinite without one: the pattern never starts again).
        self._cycle = (
            math.inf
            if self.period_s is None
            else float(self._cum[-1] + self._rates[-1] * (self.period_s - self._knots[-1]))
        )

    @property
    def mean_rate(self) -> float:
        if self.period_s is None:
            return float(self._rates[-1])
        return self._cycle / self.period_s

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"times": list(self.times), "factors": list(self.factors)}
        return out if self.period_s is None else {**out, "period_s": self.period_s}

    def _within(self, t: float) -> float:
        """``Λ(t)`` of the pattern not repeated."""
        k = int(np.searchsorted(self._knots, t, side="right")) - 1
        return float(self._cum[k] + self._rates[k] * (t - self._knots[k]))

    def _within_inverse(self, y: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self._cum, y, side="right") - 1
        return self._knots[k] + (y - self._cum[k]) / self._rates[k]

    def cumulative(self, t: float) -> np.ndarray:
        if self.period_s is None:
            return np.full(self.n_sources, self._within(t))
        n, rest = divmod(t, self.period_s)
        return np.full(self.n_sources, n * self._cycle + self._within(rest))

    def inverse(self, source: int, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.period_s is None:
            return self._within_inverse(y)
        n = np.floor(y / self._cycle)
        return n * self.period_s + self._within_inverse(y - n * self._cycle)


class SlotProfile(Profile):
    """A piecewise-constant rate per (source, slot of ``slot_s``), drawn by :meth:`slot_rates`.

    Subclasses define :meth:`slot_rates`; this class integrates it lazily and exactly.
    """

    def __init__(self, *, n_sources: int, rate: float, seed: int = 0, slot_s: float = 1.0) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed)
        self.slot_s = positive("slot_s", slot_s)
        self._reset_cache()

    def _reset_cache(self) -> None:
        # Λ at the start of every cached block: (n_sources, n_blocks + 1).
        self._bcum = np.zeros((self.n_sources, 1))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_bcum", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_cache()

    @abstractmethod
    def slot_rates(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Rate (tuples/s, > 0) of ``source`` in ``slot``; arrays broadcast together."""

    def _slot_counts(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return self.slot_rates(source, slot) * self.slot_s

    def _extend(self, n_blocks: int) -> None:
        have = self._bcum.shape[1] - 1
        if n_blocks <= have:
            return
        target = max(n_blocks, 2 * have, 16)
        src = np.arange(self.n_sources)[:, None]
        parts = [self._bcum]
        last = self._bcum[:, -1:]
        step = max(1, _CHUNK // (_BLOCK * self.n_sources))
        for b0 in range(have, target, step):
            b1 = min(target, b0 + step)
            slots = np.arange(b0 * _BLOCK, b1 * _BLOCK)[None, :]
            per_slot = self._slot_counts(src, slots).reshape(self.n_sources, b1 - b0, _BLOCK)
            block_sum = np.cumsum(per_slot, axis=2)[:, :, -1]
            cum = np.cumsum(np.concatenate([last, block_sum], axis=1), axis=1)[:, 1:]
            parts.append(cum)
            last = cum[:, -1:]
        self._bcum = np.concatenate(parts, axis=1)

    def cumulative(self, t: float) -> np.ndarray:
        k = int(t // self.slot_s)
        b = k // _BLOCK
        self._extend(b + 1)
        src = np.arange(self.n_sources)[:, None]
        counts = self._slot_counts(src, np.arange(b * _BLOCK, k + 1)[None, :])
        within = np.cumsum(counts, axis=1)
        base = self._bcum[:, b] + (within[:, -2] if k > b * _BLOCK else 0.0)
        nxt = self._bcum[:, b] + within[:, -1]
        rate = counts[:, -1] / self.slot_s
        return np.minimum(base + rate * (t - k * self.slot_s), nxt)

    def inverse(self, source: int, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if y.size == 0:
            return np.zeros(y.shape)
        top = float(y.max())
        guess = math.ceil(top / (self.mean_rate * self.slot_s * _BLOCK)) + 1
        self._extend(guess)
        while self._bcum[source, -1] <= top:  # a slow source: _extend at least doubles
            self._extend(self._bcum.shape[1])
        bc = self._bcum[source]
        blk = np.searchsorted(bc, y, side="right") - 1
        ub = np.unique(blk)
        slots = ub[:, None] * _BLOCK + np.arange(_BLOCK)[None, :]
        counts = self._slot_counts(np.array(source), slots)
        within = np.cumsum(counts, axis=1)
        bases = bc[ub][:, None] + np.concatenate([np.zeros((len(ub), 1)), within[:, :-1]], axis=1)
        flat = np.searchsorted(bases.ravel(), y, side="right") - 1
        row, col = np.divmod(flat, _BLOCK)
        k = ub[row] * _BLOCK + col
        rate = counts[row, col] / self.slot_s
        t = k * self.slot_s + (y - bases[row, col]) / rate
        return np.minimum(t, (k + 1) * self.slot_s)

    def options(self) -> dict[str, Any]:
        return {"slot_s": self.slot_s}


class BurstyProfile(SlotProfile):
    """THEMIS §7.4 bursty sources: ``fraction`` of the slots at ``factor ×`` the base rate.

    Parameters
    ----------
    fraction : probability that a (source, slot) bursts, in (0, 1).
    factor : rate multiplier of a burst (>= 1).
    slot_s : slot length (s).
    normalise : if True the long-run mean is ``rate``; else the base rate is ``rate``.

    >>> p = BurstyProfile(n_sources=1, rate=190.0, seed=3)
    >>> sorted(set(p.slot_rates(np.array(0), np.arange(100)).round(6).tolist()))
    [100.0, 1000.0]
    """

    name = "bursty"

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        seed: int = 0,
        fraction: float = 0.1,
        factor: float = 10.0,
        slot_s: float = 1.0,
        normalise: bool = True,
    ) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed, slot_s=slot_s)
        self.fraction = positive("bursty fraction", fraction)
        if self.fraction >= 1:
            raise ConfigError(f"bursty fraction must be in (0, 1), got {fraction!r}")
        self.factor = positive("bursty factor", factor)
        if self.factor < 1:
            raise ConfigError(f"bursty factor must be >= 1, got {factor!r}")
        if not isinstance(normalise, bool):
            raise ConfigError(f"bursty normalise must be true or false, got {normalise!r}")
        self.normalise = normalise
        gain = 1.0 - self.fraction + self.fraction * self.factor
        self.base_rate = self.rate / gain if normalise else self.rate
        self._mean = self.base_rate * gain

    @property
    def mean_rate(self) -> float:
        return self._mean

    def is_burst(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Whether ``source`` bursts in ``slot`` (bool, arrays broadcast)."""
        return hashing.uniform(self.seed, "profile.burst", source, slot) < self.fraction

    def slot_rates(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return np.where(self.is_burst(source, slot), self.base_rate * self.factor, self.base_rate)

    def options(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "factor": self.factor,
            "slot_s": self.slot_s,
            "normalise": self.normalise,
        }


def bounded_pareto_mean(alpha: float, low: float, high: float) -> float:
    """Mean of the Pareto law of shape ``alpha`` truncated to ``[low, high]``.

    >>> round(bounded_pareto_mean(1.0, 1.0, 10.0), 4)   # 10/9 · ln 10
    2.5584
    """
    s = high / low
    if math.isclose(alpha, 1.0):
        return low * s / (s - 1.0) * math.log(s)
    return low * alpha / (alpha - 1.0) * (1.0 - s ** (1.0 - alpha)) / (1.0 - s**-alpha)


class ParetoProfile(SlotProfile):
    """Heavy-tailed per-slot rates: bounded Pareto of shape ``alpha`` on ``[low, spread·low]``.

    Parameters
    ----------
    alpha : Pareto shape (> 0; smaller is heavier-tailed; DILoS uses 1).
    spread : ratio of the highest to the lowest rate (> 1; DILoS SD_p class 2: 1300/800).
    slot_s : slot length (s): one rate per source per slot (DILoS: per control period).

    ``low`` is set so the long-run mean per source is ``rate``.

    >>> p = ParetoProfile(n_sources=1, rate=1000.0, alpha=1.0, spread=1300 / 800)
    >>> r = p.slot_rates(np.array(0), np.arange(10_000))
    >>> round(p.low), round(p.high), round(float(r.mean()), -1)
    (792, 1287, 1000.0)
    """

    name = "pareto"

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        seed: int = 0,
        alpha: float = 1.0,
        spread: float = 10.0,
        slot_s: float = 1.0,
    ) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed, slot_s=slot_s)
        self.alpha = positive("pareto alpha", alpha)
        self.spread = positive("pareto spread", spread)
        if self.spread <= 1:
            raise ConfigError(f"pareto spread (highest / lowest rate) must be > 1, got {spread!r}")
        self.low = self.rate / bounded_pareto_mean(self.alpha, 1.0, self.spread)
        self.high = self.low * self.spread

    @property
    def mean_rate(self) -> float:
        return self.rate

    def slot_rates(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return hashing.pareto(
            self.seed,
            "profile.pareto",
            source,
            slot,
            alpha=self.alpha,
            low=self.low,
            high=self.high,
        )

    def options(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "spread": self.spread, "slot_s": self.slot_s}


class ParetoRangesProfile(SlotProfile):
    """Per-slot Pareto rates on ``[low, high] · rate``, the range changing every ``epoch_s``.

    Pham SD_p (§6.2.1): "the input rate (per control period) of classes 2 and 3 follows a
    Pareto distribution in the range of [800-1300] and [300-800], respectively, with skewness
    equal to 1"; class 1's range changes every 50 s. Epoch ``e`` uses ``ranges[e % len]``.

    Parameters
    ----------
    ranges : ``(low, high)`` pairs relative to ``rate`` (0 < low < high), used in turn.
    epoch_s : how long each range lasts (s).
    alpha : Pareto shape (Pham: 1).
    slot_s : one rate per source per slot (Pham: per control period).

    ``mean_rate`` is the mean over one cycle of the ranges.

    >>> p = ParetoRangesProfile(n_sources=1, rate=100.0, ranges=[(8.0, 13.0)], slot_s=0.15)
    >>> r = p.slot_rates(np.array(0), np.arange(20_000))
    >>> round(float(r.min())), round(float(r.max())), round(p.mean_rate)
    (800, 1300, 1010)
    """

    name = "pareto_ranges"

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        seed: int = 0,
        ranges: Sequence[Sequence[float]] = ((0.8, 1.3),),
        epoch_s: float = 50.0,
        alpha: float = 1.0,
        slot_s: float = 1.0,
    ) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed, slot_s=slot_s)
        pairs = []
        for i, pair in enumerate(ranges):
            if len(pair) != 2:
                raise ConfigError(f"pareto_ranges ranges[{i}] must be (low, high), got {pair!r}")
            low = positive(f"pareto_ranges ranges[{i}] low", pair[0])
            high = positive(f"pareto_ranges ranges[{i}] high", pair[1])
            if high <= low:
                raise ConfigError(
                    f"pareto_ranges ranges[{i}] needs low < high, got ({low:g}, {high:g})"
                )
            pairs.append((low, high))
        if not pairs:
            raise ConfigError("pareto_ranges needs at least one (low, high) range, got none")
        self.ranges = tuple(pairs)
        self.epoch_s = positive("pareto_ranges epoch_s", epoch_s)
        self.alpha = positive("pareto_ranges alpha", alpha)
        self._low = np.array([lo for lo, _ in pairs]) * self.rate
        self._high = np.array([hi for _, hi in pairs]) * self.rate
        means = [bounded_pareto_mean(self.alpha, lo, hi) for lo, hi in pairs]
        self._mean = self.rate * float(np.mean(means))

    @property
    def mean_rate(self) -> float:
        return self._mean

    def slot_rates(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        slot = np.asarray(slot)
        epoch = np.floor((slot * self.slot_s + 1e-9) / self.epoch_s).astype(np.int64)
        k = epoch % len(self.ranges)
        low, high = self._low[k], self._high[k]
        u = hashing.uniform(self.seed, "profile.pareto_ranges", source, slot)
        tail = (low / high) ** self.alpha
        return low * (1.0 - u * (1.0 - tail)) ** (-1.0 / self.alpha)

    def options(self) -> dict[str, Any]:
        return {
            "ranges": [list(r) for r in self.ranges],
            "epoch_s": self.epoch_s,
            "alpha": self.alpha,
            "slot_s": self.slot_s,
        }


class TraceProfile(SlotProfile):
    """A packet-trace-like rate: slow swings, per-slot burstiness and rare sudden peaks.

    A synthetic stand-in for the rate pattern of the LBL-PKT-4 TCP trace Pham's S_r replays
    (Fig. 7; the thesis gives neither its absolute rates nor its scaling, and the trace itself
    is not shipped). The rate of source ``s`` in slot ``k`` (time ``t``) is

        ``rate · swing(t) · burst(s, k) · peak(s, k) / norm``

    where ``swing(t) = max(0.2, 1 + a·sin(2πt/P1 + φ1) + a/2·sin(2πt/P2 + φ2))`` (periods
    ``P1 = period_s`` and ``P2 = period_s / 3.7``, phases hashed from the seed), ``burst`` a
    log-normal factor of mean 1 and coefficient of variation ``cv`` per slot, ``peak`` equal to
    ``peak_factor`` in a fraction ``peak_fraction`` of the slots (hashed) and 1 elsewhere, and
    ``norm = 1 + peak_fraction · (peak_factor − 1)`` so the long-run mean stays near ``rate``.
    To replay the real trace instead, use the ``replay`` feed on its timestamps.

    Parameters
    ----------
    amplitude : ``a``, the depth of the slow swings, in [0, 0.6].
    period_s : ``P1``, the period of the slowest swing (s).
    cv : coefficient of variation of the per-slot burstiness (>= 0).
    peak_fraction : fraction of slots with a sudden peak, in [0, 0.5].
    peak_factor : how much higher a peak slot's rate is (>= 1).
    slot_s : slot length (s).

    >>> p = TraceProfile(n_sources=1, rate=300.0, seed=4)
    >>> r = p.slot_rates(np.array(0), np.arange(3600))
    >>> round(float(r.mean()), -1), bool(r.max() > 3 * r.mean()), bool(r.min() > 0)
    (300.0, True, True)
    """

    name = "trace"

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        seed: int = 0,
        amplitude: float = 0.4,
        period_s: float = 300.0,
        cv: float = 0.3,
        peak_fraction: float = 0.02,
        peak_factor: float = 4.0,
        slot_s: float = 1.0,
    ) -> None:
        super().__init__(n_sources=n_sources, rate=rate, seed=seed, slot_s=slot_s)
        self.amplitude = in_range("trace amplitude", amplitude, 0.0, 0.6)
        self.period_s = positive("trace period_s", period_s)
        self.cv = positive("trace cv", cv, allow_zero=True)
        self.peak_fraction = in_range("trace peak_fraction", peak_fraction, 0.0, 0.5)
        self.peak_factor = positive("trace peak_factor", peak_factor)
        if self.peak_factor < 1:
            raise ConfigError(f"trace peak_factor must be >= 1, got {peak_factor!r}")
        phases = hashing.uniform(self.seed, "profile.trace.phase", 0, np.arange(2)) * 2 * math.pi
        self._phase = (float(phases[0]), float(phases[1]))
        self._norm = 1.0 + self.peak_fraction * (self.peak_factor - 1.0)

    @property
    def mean_rate(self) -> float:
        return self.rate

    def swing(self, t: np.ndarray) -> np.ndarray:
        """The slow, source-independent swing of the rate at times ``t`` (s)."""
        w = 2.0 * math.pi * np.asarray(t, dtype=np.float64)
        a = self.amplitude
        slow = a * np.sin(w / self.period_s + self._phase[0])
        fast = 0.5 * a * np.sin(w * 3.7 / self.period_s + self._phase[1])
        return np.maximum(0.2, 1.0 + slow + fast)

    def slot_rates(self, source: np.ndarray, slot: np.ndarray) -> np.ndarray:
        slot = np.asarray(slot)
        swing = self.swing((slot + 0.5) * self.slot_s)
        burst = hashing.lognormal(self.seed, "profile.trace.burst", source, slot, cv=self.cv)
        peak_u = hashing.uniform(self.seed, "profile.trace.peak", source, slot)
        peak = np.where(peak_u < self.peak_fraction, self.peak_factor, 1.0)
        return self.rate * swing * burst * peak / self._norm

    def options(self) -> dict[str, Any]:
        return {
            "amplitude": self.amplitude,
            "period_s": self.period_s,
            "cv": self.cv,
            "peak_fraction": self.peak_fraction,
            "peak_factor": self.peak_factor,
            "slot_s": self.slot_s,
        }


#: Registry of arrival-rate profiles, by the name used in configs (``QuerySpec.profile``).
PROFILES: dict[str, type[Profile]] = {
    "constant": ConstantProfile,
    "step": StepProfile,
    "bursty": BurstyProfile,
    "pareto": ParetoProfile,
    "pareto_ranges": ParetoRangesProfile,
    "trace": TraceProfile,
}


def make_profile(
    name: str, *, n_sources: int, rate: float, seed: int = 0, **options: Any
) -> Profile:
    """Build the profile ``name`` of :data:`PROFILES` with its ``options``.

    Raises
    ------
    UnknownNameError
        ``name`` is not a profile.
    ConfigError
        An unknown option or a value that breaks a rule.

    >>> make_profile("bursty", n_sources=1, rate=1.0, burst=2)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: profile 'bursty': unknown option(s) burst; known: factor, fraction, normalise, slot_s
    """
    return construct(
        "profile",
        PROFILES,
        name,
        fixed=("n_sources", "rate", "seed"),
        n_sources=n_sources,
        rate=rate,
        seed=seed,
        **options,
    )
