"""Packet sizes with a drifting mean: a synthetic stand-in for the DEC network trace.

CoD's scalar workload (§VII-B) is the DEC trace of network packets monitored over an hour (most
likely the Internet Traffic Archive DEC-PKT traces; CoD §VII-B, Table III), with the query "average packet
size" over 45-second windows sliding every 15 seconds. This **synthetic stand-in** keeps what
the scalar query depends on: a bimodal size distribution with a mean that drifts.

- A packet is *small* (ACK-like: 40 bytes plus an exponential of mean 20, at most 120) with
  probability ``p_small(e)``, else *large*: a full 1,500-byte MTU frame with probability 0.6,
  otherwise uniform in [120, 1,500) bytes. So the coefficient of variation is about 0.8-1.
- ``p_small`` drifts per epoch of ``epoch_s``: ``0.5 + amplitude · sin(2π e·epoch_s /
  period_s)`` plus a hashed jitter N(0, 0.05²) per epoch, clipped to [0.05, 0.95]; the mean size
  moves by hundreds of bytes over a period.
- ``key`` is 0 (a scalar stream).

Examples
--------
>>> f = PacketFeed(n_sources=1, rate=1000.0, seed=4, epoch_s=15.0)
>>> v = f.payload(0, np.arange(30_000))["value"]
>>> bool(v.min() >= 40 and v.max() <= 1500)
True
>>> 300 < float(v.mean()) < 1200
True
"""

from __future__ import annotations

from typing import Unpack

import numpy as np

from spillway.feeds import hashing
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import count_of, in_range, positive

MTU = 1500.0
SMALL_BASE, SMALL_MEAN_EXTRA, SMALL_MAX = 40.0, 20.0, 120.0
P_MTU = 0.6
JITTER_SD = 0.05


class PacketFeed(GeneratedFeed):
    """DEC-like packet sizes (bytes) with a drifting mean; ``key`` is 0. See the module doc.

    Parameters
    ----------
    n_sources, rate, profile, profile_options, seed : as :class:`GeneratedFeed`.
    epoch_s : epoch length (s) of the drift (the query's slide).
    amplitude : amplitude of the drift of ``p_small``, [0, 0.45].
    period_s : period of the drift (s).
    """

    name = "packets"

    def __init__(
        self,
        *,
        epoch_s: float = 15.0,
        amplitude: float = 0.2,
        period_s: float = 600.0,
        **settings: Unpack[FeedSettings],
    ) -> None:
        super().__init__(**settings)
        self.epoch_s = positive("packets epoch_s", epoch_s)
        self.amplitude = in_range("packets amplitude", amplitude, 0.0, 0.45)
        self.period_s = positive("packets period_s", period_s)

    def p_small(self, epoch: np.ndarray) -> np.ndarray:
        """Probability that a packet of ``epoch`` is small (vectorised over epochs).

        >>> f = PacketFeed(n_sources=1, rate=1.0, amplitude=0.0)
        >>> bool(abs(f.p_small(np.array([0]))[0] - 0.5) < 0.25)
        True
        """
        e = np.asarray(epoch, dtype=np.int64)
        phase = 2.0 * np.pi * e * self.epoch_s / self.period_s
        jitter = JITTER_SD * hashing.normal(self.seed, "packets.jitter", 0, np.maximum(e, 0))
        return np.clip(0.5 + self.amplitude * np.sin(phase) + jitter, 0.05, 0.95)

    def expected_size(self, epoch: int) -> float:
        """Expected packet size (bytes) during ``epoch``."""
        e = count_of("epoch", epoch, low=0)
        p = float(self.p_small(np.array([e]))[0])
        small = SMALL_BASE + SMALL_MEAN_EXTRA * (
            1 - np.exp(-(SMALL_MAX - SMALL_BASE) / SMALL_MEAN_EXTRA)
        )
        large = P_MTU * MTU + (1 - P_MTU) * 0.5 * (SMALL_MAX + MTU)
        return p * small + (1 - p) * large

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        ep = self.epoch_of(source, index, self.epoch_s)
        u = hashing.uniform(self.seed, "packets.kind", source, index)
        x = hashing.exponential(self.seed, "packets.small", source, index)
        w = hashing.uniform(self.seed, "packets.large", source, index)
        small = SMALL_BASE + np.minimum(SMALL_MEAN_EXTRA * x, SMALL_MAX - SMALL_BASE)
        large = np.where(w < P_MTU, MTU, SMALL_MAX + (w - P_MTU) / (1 - P_MTU) * (MTU - SMALL_MAX))
        return np.where(u < self.p_small(ep), np.round(small), np.floor(large))
