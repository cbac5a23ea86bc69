"""Your own PySpark query over a shed Kafka topic: the mean fare per route every 2 s, each
result with its SIC, written to the topic ``fares-mean`` exactly once.

    spillway kafka up
    spillway produce fares --feed taxi --rate 20000 --duration 120 &
    python spillway/examples/own_query.py --duration 60

``mean_fare`` is ordinary PySpark over the query's records of one micro-batch (whole 2 s
windows; every row has the record's fields, ``window_start`` and ``sic``). spillway sheds the
topic when it arrives faster than the node can process within its trigger, gives every result
row its share of its window's SIC (THEMIS Eq. 3), and writes each batch of results to Kafka in
one transaction, so a driver restarted from ``--checkpoint`` never writes a result twice.
The same query as a config file: ``spillway/examples/own_query.toml``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spillway.config import NodeConfig, QuerySpec


def mean_fare(rows: DataFrame) -> DataFrame:
    """The mean fare and the number of rides per route and 2 s window."""
    return rows.groupBy("window_start", "key").agg(
        F.avg("value").alias("mean_fare"), F.count(F.lit(1)).alias("rides")
    )


FARES = QuerySpec(
    name="fares",
    kind="user",
    feed="kafka",
    window_s=2.0,
    function=mean_fare,
    feed_options={
        "subscribe": "fares",
        "startingOffsets": "latest",
        "schema": "source long, seq long, key long, value double, event_time timestamp",
    },
    sink={"kind": "kafka", "topic": "fares-mean"},
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="the mean fare per route of a shed topic")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds to run")
    ap.add_argument("--checkpoint", default="runs/own-query", help="checkpoint folder")
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the local broker)")
    args = ap.parse_args(argv)
    query = FARES
    if args.bootstrap:  # another cluster: the topic's and the sink's
        servers = {"kafka.bootstrap.servers": args.bootstrap}
        sink = {"kind": "kafka", "topic": "fares-mean", **servers}
        query = replace(FARES, feed_options={**FARES.feed_options, **servers}, sink=sink)
    from spillway.spark.node import Node

    node = Node(NodeConfig(queries=(query,), trigger_s=1.0, checkpoint_dir=args.checkpoint))
    node.run(args.duration)
    print(node.user_results("fares").tail(10).to_string(index=False))


if __name__ == "__main__":
    main()
