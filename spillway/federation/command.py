"""``spillway coordinator FED.toml``: serve a federation's query coordinator until stopped.

The service (:class:`~spillway.federation.CoordinatorService`) listens on ``127.0.0.1`` on a
free port with a fresh random key. Nodes find both in the *state file* (JSON, readable by its
owner only: ``address``, ``authkey`` in hex, the ``nodes`` in layout order and the ``pid``)
and connect with :meth:`CoordinatorClient.from_state
<spillway.federation.client.CoordinatorClient.from_state>`. The command prints the address on
standard output, serves until Ctrl-C or SIGTERM, then removes the state file and prints one
line: reports received and the nodes lost at the end.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="spillway")
>>> add_coordinator_command(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["coordinator", "fed.toml", "--state", "coord.json"])
>>> args.federation.name, args.state.name, args.handler.__name__
('fed.toml', 'coord.json', 'cmd_coordinator')
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from spillway.errors import ConfigError
from spillway.federation.config import load_federation
from spillway.federation.service import CoordinatorService

_EPILOG = """\
examples:
  spillway coordinator spillway/examples/federation.toml --state runs/coordinator.json

Listens on 127.0.0.1 only; nodes authenticate with the key in the state file (mode 0600),
removed when the coordinator stops (Ctrl-C or SIGTERM).
"""


def add_coordinator_command(sub: Any) -> None:
    """Add ``coordinator`` to the subcommands ``sub`` of the ``spillway`` parser."""
    p = sub.add_parser(
        "coordinator",
        help="serve a federation's query coordinator (THEMIS §6) on loopback",
        description="The query coordinator of a federation file: Eq. 4 per query, node "
        "liveness, each node's update on every report.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("federation", type=Path, metavar="FED.toml", help="the federation file")
    p.add_argument(
        "--state",
        type=Path,
        default=Path("runs/coordinator.json"),
        metavar="FILE",
        help="where nodes find the address and key (default runs/coordinator.json)",
    )
    p.set_defaults(handler=cmd_coordinator)


def write_state(path: Path, content: dict[str, Any]) -> None:
    """Write ``content`` as JSON to ``path``, readable by its owner only (mode 0600).

    Raises
    ------
    ConfigError
        The file exists (another coordinator may be running: stop it or pick another path).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(
            f"--state {str(path)!r} exists: another coordinator may be running; stop it (its "
            "pid is in the file) or remove the file"
        ) from None
    with os.fdopen(fd, "w") as f:
        json.dump(content, f)


def cmd_coordinator(args: argparse.Namespace) -> int:
    """Run the coordinator of ``args.federation`` until Ctrl-C or SIGTERM; returns 0."""
    fed = load_federation(args.federation)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    state: Path = args.state
    try:
        with CoordinatorService(fed.layout(), fed.coordinator()) as service:
            write_state(
                state,
                {
                    "address": service.address_text,
                    "authkey": service.authkey.hex(),
                    "nodes": list(fed.nodes),
                    "pid": os.getpid(),
                },
            )
            try:
                print(f"coordinator on {service.address_text}; state in {state}", flush=True)
                with contextlib.suppress(KeyboardInterrupt):
                    while not stop.wait(0.2):
                        pass
            finally:
                state.unlink(missing_ok=True)
            lost = [fed.nodes[n] for n in service.federation().lost_nodes]
            print(
                f"coordinator stopped: {service.reports} reports; lost at the end: "
                f"{', '.join(lost) or 'none'}",
                file=sys.stderr,
            )
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


__all__ = ["add_coordinator_command", "cmd_coordinator", "write_state"]
