"""A single-node Apache Kafka broker on loopback, started and stopped from Python.

:func:`start` runs one Kafka process in KRaft combined mode (broker and controller in one JVM,
no ZooKeeper) from the jars of :data:`spillway.kafka.jars.KAFKA`:

- both listeners bind ``127.0.0.1`` only: clients on ``PLAINTEXT://127.0.0.1:<port>``, the
  controller on ``127.0.0.1:<controller port>``; nothing listens on other interfaces;
- everything lives in one folder (``data_dir``): ``server.properties``, ``log4j2.properties``,
  the log segments under ``kafka-logs/``, the broker's output in ``broker.log``, and
  ``state.json`` (pid, ports, bootstrap address, cluster id) while it runs;
- the storage is formatted on first start with a fresh cluster id (Kafka's ``StorageTool``);
  later starts reuse it, so topics survive ``down`` and ``up``;
- ports are free ones chosen at start (the previous ones when still free) unless given;
- it is ready when it answers a metadata request; a broker that exits while starting is
  reported with the last lines of its log.

:func:`start` is idempotent: a folder whose broker is running returns that broker's state.
:func:`stop` sends SIGTERM (Kafka's controlled shutdown), waits, then SIGKILL.

Settings suited to a development broker on a small machine: topics are not auto-created (a
misspelt topic is an error, not a new topic), replication factor 1 everywhere, retention by size
only (``log.retention.bytes`` 2 GiB per partition, 256 MiB segments; time-based retention is off
because records carry their *event* time, and replayed events from years ago would be deleted
at once), a 512 MiB heap, two network and four I/O threads.

No authentication: the broker is reachable from this machine only (loopback), meant for tests,
examples and benchmarks on one's own machine. To talk to a secured cluster, pass its settings in
:class:`~spillway.kafka.connection.KafkaConnection` ``options``.

Examples
--------
::

    state = start(BrokerConfig(data_dir=Path("/tmp/kafka")))   # about 2 s
    state.bootstrap                                            # '127.0.0.1:41577'
    stop(Path("/tmp/kafka"))                                   # True

>>> BrokerConfig(data_dir=Path("/tmp/k"), port=70000)
Traceback (most recent call last):
...
spillway.errors.ConfigError: port must be 0 (a free one) or in 1..65535, got 70000
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spillway.errors import BrokerError, ConfigError, KafkaClientError
from spillway.files import replace_text
from spillway.kafka import jars as jarlib
from spillway.kafka.connection import KafkaConnection
from spillway.procfs import read_stat

HOST = "127.0.0.1"
STATE_FILE = "state.json"
LOG_FILE = "broker.log"
_LOG_DIRS = "kafka-logs"


def default_data_dir() -> Path:
    """The broker folder of ``spillway kafka up`` without ``--dir``: ``$SPILLWAY_KAFKA_DIR``,
    else ``$XDG_STATE_HOME/spillway/kafka``, else ``~/.local/state/spillway/kafka``."""
    if os.environ.get("SPILLWAY_KAFKA_DIR"):
        return Path(os.environ["SPILLWAY_KAFKA_DIR"]).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "spillway" / "kafka"


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """How to run the local broker.

    Parameters
    ----------
    data_dir : the broker's folder (created if missing).
    port : client port on 127.0.0.1; 0 picks a free one (the last one used if still free).
    controller_port : KRaft controller port on 127.0.0.1; 0 picks a free one.
    heap_mb : JVM heap in MiB (>= 128).
    start_timeout_s : seconds to wait for the broker to answer before giving up (> 0).
    cache : jar cache folder (default :func:`spillway.kafka.jars.cache_root`).
    """

    data_dir: Path
    port: int = 0
    controller_port: int = 0
    heap_mb: int = 512
    start_timeout_s: float = 60.0
    cache: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser().absolute())
        for name in ("port", "controller_port"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 0 <= v <= 65535:
                raise ConfigError(f"{name} must be 0 (a free one) or in 1..65535, got {v!r}")
        if self.port and self.port == self.controller_port:
            raise ConfigError(
                f"port and controller_port must differ, both are {self.port}: pick two ports"
            )
        if not isinstance(self.heap_mb, int) or self.heap_mb < 128:
            raise ConfigError(f"heap_mb must be an integer >= 128, got {self.heap_mb!r}")
        if not self.start_timeout_s > 0:
            raise ConfigError(f"start_timeout_s must be > 0, got {self.start_timeout_s!r}")


@dataclass(frozen=True, kw_only=True)
class BrokerState:
    """A running broker, as recorded in its folder's ``state.json``."""

    pid: int
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    cluster_id: str
    kafka_version: str
    started_at: float

    @property
    def bootstrap(self) -> str:
        """The address clients connect to (``127.0.0.1:<port>``)."""
        return f"{HOST}:{self.port}"

    def connection(self) -> KafkaConnection:
        """A :class:`~spillway.kafka.connection.KafkaConnection` to this broker."""
        return KafkaConnection(bootstrap_servers=self.bootstrap)


