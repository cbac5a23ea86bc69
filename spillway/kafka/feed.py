"""A Kafka topic as a spillway feed: partitions are sources, offsets are tuple indices.

THEMIS's node input buffer on a real stream (docs/design.md, "Real streams"): each partition of
the subscribed topics is a source, a lane's tuple index is the Kafka offset itself (absolute, so
a query restarted from its checkpoint resumes from the offsets in Spark's log), and the arrival
clock is the record timestamp: the tuples of a partition that arrived by feed time ``t`` are the
offsets before the first record whose timestamp (as Kafka's time index keeps it, the largest
timestamp so far) reaches ``epoch + t``. So a batch ends on a window boundary in the records' own
time, the cut is a pure function of the log (a replay reads the same offsets), and built-in
queries window by the record timestamp. The log may hold records older than the cut that are
appended after it (a producer's own timestamps, delivered late): those are late for their
window, which has already been evaluated; :meth:`KafkaFeed.records` marks them and the node counts
them as lost, never folded into a second result for an old window.

Where the driver and the executors do what:

- driver (the node's controller): resolves partitions and start offsets once
  (``startingOffsets``: ``earliest`` or ``latest``), then asks :meth:`KafkaFeed.count` for the
  cut of each decision (one ``offsets_for_times`` call per decision, cached);
- executors: :meth:`KafkaFeed.records` reads an exact offset range of one partition
  (:class:`~spillway.kafka.reader.RangeReader`), keeps the decided subset, and parses the values
  with the user's schema (:mod:`spillway.kafka.parse`): malformed values come back with their
  reason, topic, partition and offset for the dead-letter destination.

The feed travels to executors as an object (its resolved partitions and start offsets, no live
client): :attr:`portable` is True.

Options follow Spark's Kafka source where they mean the same (``kafka.bootstrap.servers``:
when left out, the broker ``spillway kafka up`` runs;
``subscribe``, ``startingOffsets``, ``failOnDataLoss``, other ``kafka.*`` client settings) plus
how to read the values, which every log feed shares (:mod:`spillway.feeds.log_options`):
``format`` (``json`` or ``csv``), ``schema`` (DDL), ``value_column`` (required unless
``records``), ``key_column`` (integers or texts), ``time_column`` (kept as data; built-in
windows use the record timestamp), ``dead_letter`` (a folder for malformed and late records),
``records`` (default false: true hands a user's query every record's fields, as the JSON object
text ``raw`` that ``from_json(raw, feed.schema_ddl)`` reads back) and ``lateness_s`` (default 1:
how long after a window ends its records may still arrive; the node decides the window then);
``dead_letter_topic`` (a topic on the same cluster for malformed and late records, written
exactly once per record: :mod:`spillway.kafka.dead_letter`); and ``sic_column`` (a numeric field
of the schema holding the SIC a record already carries: a federation link topic's ``sic``, the
rows an upstream node's fragment produced, :class:`spillway.spark.links.LinkSink`). With
``sic_column`` a kept record keeps its carried SIC instead of its lane's per-tuple share, so a
node shedding a fraction of a link lane's rows keeps that fraction of the SIC they carry (THEMIS
Eq. 3 across nodes: the product of both nodes' keep ratios on the query's SIC).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from spillway.errors import ConfigError, KafkaClientError
from spillway.feeds.base import Feed
from spillway.feeds.hashing import text_keys
from spillway.feeds.log_options import SHARED, LogFields, flag, reject_unknown
from spillway.feeds.row_json import rows_json
from spillway.kafka.connection import KafkaConnection
from spillway.kafka.parse import FORMATS, parse_table

#: Offsets skipped between two kept runs of a partition before they are read as two ranges.
READ_GAP = 2048

#: Seconds a record may arrive after its timestamp and still count in its window (a producer
#: batches for 20 ms, a broker acknowledges, a busy machine delays both): the node decides each
#: window this long after it ends. Records later than that are set aside as late.
DEFAULT_LATENESS_S = 1.0

#: A link lane's carried SIC (``sic_column``) is priced at a decision from at most this many
#: of its waiting records, scaled to the range (:meth:`KafkaFeed.carried_sic`).
CARRIED_SAMPLE = 20_000

#: Starting positions.
STARTING = ("earliest", "latest")

#: The feed's options (besides ``kafka.*`` client settings): its own, then those every log
#: feed shares (:mod:`spillway.feeds.log_options`).
OPTIONS = (
    "kafka.bootstrap.servers",
    "subscribe",
    "startingOffsets",
    "failOnDataLoss",
    *SHARED,
    "lateness_s",
    "dead_letter_topic",
    "sic_column",
)


def _local_broker() -> str:
    """The address of the broker ``spillway kafka up`` runs (its default folder)."""
    from spillway.kafka.broker import local_connection

    return local_connection().bootstrap_servers


class KafkaFeed(LogFields, Feed):
    """The partitions of Kafka topics as a feed (see the module docstring).

    Parameters
    ----------
    n_sources, rate, profile, profile_options, seed : the shared feed signature; the topic
        sets the sources (its partitions: ``n_sources`` is ignored unless it disagrees with an
        explicit ``sources``) and the rate (so ``rate`` and the profile are unused).
    **options : Spark's Kafka source options (``kafka.bootstrap.servers``, ``subscribe``,
        ``startingOffsets``, ``failOnDataLoss``, ``kafka.*``) and ``format``, ``schema``,
        ``value_column``, ``key_column``, ``time_column``, ``dead_letter``, ``records``,
        ``lateness_s``, ``dead_letter_topic``, ``sic_column``.

        The shared ones become the attributes of
        :class:`~spillway.feeds.log_options.LogFields` (``format``, ``schema_ddl``, ...).

    Raises
    ------
    ConfigError
        A missing or bad option.
    KafkaClientError
        The broker is unreachable or a topic does not exist (checked when the feed is made,
        so before Spark starts).
    """

    name = "kafka"
    portable: ClassVar[bool] = True
    log: ClassVar[bool] = True
    read_gap: ClassVar[int] = READ_GAP

    def __init__(
        self,
        *,
        n_sources: int | None = None,
        rate: float | None = None,
        profile: str = "constant",
        profile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
        **options: Any,
    ) -> None:
        opts = dict(options)
        reject_unknown("kafka", opts, OPTIONS, prefix="kafka.")
        self.take_options("kafka", opts, formats=FORMATS, lateness_s=DEFAULT_LATENESS_S)
        if not opts.get("kafka.bootstrap.servers"):
            opts["kafka.bootstrap.servers"] = _local_broker()
        self.conn = KafkaConnection.from_spark_options(opts)
        topics = [t.strip() for t in str(opts.pop("subscribe", "")).split(",") if t.strip()]
        if not topics:
            raise ConfigError(
                "kafka option 'subscribe' must name a topic (or several, comma-separated)"
            )
        self.topics = tuple(topics)
        self.starting = str(opts.pop("startingOffsets", "latest"))
        if self.starting not in STARTING:
            raise ConfigError(
                f"kafka option 'startingOffsets' must be one of {', '.join(STARTING)}, got "
                f"{self.starting!r}"
            )
        self.fail_on_data_loss = flag("kafka", "failOnDataLoss", opts.pop("failOnDataLoss", True))
        dlq = opts.pop("dead_letter_topic", None)
        self.dead_letter_topic = None if dlq is None else str(dlq)
        self.sic_column = _sic_column(opts.pop("sic_column", None), self.schema)
        self.lanes: tuple[tuple[str, int, int], ...] = self._resolve()
        self.epoch_s: float | None = None
        self._cut_cache: dict[float, np.ndarray] = {}
        self._lock = threading.Lock()
        self._reader: Any = None
        self._cut_lock = threading.Lock()
        self._consumer: Any = None

    # ---- the driver's side -------------------------------------------------------------------

    def _resolve(self) -> tuple[tuple[str, int, int], ...]:
        from spillway.kafka.admin import partition_offsets

        lanes = []
        for topic in self.topics:
            for po in partition_offsets(self.conn, topic):  # raises a clear KafkaClientError
                base = po.earliest if self.starting == "earliest" else po.latest
                lanes.append((topic, int(po.partition), int(base)))
        return tuple(lanes)

    @property
    def n_sources(self) -> int:
        return len(self.lanes)

    def start_offsets(self) -> np.ndarray:
        """Every lane's first offset (where the node starts reading)."""
        return np.array([base for _, _, base in self.lanes], dtype=np.int64)

    def attach(self, epoch_s: float) -> None:
        """The node's epoch (Unix seconds): feed time ``t`` is record time ``epoch_s + t``."""
        with self._lock:
            if self.epoch_s != float(epoch_s):
                self._cut_cache.clear()  # cuts are feed times of the previous epoch
            self.epoch_s = float(epoch_s)

    def count(self, t: float) -> np.ndarray:
        """Per partition, the offset before which records arrived by feed time ``t`` (never
        below the start offset): Kafka's ``offsets_for_times`` at ``epoch + t``, the end of
        the log where no record has reached it yet (looked up again on the next call: records
        stamped before ``t`` may still be appended). Non-decreasing in ``t``."""
        if self.epoch_s is None:
            raise ConfigError("a Kafka feed needs the node's epoch (attach) before counting")
        key = round(float(t), 6)
        with self._lock:
            hit = self._cut_cache.get(key)
        if hit is not None:
            return hit.copy()
        from confluent_kafka import TopicPartition

        ms = int(round((self.epoch_s + float(t)) * 1000))
        with self._cut_lock:  # one lookup at a time on the feed's one consumer
            consumer = self._cut_consumer()
            try:
                # The log's end BEFORE the time lookup: when the lookup finds no record at or
                # after t, every record below that end is older than t. (The end read after the
                # lookup could hold records a producer appended meanwhile, of the next window.)
                ends = [
                    consumer.get_watermark_offsets(TopicPartition(tp, p), timeout=10.0)[1]
                    for tp, p, _ in self.lanes
                ]
                want = [TopicPartition(tp, p, ms) for tp, p, _ in self.lanes]
                got = consumer.offsets_for_times(want, timeout=10.0)
            except Exception as e:
                consumer, self._consumer = self._consumer, None
                consumer.close()  # a consumer that failed is not trusted: the next makes one
                raise KafkaClientError(
                    f"cannot read the offsets of {', '.join(self.topics)} at "
                    f"{self.conn.bootstrap_servers}: {e}"
                ) from None
        out = np.zeros(len(self.lanes), dtype=np.int64)
        final = True
        for j, (_tp, _p, base) in enumerate(self.lanes):
            off = got[j].offset
            if off is None or off < 0:  # no record at or after t yet: the log's end
                off, final = ends[j], False
            out[j] = max(int(off), base)
        if final:
            # Only a found offset is final: records appended later go after it. The log's end
            # is provisional (a producer may still append records stamped before t), so it is
            # looked up again next time; cached, a later cut at an earlier t could pass it.
            with self._lock:
                if len(self._cut_cache) > 4096:
                    self._cut_cache.clear()
                self._cut_cache[key] = out
        return out.copy()

    def _cut_consumer(self) -> Any:
        """The consumer of the time lookups, made on first use and kept (making one costs a
        connection to the broker; the controller looks up every lane at every interval)."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            from spillway.kafka.reader import CONSUMER_SETTINGS

            self._consumer = Consumer(
                {**CONSUMER_SETTINGS, **self.conn.client_config(group_id="spillway-cut")}
            )
        return self._consumer

    def close(self) -> None:
        """Close the consumers this feed holds (a later call makes new ones)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def positions(self, processed: np.ndarray) -> dict[str, int]:
        """Per partition (``topic/partition``), the offset ``processed`` (per lane, the end of
        what was processed) has reached, never below the start."""
        return {
            f"{tp}/{p}": max(int(done), base)
            for (tp, p, base), done in zip(self.lanes, processed, strict=True)
        }

    def lag(self, processed: np.ndarray) -> dict[str, int]:
        """Consumer lag per partition (``topic/partition``): the log's end offset minus
        ``processed`` (per lane, the end of what was processed; never below the start)."""
        from spillway.kafka.admin import partition_offsets

        latest = {
            f"{po.topic}/{int(po.partition)}": int(po.latest)
            for topic in self.topics
            for po in partition_offsets(self.conn, topic)
        }
        return {
            k: max(latest.get(k, done) - done, 0) for k, done in self.positions(processed).items()
        }

    @property
    def carries_sic(self) -> bool:
        """True with ``sic_column``: a link topic's records carry their SIC."""
        return self.sic_column is not None

    def carried_sic(self, source: int, lo: int, hi: int) -> float:
        """The SIC the records ``[lo, hi)`` of partition lane ``source`` carry, summed: read
        on the driver (a link carries result rows, a few per window and query); a range longer
        than :data:`CARRIED_SAMPLE` is priced from that many evenly spread records, scaled."""
        if self.sic_column is None:
            return super().carried_sic(source, lo, hi)
        n = int(hi) - int(lo)
        if n <= 0:
            return 0.0
        idx = np.arange(int(lo), int(hi), dtype=np.int64)
        if n > CARRIED_SAMPLE:
            idx = np.unique(np.linspace(int(lo), int(hi) - 1, CARRIED_SAMPLE).astype(np.int64))
        sic = np.asarray(self.records(source, idx)["sic"], dtype=np.float64)
        return float(sic.sum()) * (n / idx.size) if sic.size else 0.0

    def dead_letter_writer(self) -> Any | None:
        """The ``dead_letter_topic`` on this cluster (created if missing), or None."""
        if self.dead_letter_topic is None:
            return None
        from spillway.kafka.dead_letter import DeadLetterTopic

        return DeadLetterTopic(self.conn, self.dead_letter_topic)

    # ---- the executors' side -----------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_lock=None, _cut_lock=None, _reader=None, _consumer=None, _cut_cache={})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._cut_lock = threading.Lock()

    def _range_reader(self) -> Any:
        if self._reader is None:
            from spillway.kafka.reader import RangeReader

            self._reader = RangeReader(self.conn)
        return self._reader

    def records(self, source: int, index: np.ndarray, epoch_s: float = 0.0) -> dict[str, Any]:
        """The tuples ``index`` (offsets) of partition lane ``source``: ``key``, ``value``,
        ``key_text`` (text keys), ``event_ts`` and ``arrival_ts`` (the record timestamp, Unix
        seconds), ``offset``, ``topic``, ``partition``, and ``error`` (None, or why a value is
        malformed) and ``raw`` (the malformed value's text; with ``records``, a valid record's
        fields as a JSON object, :func:`~spillway.feeds.row_json.rows_json`); and ``sic``, the
        SIC each record carries (``sic_column``; 0 for a malformed record), or None without
        ``sic_column``."""
        topic, partition, _ = self.lanes[source]
        idx = np.asarray(index, dtype=np.int64)
        if idx.size == 0:
            return _empty()
        table = self._read_runs(topic, partition, idx)
        offsets = table.column("offset").to_numpy()
        if offsets.size == 0:  # only transaction markers (or compacted offsets) in the range
            none = None if self.sic_column is None else np.zeros(0)
            return {**_empty(), "topic": topic, "partition": partition, "sic": none}
        pos = np.searchsorted(offsets, idx)
        found = (pos < len(offsets)) & (offsets[np.minimum(pos, len(offsets) - 1)] == idx)
        pos, idx = pos[found], idx[found]  # offsets the log no longer has (compaction gaps)
        values = table.column("value").take(pa.array(pos)).to_pylist()
        ts = table.column("timestamp").take(pa.array(pos)).cast(pa.int64()).to_numpy() / 1e6
        parsed, errors = parse_table([v or b"" for v in values], self.format, self.schema)
        n = len(values)
        value = np.zeros(n)
        if self.value_column is not None:
            value = (
                parsed.column(self.value_column).cast(pa.float64()).to_numpy(zero_copy_only=False)
            )
        key = np.zeros(n, dtype=np.int64)
        key_text = None
        if self.key_column is not None:
            kc = parsed.column(self.key_column)
            if self._text_keys:
                key_text = np.array(kc.to_pylist(), dtype=object)
                good = np.array([k is not None for k in key_text])
                key[good] = text_keys(key_text[good])
            else:
                key = kc.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        error = np.array([errors.get(i) for i in range(n)], dtype=object)
        raw = (
            rows_json(parsed).to_numpy(zero_copy_only=False).astype(object)
            if self.record_fields
            else np.full(n, None, dtype=object)
        )
        for i in errors:
            raw[i] = bytes(values[i] or b"").decode("utf-8", "replace")
        sic = None
        if self.sic_column is not None:
            carried = parsed.column(self.sic_column).cast(pa.float64())
            sic = np.nan_to_num(carried.to_numpy(zero_copy_only=False), nan=0.0)
        return {
            "key": key,
            "key_text": key_text,
            "value": np.nan_to_num(value, nan=0.0),
            "event_ts": ts,
            "arrival_ts": ts,
            "offset": idx,
            "topic": topic,
            "partition": partition,
            "error": error,
            "raw": raw,
            "sic": sic,
        }

    def _read_runs(self, topic: str, partition: int, idx: np.ndarray) -> pa.Table:
        """The records of ``idx`` (sorted offsets) read as ranges: one per run of offsets with
        gaps shorter than :attr:`read_gap` (a seek costs more than reading a short gap)."""
        idx = np.sort(idx)
        cut = np.flatnonzero(np.diff(idx) > self.read_gap) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [idx.size]])
        reader = self._range_reader()
        tables = [
            reader.read(topic, partition, int(idx[a]), int(idx[b - 1]) + 1)
            for a, b in zip(starts, ends, strict=True)
        ]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        r = self.records(source, index)
        out = {"key": r["key"], "value": r["value"]}
        if r["key_text"] is not None:
            out["key_text"] = r["key_text"]
        return out

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        """Record timestamps as feed seconds (after the epoch)."""
        base = self.epoch_s or 0.0
        return np.asarray(self.records(source, index)["arrival_ts"]) - base

    def __repr__(self) -> str:
        return (
            f"KafkaFeed(topics={list(self.topics)}, partitions={len(self.lanes)}, "
            f"starting={self.starting!r}, format={self.format!r})"
        )


def _empty() -> dict[str, Any]:
    z = np.zeros(0)
    return {
        "key": np.zeros(0, np.int64),
        "key_text": None,
        "value": z,
        "event_ts": z,
        "arrival_ts": z,
        "offset": np.zeros(0, np.int64),
        "topic": "",
        "partition": -1,
        "error": np.zeros(0, object),
        "raw": np.zeros(0, object),
        "sic": None,
    }


def _sic_column(given: Any, schema: pa.Schema) -> str | None:
    """The ``sic_column`` option checked against the schema: None, or a numeric field."""
    if given is None:
        return None
    name = str(given)
    if name not in schema.names:
        raise ConfigError(
            f"kafka option 'sic_column' names {name!r}, not a field of the schema {schema.names}"
        )
    typ = schema.field(name).type
    if not (pa.types.is_floating(typ) or pa.types.is_integer(typ)):
        raise ConfigError(
            f"kafka option 'sic_column' names {name!r} of type {typ}: the SIC a record carries "
            "must be a number (e.g. 'sic double')"
        )
    return name
