"""The Feed interface: deterministic, replayable sources.

A feed is a fixed set of sources. Everything about tuple ``i`` of source ``s`` (its arrival time
and its payload) is a pure function of the feed's config (seed included), ``s`` and ``i``, so any
index range can be regenerated on any executor, in any order, any number of times: that is what
lets the Spark data source record only offsets and still replay a micro-batch exactly.

Time is in seconds since the feed started (float). Every payload has the same two columns so one
Spark schema serves every workload:

- ``key`` (int64): a group or join key (machine id, route id, scheduling class; 0 when unused);
- ``value`` (float64): the measured value (CPU %, free memory in KB, fare, packet size, ...).

Examples
--------
A subclass needs four methods; :class:`spillway.testing.ListFeed` is the smallest real one.
:meth:`Feed.keys` (the ``key`` column alone) defaults to the payload's and may be overridden
when keys are cheaper than the whole payload.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from spillway.errors import ConfigError

PAYLOAD_COLUMNS: tuple[str, ...] = ("key", "value")


class Feed(ABC):
    """A deterministic set of sources. Subclasses are immutable after construction."""

    name: ClassVar[str] = "feed"
    #: True when executors get the feed object itself (pickled: a Kafka feed's resolved
    #: partitions and start offsets) rather than a rebuild from its name and settings.
    portable: ClassVar[bool] = False
    #: True for external logs (Kafka topics, folders of files): their records can be malformed
    #: or late, and the node sets those aside (:mod:`spillway.spark.dead_letters`).
    log: ClassVar[bool] = False
    #: A log whose reader reads through a gap of fewer than this many shed records between two
    #: kept runs (one range instead of a seek): those shed records are fetched all the same
    #: (:func:`~spillway.spark.source.shed_read`), and the node's cost model charges them. 0:
    #: a shed record is never read.
    read_gap: ClassVar[int] = 0
    #: Where a log's malformed and late records are written (a folder), or None.
    dead_letter: str | None = None
    #: Seconds a log's records may arrive after their time and still be in their window: the
    #: node decides a window that long after it ends (0 for generated feeds: never late).
    lateness_s: float = 0.0

    def dead_letter_writer(self) -> Any | None:
        """Where else a log's set-aside records go: an object with ``write(rows)`` (a
        dead-letter topic), or None. Called on the driver when the node starts."""
        return None

    @property
    @abstractmethod
    def n_sources(self) -> int:
        """Number of sources, numbered ``0 .. n_sources - 1``."""

    @abstractmethod
    def count(self, t: float) -> np.ndarray:
        """Tuples of every source that arrived in ``[0, t)``: int64 array (n_sources,).

        Non-decreasing in ``t``; 0 for ``t <= 0``.
        """

    @abstractmethod
    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        """Arrival time (s) of tuples ``index`` of ``source``: float64, non-decreasing in index."""

    @abstractmethod
    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        """Payload columns ``key`` (int64) and ``value`` (float64) of tuples ``index``."""

    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        """The ``key`` column alone (int64) of tuples ``index`` of ``source``.

        The Spark runtime scans the keys of every waiting tuple when a policy admits per group
        (``Policy.needs_groups``), and again when it reads a grouped lane, so feeds whose keys
        are cheaper than their whole payload should override this. Default: the payload's
        ``key`` column.

        >>> from spillway.testing import ListFeed
        >>> f = ListFeed(times=[[0.1, 0.2, 0.3]], values=[[1.0, 2.0, 3.0]], keys=[[7, 8, 7]])
        >>> f.keys(0, np.array([0, 2])).tolist()
        [7, 7]
        """
        return np.asarray(self.payload(source, index)["key"], dtype=np.int64)

    def event_time(self, source: int, index: np.ndarray) -> np.ndarray:
        """Event time (s) of tuples; the arrival time unless the feed replays recorded times."""
        return self.arrival_time(source, index)

    def rejected(self) -> int:
        """Malformed input rows set aside (replayed files); 0 for generated feeds."""
        return 0

    def start_offsets(self) -> np.ndarray:
        """Every source's first tuple index (0 for generated feeds; a Kafka partition's start
        offset, so its tuple indices are the offsets themselves)."""
        return np.zeros(self.n_sources, dtype=np.int64)

    def attach(self, epoch_s: float) -> None:  # noqa: B027 (a hook: most feeds need nothing)
        """Called once with the node's epoch (Unix seconds) before the first :meth:`count`;
        feeds whose clock is absolute (a Kafka log) map feed time through it."""

    def close(self) -> None:  # noqa: B027 (a hook: most feeds hold nothing)
        """Release what the feed holds on the driver (a log's consumers); using it again
        opens them anew."""

    def records(self, source: int, index: np.ndarray, epoch_s: float) -> dict[str, Any]:
        """Everything the data source emits for tuples ``index`` of ``source``: ``key``,
        ``value``, ``key_text`` (texts, or None), ``event_ts`` and ``arrival_ts`` (absolute
        seconds: Unix time, or the data's own time for a feed with an :meth:`event_clock`),
        and, for external logs, ``offset``, ``topic``, ``partition``, ``error`` (why a value is
        malformed, per row) and ``raw`` (its text; with a log feed's ``records`` option, also
        each valid row's fields as a JSON object) and ``sic`` (the SIC each row already
        carries, a federation link's rows; the row keeps it instead of its lane's share); None
        where a feed has no such column. One call so a log is read once per range."""
        payload = self.payload(source, index)
        own = self.event_clock() is not None
        return {
            "key": payload["key"],
            "value": payload["value"],
            "key_text": payload.get("key_text"),
            "event_ts": np.asarray(self.event_time(source, index), dtype=np.float64)
            + (0.0 if own else epoch_s),
            "arrival_ts": np.asarray(self.arrival_time(source, index), dtype=np.float64) + epoch_s,
            "offset": None,
            "topic": None,
            "partition": None,
            "error": None,
            "raw": None,
            "sic": None,
        }

    @property
    def carries_sic(self) -> bool:
        """Whether every tuple already carries its SIC (a federation link's rows, written by
        an upstream node's fragment): the node then prices its tuples with
        :meth:`carried_sic` instead of the source-shaped per-tuple share of THEMIS Eq. 1."""
        return False

    def carried_sic(self, source: int, lo: int, hi: int) -> float:
        """The SIC the tuples ``[lo, hi)`` of ``source`` carry, summed (THEMIS Eq. 3: what a
        link's rows bring downstream). Called on the driver at every decision for a feed that
        :attr:`carries_sic`.

        Raises
        ------
        ConfigError
            The feed carries no SIC.
        """
        raise ConfigError(
            f"feed {self.name!r} carries no SIC of its own (its tuples are priced by THEMIS "
            "Eq. 1): ask carried_sic only of a feed whose carries_sic is True"
        )

    @property
    def text_keys(self) -> bool:
        """Whether the feed's keys are texts (``payload`` then also gives ``key_text``, and
        ``key`` is :func:`spillway.feeds.hashing.text_keys` of it)."""
        return False

    def key_texts(self) -> dict[int, str]:
        """The text of every key of a feed with :attr:`text_keys` (int64 key -> text); empty
        for feeds with integer keys."""
        return {}

    def event_clock(self) -> tuple[float, float] | None:
        """``(origin_s, speed)`` when the feed's event times are its own recorded times:
        ``event time = origin_s + speed · arrival time`` (seconds; Unix seconds for recorded
        date-times, so windows are in the data's own time). None (the default) when event time
        is the node's clock: its epoch plus the arrival time."""
        return None

    def count_until_event(self, event_s: float) -> np.ndarray:
        """Tuples of every source whose event time is before ``event_s`` (feeds with an
        :meth:`event_clock`, whose event times grow with arrival): the exact cut of a window
        in the data's own time, free of rounding in the arrival clock."""
        clock = self.event_clock()
        if clock is None:
            raise ConfigError(
                f"feed {self.name!r} has no event clock (its event time is the node's): count "
                "its tuples by arrival time with count()"
            )
        origin, speed = clock
        return self.count((event_s - origin) / speed)

    def end_s(self) -> float | None:
        """Feed time after which no tuple arrives (a replayed file without ``loop``), or None
        for a feed that never ends."""
        return None
