"""scripts/node_warmup.py: its batches cut into slices in order (no Spark run)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.scripts._load import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("node_warmup")


def test_a_node_getting_faster_shows_in_the_slices(script: ModuleType) -> None:
    batches = [{"rows": 1000, "duration_s": 1.0 - 0.05 * i} for i in range(12)]
    got = script.slices(batches, parts=3)
    assert [(s["first"], s["last"]) for s in got] == [(0, 3), (4, 7), (8, 11)]
    assert [s["rows"] for s in got] == [1000, 1000, 1000]
    durations = [s["duration_s"] for s in got]
    assert durations == pytest.approx([0.925, 0.725, 0.525])
    assert got[0]["rows_per_s"] < got[1]["rows_per_s"] < got[2]["rows_per_s"]


def test_fewer_batches_than_slices_and_no_slices(script: ModuleType) -> None:
    got = script.slices([{"rows": 5, "duration_s": 0.5}, {"rows": 7, "duration_s": 0.5}], parts=6)
    assert [(s["first"], s["last"], s["rows_per_s"]) for s in got] == [(0, 0, 10.0), (1, 1, 14.0)]
    assert script.slices([], parts=2) == []
    with pytest.raises(ValueError, match="parts must be >= 1"):
        script.slices([], parts=0)
