"""The authenticated loopback control channel between spillway sources and the NodeController.

The NodeController lives in the driver process. Spark runs a streaming source's driver-side
methods (``initialOffset``, ``latestOffset``, ``partitions``) in a separate Python worker process,
so the source reaches the controller over this channel (docs/design.md, "Data flow on
Spark"). Executors never call it.

Transport: :mod:`multiprocessing.connection` over TCP on ``127.0.0.1`` (an ephemeral port), with
its HMAC challenge-response handshake in both directions keyed by a random 32-byte key
(:func:`secrets.token_bytes`). The server never binds anything but the loopback address
(:data:`LOOPBACK`), whatever it is asked; a wrong key is refused during the handshake, before a
single request is read. The handshake runs in the connection's own thread, so a client that
connects and stays silent blocks nobody. Requests and replies are small dicts (pickled by the
connection, which is only done after both sides proved they hold the key).

Protocol: a request is ``{"op": str, ...}``; the reply is ``{"ok": True, "result": ...}`` or
``{"ok": False, "error": str}``; :meth:`ControlClient.call` returns the result or raises
:class:`~spillway.errors.ControlChannelError` with the server's message.

Examples
--------
>>> server = ControlServer(lambda req: {"echo": req["x"]})
>>> host, port = server.address
>>> host
'127.0.0.1'
>>> with ControlClient(server.address, server.authkey) as client:
...     client.call("ping", x=3)
{'echo': 3}
>>> try:
...     ControlClient(server.address, b"wrong key", timeout_s=2).call("ping", x=1)
... except ControlChannelError as e:
...     print(str(e).split(":")[0])
control channel 127.0.0.1 refused the key
>>> server.close()
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Client,
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
)
from typing import Any

from spillway.errors import ConfigError, ControlChannelError

#: The only address the control server binds.
LOOPBACK = "127.0.0.1"

#: Length of a generated key in bytes.
KEY_BYTES = 32

Handler = Callable[[dict[str, Any]], Any]


def new_authkey() -> bytes:
    """A fresh random key for one node (32 bytes from :func:`secrets.token_bytes`).

    >>> len(new_authkey())
    32
    """
    return secrets.token_bytes(KEY_BYTES)


def parse_address(text: str) -> tuple[str, int]:
    """Turn ``"127.0.0.1:41234"`` into ``("127.0.0.1", 41234)``; only loopback is accepted.

    >>> parse_address("127.0.0.1:5000")
    ('127.0.0.1', 5000)
    >>> parse_address("10.0.0.1:5000")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: control address must be 127.0.0.1:<port>, got '10.0.0.1:5000'
    """
    host, _, port = str(text).rpartition(":")
    if host != LOOPBACK or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"control address must be {LOOPBACK}:<port>, got {text!r}")
    return host, int(port)


def format_address(address: tuple[str, int]) -> str:
    """``("127.0.0.1", 5000)`` → ``"127.0.0.1:5000"``.

    >>> format_address(("127.0.0.1", 5000))
    '127.0.0.1:5000'
    """
    return f"{address[0]}:{address[1]}"


def _shutdown(conn: Connection) -> None:
    """Wake a thread blocked reading ``conn`` (closing the fd alone does not, on Linux)."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        with sock:
            sock.shutdown(socket.SHUT_RDWR)