# --------------------------------------------------------------------------- state file
def local_connection(what: str = "kafka option 'kafka.bootstrap.servers'") -> KafkaConnection:
    """The connection to the broker ``spillway kafka up`` runs in its default folder.

    Raises
    ------
    KafkaClientError
        No local broker runs (``what`` names the setting the user could give instead).
    """
    state = read_state(default_data_dir())
    if state is None:
        raise KafkaClientError(
            f"{what} is not set and no local broker runs: start one with 'spillway kafka up' "
            "or set the option (as for Spark's Kafka source)"
        )
    return state.connection()


def read_state(data_dir: Path) -> BrokerState | None:
    """The state recorded in ``data_dir`` if its broker process is alive, else None (a stale
    state file is removed)."""
    path = Path(data_dir) / STATE_FILE
    try:
        raw = json.loads(path.read_text())
        state = BrokerState(**raw)
    except (OSError, ValueError, TypeError):
        return None
    if not _is_our_broker(state.pid, Path(state.data_dir)):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return state


def _write_state(state: BrokerState) -> None:
    replace_text(
        Path(state.data_dir) / STATE_FILE, json.dumps(dataclasses.asdict(state), indent=1) + "\n"
    )


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # reaps our own exited child
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child: ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = read_stat(pid)
    return stat is None or stat.state != "Z"


def _is_our_broker(pid: int, data_dir: Path) -> bool:
    """Alive and, where /proc tells, a Kafka JVM started on this folder's properties."""
    if not _alive(pid):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS): trust the pid
    return str(data_dir / "server.properties").encode() in args


