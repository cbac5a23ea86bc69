"""scripts/bench_source_read.py: its partition is the stw node's lanes, read whole."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from spillway.spark.source import read_partition
from tests.scripts._load import load_script


def _script():  # type: ignore[no-untyped-def]
    return load_script("bench_source_read")


def test_the_partition_holds_every_tuple_of_its_lanes_interval() -> None:
    part = _script().partition(lanes=30, interval_s=0.5)
    assert len(part.lo) == 30 and np.array_equal(part.keep, part.hi - part.lo)
    # 20 sources a query at 20 tuples/s: 10 tuples a lane in half a second, queries 0 and 1
    assert part.keep.sum() == 300 and set(part.query_id.tolist()) == {0, 1}
    table = read_partition(part)
    assert table.num_rows == 300


def test_it_prints_the_median_read(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["bench", "--lanes", "5", "--repeats", "2"])
    _script().main()
    out = capsys.readouterr().out
    assert out.startswith("lanes 5, rows 50: read ") and "a lane" in out
