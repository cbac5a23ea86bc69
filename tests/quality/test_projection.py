"""A node's local projection of its queries' SIC (THEMIS §6)."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.quality.projection import LocalProjection
from spillway.quality.sic import StwConfig

STW = StwConfig(stw_s=2.0, slide_s=0.5)


def test_own_is_the_sum_over_the_window_of_own_admissions() -> None:
    p = LocalProjection(STW, 2)
    for k in range(10):
        p.record(k * 0.5, [0.1, 0.01 * k])
    # window [3.0, 5.0) holds the admissions at 3.0, 3.5, 4.0, 4.5 (k = 6..9)
    assert p.own(5.0).tolist() == pytest.approx([0.4, 0.01 * (6 + 7 + 8 + 9)])


def test_gaps_between_records_count_as_nothing_admitted() -> None:
    p = LocalProjection(STW, 1)
    p.record(0.0, [0.2])
    p.record(3.0, [0.1])
    assert p.own(3.5).tolist() == pytest.approx([0.1])
    assert p.own(2.0).tolist() == pytest.approx([0.2])
    p.record(3.0, [0.05])  # a second record in the same slide adds
    assert p.own(3.5).tolist() == pytest.approx([0.15])


def test_base_replaces_the_nodes_stale_part_and_subtracts_what_waits() -> None:
    p = LocalProjection(STW, 2, lag_s=[0.5, 0.0])
    for k in range(12):
        p.record(k * 0.5, [0.1 if k >= 8 else 0.0, 0.0])
    # update at 5.0 of query 0 reflects this node's admissions up to 4.5 (lag 0.5):
    # own(6.0) - own(4.5) = 0.4 - 0.1
    base = p.base(6.0, sic=[0.3, 0.3], as_of=5.0, waiting=[0.05, 0.0])
    assert base.tolist() == pytest.approx([0.3 + 0.3 - 0.05, 0.3])


def test_base_divides_by_the_ceiling_and_zero_ceiling_gives_zero() -> None:
    p = LocalProjection(STW, 2)
    assert p.base(1.0, sic=[0.2, 0.2], as_of=1.0, ceiling=[0.5, 0.0]).tolist() == [0.4, 0.0]


def test_without_admissions_the_base_is_the_update_minus_waiting() -> None:
    p = LocalProjection(STW, 3)
    sic = np.array([0.1, 0.5, 0.9])
    assert p.base(4.0, sic=sic, as_of=3.0, waiting=0.2).tolist() == pytest.approx(sic - 0.2)


def test_young_queries_are_extrapolated() -> None:
    p = LocalProjection(STW, 2, origin_s=[0.0, 1.0])
    p.record(0.0, [0.1, 0.0])
    p.record(1.0, [0.0, 0.1])
    assert p.own(1.5).tolist() == pytest.approx([0.1 * 2 / 1.5, 0.1 * 2 / 0.5])
    assert p.own(0.5).tolist()[1] == 0.0  # before its origin


def test_asking_older_than_the_history_uses_the_oldest_kept() -> None:
    p = LocalProjection(STW, 1, history_s=0.0)
    for k in range(40):
        p.record(k * 0.5, [0.1])
    # the ring keeps STW + 2 slides: an instant long gone reads as the oldest window kept
    # (here 0.4, like the newest), so the node's part counts as unchanged
    assert p.own(20.0).tolist() == pytest.approx([0.4])
    assert p.base(20.0, sic=[0.5], as_of=1.0).tolist() == pytest.approx([0.5])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_queries": -1}, "n_queries must be an int"),
        ({"lag_s": -1.0}, "lag_s must be >= 0"),
        ({"lag_s": [0.0, 0.0, 0.0]}, "one entry per query"),
        ({"history_s": -1.0}, "history_s must be a finite number"),
        ({"origin_s": float("nan")}, "origin_s must be finite"),
    ],
)
def test_constructor_errors(kwargs: dict, match: str) -> None:
    args = {"n_queries": 2, **kwargs}
    with pytest.raises(ConfigError, match=match):
        LocalProjection(STW, **args)


def test_other_errors() -> None:
    with pytest.raises(ConfigError, match="stw must be a StwConfig"):
        LocalProjection(2.0, 1)  # type: ignore[arg-type]
    p = LocalProjection(STW, 2)
    with pytest.raises(ConfigError, match="gained must have one entry per query"):
        p.record(0.0, [0.1])
    with pytest.raises(ConfigError, match="gained must be finite and >= 0"):
        p.record(0.0, [0.1, -0.1])
    p.record(1.0, [0.1, 0.1])
    with pytest.raises(ConfigError, match="must not go back"):
        p.record(0.5, [0.1, 0.1])
    with pytest.raises(ConfigError, match="waiting must be >= 0"):
        p.base(1.0, sic=[0.1, 0.1], as_of=1.0, waiting=-0.1)
    assert "n_queries=2" in repr(p)
