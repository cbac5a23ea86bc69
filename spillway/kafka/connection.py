"""Where a Kafka cluster is and how to talk to it: one value shared by every client helper.

A :class:`KafkaConnection` holds the bootstrap servers and any extra client settings (security,
timeouts), and renders them for each client: :meth:`~KafkaConnection.client_config` for
confluent-kafka (librdkafka) and :meth:`~KafkaConnection.spark_options` for Spark's own Kafka
source, whose option names spillway mirrors (``kafka.bootstrap.servers``, ``kafka.*``).
:meth:`~KafkaConnection.from_spark_options` goes the other way, so a user's existing
``readStream.format("kafka")`` options describe the same cluster to spillway.

librdkafka's own log lines (a refused connection, a retry) go to the Python logger
``spillway.kafka.rdkafka`` instead of standard error, so a command that fails prints one line.

:func:`check_reachable` opens a TCP connection to each bootstrap server first: an unreachable
broker is then one clear :class:`~spillway.errors.KafkaClientError` within ``timeout_s``,
instead of librdkafka retrying in the background.

Examples
--------
>>> c = KafkaConnection(bootstrap_servers="127.0.0.1:9092", options=(("client.id", "me"),))
>>> c.client_config()["bootstrap.servers"], c.client_config()["client.id"]
('127.0.0.1:9092', 'me')
>>> c.spark_options()
{'kafka.bootstrap.servers': '127.0.0.1:9092', 'kafka.client.id': 'me'}
>>> KafkaConnection.from_spark_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"})
KafkaConnection(bootstrap_servers='h:1', options=())
>>> check_reachable(KafkaConnection(bootstrap_servers="127.0.0.1:1"), timeout_s=1)
Traceback (most recent call last):
...
spillway.errors.KafkaClientError: Kafka broker 127.0.0.1:1 is unreachable (Connection refused): start one with 'spillway kafka up' or pass the right bootstrap servers
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spillway.errors import ConfigError, KafkaClientError

#: librdkafka's log lines go here (silent unless the application configures logging).
RDKAFKA_LOG = logging.getLogger("spillway.kafka.rdkafka")
RDKAFKA_LOG.addHandler(logging.NullHandler())
RDKAFKA_LOG.propagate = False

_SPARK_PREFIX = "kafka."


@dataclass(frozen=True, kw_only=True)
class KafkaConnection:
    """A Kafka cluster and the client settings to reach it.

    Parameters
    ----------
    bootstrap_servers : ``host:port[,host:port...]``.
    options : extra client settings as ``(name, value)`` pairs in librdkafka's names
        (``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ...), passed to every
        client and, prefixed with ``kafka.``, to Spark's Kafka source.
    """

    bootstrap_servers: str
    options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        servers = [s.strip() for s in str(self.bootstrap_servers).split(",")]
        for s in servers:
            host, _, port = s.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"bootstrap_servers must be 'host:port[,host:port...]' with ports in "
                    f"1..65535, got {self.bootstrap_servers!r}"
                )
        for pair in self.options:
            if len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
                raise ConfigError(f"options must be (name, value) pairs, got {pair!r}")
            if pair[0] == "bootstrap.servers":
                raise ConfigError(
                    "options must not repeat bootstrap.servers: set bootstrap_servers"
                )

    @property
    def servers(self) -> list[tuple[str, int]]:
        """The bootstrap servers as ``(host, port)`` pairs."""
        out = []
        for s in self.bootstrap_servers.split(","):
            host, _, port = s.strip().rpartition(":")
            out.append((host.strip("[]"), int(port)))
        return out

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """The confluent-kafka configuration: servers, :attr:`options`, then ``overrides``
        (underscores in their names become dots: ``linger_ms=5`` is ``linger.ms``)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, "logger": RDKAFKA_LOG}
        conf.update(dict(self.options))
        conf.update({k.replace("_", "."): v for k, v in overrides.items()})
        return conf

    def spark_options(self) -> dict[str, str]:
        """The options Spark's Kafka source takes for this cluster (``kafka.*``)."""
        out = {"kafka.bootstrap.servers": self.bootstrap_servers}
        out.update({_SPARK_PREFIX + k: str(v) for k, v in self.options})
        return out

    @classmethod
    def from_spark_options(cls, options: Mapping[str, Any]) -> KafkaConnection:
        """The connection a set of Spark Kafka source options describes (``kafka.*`` keys;
        the others, such as ``subscribe``, are ignored here).

        Raises
        ------
        ConfigError
            ``kafka.bootstrap.servers`` is missing.
        """
        servers = options.get("kafka.bootstrap.servers")
        if not servers:
            raise ConfigError(
                "option 'kafka.bootstrap.servers' is required (as for Spark's Kafka source), "
                f"got options {sorted(options)}"
            )
        extra = tuple(
            (k[len(_SPARK_PREFIX) :], str(v))
            for k, v in options.items()
            if k.startswith(_SPARK_PREFIX) and k != "kafka.bootstrap.servers"
        )
        return cls(bootstrap_servers=str(servers), options=extra)


def check_reachable(conn: KafkaConnection, *, timeout_s: float = 5.0) -> None:
    """Raise unless some bootstrap server accepts a TCP connection within ``timeout_s``.

    Raises
    ------
    KafkaClientError
        No bootstrap server accepted a connection; the message names each and why.
    """
    why = []
    for host, port in conn.servers:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as e:
            reason = e.strerror or type(e).__name__
            why.append(f"{host}:{port} is unreachable ({reason})")
    raise KafkaClientError(
        f"Kafka broker {'; '.join(why)}: start one with 'spillway kafka up' or pass the right "
        "bootstrap servers"
    )
