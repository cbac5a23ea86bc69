"""Deterministic, replayable workloads: feeds (what tuples carry) and profiles (when they arrive).

Every feed implements :class:`spillway.feeds.base.Feed`: a fixed set of sources where
everything about tuple ``i`` of source ``s`` is a pure function of the feed's settings (seed
included), ``s`` and ``i``, computed vectorised with numpy (no per-row Python). So the Spark data
source can record only offsets and regenerate any micro-batch exactly, on any executor.

A member of this family must:

- return the same arrays for the same settings, and for any sub-range the slice of the full
  range (counter-based hashing, :mod:`spillway.feeds.hashing`; never a sequential generator);
- keep ``count(t)`` integer and non-decreasing, with ``count(arrival_time(i) + ε) > i``;
- emit the payload columns ``key`` (int64) and ``value`` (float64);
- raise :class:`~spillway.errors.ConfigError` / :class:`~spillway.errors.UnknownNameError`
  (settings) or :class:`~spillway.errors.InputDataError` (unreadable input) with one line.

Registries (the names used by ``QuerySpec.feed`` and ``QuerySpec.profile``):

- :data:`FEEDS`: ``gaussian``, ``uniform``, ``exponential``, ``mixed`` (THEMIS synthetic data,
  mean 50; :mod:`~spillway.feeds.synthetic`), ``cluster`` (CPU and free memory of machines, a
  stand-in for the PlanetLab CoTop traces; :mod:`~spillway.feeds.cluster`), ``replay`` (a CSV or
  Parquet file by its timestamps; :mod:`~spillway.feeds.replay`); ``taxi``, ``tasks``, ``packets``
  (drifting stand-ins for the DEBS 2015 taxi rides, Google cluster task events and the DEC packet
  trace used by CoD; :mod:`~spillway.feeds.taxi`, :mod:`~spillway.feeds.tasks`,
  :mod:`~spillway.feeds.packets`);
- :data:`PROFILES`: ``constant``, ``step``, ``bursty`` (THEMIS §7.4), ``pareto``,
  ``pareto_ranges`` (Pham SD_p) and ``trace`` (a packet-trace-like rate, Pham S_r)
  (:mod:`~spillway.feeds.profiles`).

Pham's named input streams (S_c, S_step, S_r, SD_c, SD_p, SD_r) are in
:mod:`~spillway.feeds.inputs`; the background CPU load that changes a node's true capacity on
a schedule is :mod:`~spillway.feeds.background`.

To add a generated feed, subclass :class:`~spillway.feeds.generated.GeneratedFeed` in its own
module (its constructor takes its own keyword options and forwards the shared
:class:`~spillway.feeds.generated.FeedSettings`) and add it to :data:`FEEDS` below;
:func:`make_feed` then accepts its name and its own keyword options.

Examples
--------
>>> f = make_feed("gaussian", n_sources=3, rate=400.0, profile="bursty", seed=7)
>>> f.n_sources, f.count(0.0).tolist()
(3, [0, 0, 0])
>>> make_feed("gausian", n_sources=1, rate=1.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spillway.errors.UnknownNameError: feed must be one of cluster, ..., uniform; got 'gausian'
>>> make_feed("gaussian", n_sources=1, rate=1.0, sigma=3)
Traceback (most recent call last):
...
spillway.errors.ConfigError: feed 'gaussian': unknown option(s) sigma; known: mean, std
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spillway.feeds.base import PAYLOAD_COLUMNS, Feed
from spillway.feeds.cluster import ClusterFeed
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import construct
from spillway.feeds.packets import PacketFeed
from spillway.feeds.profiles import (
    PROFILES,
    BurstyProfile,
    ConstantProfile,
    ParetoProfile,
    ParetoRangesProfile,
    Profile,
    StepProfile,
    TraceProfile,
    make_profile,
)
from spillway.feeds.replay import ReplayFeed
from spillway.feeds.synthetic import ExponentialFeed, GaussianFeed, MixedFeed, UniformFeed
from spillway.feeds.tasks import TaskFeed
from spillway.feeds.taxi import TaxiFeed

#: Registry of feeds, by the name used in configs (``QuerySpec.feed``).
FEEDS: dict[str, type[Feed]] = {
    "gaussian": GaussianFeed,
    "uniform": UniformFeed,
    "exponential": ExponentialFeed,
    "mixed": MixedFeed,
    "cluster": ClusterFeed,
    "replay": ReplayFeed,
    "taxi": TaxiFeed,
    "tasks": TaskFeed,
    "packets": PacketFeed,
}

#: Feeds that read external logs, imported when first used (they need a log client):
#: name -> "module:class".
LOG_FEEDS: dict[str, str] = {
    "kafka": "spillway.kafka.feed:KafkaFeed",
    "folder": "spillway.feeds.folder:FolderFeed",
}

_FIXED = tuple(FeedSettings.__annotations__)  # the shared settings, left out of messages


def make_feed(
    name: str,
    *,
    n_sources: int,
    rate: float,
    profile: str = "constant",
    profile_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    **options: Any,
) -> Feed:
    """Build the feed ``name`` of :data:`FEEDS`.

    Parameters
    ----------
    name : feed name.
    n_sources : number of sources.
    rate : mean tuples per second per source (ignored by ``replay``, which follows its file).
    profile : arrival-rate profile name in :data:`PROFILES`.
    profile_options : the profile's own settings (e.g. ``{"fraction": 0.1, "factor": 10}``).
    seed : seed of the feed's values and arrivals.
    **options : the feed's own settings (``QuerySpec.feed_options``), e.g. ``std`` for
        ``gaussian``, ``path`` and ``time_column`` for ``replay``.

    Raises
    ------
    UnknownNameError
        ``name`` is not a feed, or ``profile`` not a profile.
    ConfigError
        An unknown or missing option, or a value that breaks a rule.
    InputDataError
        A replayed file cannot be read.
    """
    if name in LOG_FEEDS:
        import importlib

        module, cls = LOG_FEEDS[name].split(":")
        feed: Feed = getattr(importlib.import_module(module), cls)(
            n_sources=n_sources,
            rate=rate,
            profile=profile,
            profile_options=dict(profile_options or {}),
            seed=seed,
            **options,
        )
        return feed
    return construct(
        "feed",
        FEEDS,
        name,
        fixed=_FIXED,
        n_sources=n_sources,
        rate=rate,
        profile=profile,
        profile_options=dict(profile_options or {}),
        seed=seed,
        **options,
    )


__all__ = [
    "FEEDS",
    "LOG_FEEDS",
    "PAYLOAD_COLUMNS",
    "PROFILES",
    "BurstyProfile",
    "ClusterFeed",
    "ConstantProfile",
    "ExponentialFeed",
    "Feed",
    "FeedSettings",
    "GaussianFeed",
    "GeneratedFeed",
    "MixedFeed",
    "ParetoProfile",
    "ParetoRangesProfile",
    "Profile",
    "ReplayFeed",
    "StepProfile",
    "TraceProfile",
    "UniformFeed",
    "make_feed",
    "make_profile",
]
