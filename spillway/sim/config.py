"""Settings of a simulation run (:class:`SimConfig`) and node failures (:class:`NodeFailure`).

Defaults are THEMIS's (§7, Table 2): shedding interval 250 ms (= STW slide), STW 10 s,
operators' windows of 1 s, Emulab sources at 150 tuples/s in batches of 50, 5 ms between nodes,
coordinator updates every interval, 5 minutes.

Delays are rounded up to whole shedding intervals: the simulator is time-stepped (one step =
one interval) and a node looks at its input only when it decides, so anything that arrives
between two decisions waits for the next one. A delay of 0 means "before the next decision of
the same step"; 5 ms and 50 ms both mean "one interval later" at 250 ms (see
:mod:`spillway.sim.engine`).

Examples
--------
>>> c = SimConfig(duration_s=60.0, policy="random")
>>> c.n_steps, c.steps_per_window, c.delay_steps(c.data_delay_s)
(240, 4, 1)
>>> SimConfig(interval_s=0.3, stw_s=9.0)
Traceback (most recent call last):
...
spillway.errors.ConfigError: window_s (1.0) must be a whole multiple of interval_s (0.3): a window closes on a decision
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds.profiles import PROFILES
from spillway.policies import POLICIES

#: How a node gets the SIC of its queries: from the query coordinator (THEMIS ``updateSIC``,
#: with the local projection), from its own admissions only (THEMIS Fig. 4, top), or as the
#: share it kept of what reached its fragment (``share``: the Spark node without a coordinator,
#: :meth:`spillway.spark.controller.NodeController._projection`).
COORDINATION = ("coordinated", "local", "share")
_TOL = 1e-9


def _num(name: str, v: Any, *, low: float = 0.0, strict: bool = True) -> float:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= low if strict else v < low):
        rule = f"> {low:g}" if strict else f">= {low:g}"
        raise ConfigError(f"{name} must be a finite number {rule}, got {v!r}")
    return float(v)


def _multiple(a: float, b: float) -> bool:
    r = a / b
    return r >= 1 - _TOL and abs(r - round(r)) <= _TOL * max(1.0, r)


@dataclass(frozen=True, kw_only=True)
class NodeFailure:
    """Node ``node`` stops at ``at_s`` (no decisions, processing or reports) until ``until_s``.

    Tuples that reach it meanwhile are lost, and so are its windows in progress.

    >>> NodeFailure(node=2, at_s=60.0, until_s=30.0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: until_s (30.0) must be after at_s (60.0), or None for a node that never comes back
    """

    node: int
    at_s: float
    until_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.node, bool) or not isinstance(self.node, int) or self.node < 0:
            raise ConfigError(f"node must be an int >= 0, got {self.node!r}")
        _num("at_s", self.at_s, strict=False)
        if self.until_s is not None and _num("until_s", self.until_s, strict=False) <= self.at_s:
            raise ConfigError(
                f"until_s ({self.until_s}) must be after at_s ({self.at_s}), or None for a node "
                "that never comes back"
            )

    def down(self, t: float) -> bool:
        """Whether the node is down at ``t``."""
        return self.at_s <= t and (self.until_s is None or t < self.until_s)


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """How a deployment is run.

    Parameters
    ----------
    duration_s : simulated time (THEMIS reports 5 minutes after deployment).
    interval_s : shedding interval = STW slide (THEMIS 250 ms).
    stw_s : source time window (THEMIS 10 s); a whole multiple of ``interval_s``.
    window_s : the operators' tumbling window (THEMIS Table 1: 1 s); a whole multiple of
        ``interval_s``.
    source_rate : tuples/s per source (Table 2 Emulab: 150).
    batch_size : tuples per source batch (Table 2 Emulab: 50; the rate is ``rate / batch``
        batches per second).
    profile : arrival profile of the batches (``constant``, ``bursty``, ``pareto``, ``step``;
        :data:`spillway.feeds.PROFILES`).
    profile_options : the profile's options as ``(name, value)`` pairs (e.g.
        ``(("fraction", 0.1), ("factor", 10.0), ("normalise", False))``).
    data_delay_s : network delay of tuples between nodes and of results to the coordinator.
    coord_delay_s : delay of coordinator updates to the nodes and of node reports back.
    policy : shedding policy (:data:`spillway.policies.POLICIES`).
    coordination : ``coordinated`` (coordinator updates + local projection), ``local`` (own
        admitted SIC) or ``share`` (own admitted SIC over the SIC mass that arrived at the
        fragment in the STW, tuple SICs divided by the same mass: Spark's uncoordinated rule).
    projection_lag_s : admission-to-result lag the projection assumes; None estimates it per
        fragment from its hops to the root.
    headroom : fraction of the interval a node fills (THEMIS: 1, ``c`` tuples exactly).
    duration_noise : relative standard deviation of processing times around the node's true
        cost (log-normal, seeded), which the nodes' cost models see.
    heartbeat_timeout_s : a node not heard from for longer is lost (coordinator).
    warmup_s : SIC samples before this are not used in summaries.
    sample_s : how often the query SIC (Eq. 4) is sampled.
    failures : nodes that stop (and maybe come back).
    seed : seed of arrival phases, policies and processing noise.
    """

    duration_s: float = 300.0
    interval_s: float = 0.25
    stw_s: float = 10.0
    window_s: float = 1.0
    source_rate: float = 150.0
    batch_size: int = 50
    profile: str = "constant"
    profile_options: tuple[tuple[str, Any], ...] = ()
    data_delay_s: float = 0.005
    coord_delay_s: float = 0.005
    policy: str = "balance-sic"
    coordination: str = "coordinated"
    projection_lag_s: float | None = None
    headroom: float = 1.0
    duration_noise: float = 0.02
    heartbeat_timeout_s: float = 1.0
    warmup_s: float = 20.0
    sample_s: float = 1.0
    failures: tuple[NodeFailure, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("duration_s", "interval_s", "stw_s", "window_s", "source_rate", "sample_s"):
            _num(name, getattr(self, name))
        for name in ("data_delay_s", "coord_delay_s", "duration_noise", "warmup_s"):
            _num(name, getattr(self, name), strict=False)
        _num("heartbeat_timeout_s", self.heartbeat_timeout_s)
        if self.projection_lag_s is not None:
            _num("projection_lag_s", self.projection_lag_s, strict=False)
        if not 0 < self.headroom <= 1:
            raise ConfigError(f"headroom must be in (0, 1], got {self.headroom!r}")
        if (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or self.batch_size < 1
        ):
            raise ConfigError(f"batch_size must be an int >= 1, got {self.batch_size!r}")
        for name in ("stw_s", "window_s", "duration_s", "sample_s"):
            if not _multiple(getattr(self, name), self.interval_s):
                what = {
                    "window_s": "a window closes on a decision",
                    "stw_s": "the STW slides by one interval",
                    "duration_s": "the run is whole steps",
                    "sample_s": "SIC is sampled on a step",
                }[name]
                raise ConfigError(
                    f"{name} ({getattr(self, name)}) must be a whole multiple of interval_s "
                    f"({self.interval_s}): {what}"
                )
        if self.warmup_s >= self.duration_s:
            raise ConfigError(
                f"warmup_s ({self.warmup_s}) must be below duration_s ({self.duration_s}): "
                "summaries use the samples after it"
            )
        if self.profile not in PROFILES:
            raise UnknownNameError(
                f"profile must be one of {', '.join(PROFILES)}; got {self.profile!r}"
            )
        if not isinstance(self.profile_options, tuple) or any(
            not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str))
            for p in self.profile_options
        ):
            raise ConfigError(
                f"profile_options must be a tuple of (name, value) pairs, got {self.profile_options!r}"
            )
        if self.policy not in POLICIES:
            raise UnknownNameError(
                f"policy must be one of {', '.join(sorted(POLICIES))}; got {self.policy!r}"
            )
        if self.coordination not in COORDINATION:
            raise UnknownNameError(
                f"coordination must be one of {', '.join(COORDINATION)}; got {self.coordination!r}"
            )
        if not isinstance(self.failures, tuple) or any(
            not isinstance(f, NodeFailure) for f in self.failures
        ):
            raise ConfigError("failures must be a tuple of NodeFailure")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative int, got {self.seed!r}")

    @property
    def n_steps(self) -> int:
        """Shedding intervals in the run."""
        return int(round(self.duration_s / self.interval_s))

    @property
    def steps_per_window(self) -> int:
        """Intervals per operator window."""
        return int(round(self.window_s / self.interval_s))

    @property
    def steps_per_sample(self) -> int:
        """Intervals between two SIC samples."""
        return int(round(self.sample_s / self.interval_s))

    def delay_steps(self, delay_s: float) -> int:
        """Whole intervals a delay takes (rounded up; 0 for no delay).

        >>> SimConfig().delay_steps(0.05), SimConfig().delay_steps(0.0), SimConfig().delay_steps(0.5)
        (1, 0, 2)
        """
        return int(math.ceil(delay_s / self.interval_s - _TOL)) if delay_s > 0 else 0

    def to_dict(self) -> dict[str, Any]:
        """The config as plain values (for summary.json)."""
        return asdict(self)


__all__ = ["COORDINATION", "NodeFailure", "SimConfig"]