class ControlServer:
    """Serves requests on ``127.0.0.1`` (ephemeral port), one thread per connection.

    Parameters
    ----------
    handler : called with each request dict; its return value is the reply's ``result``. An
        exception becomes an error reply (the connection stays open).
    authkey : the shared key; a fresh random one when None.
    handshake_timeout_s : a connection that has not completed the handshake in this time is
        closed.

    Attributes
    ----------
    address : ``(host, port)`` the server listens on.
    authkey : the key clients must present.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        authkey: bytes | None = None,
        handshake_timeout_s: float = 10.0,
    ) -> None:
        self.authkey = new_authkey() if authkey is None else bytes(authkey)
        if len(self.authkey) < 16:
            raise ConfigError(
                f"authkey must be at least 16 bytes, got {len(self.authkey)}: use new_authkey()"
            )
        self._handler = handler
        self._handshake_timeout_s = float(handshake_timeout_s)
        # No authkey here: the handshake is done per connection in its own thread.
        self._listener = Listener((LOOPBACK, 0), family="AF_INET")
        host, port = self._listener.address
        if host != LOOPBACK:  # pragma: no cover - Listener binds what it is given
            self._listener.close()
            raise ControlChannelError(f"control server bound {host}, not {LOOPBACK}")
        self.address: tuple[str, int] = (host, int(port))
        self._closed = threading.Event()
        self._conns: set[Connection] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._accept_loop, name="spillway-control-accept", daemon=True
        )
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            if self._closed.is_set():
                conn.close()
                return
            threading.Thread(
                target=self._serve, args=(conn,), name="spillway-control-conn", daemon=True
            ).start()

    def _handshake(self, conn: Connection) -> bool:
        done = threading.Event()

        def expire() -> None:
            if not done.is_set():
                _shutdown(conn)

        timer = threading.Timer(self._handshake_timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            return True
        except (AuthenticationError, OSError, EOFError):
            return False
        finally:
            done.set()
            timer.cancel()

    def _serve(self, conn: Connection) -> None:
        try:
            if not self._handshake(conn):
                return
            with self._lock:
                self._conns.add(conn)
            while not self._closed.is_set():
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                conn.send(self._answer(request))
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, Mapping) or not isinstance(request.get("op"), str):
            return {"ok": False, "error": f"a request must be a dict with 'op', got {request!r}"}
        try:
            return {"ok": True, "result": self._handler(dict(request))}
        except Exception as e:  # the error travels back to the caller
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}

    @property
    def address_text(self) -> str:
        """The address as ``"127.0.0.1:<port>"`` (for a data source option)."""
        return format_address(self.address)

    def close(self) -> None:
        """Stop accepting, close every open connection (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        # Wake the thread blocked in accept() (closing the socket alone does not, on Linux).
        with contextlib.suppress(OSError), socket.create_connection(self.address, timeout=1.0):
            pass
        self._thread.join(timeout=2.0)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            _shutdown(c)

    def __enter__(self) -> ControlServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ControlClient:
    """A connection to a :class:`ControlServer` (connects lazily, reconnects once on failure).

    Parameters
    ----------
    address : ``(host, port)`` or ``"127.0.0.1:<port>"``; the host must be loopback.
    authkey : the server's key (bytes or hex text).
    timeout_s : how long a reply may take before :class:`ControlChannelError`.
    """

    def __init__(
        self, address: tuple[str, int] | str, authkey: bytes | str, *, timeout_s: float = 30.0
    ) -> None:
        if isinstance(address, str):
            address = parse_address(address)
        else:
            address = parse_address(format_address(address))
        self.address = address
        if isinstance(authkey, str):
            try:
                authkey = bytes.fromhex(authkey)
            except ValueError:
                raise ConfigError("authkey must be hex text or bytes, got non-hex text") from None
        self._authkey = bytes(authkey)
        self.timeout_s = float(timeout_s)
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> Connection:
        where = format_address(self.address)
        try:
            return Client(self.address, family="AF_INET", authkey=self._authkey)
        except AuthenticationError:
            raise ControlChannelError(
                f"control channel {self.address[0]} refused the key: {where} belongs to another "
                "node or the authkey option is wrong"
            ) from None
        except (OSError, EOFError) as e:
            raise ControlChannelError(
                f"cannot reach the spillway controller at {where}: {e}; is the node running?"
            ) from None

    def call(self, op: str, **args: Any) -> Any:
        """Send ``{"op": op, **args}`` and return the reply's result.

        Raises
        ------
        ControlChannelError
            Refused (wrong key), unreachable, timed out, or the server reported an error.
        """
        request = {"op": op, **args}
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    self._conn.send(request)
                    if not self._conn.poll(self.timeout_s):
                        self._drop()
                        raise ControlChannelError(
                            f"the spillway controller at {format_address(self.address)} did not "
                            f"answer {op!r} within {self.timeout_s:g} s"
                        )
                    reply = self._conn.recv()
                    break
                except (OSError, EOFError) as e:
                    self._drop()
                    if attempt == 2:
                        raise ControlChannelError(
                            f"control channel to {format_address(self.address)} broke during "
                            f"{op!r}: {e or type(e).__name__}"
                        ) from None
        if not isinstance(reply, Mapping) or "ok" not in reply:
            raise ControlChannelError(f"malformed reply to {op!r}: {reply!r}")
        if not reply["ok"]:
            raise ControlChannelError(f"controller refused {op!r}: {reply.get('error')}")
        return reply.get("result")

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the connection (a later :meth:`call` reconnects)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
