"""Topics and their offsets: create and delete topics, list partitions with their log bounds.

A Kafka partition is a feed whose tuple index is the offset: its *earliest* offset is the first
record still in the log, its *latest* offset the one the next record will get (the high
watermark). A source's backlog on a lane is ``latest − admitted``. :func:`partition_offsets`
reads both bounds of every partition of a topic in two list-offsets requests (not one request
per partition).

Every function checks that the cluster is reachable first and turns a missing topic or a
refused request into one :class:`~spillway.errors.KafkaClientError` line.

Examples
--------
Needs a broker (``spillway kafka up`` prints its address)::

    conn = KafkaConnection(bootstrap_servers="127.0.0.1:9092")
    create_topic(conn, "clicks", partitions=4)
    [(p.partition, p.earliest, p.latest) for p in partition_offsets(conn, "clicks")]
    # [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]

>>> PartitionOffsets(topic="t", partition=0, earliest=5, latest=12).available
7
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.connection import KafkaConnection, check_reachable

#: Seconds an admin request may take before it is reported as failed.
ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class PartitionOffsets:
    """The log bounds of one partition: records ``[earliest, latest)`` are readable."""

    topic: str
    partition: int
    earliest: int
    latest: int

    @property
    def available(self) -> int:
        """Records in the log now (``latest − earliest``)."""
        return self.latest - self.earliest


def admin_client(conn: KafkaConnection, *, timeout_s: float = 5.0) -> Any:
    """The confluent-kafka ``AdminClient`` of ``conn``, checked reachable first.

    One client per connection is kept for the life of the process (a client holds threads and
    broker connections; making one per call would cost more than the request).
    """
    check_reachable(conn, timeout_s=timeout_s)
    return _cached_admin(conn)


@functools.lru_cache(maxsize=16)
def _cached_admin(conn: KafkaConnection) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(conn.client_config())


def _fail(what: str, conn: KafkaConnection, e: BaseException) -> KafkaClientError:
    err = e.args[0] if e.args else e
    msg = err.str() if hasattr(err, "str") else str(err)
    return KafkaClientError(f"{what} on {conn.bootstrap_servers} failed: {msg}")


def list_topics(conn: KafkaConnection) -> dict[str, int]:
    """Topic name -> number of partitions, internal topics (``__...``) left out."""
    md = _metadata(conn)
    return {
        name: len(t.partitions)
        for name, t in sorted(md.topics.items())
        if not name.startswith("__")
    }


def _metadata(conn: KafkaConnection, topic: str | None = None) -> Any:
    admin = admin_client(conn)
    try:
        return admin.list_topics(topic=topic, timeout=ADMIN_TIMEOUT_S)
    except Exception as e:  # confluent_kafka.KafkaException
        raise _fail("listing topics", conn, e) from None


def create_topic(
    conn: KafkaConnection,
    name: str,
    *,
    partitions: int = 1,
    config: Iterable[tuple[str, str]] = (),
    exist_ok: bool = False,
) -> None:
    """Create topic ``name`` with ``partitions`` partitions (replication factor 1).

    Parameters
    ----------
    conn : the cluster.
    name : topic name (letters, digits, ``.``, ``_``, ``-``; at most 249 characters).
    partitions : number of partitions, >= 1.
    config : topic settings as ``(name, value)`` pairs (e.g. ``("retention.ms", "-1")``).
    exist_ok : do nothing if the topic exists (its partition count is not checked).

    Raises
    ------
    ConfigError
        ``partitions`` < 1 or a bad topic name.
    KafkaClientError
        The broker refused (the topic exists and ``exist_ok`` is false, a bad setting).
    """
    from confluent_kafka.admin import NewTopic

    if not isinstance(partitions, int) or partitions < 1:
        raise ConfigError(f"partitions must be an integer >= 1, got {partitions!r}")
    _check_name(name)
    admin = admin_client(conn)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config))
    try:
        admin.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S)[name].result()
    except Exception as e:
        err = e.args[0] if e.args else None
        if exist_ok and getattr(err, "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
            return
        raise _fail(f"creating topic {name!r}", conn, e) from None
    _wait_for_leaders(conn, admin, name, partitions)


def _wait_for_leaders(conn: KafkaConnection, admin: Any, name: str, partitions: int) -> None:
    """Wait until the broker's metadata shows every partition of a new topic with a leader:
    the controller has created it, but the broker may not serve it for a few milliseconds."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        t = admin.list_topics(topic=name, timeout=ADMIN_TIMEOUT_S).topics.get(name)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in t.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise KafkaClientError(
                f"topic {name!r} on {conn.bootstrap_servers} was created but has no leader "
                f"after {ADMIN_TIMEOUT_S:g} s: see the broker's log"
            )
        time.sleep(0.01)


