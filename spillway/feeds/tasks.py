"""Cluster task events with a drifting class mix: a synthetic stand-in for Google's GCM trace.

CoD's GCM workload (§VII-B) is part of the ``task_events`` table of the Google cluster trace, with
the SABER query "average CPU requested per scheduling class" over 60-minute windows sliding
every 30 minutes; the paper notes it has fewer groups than DEBS and reports Uniform losing
infrequent groups (> 40 % error at b = 0.98). The real trace has only 4 scheduling classes, with
which Uniform could hardly miss a group (CoD §VII-B, Table III), so this
**synthetic stand-in** uses a finer grouping: ``n_classes`` (tens of) task classes, think
(scheduling class × priority band × job type), with a heavily skewed, drifting mix:

- ``key`` = task class; its share of the events follows a Zipf law of exponent ``zipf_s`` over
  popularity ranks, and the ranks drift: every class redraws its hashed popularity score once
  every ``1 / drift`` epochs of ``epoch_s`` on average (at its own phase), so each epoch a
  fraction ``drift`` of the classes moves in the ranking
  (:class:`~spillway.feeds.popularity.DriftingZipf`).
- ``value`` = normalised CPU request of the task (the trace's [0, 1] scale): a per-class level
  ``median_cpu · exp(0.7·Z_c)`` times a log-normal factor of coefficient of variation ``cpu_cv``,
  clipped to [1e-4, 1].

Everything is a pure function of (seed, source, index) through the tuples' arrival times
(:mod:`spillway.feeds.hashing`).

Examples
--------
>>> f = TaskFeed(n_sources=1, rate=1000.0, seed=2, epoch_s=10.0)
>>> p = f.payload(0, np.arange(20_000))
>>> int(p["key"].min()) >= 0 and int(p["key"].max()) < f.n_classes
True
>>> bool(((p["value"] > 0) & (p["value"] <= 1)).all())
True
>>> bool(np.array_equal(p["key"][5:9], f.payload(0, np.arange(5, 9))["key"]))
True
"""

from __future__ import annotations

from typing import Unpack

import numpy as np

from spillway.feeds import hashing
from spillway.feeds.generated import FeedSettings, GeneratedFeed
from spillway.feeds.options import count_of, in_range, positive
from spillway.feeds.popularity import DriftingZipf

#: Spread (log-sd) of the per-class CPU request levels.
CLASS_CPU_SIGMA = 0.7


class TaskFeed(GeneratedFeed):
    """GCM-like task events: ``key`` = task class, ``value`` = CPU request. See the module doc.

    Parameters
    ----------
    n_sources, rate, profile, profile_options, seed : as :class:`GeneratedFeed`.
    n_classes : task classes (groups), tens.
    zipf_s : Zipf exponent of the class mix (heavy skew: a few classes dominate).
    drift : fraction of classes whose popularity is redrawn per epoch, [0, 1].
    epoch_s : epoch length (s), the slide of the query.
    median_cpu : median per-class CPU request level, (0, 1].
    cpu_cv : coefficient of variation of the requests within a class, [0, 1].
    """

    name = "tasks"

    def __init__(
        self,
        *,
        n_classes: int = 40,
        zipf_s: float = 2.0,
        drift: float = 0.3,
        epoch_s: float = 1800.0,
        median_cpu: float = 0.03,
        cpu_cv: float = 0.25,
        **settings: Unpack[FeedSettings],
    ) -> None:
        super().__init__(**settings)
        self.n_classes = count_of("tasks n_classes", n_classes, low=2)
        self.zipf_s = positive("tasks zipf_s", zipf_s)
        self.drift = in_range("tasks drift", drift, 0.0, 1.0)
        self.epoch_s = positive("tasks epoch_s", epoch_s)
        self.median_cpu = in_range("tasks median_cpu", median_cpu, 1e-4, 1.0)
        self.cpu_cv = in_range("tasks cpu_cv", cpu_cv, 0.0, 1.0)
        self.popularity = DriftingZipf(
            seed=self.seed, stream="tasks", n=self.n_classes, s=self.zipf_s, drift=self.drift
        )
        self._level = self.median_cpu * np.exp(
            CLASS_CPU_SIGMA
            * hashing.normal(self.seed, "tasks.cpu.level", np.arange(self.n_classes), 0)
        )

    def popularity_order(self, epoch: int) -> np.ndarray:
        """Class ids from the most to the least frequent at ``epoch`` (>= 0).

        >>> sorted(TaskFeed(n_sources=1, rate=1.0).popularity_order(3).tolist()) == list(range(40))
        True
        """
        return self.popularity.order(epoch)

    def class_share(self, epoch: int) -> np.ndarray:
        """Expected share of the events of every class at ``epoch`` (sums to 1)."""
        return self.popularity.share(epoch)

    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        u = hashing.uniform(self.seed, "tasks.class", source, index)
        return self.popularity.draw(u, self.epoch_of(source, index, self.epoch_s))

    def keyed_values(self, source: int, index: np.ndarray, key: np.ndarray) -> np.ndarray:
        cpu = self._level[key] * hashing.lognormal(
            self.seed, "tasks.cpu.task", source, index, cv=self.cpu_cv
        )
        return np.clip(cpu, 1e-4, 1.0)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.keyed_values(source, index, self.keys(source, index))
