"""The dashboard's server: loopback by default, a chosen or free port, clean errors."""

from __future__ import annotations

import socket
from urllib.request import urlopen

import pytest

from spillway.errors import ConfigError
from spillway.telemetry import Hub, NodeBoard
from spillway.ui.server import DashboardServer


def test_serves_on_a_given_port_and_stops() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = DashboardServer(Hub([NodeBoard("node", queries=("q",), stw_s=1.0)]), port=port)
    try:
        assert server.url == f"http://127.0.0.1:{port}/"
        assert b"<title>spillway dashboard</title>" in urlopen(server.url, timeout=5).read()
    finally:
        server.close()
    with pytest.raises(OSError):
        urlopen(server.url, timeout=2)


def test_a_busy_port_is_a_config_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--ui-port {port}: cannot listen on 127.0.0.1"):
            DashboardServer(Hub(), port=port)


def test_a_port_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"--ui-port must be a port number in \[0, 65535\]"):
        DashboardServer(Hub(), port=-1)
