"""Produce batches of messages fast, with every failed delivery counted.

:class:`KafkaWriter` wraps one confluent-kafka producer set for throughput: records wait up to
20 ms to fill batches of up to 1 MiB, compressed with LZ4; up to a million messages may be
queued in the client. :meth:`~KafkaWriter.write` hands a whole batch to the client in one tight
loop (no per-message callback into Python: librdkafka reports only failed deliveries). When the
client's queue is full it serves the queue and retries the same message, so a batch is never
partly dropped. :meth:`~KafkaWriter.flush` waits until every message is acknowledged and
raises if any failed.

The per-message cost is the client's ``produce`` call (about 1 µs here): confluent-kafka's
``produce_batch`` does not take timestamps, and spillway sets the event time as each record's
timestamp.

Examples
--------
Needs a broker::

    with KafkaWriter(KafkaConnection(bootstrap_servers="127.0.0.1:9092")) as w:
        w.write("clicks", ["a", "b"], keys=["1", "2"], partitions=0, timestamps_ms=[5, 6])
    # leaving the block flushes: both messages are acknowledged or an error is raised

>>> PRODUCER_SETTINGS["compression.type"], PRODUCER_SETTINGS["linger.ms"]
('lz4', 20)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.connection import KafkaConnection, check_reachable

#: Producer settings of the fast path (librdkafka names).
PRODUCER_SETTINGS: dict[str, Any] = {
    "linger.ms": 20,
    "batch.size": 1 << 20,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1 << 20,
    "acks": "all",
    "partitioner": "murmur2_random",  # the Java client's key hashing, as Spark's writer
    "delivery.report.only.error": True,
}

#: Messages produced between two services of the client's event queue.
_POLL_EVERY = 20_000


class KafkaWriter:
    """One producer; write batches, then flush (or use it as a context manager).

    Parameters
    ----------
    conn : the cluster.
    **settings : extra librdkafka producer settings (underscores for dots, ``linger_ms=5``).

    Raises
    ------
    KafkaClientError
        The cluster is unreachable.
    """

    def __init__(self, conn: KafkaConnection, **settings: Any) -> None:
        from confluent_kafka import Producer

        check_reachable(conn)
        self.conn = conn
        self.produced = 0
        self.failed = 0
        self.first_error: str | None = None
        conf = {**PRODUCER_SETTINGS, **conn.client_config(**settings)}
        conf["on_delivery"] = self._on_delivery
        self._producer = Producer(conf)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            if self.first_error is None:
                where = f"{msg.topic()}[{msg.partition()}]" if msg is not None else "?"
                self.first_error = f"{where}: {err.str()}"

    def __enter__(self) -> KafkaWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.flush()

    def write(
        self,
        topic: str,
        values: Sequence[str | bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        partitions: int | Sequence[int] | np.ndarray | None = None,
        timestamps_ms: Sequence[int] | np.ndarray | None = None,
    ) -> int:
        """Queue one message per value; returns how many were queued (all of them).

        Parameters
        ----------
        topic : the topic (must exist).
        values : message values.
        keys : message keys (default none).
        partitions : one partition for all, one per message, or None for the partitioner
            (murmur2 of the key, as the Java client; random without a key).
        timestamps_ms : record timestamps in epoch milliseconds (default: the time of sending).

        Raises
        ------
        ConfigError
            ``keys``, ``partitions`` or ``timestamps_ms`` do not have one entry per value.
        KafkaClientError
            The client refused a message (e.g. larger than the broker allows).
        """
        n = len(values)
        ks: Any = itertools.repeat(None, n) if keys is None else keys
        if partitions is None or isinstance(partitions, int | np.integer):
            ps: Any = itertools.repeat(-1 if partitions is None else int(partitions), n)
        else:
            ps = np.asarray(partitions, dtype=np.int64).tolist()
        ts: Any = (
            itertools.repeat(0, n)
            if timestamps_ms is None
            else np.asarray(timestamps_ms, dtype=np.int64).tolist()
        )
        for name, seq in (("keys", keys), ("partitions", ps), ("timestamps_ms", ts)):
            if isinstance(seq, list | tuple | np.ndarray) and len(seq) != n:
                raise ConfigError(f"{name} needs one entry per value ({n}), got {len(seq)}")
        produce, poll = self._producer.produce, self._producer.poll
        i = 0
        try:
            for v, k, p, t in zip(values, ks, ps, ts, strict=False):
                while True:
                    try:
                        produce(topic, v, k, p, timestamp=t)
                        break
                    except BufferError:  # the client's queue is full: let it drain
                        poll(0.05)
                i += 1
                if i % _POLL_EVERY == 0:
                    poll(0)
        except Exception as e:  # KafkaException from the client
            raise KafkaClientError(
                f"producing to {topic!r} on {self.conn.bootstrap_servers} failed: {e}"
            ) from None
        finally:
            self.produced += i
        poll(0)
        return i

    def pending(self) -> int:
        """Messages queued and not yet acknowledged."""
        return len(self._producer)

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait until every queued message is acknowledged.

        Raises
        ------
        KafkaClientError
            Messages still unacknowledged after ``timeout_s``, or any delivery failed.
        """
        left = self._producer.flush(timeout_s)
        if left:
            raise KafkaClientError(
                f"{left} messages to {self.conn.bootstrap_servers} were not acknowledged "
                f"within {timeout_s:g} s: is the broker up?"
            )
        if self.failed:
            raise KafkaClientError(
                f"{self.failed} of {self.produced} messages to {self.conn.bootstrap_servers} "
                f"failed; first: {self.first_error}"
            )
