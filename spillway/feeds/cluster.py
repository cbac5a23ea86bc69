"""Cluster monitoring: CPU % and free memory (KB) of machines, a stand-in for PlanetLab CoTop.

THEMIS evaluates its complex workload (AVG-all, TOP-5, COV; Table 1) on CPU and memory traces of
PlanetLab nodes recorded by CoTop (THEMIS §7, "Data sets"). Those traces are not available offline, so this
feed is a **synthetic stand-in** with the properties the queries depend on:

- CPU % of machine ``m`` at time ``t`` is bounded to [0, 100]: a per-machine level (uniform in
  [15, 65]) plus smooth noise on three time scales (2 min, 15 s, 2 s) plus bursts (each 30 s
  slot of a machine bursts with probability 0.15, rising and falling as ``sin²`` to a peak of
  +30 to +70 points) plus a small per-reading noise; so machines differ, wander and sometimes
  saturate, like loaded PlanetLab nodes.
- Free memory in KB is log-normal around the TOP-5 filter threshold of 100,000 KB: a
  per-machine log-level ~ N(0, 0.9²) plus slow (5 min) and medium (20 s) smooth noise, lowered
  while the machine's CPU bursts; clipped to [0, 2,000,000 KB] (2 GB machines). At any time
  roughly half of the machines pass ``free >= 100,000``, and which ones changes slowly.

Every reading is a function of the machine's latent state at the reading's arrival time
(hashed value noise: Gaussian values at the slots of each time scale, smoothly interpolated), so
it remains a pure function of (seed, source, index): no sequential random walk.

Source layout (``layout="cpu_mem"``, default): source ``2m`` is the CPU % of machine
``machine_offset + m`` and source ``2m + 1`` its free memory; ``n_sources`` must be even (a
TOP-5 fragment's 20 sources are 10 machines). With ``layout="cpu"`` every source is the CPU of
its own machine (for AVG-all and COV over several machines). ``key`` is the machine id.

Examples
--------
>>> f = ClusterFeed(n_sources=20, rate=20.0, seed=1)
>>> cpu = f.payload(0, np.arange(2000))
>>> bool((cpu["value"] >= 0).all() and (cpu["value"] <= 100).all()), int(cpu["key"][0])
(True, 0)
>>> int(f.payload(3, np.arange(1))["key"][0])   # source 3: memory of machine 1
1
"""

from __future__ import annotations

from typing import Unpack

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds import hashing
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import count_of

#: (time scale s, amplitude in CPU points) of the CPU's smooth noise.
CPU_SCALES: tuple[tuple[float, float], ...] = ((120.0, 18.0), (15.0, 8.0), (2.0, 4.0))
#: (time scale s, amplitude in log units) of the free memory's smooth noise.
MEM_SCALES: tuple[tuple[float, float], ...] = ((300.0, 0.5), (20.0, 0.15))
BURST_SLOT_S = 30.0
BURST_PROB = 0.15
MEM_THRESHOLD_KB = 100_000.0
MEM_TOTAL_KB = 2_000_000.0
LAYOUTS = ("cpu_mem", "cpu")
_BURST_MEAN = BURST_PROB * 0.5 * (0.5 / 0.7)  # P(burst) · mean of sin² · mean peak


def _slot_normal(seed: int, stream: str, machine: int, slot: np.ndarray) -> np.ndarray:
    """Hashed N(0, 1) per (machine, slot); computed once per distinct slot of a sorted range."""
    lo, hi = int(slot.min()), int(slot.max())
    if hi - lo + 1 <= slot.size:
        table = hashing.normal(seed, stream, machine, np.arange(lo, hi + 1))
        return table[slot - lo]
    return hashing.normal(seed, stream, machine, slot)


def smooth_noise(seed: int, stream: str, machine: int, t: np.ndarray, scale_s: float) -> np.ndarray:
    """Value noise: N(0, 1) values at multiples of ``scale_s``, interpolated by smoothstep.

    Continuous in ``t``; its variance is 1 at slot boundaries and 0.5 midway.

    >>> x = smooth_noise(0, "n", 0, np.array([0.0, 0.5, 1.0]), 1.0)
    >>> bool(min(x[0], x[2]) <= x[1] <= max(x[0], x[2]))
    True
    """
    u = t / scale_s
    k = np.floor(u).astype(np.int64)
    f = u - k
    g0 = _slot_normal(seed, stream, machine, k)
    g1 = _slot_normal(seed, stream, machine, k + 1)
    return g0 + (g1 - g0) * (f * f * (3.0 - 2.0 * f))


