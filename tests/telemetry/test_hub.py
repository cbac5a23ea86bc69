"""Hub: several boards shown together, unique names, one version."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError
from spillway.telemetry import Hub, NodeBoard


def test_hub_shows_every_board_in_order_and_follows_their_changes() -> None:
    a, b = (NodeBoard(n, queries=("q",), stw_s=10.0) for n in ("a", "b"))
    hub = Hub([a, b])
    v = hub.version
    b.note("line")
    assert hub.version > v
    assert [s.name for s in hub.states()] == ["a", "b"]


def test_two_boards_with_one_name_are_refused() -> None:
    hub = Hub([NodeBoard("a", queries=(), stw_s=1.0)])
    with pytest.raises(ConfigError, match="a board named 'a' is already shown"):
        hub.add(NodeBoard("a", queries=(), stw_s=1.0))
