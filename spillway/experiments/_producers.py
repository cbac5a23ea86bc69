"""Kafka topics fed live during a Spark experiment: one ``spillway produce`` process per topic.

Shared by the Kafka experiments (``overload``, ``kafka-overload``): each topic gets its own
producer process (as a user's ``spillway produce ... &`` would run), at a given rate per
partition, until :meth:`Producers.stop`, which reports what the log received from them (the
topics' end offsets, less what they held before) over the seconds they ran: a producer on a
2-core machine shared with Spark may not reach its rate, and the overload actually run is then
computed from what was sent.

>>> TopicLoad(feed="taxi", per_source=250.0, sources=2).argv("fares", 3)[:6]
['produce', 'fares', '--feed', 'taxi', '--sources', '2']
>>> steps = TopicLoad(feed="taxi", per_source=100.0, sources=2, profile="step",
...                   profile_options={"times": [10], "factors": [3], "period_s": 20})
>>> " ".join(steps.argv("fares", 3)[12:])
'--profile step --profile-option times=[10] --profile-option factors=[3] --profile-option period_s=20'
>>> steps.mean_rate   # 2 sources, each 100 t/s for 10 s then 300 t/s for 10 s
400.0
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spillway.errors import SpillwayError
from spillway.federation.cpu import limited_argv
from spillway.feeds.profiles import make_profile


@dataclass(frozen=True, kw_only=True)
class TopicLoad:
    """What one producer sends: a feed, its settings, tuples/s per source (partition) at the
    arrival-rate ``profile`` of :mod:`spillway.feeds.profiles` (its ``rate``) and that
    profile's settings."""

    feed: str
    per_source: float
    sources: int
    options: Mapping[str, Any] = field(default_factory=dict)
    profile: str = "constant"
    profile_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def mean_rate(self) -> float:
        """The long-run mean tuples/s of all sources (raises for a bad profile or setting)."""
        return self.sources * make_profile(self.profile, n_sources=1, rate=self.per_source,
                                           **self.profile_options).mean_rate  # fmt: skip

    def argv(self, topic: str, seed: int) -> list[str]:
        """The ``spillway produce`` arguments for ``topic``."""
        args = ["produce", topic, "--feed", self.feed, "--sources", str(self.sources),
                "--rate", f"{self.per_source:.3f}", "--duration", "3600", "--seed", str(seed)]  # fmt: skip
        for k, v in self.options.items():
            args += ["--feed-option", f"{k}={v}"]
        if self.profile != "constant" or self.profile_options:
            args += ["--profile", self.profile]
        for k, v in self.profile_options.items():
            args += ["--profile-option", f"{k}={json.dumps(v)}"]
        return args


class Producers:
    """One ``spillway produce`` process per topic of ``loads`` (``{topic: TopicLoad}``); with
    ``procs_file``, each starts in the cgroup whose ``cgroup.procs`` that is (outside a node's
    CPU quota: :mod:`spillway.experiments._node_cpu`)."""

    def __init__(
        self, conn: Any, loads: Mapping[str, TopicLoad], seed: int, procs_file: Path | None = None
    ) -> None:
        for topic, load in loads.items():
            if not (math.isfinite(load.per_source) and load.per_source > 0):
                raise SpillwayError(
                    f"the producer of {topic} needs a rate > 0 tuples/s, got {load.per_source!r}"
                )
        self.conn, self.topics = conn, list(loads)
        #: Tuples/s asked of all producers together over the long run (their profiles' mean).
        self.asked_rate = sum(x.mean_rate for x in loads.values())
        #: Records the topics held before these producers started (not counted as theirs).
        self.before = self._held()
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.t0 = time.monotonic()
        cli = "import sys; from spillway.cli import main; sys.exit(main(sys.argv[1:]))"
        for i, (topic, load) in enumerate(loads.items()):
            cmd = [sys.executable, "-c", cli, *load.argv(topic, seed + i),
                   "--bootstrap", conn.bootstrap_servers]  # fmt: skip
            if procs_file is not None:
                cmd = limited_argv(cmd, procs_file)
            self.procs.append(
                (topic, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            )

    def check(self) -> None:
        """Raise if a producer has died."""
        for topic, p in self.procs:
            if p.poll() is not None:
                err = (p.stderr.read() if p.stderr else b"").decode(errors="replace")
                raise SpillwayError(
                    f"spillway produce for {topic} ended ({p.returncode}): {err.strip()[-300:]}"
                )

    def _held(self) -> int:
        from spillway.kafka.admin import partition_offsets

        return sum(po.latest for t in self.topics for po in partition_offsets(self.conn, t))

    def stop(self) -> dict[str, Any]:
        """Stop every producer; what the topics received from them."""
        secs = time.monotonic() - self.t0
        for _, p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        sent = self._held() - self.before
        return {"produced": int(sent), "asked_rate": self.asked_rate,
                "achieved_rate": sent / secs if secs > 0 else math.nan}  # fmt: skip
