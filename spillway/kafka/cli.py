"""The Kafka commands of ``spillway``: ``kafka up|down|status|topics|fetch`` and ``produce``.

:func:`add_kafka_commands` adds them to the ``spillway`` parser; each sets ``handler`` to the
function that runs it (``main`` calls ``args.handler(args)``), so the main CLI module only
registers them. Errors are :class:`~spillway.errors.SpillwayError` s, which ``main`` turns into
one line and exit code 2.

``spillway kafka up`` prints the bootstrap address alone on standard output (notes go to
standard error), so ``BOOTSTRAP=$(spillway kafka up)`` works in scripts.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="spillway")
>>> add_kafka_commands(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["produce", "clicks", "--rate", "5000", "--profile", "bursty",
...                           "--profile-option", "factor=10", "--duration", "30"])
>>> cfg = produce_config(args)
>>> cfg.topic, cfg.rate, cfg.profile, cfg.profile_options, cfg.duration_s
('clicks', 5000.0, 'bursty', (('factor', 10),), 30.0)
>>> parse_option("path=rides.csv"), parse_option("factors=[1, 3]")
(('path', 'rides.csv'), ('factors', [1, 3]))
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka import broker as brokers
from spillway.kafka.connection import KafkaConnection, check_reachable

_KAFKA_EPILOG = """\
examples:
  spillway kafka up                  # start the local broker, print its address
  spillway kafka status
  spillway kafka topics
  spillway kafka down

The broker is Apache Kafka (KRaft, one node) on 127.0.0.1 only; its data and log stay in
--dir between 'up' and 'down'. 'up' of a running broker prints its address again.
"""

_PRODUCE_EPILOG = """\
examples:
  spillway produce clicks --rate 10000 --duration 60
  spillway produce clicks --feed taxi --sources 4 --rate 5000 --profile bursty
  spillway produce rides --feed replay --feed-option path=rides.csv \\
      --feed-option time_column=pickup --feed-option value_column=fare --duration 120
  spillway produce cpu --profile step --profile-option times=[20] \\
      --profile-option factors=[3] --format csv --key source

Each tuple is one message: a JSON object (or CSV line) with source, seq, key, value and
event_time; the record timestamp is the event time. Progress every --report-every seconds,
then the achieved rate against the profile's.
"""


def parse_option(text: str) -> tuple[str, Any]:
    """``name=value``, the value read as JSON when it is JSON (numbers, lists, true), else
    as text."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"an option must be name=value, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return name.strip(), value


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help=f"the broker's folder (default {brokers.default_data_dir()})",
    )


def add_kafka_commands(sub: Any) -> None:
    """Add ``kafka`` (with ``up``, ``down``, ``status``, ``topics``, ``fetch``) and ``produce``
    to the subcommands ``sub`` of the ``spillway`` parser."""
    kafka = sub.add_parser(
        "kafka",
        help="start, stop or inspect the local Kafka broker",
        description="A single-node Apache Kafka broker on 127.0.0.1 for spillway's sources.",
        epilog=_KAFKA_EPILOG,
    )
    ksub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    up = ksub.add_parser("up", help="start the broker (or find it running); print its address")
    _dir_arg(up)
    up.add_argument("--port", type=int, default=0, help="client port (default: a free one)")
    up.add_argument("--heap-mb", type=int, default=512, help="JVM heap in MiB (default 512)")
    up.set_defaults(handler=cmd_up)
    down = ksub.add_parser("down", help="stop the broker (its data stays)")
    _dir_arg(down)
    down.set_defaults(handler=cmd_down)
    status = ksub.add_parser("status", help="is the broker running? (exit 0 yes, 1 no)")
    _dir_arg(status)
    status.set_defaults(handler=cmd_status)
    topics = ksub.add_parser("topics", help="list topics with their partitions' offsets")
    _dir_arg(topics)
    topics.add_argument("topic", nargs="?", help="only this topic")
    topics.add_argument("--bootstrap", metavar="HOST:PORT", help="another cluster's address")
    topics.set_defaults(handler=cmd_topics)
    fetch = ksub.add_parser("fetch", help="fetch the pinned Kafka jars from Maven Central")
    fetch.set_defaults(handler=cmd_fetch)

    prod = sub.add_parser(
        "produce",
        help="push a feed into a Kafka topic at a rate profile",
        description="Send a spillway feed into a Kafka topic, following its rate profile.",
        epilog=_PRODUCE_EPILOG,
    )
    prod.add_argument("topic", help="topic (created if missing)")
    prod.add_argument("--feed", default="gaussian", help="feed name (default gaussian)")
    prod.add_argument(
        "--feed-option",
        action="append",
        default=[],
        type=parse_option,
        metavar="NAME=VALUE",
        help="a setting of the feed (repeatable), e.g. path=rides.csv for replay",
    )
    prod.add_argument("--sources", type=int, default=1, help="sources of the feed (default 1)")
    prod.add_argument(
        "--rate", type=float, default=1000.0, help="tuples/s per source (default 1000)"
    )
    prod.add_argument(
        "--profile", default="constant", help="constant, step, bursty or pareto (default constant)"
    )
    prod.add_argument(
        "--profile-option",
        action="append",
        default=[],
        type=parse_option,
        metavar="NAME=VALUE",
        help="a setting of the profile (repeatable), e.g. factor=10 for bursty",
    )
    prod.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    prod.add_argument("--duration", type=float, default=60.0, help="seconds to send (default 60)")
    prod.add_argument("--format", default="json", choices=("json", "csv"), help="value format")
    prod.add_argument(
        "--time-format", default="iso", choices=("iso", "millis"), help="event_time as text"
    )
    prod.add_argument("--key", default="key", choices=("key", "source", "none"), help="message key")
    prod.add_argument(
        "--partition-by", default="source", choices=("source", "key"), help="partition choice"
    )
    prod.add_argument(
        "--timestamp",
        default="event",
        choices=("event", "arrival"),
        help="record timestamp: event time (default) or arrival time",
    )
    prod.add_argument("--partitions", type=int, help="partitions of a new topic (default sources)")
    prod.add_argument(
        "--report-every", type=float, default=5.0, metavar="S", help="progress period (default 5)"
    )
    prod.add_argument("--summary", type=Path, metavar="FILE.json", help="write the figures here")
    prod.add_argument("--bootstrap", metavar="HOST:PORT", help="cluster (default: the local one)")
    _dir_arg(prod)
    prod.set_defaults(handler=cmd_produce)


