"""The dashboard's web application: a page, its files, the state as JSON and as a live stream.

A small Starlette application (ASGI) over a :class:`~spillway.telemetry.hub.Hub`:

- ``GET /``: the page (``static/index.html``), which draws every node of the hub;
- ``GET /static/...``: the page's script and styles and the bundled chart library;
- ``GET /api/state``: every node's state now, as JSON (:func:`~spillway.ui.payload.node_payload`);
- ``GET /api/events``: server-sent events: one ``state`` event when the page connects (series
  whole), then one whenever a node changes (series points after those already sent), checked
  every ``poll_s`` seconds. The browser's ``EventSource`` reconnects by itself. A node's
  figures change once a second (the driver's tick) and its counts several times in between;
  every event makes the page lay itself out and paint again, so the default ``poll_s`` of 1 s
  sends at most one a second (what an open page costs the node at 0.25 s and at 1 s: README,
  "Watching a run", measured by ``scripts/ui_overhead.py``).

The application only reads: no route changes anything, so it needs no login, and it is served
on the loopback address unless the user names another (:mod:`spillway.ui.server`). Every
response carries a Content-Security-Policy that lets the page load only the dashboard's own
files, and the Host header must name the address served (or ``localhost``), so a page on
another site cannot read the dashboard through DNS rebinding.

Examples
--------
>>> from starlette.testclient import TestClient
>>> from spillway.telemetry import Hub, NodeBoard
>>> hub = Hub([NodeBoard("node", queries=("q",), stw_s=10.0)])
>>> client = TestClient(make_app(hub, static=Path("."), check=False), base_url="http://127.0.0.1")
>>> r = client.get("/api/state")
>>> r.status_code, r.json()["nodes"][0]["phase"]
(200, 'starting')
>>> client.get("/api/state", headers={"host": "evil.example"}).status_code
400
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spillway.telemetry.hub import Hub
from spillway.ui.assets import STATIC, check_assets
from spillway.ui.payload import node_payload

#: Only the dashboard's own files: nothing is loaded from elsewhere.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
#: Host names every dashboard accepts (the loopback ones).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class _SecurityHeaders:
    """Adds the CSP and no-sniff headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", CSP.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _stream_message(hub: Hub, sent: dict[str, int]) -> str:
    nodes = []
    for st in hub.states():
        since = sent.get(st.name, 0)
        payload = node_payload(st, since=since)
        payload["since"] = since
        nodes.append(payload)
        sent[st.name] = st.series[-1].seq if st.series else since
    return json.dumps({"nodes": nodes}, allow_nan=False, separators=(",", ":"))


def make_app(
    hub: Hub,
    *,
    static: Path = STATIC,
    poll_s: float = 1.0,
    hosts: Sequence[str] = (),
    stop: threading.Event | None = None,
    check: bool = True,
) -> Starlette:
    """The dashboard application over ``hub``.

    Parameters
    ----------
    hub : the nodes shown.
    static : the folder of the page's files.
    poll_s : how often an open event stream checks the hub for changes.
    hosts : host names accepted besides the loopback ones (the address served on).
    stop : when set, open event streams end (so the server can shut down).
    check : check the page's files first (:func:`~spillway.ui.assets.check_assets`).
    """
    if check:
        check_assets(static)
    stopping = stop if stop is not None else threading.Event()

    async def index(request: Request) -> Response:
        return FileResponse(static / "index.html", headers={"cache-control": "no-cache"})

    async def state(request: Request) -> Response:
        return JSONResponse({"nodes": [node_payload(s) for s in hub.states()]})

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            sent: dict[str, int] = {}
            version = -1
            yield "retry: 1000\n\n"
            while not stopping.is_set():
                v = hub.version
                if v != version:
                    version = v
                    yield f"event: state\ndata: {_stream_message(hub, sent)}\n\n"
                await asyncio.sleep(poll_s)

        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    allowed = [*LOOPBACK_HOSTS, *(h for h in hosts if h not in LOOPBACK_HOSTS)]
    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/state", state),
            Route("/api/events", events),
            Mount("/static", app=StaticFiles(directory=static, check_dir=False), name="static"),
        ],
        middleware=[
            Middleware(_SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed),
        ],
    )
