"""A node's side of the query coordinator service: report results, receive its queries' SIC.

Each shedding interval a node calls :meth:`CoordinatorClient.report` with the results its root
fragments produced since the last call (THEMIS's result tuples with their SIC and production
time ``t^r_τ``) and gets back a :class:`~spillway.federation.update.NodeUpdate`: Eq. 4 for every
query it hosts, their ceilings, the lost nodes and its orphaned fragments. The node then
projects its own shedding over the delay (:class:`spillway.quality.LocalProjection`, THEMIS §6)
and calls its policy. The channel is :class:`~spillway.spark.channel.ControlClient` (loopback
only, HMAC handshake; a wrong key is refused before any request is read).

See :mod:`spillway.federation.service` for the protocol and a runnable example.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError, ControlChannelError, InputDataError
from spillway.federation.update import NodeUpdate
from spillway.spark.channel import ControlClient


def _floats(values: Any, name: str) -> list[float]:
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr.tolist()


def parse_update(payload: Any) -> NodeUpdate:
    """The :class:`NodeUpdate` in a reply of the service.

    Raises
    ------
    ControlChannelError
        The reply lacks a field (a service of another version, or not a coordinator).

    Examples
    --------
    >>> parse_update({"node": 0, "as_of": 1.0, "queries": [2], "sic": [0.5],
    ...               "ceiling": [1.0], "lost_nodes": [], "orphaned": []}).balance.tolist()
    [0.5]
    >>> parse_update({"node": 0})
    Traceback (most recent call last):
    ...
    spillway.errors.ControlChannelError: the coordinator's reply lacks 'as_of'; is the address a spillway coordinator service?
    """
    fields = ("node", "as_of", "queries", "sic", "ceiling", "lost_nodes", "orphaned")
    if not isinstance(payload, dict):
        raise ControlChannelError(f"the coordinator's reply must be a dict, got {payload!r}")
    for f in fields:
        if f not in payload:
            raise ControlChannelError(
                f"the coordinator's reply lacks {f!r}; is the address a spillway coordinator "
                "service?"
            )
    return NodeUpdate(
        node=int(payload["node"]),
        as_of=float(payload["as_of"]),
        queries=np.asarray(payload["queries"], dtype=np.int64),
        sic=np.asarray(payload["sic"], dtype=np.float64),
        ceiling=np.asarray(payload["ceiling"], dtype=np.float64),
        lost_nodes=tuple(int(n) for n in payload["lost_nodes"]),
        orphaned=np.asarray(payload["orphaned"], dtype=np.int64),
        stw_end=(
            None
            if payload.get("stw_end") is None
            else np.asarray(payload["stw_end"], dtype=np.float64)
        ),
    )


class CoordinatorClient:
    """One node's connection to a :class:`~spillway.federation.service.CoordinatorService`.

    Parameters
    ----------
    address : ``("127.0.0.1", port)`` or ``"127.0.0.1:<port>"``.
    authkey : the service's key (bytes or hex text).
    node : int
        This node's index in the federation's layout.
    timeout_s : float
        How long a reply may take before :class:`~spillway.errors.ControlChannelError`.

    Raises
    ------
    ConfigError
        A node index that is not an int >= 0, or an address off loopback.
    """

    def __init__(
        self,
        address: tuple[str, int] | str,
        authkey: bytes | str,
        *,
        node: int,
        timeout_s: float = 10.0,
    ) -> None:
        if isinstance(node, bool) or not isinstance(node, int) or node < 0:
            raise ConfigError(f"node must be an int >= 0 (its index in the layout), got {node!r}")
        self.node = node
        self._client = ControlClient(address, authkey, timeout_s=timeout_s)

    @classmethod
    def from_state(
        cls, path: str | Path, node: str | int, *, timeout_s: float = 10.0
    ) -> CoordinatorClient:
        """Connect as ``node`` (a name of the federation file, or its index) to the coordinator
        whose state file ``spillway coordinator`` wrote at ``path``.

        Raises
        ------
        InputDataError
            The state file is missing or unreadable (is the coordinator running?).
        ConfigError
            ``node`` is not one of the federation's nodes.
        """
        p = Path(path)
        try:
            state = json.loads(p.read_text())
            address, key, nodes = state["address"], state["authkey"], list(state["nodes"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputDataError(
                f"cannot read the coordinator state file {str(p)!r} ({type(e).__name__}: {e}); "
                "is 'spillway coordinator' running with --state there?"
            ) from None
        if isinstance(node, str):
            if node not in nodes:
                raise ConfigError(
                    f"node must be one of the federation's nodes {nodes}, got {node!r}"
                )
            node = nodes.index(node)
        return cls(address, key, node=node, timeout_s=timeout_s)

    def report(
        self,
        *,
        sent: float,
        result_time: Any = (),
        query: Any = (),
        sic: Any = (),
        fragment: Any = (),
        done: Any = (),
        decided: Any = (),
    ) -> NodeUpdate:
        """Report this node alive at ``sent`` with its new results; returns its update.

        Parameters
        ----------
        sent : float
            The node's clock (seconds) when it reports.
        result_time, query, sic : arrays (R,)
            Results produced since the last report: their time (a Spark node gives the
            source time, the start of the result's window), global query index and SIC (a
            window's result rows may be summed into one entry). Empty: a heartbeat.
        fragment, done, decided : arrays (K,)
            The node's progress per fragment it hosts (global index): source time below
            which every result has been reported or sent downstream, and when the input of
            its last processed batch was cut (NaN: nothing yet). Empty: no progress.

        Raises
        ------
        ConfigError
            ``sent`` not finite.
        ControlChannelError
            The service is unreachable, refused the key, or refused the report (an unknown
            node, mismatched or negative results: its message says which).
        """
        if isinstance(sent, bool) or not isinstance(sent, int | float) or not math.isfinite(sent):
            raise ConfigError(f"sent must be a finite time in seconds, got {sent!r}")
        return parse_update(
            self._client.call(
                "report",
                node=self.node,
                sent=float(sent),
                result_time=_floats(result_time, "result_time"),
                query=np.atleast_1d(np.asarray(query, dtype=np.int64)).tolist(),
                sic=_floats(sic, "sic"),
                fragment=np.atleast_1d(np.asarray(fragment, dtype=np.int64)).tolist(),
                done=_floats(done, "done"),
                decided=_floats(decided, "decided"),
            )
        )

    def update(self) -> NodeUpdate:
        """This node's update now, without reporting (does not count as a heartbeat)."""
        return parse_update(self._client.call("update", node=self.node))

    def layout(self) -> dict[str, list[int]]:
        """``{"queries": [...], "fragments": [...]}``: what this node hosts, global indices."""
        result = self._client.call("layout", node=self.node)
        return {k: [int(v) for v in result[k]] for k in ("queries", "fragments")}

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        self._client.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CoordinatorClient", "parse_update"]
