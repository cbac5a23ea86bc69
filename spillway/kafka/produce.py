"""Push a spillway feed into a Kafka topic at its rate profile (``spillway produce``).

Arrivals follow the feed's profile (constant, step, bursty, Pareto: :mod:`spillway.feeds.profiles`)
on the wall clock, open loop: whatever reads the topic, tuple ``i`` of source ``s`` is sent once
the run has lasted its arrival time, and never held back by a consumer. If the producer itself
cannot keep up, it sends what is due as fast as it can and reports how far behind the profile it
is; the run stops at ``duration_s`` either way.

Each tuple becomes one message:

- value: JSON (or CSV, same field order) with ``source`` (int), ``seq`` (its index in the source),
  ``key``, ``value`` and ``event_time`` (ISO 8601 UTC to the millisecond, or epoch milliseconds),
  plus any further payload column of the feed; read it in Spark with the schema
  ``source INT, seq BIGINT, key BIGINT, value DOUBLE, event_time TIMESTAMP``;
- key: the tuple's ``key`` as text (or its ``source``, or none); a feed with text keys (a
  replayed file with keys such as ``"JFK-LAX"``) sends those texts, in the value too;
- partition: ``source mod partitions`` (or the Java client's hash of the key);
- timestamp: the event time (or the arrival time).

Event time: a generated feed's tuples happen when they arrive, so their event time is the run's
start (wall clock) plus their arrival time; a feed with its own event clock (a replayed file)
keeps its recorded times (date-time columns as they are, numeric ones as epoch seconds).

Examples
--------
>>> cfg = ProduceConfig(topic="t", feed="gaussian", sources=2, rate=500.0, duration_s=1.0)
>>> cfg.make_feed().n_sources
2
>>> ProduceConfig(topic="t", key="none", partition_by="key")
Traceback (most recent call last):
...
spillway.errors.ConfigError: partition_by 'key' needs message keys, but key is 'none': use key='key' or partition_by='source'
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from spillway.errors import ConfigError
from spillway.feeds import make_feed
from spillway.feeds.base import Feed
from spillway.kafka.admin import _check_name, create_topic, partitions_of
from spillway.kafka.connection import KafkaConnection
from spillway.kafka.encode import FORMATS, TIME_FORMATS, encode
from spillway.kafka.writer import KafkaWriter

KEYS = ("key", "source", "none")
PARTITION_BY = ("source", "key")
TIMESTAMPS = ("event", "arrival")
#: Seconds between two looks at the profile when nothing is due.
TICK_S = 0.005
#: Seconds between two sends: the tuples due meanwhile go in one batch. Encoding costs per
#: call: sending every tick took 91 % of a core for 8,700 taxi tuples/s (2,665 writes in 8 s),
#: batching 19 % (312 writes), by ``scripts/bench_produce_cpu.py --seconds 8``, so producers
#: no longer starve the node they feed. A record still carries its own timestamp; it reaches
#: the log at most this much later, well within a log's lateness (1 s by default).
SEND_EVERY_S = 0.05


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ProduceConfig:
    """What ``spillway produce`` sends, where, and how fast.

    Parameters
    ----------
    topic : the topic (created with ``partitions`` partitions if missing).
    feed, feed_options : a feed of :data:`spillway.feeds.FEEDS` and its own settings as
        ``(name, value)`` pairs (e.g. ``(("path", "rides.csv"), ("time_column", "ts"), ...)``
        for ``replay``).
    sources : number of sources of the feed.
    rate : mean tuples per second per source.
    profile, profile_options : the arrival-rate profile of :data:`spillway.feeds.PROFILES`
        and its settings as pairs.
    seed : seed of the feed's values and arrivals.
    duration_s : how long to send (> 0).
    value_format : ``json`` or ``csv``.
    time_format : ``iso`` or ``millis`` (event time in the value).
    key : message key: the tuple's ``key``, its ``source``, or ``none``.
    partition_by : ``source`` (source mod partitions) or ``key`` (hash of the message key).
    timestamp : the record timestamp: ``event`` time or ``arrival`` time.
    partitions : partitions of a topic created here (default ``sources``).
    report_every_s : seconds between two progress reports (> 0).
    max_batch : most tuples of one source encoded and sent at once (>= 1).
    """

    topic: str
    feed: str = "gaussian"
    feed_options: tuple[tuple[str, Any], ...] = ()
    sources: int = 1
    rate: float = 1000.0
    profile: str = "constant"
    profile_options: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    duration_s: float = 60.0
    value_format: str = "json"
    time_format: str = "iso"
    key: str = "key"
    partition_by: str = "source"
    timestamp: str = "event"
    partitions: int | None = None
    report_every_s: float = 5.0
    max_batch: int = 50_000

    def __post_init__(self) -> None:
        _check_name(self.topic)
        _choice("value_format", self.value_format, FORMATS)
        _choice("time_format", self.time_format, TIME_FORMATS)
        _choice("key", self.key, KEYS)
        _choice("partition_by", self.partition_by, PARTITION_BY)
        _choice("timestamp", self.timestamp, TIMESTAMPS)
        if self.partition_by == "key" and self.key == "none":
            raise ConfigError(
                "partition_by 'key' needs message keys, but key is 'none': use key='key' or "
                "partition_by='source'"
            )
        for name in ("duration_s", "report_every_s", "rate"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise ConfigError(f"{name} must be a finite number > 0, got {v!r}")
        for name, v, low in (("sources", self.sources, 1), ("max_batch", self.max_batch, 1)):
            if not isinstance(v, int) or v < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {v!r}")
        if self.partitions is not None and (
            not isinstance(self.partitions, int) or self.partitions < 1
        ):
            raise ConfigError(f"partitions must be an integer >= 1, got {self.partitions!r}")

    def make_feed(self) -> Feed:
        """The feed this config names (raises the feed's own errors for bad options)."""
        return make_feed(
            self.feed,
            n_sources=self.sources,
            rate=self.rate,
            profile=self.profile,
            profile_options=dict(self.profile_options),
            seed=self.seed,
            **dict(self.feed_options),
        )


@dataclass(frozen=True, kw_only=True)
class ProduceProgress:
    """Where a run stands at ``t_s`` seconds: tuples sent and due, rates of the last interval."""

    t_s: float
    sent: int
    due: int
    interval_s: float
    interval_sent: int
    interval_due: int

    @property
    def behind(self) -> int:
        """Tuples the profile made arrive that are not sent yet."""
        return self.due - self.sent

    def line(self) -> str:
        """One progress line."""
        d = max(self.interval_s, 1e-9)
        return (
            f"{self.t_s:6.1f} s: {self.sent:,} sent ({self.due:,} due), "
            f"{self.interval_sent / d:,.0f}/s over the last {self.interval_s:.1f} s "
            f"(profile {self.interval_due / d:,.0f}/s), behind {self.behind:,}"
        )


@dataclass(frozen=True, kw_only=True)
class ProduceSummary:
    """The outcome of a run."""

    topic: str
    partitions: int
    profile: str
    elapsed_s: float
    sent: int
    due: int
    delivered: int

    @property
    def achieved_rate(self) -> float:
        """Tuples per second sent over the run."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def target_rate(self) -> float:
        """Tuples per second the profile made arrive over the run."""
        return self.due / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def ratio(self) -> float:
        """Sent over due (1.0: the producer kept up with the profile)."""
        return self.sent / self.due if self.due else 1.0

    def line(self) -> str:
        """The closing line of ``spillway produce``."""
        return (
            f"{self.sent:,} tuples to {self.topic} ({self.partitions} partitions) in "
            f"{self.elapsed_s:.1f} s: {self.achieved_rate:,.0f} tuples/s achieved, the "
            f"{self.profile} profile asked {self.target_rate:,.0f}/s (sent/due "
            f"{self.ratio:.3f}); {self.delivered:,} acknowledged by the broker"
        )

    def to_dict(self) -> dict[str, Any]:
        """Figures for a JSON summary."""
        return {
            "topic": self.topic,
            "partitions": self.partitions,
            "profile": self.profile,
            "elapsed_s": round(self.elapsed_s, 3),
            "sent": self.sent,
            "due": self.due,
            "delivered": self.delivered,
            "achieved_rate": round(self.achieved_rate, 1),
            "target_rate": round(self.target_rate, 1),
            "sent_over_due": round(self.ratio, 4),
        }


def event_seconds(feed: Feed, source: int, index: np.ndarray, start_epoch_s: float) -> np.ndarray:
    """Event times (epoch seconds) of tuples ``index``: the feed's own recorded times when it
    has an :meth:`~spillway.feeds.base.Feed.event_clock` (a replayed file), else the run's
    start plus the arrival time.

    >>> from spillway.testing import ListFeed
    >>> event_seconds(ListFeed(times=[[0.5]], values=[[1.0]]), 0, np.array([0]), 100.0)
    array([100.5])
    """
    if feed.event_clock() is None:
        return start_epoch_s + feed.arrival_time(source, index)
    return np.asarray(feed.event_time(source, index), dtype=np.float64)


class _Batcher:
    """Encodes the tuples of one source into messages and hands them to the writer."""

    def __init__(
        self, config: ProduceConfig, feed: Feed, writer: Any, partitions: int, start: float
    ) -> None:
        self.config, self.feed, self.writer = config, feed, writer
        self.partitions, self.start = partitions, start

    def send(self, source: int, index: np.ndarray) -> None:
        cfg, n = self.config, len(index)
        payload = self.feed.payload(source, index)
        event_ms = np.round(event_seconds(self.feed, source, index, self.start) * 1000).astype(
            np.int64
        )
        cols: dict[str, Any] = {
            "source": np.full(n, source, dtype=np.int64),
            "seq": index,
            "key": payload["key_text"] if "key_text" in payload else payload["key"],
            "value": payload["value"],
        }
        cols.update({k: v for k, v in payload.items() if k not in cols and k != "key_text"})
        cols["event_time"] = event_ms.astype("datetime64[ms]")
        values = encode(cols, fmt=cfg.value_format, time_format=cfg.time_format)
        keys = None
        if cfg.key != "none":
            keys = pa.array(np.asarray(cols[cfg.key])).cast(pa.string()).to_pylist()
        if cfg.timestamp == "event":
            stamps = event_ms
        else:
            arrival = self.start + self.feed.arrival_time(source, index)
            stamps = np.round(arrival * 1000).astype(np.int64)
        part = source % self.partitions if cfg.partition_by == "source" else None
        self.writer.write(cfg.topic, values, keys=keys, partitions=part, timestamps_ms=stamps)


def ensure_topic(conn: KafkaConnection, config: ProduceConfig) -> int:
    """The topic's partition count, creating it (``config.partitions``, default one per
    source) if it does not exist."""
    create_topic(conn, config.topic, partitions=config.partitions or config.sources, exist_ok=True)
    return len(partitions_of(conn, config.topic))


def produce_feed(
    config: ProduceConfig,
    conn: KafkaConnection,
    *,
    on_progress: Callable[[ProduceProgress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> ProduceSummary:
    """Send ``config``'s feed into its topic on ``conn`` for ``config.duration_s`` seconds
    (creating the topic if needed); see :func:`run_paced` for the parameters.

    Raises
    ------
    KafkaClientError
        The broker is unreachable, refused the topic, or did not acknowledge every message.
    """
    feed = config.make_feed()
    partitions = ensure_topic(conn, config)
    writer = KafkaWriter(conn)
    return run_paced(
        config,
        feed,
        writer,
        partitions=partitions,
        on_progress=on_progress,
        clock=clock,
        wall=wall,
        sleep=sleep,
    )


def run_paced(
    config: ProduceConfig,
    feed: Feed,
    writer: Any,
    *,
    partitions: int,
    on_progress: Callable[[ProduceProgress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> ProduceSummary:
    """Hand ``feed``'s tuples to ``writer`` as the profile makes them arrive.

    Parameters
    ----------
    config : what to send (topic, formats, duration, report period).
    feed : the feed (``config.make_feed()``).
    writer : a :class:`~spillway.kafka.writer.KafkaWriter` (anything with its ``write``,
        ``flush`` and ``failed``).
    partitions : the topic's partition count.
    on_progress : called every ``config.report_every_s`` seconds and at the end.
    clock : monotonic seconds (pacing); ``wall``: epoch seconds (event times); ``sleep``.

    Returns
    -------
    ProduceSummary
        Tuples sent and due, the achieved and asked rates, and how many were acknowledged.

    Examples
    --------
    >>> from spillway.testing import ManualClock
    >>> class Sink:
    ...     failed, n = 0, 0
    ...     def write(self, topic, values, **kw):
    ...         self.n += len(values)
    ...     def flush(self):
    ...         pass
    >>> clock, sink = ManualClock(), Sink()
    >>> cfg = ProduceConfig(topic="t", rate=1000.0, sources=2, duration_s=3.0)
    >>> s = run_paced(cfg, cfg.make_feed(), sink, partitions=2, clock=clock,
    ...               sleep=clock.advance, wall=lambda: 0.0)
    >>> s.sent, s.due, sink.n
    (6000, 6000, 6000)
    """
    w = writer
    start_epoch = wall()
    batcher = _Batcher(config, feed, w, partitions, start_epoch)
    sent = np.zeros(feed.n_sources, dtype=np.int64)
    t0 = clock()
    last = (0.0, 0, 0)  # time, sent, due at the last report
    next_report = config.report_every_s
    due = sent
    next_send = 0.0
    while True:
        now = clock() - t0
        final = now >= config.duration_s
        due = feed.count(min(now, config.duration_s))
        busy = False
        reporting = on_progress is not None and now >= next_report
        if now >= next_send or final or reporting:  # a report counts what was due as sent
            for s in np.flatnonzero(due > sent):
                hi = min(int(due[s]), int(sent[s]) + config.max_batch)
                batcher.send(int(s), np.arange(sent[s], hi, dtype=np.int64))
                sent[s] = hi
                busy = True
            if busy and not (due > sent).any():  # caught up: wait for the next batch to fill
                next_send = now + SEND_EVERY_S
        if on_progress is not None and (reporting or final):
            total_sent, total_due = int(sent.sum()), int(due.sum())
            on_progress(
                ProduceProgress(
                    t_s=now,
                    sent=total_sent,
                    due=total_due,
                    interval_s=now - last[0],
                    interval_sent=total_sent - last[1],
                    interval_due=total_due - last[2],
                )
            )
            last = (now, total_sent, total_due)
            while next_report <= now:
                next_report += config.report_every_s
        if final:
            break
        if not busy:
            sleep(min(TICK_S, max(config.duration_s - now, 0.0)))
    elapsed = clock() - t0
    total = int(sent.sum())
    w.flush()
    return ProduceSummary(
        topic=config.topic,
        partitions=partitions,
        profile=config.profile if config.feed != "replay" else "replay",
        elapsed_s=elapsed,
        sent=total,
        due=int(due.sum()),
        delivered=total - int(getattr(w, "failed", 0)),
    )
