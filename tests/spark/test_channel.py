"""The loopback control channel: authenticated, loopback-only, clear errors."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from spillway.errors import ConfigError, ControlChannelError
from spillway.spark.channel import (
    LOOPBACK,
    ControlClient,
    ControlServer,
    new_authkey,
    parse_address,
)


@pytest.fixture
def server():
    calls = []

    def handler(req):
        calls.append(req)
        if req["op"] == "boom":
            raise ValueError("no such thing")
        if req["op"] == "slow":
            time.sleep(req["s"])
        return {"op": req["op"], "n": len(calls)}

    srv = ControlServer(handler, handshake_timeout_s=0.5)
    srv.calls = calls
    yield srv
    srv.close()


def test_round_trip_and_many_clients(server):
    results = []

    def worker():
        with ControlClient(server.address, server.authkey) as c:
            results.extend(c.call("ping")["op"] for _ in range(20))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ping"] * 80
    assert len(server.calls) == 80


def test_binds_loopback_only(server):
    host, port = server.address
    assert host == LOOPBACK
    # The listening socket is bound to 127.0.0.1, so a non-loopback local address cannot reach it.
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent (UDP connect only picks a route)
        local_ip = probe.getsockname()[0]
    except OSError:
        local_ip = None
    finally:
        probe.close()
    if local_ip and not local_ip.startswith("127."):
        with pytest.raises(OSError):
            socket.create_connection((local_ip, port), timeout=1).close()


def test_wrong_key_is_refused(server):
    client = ControlClient(server.address, new_authkey(), timeout_s=2)
    with pytest.raises(ControlChannelError, match="refused the key"):
        client.call("ping")
    assert server.calls == []  # not a single request was served


def test_hex_key_accepted(server):
    with ControlClient(f"127.0.0.1:{server.address[1]}", server.authkey.hex()) as c:
        assert c.call("x")["op"] == "x"


def test_handler_error_travels_back(server):
    with ControlClient(server.address, server.authkey) as c:
        with pytest.raises(ControlChannelError, match="ValueError: no such thing"):
            c.call("boom")
        assert c.call("ok")["op"] == "ok"  # the connection survives an error


def test_timeout(server):
    with (
        ControlClient(server.address, server.authkey, timeout_s=0.2) as c,
        pytest.raises(ControlChannelError, match="did not answer 'slow' within 0.2 s"),
    ):
        c.call("slow", s=1.0)


def test_unreachable():
    srv = ControlServer(lambda r: None)
    address, key = srv.address, srv.authkey
    srv.close()
    with pytest.raises(ControlChannelError, match="cannot reach the spillway controller"):
        ControlClient(address, key, timeout_s=1).call("ping")


def test_silent_client_is_dropped_after_handshake_timeout(server):
    raw = socket.create_connection(server.address, timeout=5)
    try:
        assert raw.recv(100)  # the server's challenge
        t0 = time.monotonic()
        assert raw.recv(100) == b""  # closed by the server after handshake_timeout_s
        assert time.monotonic() - t0 < 3
    finally:
        raw.close()
    with ControlClient(server.address, server.authkey) as c:  # others are still served
        assert c.call("ok")["op"] == "ok"


def test_address_rules():
    with pytest.raises(ConfigError, match="control address must be 127.0.0.1:<port>"):
        parse_address("0.0.0.0:5000")
    with pytest.raises(ConfigError, match="control address must be"):
        ControlClient(("localhost", 5000), b"k" * 32)
    with pytest.raises(ConfigError, match="authkey must be hex text"):
        ControlClient("127.0.0.1:5000", "not hex")
    with pytest.raises(ConfigError, match="authkey must be at least 16 bytes"):
        ControlServer(lambda r: None, authkey=b"short")


def test_malformed_request(server):
    with ControlClient(server.address, server.authkey) as c:
        c._conn = c._connect()
        c._conn.send(["not", "a", "dict"])
        reply = c._conn.recv()
    assert reply["ok"] is False and "must be a dict with 'op'" in reply["error"]
