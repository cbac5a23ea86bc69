"""Watching a running node: its live figures, for the dashboard, Prometheus and the terminal.

- :mod:`spillway.telemetry.board`: :class:`~spillway.telemetry.board.NodeBoard` gathers a
  node's events and snapshots into immutable states;
- :mod:`spillway.telemetry.hub`: :class:`~spillway.telemetry.hub.Hub`, the boards shown
  together (one per node);
- :mod:`spillway.telemetry.prometheus`: the ``/metrics`` endpoint over a hub.

Nothing here imports pyspark: a board is fed by the node's observers and snapshots.
"""

from spillway.telemetry.board import BoardState, NodeBoard
from spillway.telemetry.hub import Hub, StateSource

__all__ = ["BoardState", "Hub", "NodeBoard", "StateSource"]