class ClusterFeed(GeneratedFeed):
    """CPU % and free memory (KB) of machines; see the module docstring for the model.

    Parameters
    ----------
    n_sources, rate, profile, profile_options, seed : as :class:`GeneratedFeed`.
    layout : ``"cpu_mem"`` (source 2m CPU, 2m+1 memory of machine m) or ``"cpu"``.
    machine_offset : id of the first machine (so several queries can watch different machines).
    """

    name = "cluster"

    def __init__(
        self,
        *,
        layout: str = "cpu_mem",
        machine_offset: int = 0,
        **settings: Unpack[FeedSettings],
    ) -> None:
        super().__init__(**settings)
        if layout not in LAYOUTS:
            raise ConfigError(f"cluster layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
        if layout == "cpu_mem" and self.n_sources % 2:
            raise ConfigError(
                f"cluster layout 'cpu_mem' needs an even number of sources (CPU and memory of "
                f"each machine), got {self.n_sources}: use an even number or layout = 'cpu'"
            )
        self.layout = layout
        self.machine_offset = count_of("cluster machine_offset", machine_offset, low=0)

    @property
    def n_machines(self) -> int:
        """Machines watched by this feed."""
        return self.n_sources // 2 if self.layout == "cpu_mem" else self.n_sources

    def machine(self, source: int) -> int:
        """Machine id of ``source``."""
        per = 2 if self.layout == "cpu_mem" else 1
        return self.machine_offset + source // per

    def is_memory(self, source: int) -> bool:
        """Whether ``source`` reports free memory (else CPU %)."""
        return self.layout == "cpu_mem" and source % 2 == 1

    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        return np.full(index.shape, self.machine(source), dtype=np.int64)

    def burst(self, machine: int, t: np.ndarray) -> np.ndarray:
        """Burst shape of ``machine`` at times ``t``: 0 outside bursts, up to 1 at a peak."""
        u = t / BURST_SLOT_S
        k = np.floor(u).astype(np.int64)
        lo = int(k.min()) if k.size else 0
        span = np.arange(lo, int(k.max()) + 1) if k.size else np.zeros(0, dtype=np.int64)
        on = hashing.uniform(self.seed, "cluster.burst", machine, span) < BURST_PROB
        height = 0.3 + 0.4 * hashing.uniform(self.seed, "cluster.burst.height", machine, span)
        peak = np.where(on, height / 0.7, 0.0)[k - lo]
        return peak * np.sin(np.pi * (u - k)) ** 2

    def cpu(self, machine: int, t: np.ndarray) -> np.ndarray:
        """Noise-free CPU % of ``machine`` at times ``t`` (before the per-reading noise)."""
        level = 15.0 + 50.0 * float(hashing.uniform(self.seed, "cluster.cpu.level", machine, 0)[0])
        x = np.full(t.shape, level)
        for j, (scale, amp) in enumerate(CPU_SCALES):
            x += amp * smooth_noise(self.seed, f"cluster.cpu.{j}", machine, t, scale)
        x += 70.0 * self.burst(machine, t)
        return x

    def log_free(self, machine: int, t: np.ndarray) -> np.ndarray:
        """``log(free KB / 100,000)`` of ``machine`` at times ``t`` (before reading noise)."""
        level = 0.9 * float(hashing.normal(self.seed, "cluster.mem.level", machine, 0)[0])
        z = np.full(t.shape, level)
        for j, (scale, amp) in enumerate(MEM_SCALES):
            z += amp * smooth_noise(self.seed, f"cluster.mem.{j}", machine, t, scale)
        # Bursts eat memory; centred so the long-run median stays near the threshold.
        z -= 0.6 * (self.burst(machine, t) - _BURST_MEAN)
        return z

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        if index.size == 0:
            return np.zeros(0)
        t = self.arrival_time(source, index)
        m = self.machine(source)
        if self.is_memory(source):
            noise = 0.02 * hashing.normal(self.seed, "cluster.mem.read", source, index)
            free = MEM_THRESHOLD_KB * np.exp(self.log_free(m, t) + noise)
            return np.clip(np.round(free), 0.0, MEM_TOTAL_KB)
        noise = 1.5 * hashing.normal(self.seed, "cluster.cpu.read", source, index)
        return np.clip(self.cpu(m, t) + noise, 0.0, 100.0)
