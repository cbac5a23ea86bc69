"""The dashboard's server: uvicorn in a background thread of the driver.

``spillway run --ui`` starts a :class:`DashboardServer` before the node and closes it after
the report is written. It listens on ``127.0.0.1`` (this machine only) unless ``--ui-host``
names another address; port 0 (the default) picks a free port, and :attr:`DashboardServer.url`
says which. The server is read-only (:mod:`spillway.ui.app`): it has no login because it
changes nothing and, by default, nobody else can reach it; whoever can reach an address given
with ``--ui-host`` sees the run's figures, names and paths, so give one only on a trusted
network.

Examples
--------
>>> from urllib.request import urlopen
>>> from spillway.telemetry import Hub, NodeBoard
>>> hub = Hub([NodeBoard("node", queries=("q",), stw_s=10.0)])
>>> server = DashboardServer(hub, check=False)
>>> server.url.startswith("http://127.0.0.1:")
True
>>> b'"phase":"starting"' in urlopen(server.url + "api/state", timeout=5).read()
True
>>> server.close()
>>> server.cpu_s > 0.0                       # what serving took, CPU seconds
True
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time

import uvicorn

from spillway.errors import ConfigError, RunFailedError
from spillway.telemetry.hub import Hub
from spillway.ui.app import make_app

#: The address served unless the user names another.
DEFAULT_HOST = "127.0.0.1"


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET  # a host name
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(
            f"--ui-port {port}: cannot listen on {host}:{port} ({e.strerror or e}); pass a free "
            "port, or 0 to pick one"
        ) from None
    sock.listen(64)
    return sock


class DashboardServer:
    """Serve the dashboard of ``hub`` from a background thread.

    Parameters
    ----------
    hub : the nodes shown.
    host : the address to listen on.
    port : the port; 0 picks a free one.
    check : check the page's files before starting
        (:func:`~spillway.ui.assets.check_assets`).
    start_timeout_s : how long to wait for the server to listen.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        check: bool = True,
        start_timeout_s: float = 10.0,
    ) -> None:
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise ConfigError(f"--ui-port must be a port number in [0, 65535], got {port!r}")
        self._stop = threading.Event()
        app = make_app(hub, hosts=(host,), stop=self._stop, check=check)
        sock = _bind(host, port)
        self.host = host
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http="h11",
            loop="asyncio",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._cpu_at_end: float | None = None
        self._thread = threading.Thread(
            target=self._serve, args=(sock,), name="spillway-ui", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RunFailedError(f"the dashboard did not start on {self.url}")
            time.sleep(0.02)
        self._sock = sock

    def _serve(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])
        finally:
            self._cpu_at_end = time.thread_time()

    @property
    def cpu_s(self) -> float:
        """CPU seconds the server's thread took so far: every page, state and event stream it
        served, the JSON it encoded (its event loop runs in that one thread)."""
        if self._cpu_at_end is not None:
            return self._cpu_at_end
        ident = self._thread.ident
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident)) if ident else 0.0
        except (OSError, ProcessLookupError):  # ended between the two reads
            return self._cpu_at_end or 0.0

    @property
    def url(self) -> str:
        """The dashboard's address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def close(self) -> None:
        """End the open event streams and stop the server."""
        self._stop.set()
        self._server.should_exit = True
        self._thread.join(timeout=5)
        with contextlib.suppress(AttributeError, OSError):
            self._sock.close()
