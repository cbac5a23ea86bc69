"""The batch-cost fit and the rate a plan sustains with one batch a trigger."""

from __future__ import annotations

import math

import pytest

from spillway.control.batch_fit import (
    fit_batch_cost,
    operating_capacity,
    sustainable_rows_per_s,
)


def test_batch_cost_fit_and_sustained_rate():
    batches = [{"rows": r, "duration_s": 0.3 + 1e-6 * r} for r in (2e5, 1e5, 4e5, 3e5)]
    fixed, per_row = fit_batch_cost(batches)
    assert fixed == pytest.approx(0.3) and per_row == pytest.approx(1e-6)
    assert sustainable_rows_per_s(fixed, per_row, 1.0) == pytest.approx(700_000.0)
    same = [{"rows": 1e5, "duration_s": d} for d in (0.4, 0.5, 0.6)]
    assert all(math.isnan(v) for v in fit_batch_cost(same))
    assert math.isnan(sustainable_rows_per_s(1.2, 1e-6, 1.0))  # fixed cost fills it
    assert math.isnan(sustainable_rows_per_s(0.2, 0.0, 1.0))  # no per-row cost: no line


@pytest.mark.parametrize(
    ("fixed", "per_row", "method", "span"),
    [(0.5, 1e-5, "fit", 1),
     # the controller decides every 2 triggers when the fixed cost passes 3/4 of one
     (2.5, 1e-5, "fit", 2),
     (8.5, 1e-5, "rows over batch time (fit not possible)", 4),  # fills even 4 triggers
     (-0.4, 1e-5, "rows over batch time (fit not possible)", 1)],
)  # fmt: skip
def test_operating_capacity_is_the_rate_whose_batch_fills_the_span(fixed, per_row, method, span):
    """The rate whose batch fills the intervals the node's batches span at that fixed cost
    (before, the span was one trigger whatever the fixed cost: 2.5 s gave no capacity)."""
    batches = [{"rows": r, "duration_s": fixed + per_row * r} for r in (10_000, 30_000, 90_000)]
    got = operating_capacity(batches, 2.0, fallback=12_345.0)
    assert got["capacity_method"] == method and got["span"] == span
    want = (2.0 * span - fixed) / per_row / (2.0 * span) if method == "fit" else 12_345.0
    assert got["capacity_tuples_per_s"] == pytest.approx(want)
