"""KafkaConnection: validation, the two renderings, reachability."""

from __future__ import annotations

import socket

import pytest

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.connection import KafkaConnection, check_reachable


@pytest.mark.parametrize("servers", ["", "localhost", "h:0", "h:70000", "h:1,", ":9092"])
def test_bad_bootstrap_servers(servers: str) -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers must be 'host:port"):
        KafkaConnection(bootstrap_servers=servers)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="options must be \\(name, value\\) pairs"):
        KafkaConnection(bootstrap_servers="h:1", options=(("a",),))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must not repeat bootstrap.servers"):
        KafkaConnection(bootstrap_servers="h:1", options=(("bootstrap.servers", "x:2"),))


def test_spark_options_round_trip() -> None:
    conn = KafkaConnection(
        bootstrap_servers="a:1,b:2",
        options=(("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN")),
    )
    opts = conn.spark_options()
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert KafkaConnection.from_spark_options({**opts, "subscribe": "t"}) == conn
    assert conn.servers == [("a", 1), ("b", 2)]
    assert conn.client_config(linger_ms=5)["linger.ms"] == 5


def test_spark_options_need_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match="'kafka.bootstrap.servers' is required"):
        KafkaConnection.from_spark_options({"subscribe": "t"})


def test_unreachable_broker_is_one_line() -> None:
    with socket.socket() as s:  # a port that is bound but not listening: refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(KafkaClientError, match=f"127.0.0.1:{port} is unreachable") as e:
            check_reachable(KafkaConnection(bootstrap_servers=f"127.0.0.1:{port}"))
    assert "\n" not in str(e.value)
    assert "spillway kafka up" in str(e.value)
