"""A fragment's rows across nodes on Spark: a ``foreachBatch`` sink into link topics and the
link topic read back as a streaming source, rows keeping their SIC.

- :class:`LinkSink` is the upstream side: called as ``foreachBatch(sink)``, it collects the
  batch's rows (:data:`~spillway.federation.link.LINK_COLUMNS` at least) and writes them to every
  link of the fragment with a :class:`~spillway.federation.link.LinkWriter`, one Kafka
  transaction per batch and link, the SIC multiplied by the link's share (a replicated output
  divides its SIC among its copies, DISSP Assumption 9). Spark re-runs a batch whose commit it
  did not record (a node restarted from its checkpoint) with the same ``batch_id``: the writer
  recognises it and writes nothing, so downstream never receives its rows, nor their SIC,
  twice.
- :func:`link_stream` is the downstream side: Spark's own Kafka source on the link topic,
  ``read_committed`` (an aborted transaction, a batch cut by a crash, never shows), its
  offsets in the consumer's checkpoint, the values parsed back into columns with their SIC and
  the producing fragment and batch from the key.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §3-§4, Eq. 3; Fiscato, PhD thesis 2012, Assumption 9.

Examples
--------
>>> LINK_SCHEMA
'query_id BIGINT, window_start DOUBLE, sic DOUBLE'
"""

from __future__ import annotations

from typing import Any

from spillway.errors import ConfigError
from spillway.federation.link import LinkWriter
from spillway.federation.placement import LinkIn, LinkOut
from spillway.kafka.connection import KafkaConnection
from spillway.spark.batch_stop import stop_safe
from spillway.spark.queries import collect_pandas

#: The parsed columns of a link record's value (those of ``LINK_COLUMNS``).
LINK_SCHEMA = "query_id BIGINT, window_start DOUBLE, sic DOUBLE"


class LinkSink:
    """``foreachBatch`` sink writing a fragment's rows to its links, each batch once.

    Parameters
    ----------
    conn : the cluster.
    outputs : the fragment's links (:func:`spillway.federation.placement.node_links`), all of
        one fragment.
    timeout_s : passed to every :class:`LinkWriter`.

    Attributes
    ----------
    written, replayed : list of int
        The batch ids written, and those recognised as already written (a replay).

    Raises
    ------
    ConfigError
        No outputs, or outputs of several fragments.
    """

    def __init__(
        self, conn: KafkaConnection, outputs: tuple[LinkOut, ...], *, timeout_s: float = 30.0
    ) -> None:
        frags = {o.fragment for o in outputs}
        if len(frags) != 1:
            raise ConfigError(
                f"outputs must be the links of exactly one fragment, got fragments {sorted(frags)}"
            )
        self.outputs = outputs
        self.fragment = outputs[0].fragment
        self._writers = [
            LinkWriter(conn, o.topic, fragment=o.fragment, partition=o.partition,
                       timeout_s=timeout_s)
            for o in outputs
        ]  # fmt: skip
        self.written: list[int] = []
        self.replayed: list[int] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = collect_pandas(df)
        fresh = False
        for out, writer in zip(self.outputs, self._writers, strict=True):
            part = rows.copy()
            part["sic"] = part["sic"].astype("float64") * out.share
            fresh |= writer.write(int(batch_id), part)
        (self.written if fresh else self.replayed).append(int(batch_id))

    def close(self) -> None:
        """Flush every writer."""
        for w in self._writers:
            w.close()


def link_stream(spark: Any, conn: KafkaConnection, link: LinkIn) -> Any:
    """The streaming DataFrame of a consumer fragment's link topic.

    Columns: ``query_id``, ``window_start``, ``sic`` (as written, already divided by the
    producer's share), ``fragment`` and ``batch`` (the producer and its batch, from the key),
    ``partition`` and ``offset``. Committed records only (``read_committed``), from the
    earliest offset; the consumer's checkpoint keeps its offsets.
    """
    from pyspark.sql import functions as F

    raw = (
        spark.readStream.format("kafka").options(**conn.spark_options())
        .option("subscribe", link.topic).option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed").option("failOnDataLoss", "true")
        .load()
    )  # fmt: skip
    key = F.col("key").cast("string")
    return raw.select(
        F.from_json(F.col("value").cast("string"), LINK_SCHEMA).alias("v"),
        F.regexp_extract(key, r"^(.*):(\d+)$", 1).alias("fragment"),
        F.regexp_extract(key, r"^(.*):(\d+)$", 2).cast("long").alias("batch"),
        "partition",
        "offset",
    ).select("v.*", "fragment", "batch", "partition", "offset")


def merge_windows(df: Any) -> Any:
    """A fragment's partial result of rows it received: one row per query and window, its SIC
    the sum of theirs (THEMIS Eq. 3: a derived tuple carries the SIC of its inputs)."""
    from pyspark.sql import functions as F

    return df.groupBy("query_id", "window_start").agg(F.sum("sic").alias("sic"))


def start_relay(
    spark: Any,
    conn: KafkaConnection,
    link: LinkIn,
    sink: LinkSink,
    *,
    checkpoint: str,
    trigger: dict[str, Any],
) -> Any:
    """Run a middle fragment: its link topic's rows merged per window
    (:func:`merge_windows`) and written to its own links, each batch once.

    Parameters
    ----------
    link : the fragment's input; sink : its outputs (same fragment).
    checkpoint : the streaming query's checkpoint (the input offsets; the batch ids the sink
        writes under come from it, so a restart replays them under the same ids).
    trigger : ``DataStreamWriter.trigger`` keywords, e.g. ``{"processingTime": "1 second"}``.

    Raises
    ------
    ConfigError
        The sink writes for another fragment than the link feeds.
    """
    if sink.fragment != link.fragment:
        raise ConfigError(
            f"the relay of {link.fragment!r} must write that fragment's links, got a sink of "
            f"{sink.fragment!r}"
        )

    def run(df: Any, batch_id: int) -> None:
        sink(merge_windows(df), batch_id)

    batches = stop_safe(run, f"relay {link.fragment!r}")
    return (
        link_stream(spark, conn, link).writeStream.foreachBatch(batches)
        .option("checkpointLocation", checkpoint).trigger(**trigger)
        .queryName(f"relay:{link.fragment}").start()
    )  # fmt: skip


__all__ = ["LINK_SCHEMA", "LinkSink", "link_stream", "merge_windows", "start_relay"]
