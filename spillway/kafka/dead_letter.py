"""A dead-letter topic written exactly once per record, whatever Spark retries or replays.

Malformed and late records of a Kafka feed go, with their reason, to a topic (the feed option
``dead_letter_topic``) as well as, or instead of, a folder. Each message's key is the record's
identity ``<topic>/<partition>/<offset>`` and its value the JSON object of the set-aside row
(topic, partition, offset, error, raw). A micro-batch Spark runs again (a task retry, a batch
replayed after a restart from the checkpoint) hands the same records again; so before it writes,
:class:`DeadLetterTopic` reads what the topic gained since it last looked (one partition, read
from the offset it reached; the whole topic once after a restart) and writes only the keys the
topic does not hold yet, then waits until every message is acknowledged (``acks=all``, the
client's idempotent retries: a lost acknowledgement does not duplicate a message either).
One writer per topic: the node's driver.

Examples
--------
Needs a broker::

    dlq = DeadLetterTopic(conn, "fares-dead")
    dlq.write(rows)   # rows: topic, partition, offset, error, raw
    dlq.write(rows)   # the same batch again: nothing written
    dlq.keys()        # {'fares/0/17', ...}

>>> record_key("fares", 0, 17)
'fares/0/17'
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pandas as pd

from spillway.kafka.connection import KafkaConnection

#: Columns of a set-aside row written as the message value.
VALUE_COLUMNS = ("topic", "partition", "offset", "error", "raw")


def record_key(topic: str, partition: int, offset: int) -> str:
    """The identity of a source record: ``<topic>/<partition>/<offset>``."""
    return f"{topic}/{int(partition)}/{int(offset)}"


class DeadLetterTopic:
    """Write set-aside records to ``topic`` exactly once (see the module docstring).

    Parameters
    ----------
    conn : the cluster.
    topic : the dead-letter topic (created with one partition if missing).

    Raises
    ------
    KafkaClientError
        The broker is unreachable or refuses the topic.
    """

    def __init__(self, conn: KafkaConnection, topic: str) -> None:
        from spillway.kafka.admin import create_topic

        self.conn = conn
        self.topic = topic
        create_topic(conn, topic, partitions=1, exist_ok=True)
        self._keys: set[str] = set()
        self._read_to = 0  # the offset the topic has been read up to
        self._lock = threading.Lock()

    def _catch_up(self) -> None:
        """Read the keys the topic gained since :attr:`_read_to`."""
        from spillway.kafka.admin import partition_offsets
        from spillway.kafka.reader import RangeReader

        (po,) = partition_offsets(self.conn, self.topic)
        start = max(self._read_to, int(po.earliest))
        if po.latest > start:
            with RangeReader(self.conn) as r:
                table = r.read(self.topic, 0, start, int(po.latest))
            self._keys.update(
                k.decode() if isinstance(k, bytes) else str(k)
                for k in table.column("key").to_pylist()
                if k is not None
            )
        self._read_to = int(po.latest)

    def write(self, rows: pd.DataFrame) -> int:
        """Write the rows whose record the topic does not hold yet; return how many were new."""
        from spillway.kafka.writer import KafkaWriter

        if rows is None or rows.empty:
            return 0
        with self._lock:
            self._catch_up()
            keys = [
                record_key(t, p, o)
                for t, p, o in zip(rows["topic"], rows["partition"], rows["offset"], strict=True)
            ]
            new = [i for i, k in enumerate(keys) if k not in self._keys]
            if not new:
                return 0
            values = [_value(rows.iloc[i]) for i in new]
            with KafkaWriter(self.conn, enable_idempotence=True) as w:
                w.write(self.topic, values, keys=[keys[i] for i in new], partitions=0)
            self._keys.update(keys[i] for i in new)
            return len(new)

    def keys(self) -> set[str]:
        """Every record identity the topic holds (read from the topic)."""
        with self._lock:
            self._catch_up()
            return set(self._keys)


def _value(row: Any) -> str:
    return json.dumps(
        {c: (None if pd.isna(row[c]) else row[c]) for c in VALUE_COLUMNS if c in row.index},
        default=str,
    )