def _data_dir(args: argparse.Namespace) -> Path:
    return args.dir if args.dir is not None else brokers.default_data_dir()


def _note(text: str) -> None:
    print(f"spillway: {text}", file=sys.stderr, flush=True)


def connection_from_args(args: argparse.Namespace) -> KafkaConnection:
    """``--bootstrap`` if given, else the local broker of ``--dir``.

    Raises
    ------
    KafkaClientError
        Neither is there.
    """
    if getattr(args, "bootstrap", None):
        return KafkaConnection(bootstrap_servers=args.bootstrap)
    state = brokers.read_state(_data_dir(args))
    if state is None:
        raise KafkaClientError(
            f"no Kafka broker is running from {_data_dir(args)}: start one with "
            "'spillway kafka up' or pass --bootstrap HOST:PORT"
        )
    return state.connection()


def cmd_up(args: argparse.Namespace) -> int:
    """``spillway kafka up``."""
    data_dir = _data_dir(args)
    running = brokers.read_state(data_dir)
    t0 = time.monotonic()
    state = brokers.start(
        brokers.BrokerConfig(data_dir=data_dir, port=args.port, heap_mb=args.heap_mb)
    )
    if running is not None:
        _note(f"Kafka already running on {state.bootstrap} (pid {state.pid}, {data_dir})")
    else:
        _note(
            f"Kafka {state.kafka_version} up on {state.bootstrap} in {time.monotonic() - t0:.1f} s "
            f"(pid {state.pid}, data and log in {data_dir}); stop it with 'spillway kafka down'"
        )
    print(state.bootstrap, flush=True)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """``spillway kafka down``."""
    data_dir = _data_dir(args)
    if brokers.stop(data_dir):
        print(f"stopped the Kafka broker of {data_dir}")
    else:
        print(f"no Kafka broker was running from {data_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``spillway kafka status``: exit 0 when running, 1 when not."""
    data_dir = _data_dir(args)
    state = brokers.read_state(data_dir)
    if state is None:
        print(f"not running ({data_dir})")
        return 1
    print(
        f"running on {state.bootstrap}: Kafka {state.kafka_version}, pid {state.pid}, up "
        f"{time.time() - state.started_at:.0f} s, data in {state.data_dir}, log {state.log_file}"
    )
    return 0


def cmd_topics(args: argparse.Namespace) -> int:
    """``spillway kafka topics``: one line per partition with its earliest and latest offset."""
    from spillway.kafka.admin import list_topics, partition_offsets

    conn = connection_from_args(args)
    names = [args.topic] if args.topic else list(list_topics(conn))
    for name in names:
        for p in partition_offsets(conn, name):
            print(f"{name}\t{p.partition}\t{p.earliest}\t{p.latest}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """``spillway kafka fetch``: the pinned jars into the cache (no-op when there)."""
    from spillway.kafka import jars

    for bundle in jars.BUNDLES.values():
        found = jars.fetch(bundle)
        print(f"{bundle.name}: {len(found)} jars in {jars.bundle_dir(bundle)}")
    return 0


def produce_config(args: argparse.Namespace) -> Any:
    """The :class:`~spillway.kafka.produce.ProduceConfig` of ``spillway produce``'s options."""
    from spillway.kafka.produce import ProduceConfig

    return ProduceConfig(
        topic=args.topic,
        feed=args.feed,
        feed_options=tuple(args.feed_option),
        sources=args.sources,
        rate=args.rate,
        profile=args.profile,
        profile_options=tuple(args.profile_option),
        seed=args.seed,
        duration_s=args.duration,
        value_format=args.format,
        time_format=args.time_format,
        key=args.key,
        partition_by=args.partition_by,
        timestamp=args.timestamp,
        partitions=args.partitions,
        report_every_s=args.report_every,
    )


def cmd_produce(args: argparse.Namespace) -> int:
    """``spillway produce``."""
    from spillway.kafka.produce import produce_feed

    config = produce_config(args)
    config.make_feed()  # bad feed settings fail before anything is sent
    conn = connection_from_args(args)
    check_reachable(conn)
    _note(
        f"sending feed {config.feed} ({config.sources} sources, {config.rate:,.0f} tuples/s "
        f"each, {config.profile}) to {config.topic} on {conn.bootstrap_servers} for "
        f"{config.duration_s:g} s"
    )
    summary = produce_feed(config, conn, on_progress=lambda p: print(p.line(), flush=True))
    if args.summary is not None:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    print(summary.line(), flush=True)
    return 0