# --------------------------------------------------------------------------- files
def _free_port(preferred: int = 0) -> int:
    for candidate in (preferred, 0) if preferred else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
            try:
                s.bind((HOST, candidate))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise BrokerError(f"no free port on {HOST}")  # pragma: no cover - the kernel always has one


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def server_properties(data_dir: Path, port: int, controller_port: int) -> str:
    """The broker's ``server.properties`` (see the module docstring for the choices).

    >>> print(server_properties(Path("/d"), 9092, 9093).splitlines()[3])
    listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
    """
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir / _LOG_DIRS),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "log.retention.ms": "-1",
        "log.retention.bytes": str(2 << 30),
        "log.segment.bytes": str(256 << 20),
        "log.cleaner.dedupe.buffer.size": str(16 << 20),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerError(
            "Java 17+ is needed to run the Kafka broker and was not found: install it "
            "(Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return found


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with
    ``-`` (as Kafka's own ``Uuid.randomUuid``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _java_cmd(config: BrokerConfig, main: str, *args: str) -> list[str]:
    classpath = os.pathsep.join(str(p) for p in jarlib.jars(jarlib.KAFKA, cache=config.cache))
    return [
        _java(),
        "-Xms128m",
        f"-Xmx{config.heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={config.data_dir / 'log4j2.properties'}",
        "-cp",
        classpath,
        main,
        *args,
    ]


def _tail(path: Path, n: int = 3) -> str:
    """The last ``n`` lines of a log that say something (stack frames left out)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith(("at ", "... "))
    ]
    return " | ".join(ln[:300] for ln in lines[-n:]) or "(empty log)"


def _format_storage(config: BrokerConfig, log: Path) -> str:
    """Format ``kafka-logs`` with a new cluster id unless it is formatted; return the id."""
    meta = config.data_dir / _LOG_DIRS / "meta.properties"
    if meta.is_file():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    cid = _cluster_id()
    cmd = _java_cmd(
        config,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        cid,
        "-c",
        str(config.data_dir / "server.properties"),
    )
    with open(log, "a") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise BrokerError(
            f"formatting Kafka storage in {config.data_dir} failed (exit {done.returncode}): "
            f"{_tail(log)}"
        )
    return cid


# --------------------------------------------------------------------------- start / stop
def start(
    config: BrokerConfig,
    *,
    die_with_parent: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> BrokerState:
    """Start the broker of ``config.data_dir`` (or find it running) and wait until it answers.

    Parameters
    ----------
    config : where and how to run it.
    die_with_parent : stop the broker when this process dies (Linux, through util-linux's
        ``setpriv --pdeathsig``; for test sessions, so a crashed session leaves no broker
        behind). ``spillway kafka up`` leaves it False: the broker outlives the command.
    clock : monotonic seconds, for the start timeout.

    Returns
    -------
    BrokerState
        Its pid, ports and bootstrap address.

    Raises
    ------
    BrokerError
        Jars not fetched, Java missing, a port taken, storage formatting failed, or the broker
        exited or did not answer within ``config.start_timeout_s`` (its log's last lines are
        in the message).
    """
    running = read_state(config.data_dir)
    if running is not None:
        if config.port and running.port != config.port:
            raise BrokerError(
                f"a broker already runs from {config.data_dir} on port {running.port}, not "
                f"{config.port}: stop it first ('spillway kafka down') or use another --dir"
            )
        return running
    config.data_dir.mkdir(parents=True, exist_ok=True)
    previous = _previous_ports(config.data_dir)
    port = config.port or _free_port(previous[0])
    cport = config.controller_port or _free_port(previous[1])
    while cport == port:
        cport = _free_port()
    for name, p in (("port", port), ("controller port", cport)):
        if not _port_free(p):
            raise BrokerError(
                f"{name} {p} on {HOST} is in use: pick another or let spillway choose (0)"
            )
    (config.data_dir / "server.properties").write_text(
        server_properties(config.data_dir, port, cport)
    )
    (config.data_dir / "log4j2.properties").write_text(_LOG4J2)
    log = config.data_dir / LOG_FILE
    cluster_id = _format_storage(config, log)
    cmd = _java_cmd(config, "kafka.Kafka", str(config.data_dir / "server.properties"))
    setpriv = shutil.which("setpriv") if die_with_parent else None
    if setpriv is not None:  # Linux util-linux: SIGTERM to the broker when we die
        cmd = [setpriv, "--pdeathsig", "TERM", *cmd]
    with open(log, "a") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=config.data_dir,
            start_new_session=True,
        )
    state = BrokerState(
        pid=proc.pid,
        port=port,
        controller_port=cport,
        data_dir=str(config.data_dir),
        log_file=str(log),
        cluster_id=cluster_id,
        kafka_version=jarlib.KAFKA_VERSION,
        started_at=time.time(),
    )
    _write_state(state)
    try:
        wait_ready(state, timeout_s=config.start_timeout_s, clock=clock)
    except BrokerError:
        _terminate(proc.pid, timeout_s=10.0, clock=clock)
        with contextlib.suppress(OSError):
            (config.data_dir / STATE_FILE).unlink()
        raise
    return state


def _previous_ports(data_dir: Path) -> tuple[int, int]:
    """The client and controller ports of the last ``server.properties`` (0, 0 if none)."""
    try:
        text = (data_dir / "server.properties").read_text()
    except OSError:
        return 0, 0
    ports = {"PLAINTEXT": 0, "CONTROLLER": 0}
    for line in text.splitlines():
        if line.startswith("listeners="):
            for item in line.split("=", 1)[1].split(","):
                name, _, addr = item.partition("://")
                tail = addr.rpartition(":")[2]
                if name in ports and tail.isdigit():
                    ports[name] = int(tail)
    return ports["PLAINTEXT"], ports["CONTROLLER"]


def wait_ready(
    state: BrokerState, *, timeout_s: float = 60.0, clock: Callable[[], float] = time.monotonic
) -> None:
    """Wait until the broker answers a metadata request.

    Raises
    ------
    BrokerError
        The process exited (with the last lines of its log) or did not answer in time.
    """
    from confluent_kafka.admin import AdminClient

    deadline = clock() + timeout_s
    log = Path(state.log_file)
    admin: Any = None
    while True:
        if not _alive(state.pid):
            raise BrokerError(f"the Kafka broker exited while starting: {_tail(log)}")
        try:
            with socket.create_connection((HOST, state.port), timeout=0.5):
                pass
            if admin is None:
                admin = AdminClient(state.connection().client_config())
            md = admin.list_topics(timeout=max(0.5, min(2.0, deadline - clock())))
            if md.brokers:
                return
        except Exception:  # not listening yet, or not answering yet
            pass
        if clock() >= deadline:
            raise BrokerError(
                f"the Kafka broker (pid {state.pid}) did not answer on {state.bootstrap} within "
                f"{timeout_s:g} s: {_tail(log)}"
            )
        time.sleep(0.05)


def _terminate(pid: int, *, timeout_s: float, clock: Callable[[], float]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = clock() + timeout_s
    while _alive(pid):
        if clock() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = clock() + 10.0
            while _alive(pid) and clock() < deadline:
                time.sleep(0.05)
            return
        time.sleep(0.05)


def stop(
    data_dir: Path, *, timeout_s: float = 30.0, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Stop the broker of ``data_dir``: SIGTERM (controlled shutdown), SIGKILL after
    ``timeout_s``. Returns whether a broker was running. The data stays for the next start."""
    state = read_state(Path(data_dir).expanduser().absolute())
    if state is None:
        return False
    _terminate(state.pid, timeout_s=timeout_s, clock=clock)
    with contextlib.suppress(OSError):
        (Path(state.data_dir) / STATE_FILE).unlink()
    return True
