"""A fragment's output to the next node through Kafka, each batch delivered exactly once.

In a federation an upstream fragment's partial results reach the fragment that consumes them,
on another node, through a Kafka topic, and keep their SIC (THEMIS Eq. 3: the consumer adds the
SIC of what it receives). A node that crashes and restarts from its checkpoint replays its
last batches (Spark re-runs a batch whose commit it did not record), so without care the
downstream node would receive those rows, and their SIC, twice.

:class:`LinkWriter` makes every upstream batch reach the log once:

- each batch is one Kafka *transaction* (all its rows or none: a crash in the middle leaves an
  aborted transaction, which a ``read_committed`` reader never returns);
- the writer is the only producer of its partition with a fixed ``transactional.id`` (from
  topic, partition and fragment), so a restarted writer *fences* its dead predecessor and
  aborts the transaction it left open (Kafka's ``init_transactions``);
- the key of every record is ``"<fragment>:<batch>"``; on start the writer reads the last
  committed record of its partition and refuses any batch id at or below it
  (:meth:`LinkWriter.write` returns False): a replayed batch is recognised and not written again;
- the timestamp of every record is its row's ``window_start`` (Unix seconds): the source time of
  the window the row was computed from, so the consumer windows the row by it (a micro-batch
  that spans several windows writes their rows at once, and stamped with the time of writing
  they would fall into one window downstream, with more than a window's SIC: THEMIS §4 counts
  a result in the STW of its source tuples).

Batch ids must grow (Spark's batch ids do). :func:`read_link` reads an exact offset range back
(committed records only) as rows with their batch and SIC.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §3-§4 (fragments, Eq. 3); Fiscato, PhD thesis 2012,
Assumption 9 (SIC across replicated and partitioned outputs).

Examples
--------
Needs a broker (``spillway kafka up``)::

    with LinkWriter(conn, "avg-leaf", fragment="avg/leaf-b") as w:
        w.write(7, pd.DataFrame({"query_id": [0], "window_start": [12.0], "sic": [0.2]}))
        w.write(7, ...)  # a replay after a crash: False, nothing written

>>> link_key("avg/leaf-b", 7), parse_key(b"avg/leaf-b:7")
('avg/leaf-b:7', ('avg/leaf-b', 7))
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import ConfigError, InputDataError, KafkaClientError
from spillway.kafka.admin import partition_offsets
from spillway.kafka.connection import KafkaConnection, check_reachable
from spillway.kafka.reader import RangeReader
from spillway.kafka.transaction import write_batch

#: Columns every batch of rows must have (the row's query, its window and its SIC).
LINK_COLUMNS: tuple[str, ...] = ("query_id", "window_start", "sic")


def link_key(fragment: str, batch_id: int) -> str:
    """The key of a record of batch ``batch_id`` written by ``fragment``."""
    return f"{fragment}:{batch_id}"


def parse_key(key: bytes | None) -> tuple[str, int]:
    """``(fragment, batch_id)`` from a record key written by :class:`LinkWriter`.

    Raises
    ------
    InputDataError
        A key not of the form ``<fragment>:<batch>`` (a record some other producer wrote).
    """
    text = (key or b"").decode("utf-8", "replace")
    fragment, sep, batch = text.rpartition(":")
    if not sep or not fragment or not batch.isdigit():
        raise InputDataError(
            f"record key {text!r} is not '<fragment>:<batch>'; only a LinkWriter may write to a "
            "link's partition"
        )
    return fragment, int(batch)


def _rows(rows: pd.DataFrame) -> list[str]:
    if not isinstance(rows, pd.DataFrame):
        raise ConfigError(f"rows must be a pandas DataFrame, got {type(rows).__name__}")
    missing = [c for c in LINK_COLUMNS if c not in rows.columns]
    if missing:
        raise ConfigError(f"rows need the columns {list(LINK_COLUMNS)}; missing {missing}")
    sic = rows["sic"].to_numpy(dtype=np.float64)
    if sic.size and (not np.isfinite(sic).all() or sic.min() < 0):
        raise ConfigError("rows' sic must be finite and >= 0 (THEMIS Eq. 3)")
    start = rows["window_start"].to_numpy(dtype=np.float64)
    if start.size and (not np.isfinite(start).all() or start.min() < 0):
        raise ConfigError("rows' window_start must be finite Unix seconds >= 0 (a source time)")
    text = rows.to_json(orient="records", lines=True, double_precision=15)
    return [line for line in text.split("\n") if line]


def record_timestamps(rows: pd.DataFrame) -> list[int]:
    """Each row's record timestamp: its ``window_start`` (Unix seconds) in milliseconds.

    >>> record_timestamps(pd.DataFrame({"window_start": [1795773416.0, 12.25]}))
    [1795773416000, 12250]
    """
    return (
        np.round(rows["window_start"].to_numpy(dtype=np.float64) * 1000).astype(np.int64).tolist()
    )


class LinkWriter:
    """Writes one upstream fragment's batches into one partition, each exactly once.

    Parameters
    ----------
    conn : the cluster.
    topic : the link's topic (created beforehand).
    fragment : the upstream fragment's name (no ``:`` is needed to be unique, any text works).
    partition : the partition this fragment writes (it must be the only writer there).
    timeout_s : how long starting, committing or reading the tail may take.

    Attributes
    ----------
    last_batch : int
        The last batch id committed to the partition by this fragment (-1: none yet).

    Raises
    ------
    ConfigError
        An empty fragment name or a negative partition.
    KafkaClientError
        The cluster is unreachable, or the transaction could not start (fencing timed out).
    InputDataError
        The partition's last record was written by someone else.
    """

    def __init__(
        self,
        conn: KafkaConnection,
        topic: str,
        *,
        fragment: str,
        partition: int = 0,
        timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(fragment, str) or not fragment:
            raise ConfigError(f"fragment must be a non-empty name, got {fragment!r}")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ConfigError(f"partition must be an int >= 0, got {partition!r}")
        from confluent_kafka import KafkaException, Producer

        check_reachable(conn)
        self.conn, self.topic, self.fragment, self.partition = conn, topic, fragment, partition
        self.timeout_s = float(timeout_s)
        self.transactional_id = f"spillway-link:{topic}:{partition}:{fragment}"
        self._producer = Producer(
            conn.client_config(
                transactional_id=self.transactional_id,
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
            )
        )
        try:  # fences a predecessor with the same id and aborts its open transaction
            self._producer.init_transactions(self.timeout_s)
        except KafkaException as e:
            raise KafkaClientError(
                f"link {self.transactional_id!r} could not start its transactions on "
                f"{conn.bootstrap_servers}: {e}"
            ) from None
        self.last_batch = self._tail_batch()

    def _tail_batch(self) -> int:
        """The batch id of the last committed record of this partition (-1 if none)."""
        offs = {p.partition: p for p in partition_offsets(self.conn, self.topic)}
        if self.partition not in offs:
            raise ConfigError(
                f"topic {self.topic!r} has no partition {self.partition} "
                f"(it has {sorted(offs)}); create it with more partitions"
            )
        low, high = offs[self.partition].earliest, offs[self.partition].latest
        span = 16
        with RangeReader(self.conn, timeout_s=self.timeout_s) as reader:
            while True:  # the tail may be transaction markers and aborted records: widen
                start = max(low, high - span)
                table = reader.read(self.topic, self.partition, start, high)
                if table.num_rows:
                    break
                if start == low:
                    return -1
                span *= 4
        fragment, batch = parse_key(table.column("key")[-1].as_py())
        if fragment != self.fragment:
            raise InputDataError(
                f"{self.topic}[{self.partition}] was last written by fragment {fragment!r}, not "
                f"{self.fragment!r}; give every upstream fragment its own partition"
            )
        return batch

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        """Write batch ``batch_id``'s rows in one transaction; False if it was already written.

        Parameters
        ----------
        batch_id : int >= 0
            The upstream batch (Spark's ``batch_id``); ids must grow.
        rows : pandas.DataFrame
            At least :data:`LINK_COLUMNS`; every column goes as JSON, and each record's
            timestamp is its row's ``window_start`` (:func:`record_timestamps`).

        Raises
        ------
        ConfigError
            A negative batch id, missing columns, a negative or non-finite SIC or window
            start.
        KafkaClientError
            The transaction failed (it is aborted: nothing of the batch is visible).
        """
        if isinstance(batch_id, bool) or not isinstance(batch_id, int | np.integer):
            raise ConfigError(f"batch_id must be an int >= 0, got {batch_id!r}")
        if batch_id < 0:
            raise ConfigError(f"batch_id must be an int >= 0, got {batch_id!r}")
        values = _rows(rows)
        if batch_id <= self.last_batch:
            return False  # a replay: the batch is in the log already
        write_batch(
            self._producer, self.topic, self.partition, link_key(self.fragment, int(batch_id)),
            values, timeout_s=self.timeout_s, timestamps_ms=record_timestamps(rows),
            what=f"link {self.transactional_id!r} could not commit batch {batch_id}",
        )  # fmt: skip
        self.last_batch = int(batch_id)
        return True

    def close(self) -> None:
        """Flush the producer (nothing is pending between :meth:`write` calls)."""
        self._producer.flush(self.timeout_s)

    def __enter__(self) -> LinkWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_link(
    conn: KafkaConnection, topic: str, partition: int, start: int, end: int, **kw: Any
) -> pd.DataFrame:
    """The committed rows of offsets ``[start, end)`` of a link's partition, in log order.

    Returns
    -------
    pandas.DataFrame
        The rows' columns plus ``fragment``, ``batch`` and ``offset``; aborted transactions
        never appear.

    Raises
    ------
    InputDataError
        A record not written by a :class:`LinkWriter`.
    """
    with RangeReader(conn, **kw) as reader:
        table = reader.read(topic, partition, start, end)
    keys = [parse_key(k) for k in table.column("key").to_pylist()]
    rows = [json.loads(v) for v in table.column("value").to_pylist()]
    df = pd.DataFrame(rows, columns=None if rows else list(LINK_COLUMNS))
    df["fragment"] = [k[0] for k in keys]
    df["batch"] = np.array([k[1] for k in keys], dtype=np.int64)
    df["offset"] = table.column("offset").to_numpy()
    return df


__all__ = ["LINK_COLUMNS", "LinkWriter", "link_key", "parse_key", "read_link", "record_timestamps"]