def delete_topics(conn: KafkaConnection, names: Iterable[str], *, missing_ok: bool = True) -> None:
    """Delete topics ``names`` (a missing one is skipped unless ``missing_ok`` is false).

    Raises
    ------
    KafkaClientError
        The broker refused a deletion.
    """
    names = list(names)
    if not names:
        return
    admin = admin_client(conn)
    futures = admin.delete_topics(names, operation_timeout=ADMIN_TIMEOUT_S)
    for name, fut in futures.items():
        try:
            fut.result()
        except Exception as e:
            err = e.args[0] if e.args else None
            if missing_ok and getattr(err, "name", lambda: "")() == "UNKNOWN_TOPIC_OR_PART":
                continue
            raise _fail(f"deleting topic {name!r}", conn, e) from None


def partitions_of(conn: KafkaConnection, topic: str) -> list[int]:
    """The partition ids of ``topic``, sorted.

    Raises
    ------
    KafkaClientError
        The topic does not exist.
    """
    md = _metadata(conn, topic)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise KafkaClientError(
            f"topic {topic!r} does not exist on {conn.bootstrap_servers}: create it first "
            "(spillway produce creates the topics it writes)"
        )
    return sorted(t.partitions)


def partition_offsets(
    conn: KafkaConnection, topic: str, *, committed: bool = True
) -> list[PartitionOffsets]:
    """Earliest and latest offsets of every partition of ``topic``, by partition id.

    ``committed`` (the default) gives a read_committed reader's view: ``latest`` is the last
    stable offset, before any open transaction. ``committed=False`` gives the high watermark;
    the two agree once no transaction is open and every commit marker has been written.

    Raises
    ------
    KafkaClientError
        The topic does not exist or the broker did not answer.
    """
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    parts = partitions_of(conn, topic)
    admin = admin_client(conn)
    bounds: dict[str, dict[int, int]] = {}
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    for which, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):
        request = {TopicPartition(topic, p): spec for p in parts}
        while which not in bounds:
            try:
                futures = admin.list_offsets(
                    request,
                    isolation_level=(
                        IsolationLevel.READ_COMMITTED
                        if committed
                        else IsolationLevel.READ_UNCOMMITTED
                    ),
                    request_timeout=ADMIN_TIMEOUT_S,
                )
                bounds[which] = {tp.partition: f.result().offset for tp, f in futures.items()}
            except Exception as e:
                err = e.args[0] if e.args else None
                # a leader moving or a topic just created: retry for a while
                if _transient(err) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise _fail(f"listing {which} offsets of {topic!r}", conn, e) from None
    return [
        PartitionOffsets(
            topic=topic, partition=p, earliest=bounds["earliest"][p], latest=bounds["latest"][p]
        )
        for p in parts
    ]


_TRANSIENT = {
    "NOT_LEADER_FOR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PART",
    # a partition just created: its leader's epoch reaches the broker a moment later (a CI
    # run once failed on this right after creating a topic)
    "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH",
}


def _transient(err: Any) -> bool:
    """Errors of a partition whose leader is moving or being created (librdkafka does not
    mark NOT_LEADER_FOR_PARTITION retriable for list-offsets, though it passes in ms)."""
    if err is None or not hasattr(err, "name"):
        return False
    return bool(err.retriable()) or err.name() in _TRANSIENT


_LEGAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _check_name(name: str) -> None:
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= 249
        or name in (".", "..")
        or set(name) - _LEGAL
    ):
        raise ConfigError(
            f"topic name must be 1-249 characters of letters, digits, '.', '_' and '-', "
            f"got {name!r}"
        )
