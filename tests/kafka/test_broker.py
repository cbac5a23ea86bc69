"""The local broker: loopback only, idempotent start, stop and restart with its data, errors."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from spillway.errors import BrokerError, ConfigError
from spillway.kafka import broker
from spillway.kafka.broker import BrokerConfig, BrokerState

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"port": 70000}, "port must be 0 .* got 70000"),
        ({"controller_port": -1}, "controller_port must be 0"),
        ({"port": 9000, "controller_port": 9000}, "must differ, both are 9000"),
        ({"heap_mb": 64}, "heap_mb must be an integer >= 128"),
        ({"start_timeout_s": 0}, "start_timeout_s must be > 0"),
    ],
)
def test_config_rules(tmp_path: Path, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        BrokerConfig(data_dir=tmp_path, **kw)


def test_every_listener_is_on_loopback() -> None:
    props = broker.server_properties(Path("/d"), 1000, 1001)
    lines = dict(line.split("=", 1) for line in props.splitlines())
    for key in ("listeners", "advertised.listeners", "controller.quorum.voters"):
        for endpoint in lines[key].split(","):
            assert endpoint.rsplit(":", 1)[0].endswith("127.0.0.1"), (key, endpoint)
    assert lines["auto.create.topics.enable"] == "false"


def _listening_addresses(pid: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of the sockets ``pid`` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = (
            os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.islink(f"/proc/{pid}/fd/{fd}") else ""
        )
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                found.append(cols[1].split(":")[0])
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_broker_listens_on_loopback_only(kafka_broker: BrokerState) -> None:
    addresses = _listening_addresses(kafka_broker.pid)
    assert len(addresses) == 2  # clients and controller
    loopback = ("0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000")
    assert all(a in loopback for a in addresses), addresses


def test_start_is_idempotent(kafka_broker: BrokerState) -> None:
    again = broker.start(BrokerConfig(data_dir=Path(kafka_broker.data_dir)))
    assert again == kafka_broker
    with pytest.raises(BrokerError, match="already runs from .* stop it first"):
        broker.start(BrokerConfig(data_dir=Path(kafka_broker.data_dir), port=1))


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(BrokerError, match=f"port {s.getsockname()[1]} on 127.0.0.1 is in use"):
            broker.start(BrokerConfig(data_dir=tmp_path, port=s.getsockname()[1]))


def test_jars_not_fetched(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="not fetched"):
        broker.start(BrokerConfig(data_dir=tmp_path / "d", cache=tmp_path / "empty"))


def test_java_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError, match="Java 17\\+ is needed"):
        broker.start(BrokerConfig(data_dir=tmp_path / "d"))


def test_broker_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    logs = tmp_path / "kafka-logs"
    logs.mkdir()
    # storage of another node: Kafka refuses to start on it
    (logs / "meta.properties").write_text(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\n"
        "directory.id=AAAAAAAAAAAAAAAAAAAAAQ\n"
    )
    with pytest.raises(
        BrokerError, match="exited while starting: .*Stored node id 7 doesn.t match"
    ):
        broker.start(BrokerConfig(data_dir=tmp_path))
    assert broker.read_state(tmp_path) is None


def test_broker_that_does_not_answer_in_time_is_stopped(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="did not answer on 127.0.0.1:\\d+ within 0.2 s"):
        broker.start(BrokerConfig(data_dir=tmp_path, start_timeout_s=0.2))
    assert broker.read_state(tmp_path) is None
    assert not (tmp_path / broker.STATE_FILE).exists()


def test_stale_state_file_is_ignored(tmp_path: Path) -> None:
    state = BrokerState(
        pid=2**22 + 12345,  # above Linux's default pid_max: not running
        port=1,
        controller_port=2,
        data_dir=str(tmp_path),
        log_file=str(tmp_path / "broker.log"),
        cluster_id="x",
        kafka_version="4",
        started_at=time.time(),
    )
    (tmp_path / broker.STATE_FILE).write_text(json.dumps(state.__dict__))
    assert broker.read_state(tmp_path) is None
    assert not (tmp_path / broker.STATE_FILE).exists()


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPILLWAY_KAFKA_DIR", "/k")
    assert broker.default_data_dir() == Path("/k")
    monkeypatch.delenv("SPILLWAY_KAFKA_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", "/s")
    assert broker.default_data_dir() == Path("/s/spillway/kafka")


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux's")
def test_a_test_broker_dies_with_its_session(tmp_path: Path) -> None:
    """A crashed test process leaves no broker behind (die_with_parent)."""
    import subprocess

    code = (
        "import os; from pathlib import Path; from spillway.kafka import broker; "
        f"s = broker.start(broker.BrokerConfig(data_dir=Path({str(tmp_path)!r})), "
        "die_with_parent=True); print(s.pid, flush=True); os._exit(0)"
    )
    pid = int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    deadline = time.monotonic() + 30
    while broker._alive(pid):
        assert time.monotonic() < deadline, f"broker {pid} outlived the process that started it"
        time.sleep(0.1)
    assert broker.read_state(tmp_path) is None
