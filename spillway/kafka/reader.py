"""Read an exact offset range ``[start, end)`` of one Kafka partition into Arrow columns.

A Kafka source lane is a partition and its micro-batch share an offset range, decided by the
driver; the reader fetches exactly that range (on an executor) and nothing else, so a replayed
batch reads the same records. :class:`RangeReader` holds one confluent-kafka consumer (manual
assignment, no consumer group, no commits) and returns a :class:`pyarrow.Table` with the columns
of Spark's own Kafka source: ``key`` and ``value`` (binary), ``topic`` (string), ``partition``
(int32), ``offset`` (int64), ``timestamp`` (timestamp[us, UTC]) and ``timestampType`` (int32:
0 create time, 1 log-append time).

Fast path: the consumer fetches in the background (librdkafka's thread, 256 KiB of a
partition per fetch, up to a million records or 128 MiB queued ahead) while Python takes up to
100,000
messages per call; the columns are then built with one list comprehension each and handed to
Arrow, with no per-row branching. Python's cyclic garbage collector is paused during a read:
the million message objects of a large range would otherwise trigger collections that scan
them all again. Reading the next
range of a partition where the last one ended keeps the consumer's prefetched records (no
re-seek), so consecutive micro-batches of a lane stream without a pause.

Why 256 KiB a fetch: a re-seek (the next kept run of a lane that sheds) waits for the fetch
in flight to arrive before the new position's first one is sent. At 16 MiB a partition fetch
each seek cost about 0.12 s: a shedding lane's 16 runs of 1,250 records took 2.0 s against
0.16 s for the same 20,000 records in one range; at 256 KiB, 0.13 s and 0.04 s, and a whole
200,000-record partition reads as fast as before (468,000 records/s; 446,700 at 16 MiB).
``flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_kafka_io.py --rows 200000``
prints both (``reader_runs_seconds``, ``reader_rows_per_s``).

Exactness: offsets may have gaps (compacted topics, transaction markers, aborted records under
``read_committed``), so the range is done when a record at ``end − 1`` or later has been seen,
or when the consumer reached the end of the log at ``end`` or beyond. A record at or past
``end`` that a gap let in is not returned (the next range re-seeks). A range not (or no longer) in
the log is an error, never silently shortened: with ``auto.offset.reset=error`` a deleted
offset raises (Spark's ``failOnDataLoss``), and a range past the end of the log raises after
``timeout_s``.

Examples
--------
Needs a broker::

    with RangeReader(KafkaConnection(bootstrap_servers="127.0.0.1:9092")) as r:
        table = r.read("clicks", 0, 1000, 2000)   # offsets 1000..1999 of partition 0
        table.num_rows, table.column("offset")[0]  # (1000, 1000)

>>> SCHEMA.names
['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType']
>>> RangeReader(KafkaConnection(bootstrap_servers="127.0.0.1:9092")).read("t", 0, 5, 3)
Traceback (most recent call last):
...
spillway.errors.ConfigError: offset range [5, 3) of t[0]: need 0 <= start <= end
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.connection import KafkaConnection, check_reachable

#: The columns of Spark's Kafka source (headers left out), in its order.
SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)

#: Messages taken from the consumer per call.
BATCH_MESSAGES = 100_000

#: Consumer settings of the fast path (librdkafka names).
CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "spillway-range-reader",  # required by librdkafka; never joined, never committed
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "isolation.level": "read_committed",
    "fetch.max.bytes": 64 << 20,
    "max.partition.fetch.bytes": 256 << 10,  # small: a re-seek waits for the fetch in flight
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 128 << 10,
}


class RangeReader:
    """Reads offset ranges of partitions with one consumer; reuse it across ranges.

    Parameters
    ----------
    conn : the cluster.
    timeout_s : default seconds a read may take before it fails (> 0).
    clock : monotonic seconds, for the timeout.
    **settings : extra librdkafka consumer settings (``fetch_max_bytes=...``, underscores for
        dots).

    Raises
    ------
    KafkaClientError
        The cluster is unreachable.
    """

    def __init__(
        self,
        conn: KafkaConnection,
        *,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        **settings: Any,
    ) -> None:
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.conn = conn
        self.timeout_s = float(timeout_s)
        self._clock = clock
        self._settings = settings
        self._consumer: Any = None
        self._assigned: tuple[str, int] | None = None
        self._next = -1  # next offset the consumer will return on the assigned partition
        self._known: set[tuple[str, int]] = set()  # partitions seen to exist

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the consumer (a closed reader opens a new one on the next read)."""
        if self._consumer is not None:
            self._consumer.close()
        self._consumer, self._assigned = None, None

    def _open(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            check_reachable(self.conn)
            conf = self.conn.client_config(**self._settings)
            self._consumer = Consumer({**CONSUMER_SETTINGS, **conf})
        return self._consumer

    def read(
        self, topic: str, partition: int, start: int, end: int, *, timeout_s: float | None = None
    ) -> pa.Table:
        """Records of ``topic`` partition ``partition`` with offsets in ``[start, end)``.

        Returns
        -------
        pyarrow.Table
            :data:`SCHEMA` columns, by offset; fewer than ``end − start`` rows only where the
            log has gaps (compaction, transaction markers).

        Raises
        ------
        ConfigError
            ``start`` > ``end`` or a negative offset.
        KafkaClientError
            The topic or partition is missing, ``start`` is no longer in the log, or the range
            was not complete within ``timeout_s`` (it ends past the log's end).
        """
        if not (isinstance(start, int | np.integer) and isinstance(end, int | np.integer)) or not (
            0 <= start <= end
        ):
            raise ConfigError(
                f"offset range [{start}, {end}) of {topic}[{partition}]: need 0 <= start <= end"
            )
        start, end = int(start), int(end)
        if start == end:
            return SCHEMA.empty_table()
        consumer = self._open()
        self._seek(consumer, topic, partition, start)
        with _gc_paused():
            return self._read(consumer, topic, partition, start, end, timeout_s)

    def _read(
        self, consumer: Any, topic: str, partition: int, start: int, end: int, timeout_s: Any
    ) -> pa.Table:
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        deadline = self._clock() + limit
        batches: list[list[Any]] = []
        last = start - 1  # highest offset returned so far
        eof_at = -1  # where the consumer last reached the end of the log
        while last < end - 1:
            msgs = consumer.consume(min(BATCH_MESSAGES, end - 1 - last), 0.1)
            if msgs:
                good = [m for m in msgs if m.error() is None]
                if len(good) != len(msgs):
                    eof_at = max(eof_at, self._events(msgs, topic, partition, start, end, last))
                if good:
                    if good[-1].offset() >= end:  # a gap let records past the range in
                        good = [m for m in good if m.offset() < end]
                        self._assigned = None  # the next range re-seeks
                        last = end - 1
                    else:
                        last = good[-1].offset()
                    batches.append(good)
            if last < end - 1:
                if eof_at >= end:  # the log goes past the range: the rest were gaps
                    break
                if self._clock() >= deadline:
                    raise KafkaClientError(
                        f"reading {topic}[{partition}] offsets [{start}, {end}) from "
                        f"{self.conn.bootstrap_servers}: stopped at offset {last + 1} after "
                        f"{limit:g} s; the range must lie below the partition's latest offset"
                    )
        self._next = end
        return _to_table([m for b in batches for m in b], topic, partition)

    def _seek(self, consumer: Any, topic: str, partition: int, start: int) -> None:
        from confluent_kafka import TopicPartition

        if self._assigned == (topic, partition) and self._next == start:
            return  # continue where the last range ended: keep the prefetched records
        if (topic, partition) not in self._known:
            self._check_partition(consumer, topic, partition)
        consumer.assign([TopicPartition(topic, partition, start)])
        self._assigned, self._next = (topic, partition), start

    def _check_partition(self, consumer: Any, topic: str, partition: int) -> None:
        try:
            md = consumer.list_topics(topic=topic, timeout=min(self.timeout_s, 10.0))
        except Exception as e:
            raise KafkaClientError(
                f"reading {topic}[{partition}] from {self.conn.bootstrap_servers} failed: {e}"
            ) from None
        t = md.topics.get(topic)
        if t is None or t.error is not None or partition not in t.partitions:
            known = f"partitions 0..{len(t.partitions) - 1}" if t and t.partitions else "none"
            raise KafkaClientError(
                f"topic {topic!r} partition {partition} does not exist on "
                f"{self.conn.bootstrap_servers} (the topic has {known}): check the topic name"
            )
        self._known.add((topic, partition))

    def _events(
        self, msgs: list[Any], topic: str, partition: int, start: int, end: int, last: int
    ) -> int:
        """The highest end-of-log offset among ``msgs``' events (-1 if none); raise on an error."""
        from confluent_kafka import KafkaError

        eof_at = -1
        for m in msgs:
            err = m.error()
            if err is None:
                continue
            if err.code() == KafkaError._PARTITION_EOF:
                eof_at = max(eof_at, m.offset())
                continue
            self._assigned = None
            raise KafkaClientError(
                f"reading {topic}[{partition}] offsets [{start}, {end}) from "
                f"{self.conn.bootstrap_servers} failed after offset {last}: {err.str()}"
            )
        return eof_at


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: a read creates a million message objects, and
    collections triggered by them would re-scan every one (this halves the read rate)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _to_table(msgs: list[Any], topic: str, partition: int) -> pa.Table:
    n = len(msgs)
    ts = [m.timestamp() for m in msgs]
    columns = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(np.fromiter((m.offset() for m in msgs), dtype=np.int64, count=n)),
        pa.array(np.fromiter((t[1] for t in ts), dtype=np.int64, count=n) * 1000).cast(
            SCHEMA.field("timestamp").type
        ),
        pa.array(np.fromiter((t[0] for t in ts), dtype=np.int32, count=n) - 1),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def read_range(
    conn: KafkaConnection, topic: str, partition: int, start: int, end: int, **kw: Any
) -> pa.Table:
    """One-off :meth:`RangeReader.read` (opens and closes a consumer; reuse a
    :class:`RangeReader` for many ranges)."""
    with RangeReader(conn, **kw) as r:
        return r.read(topic, partition, start, end)
