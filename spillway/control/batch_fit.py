"""What a plan sustains with one micro-batch a trigger, from the batches it ran.

A Spark micro-batch that processes ``rows`` takes about ``fixed + per_row * rows`` seconds
(planning, scheduling and commits, then the rows). Rows over batch time depend on the batch
size (the fixed cost spread over more or fewer rows), so they are not a capacity: a node that
keeps everything has batches that grow with what arrives and reads higher the more it lags.
The rate the node sustains is the one whose batch fills one trigger interval,
``(trigger - fixed) / per_row / trigger`` (:func:`sustainable_rows_per_s`), with both terms
fitted by least squares over batches of different sizes (:func:`fit_batch_cost`).
:func:`operating_capacity` puts the two together for the experiments, with a stated fallback
when the batches cannot separate the terms. (The node's online model,
:mod:`spillway.control.cost_model`, fits the same line recursively while it runs.)

Examples
--------
>>> batches = [{"rows": r, "duration_s": 0.5 + 1e-5 * r} for r in (20_000, 40_000, 80_000)]
>>> fit_batch_cost(batches)
(0.5, 1e-05)
>>> sustainable_rows_per_s(0.5, 1e-5, 2.0)
75000.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spillway.control.capacity import batch_span


def fit_batch_cost(batches: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """Least-squares ``duration = fixed + per_row * rows`` over micro-batches: (fixed s,
    per-row s). NaN when the batch sizes do not vary enough (max < 1.3 x min) to separate them.

    >>> fit_batch_cost([{"rows": r, "duration_s": 0.5 + 2e-6 * r} for r in (1e5, 2e5, 4e5)])
    (0.5, 2e-06)
    >>> fit_batch_cost([{"rows": 1e5, "duration_s": 0.7}] * 3)
    (nan, nan)
    """
    rows = np.array([b["rows"] for b in batches], dtype=np.float64)
    secs = np.array([b["duration_s"] for b in batches], dtype=np.float64)
    if rows.size < 3 or rows.min() <= 0 or rows.max() < 1.3 * rows.min():
        return math.nan, math.nan
    per_row, fixed = np.polyfit(rows, secs, 1)
    return round(float(fixed), 12), round(float(per_row), 15)


def sustainable_rows_per_s(
    fixed_s: float, per_row_s: float, trigger_s: float, headroom: float = 1.0
) -> float:
    """Rows/s a source keeps up with when every trigger interval holds one batch that fills
    ``headroom`` of it: ``(headroom * trigger - fixed) / per_row / trigger``; NaN when the
    fixed cost alone fills that much.

    >>> sustainable_rows_per_s(0.5, 2e-6, 1.0)
    250000.0
    >>> round(sustainable_rows_per_s(0.5, 2e-6, 1.0, headroom=0.8))
    150000
    >>> sustainable_rows_per_s(1.2, 2e-6, 1.0)
    nan
    """
    usable = headroom * trigger_s
    if not (math.isfinite(fixed_s) and math.isfinite(per_row_s)) or per_row_s <= 0:
        return math.nan
    if fixed_s >= usable:
        return math.nan
    return (usable - fixed_s) / per_row_s / trigger_s


def operating_capacity(
    batches: Sequence[Mapping[str, Any]], trigger_s: float, fallback: float,
    headroom: float = 1.0,
) -> dict[str, Any]:  # fmt: skip
    """The rate a node's controller sustains at its operating point, fitted over ``batches``
    (runs whose batch sizes differ): the rate whose micro-batch fills ``headroom`` (the
    controller fills its headroom, not the whole interval) of ``span`` trigger intervals,
    ``span`` being what the controller's :func:`~spillway.control.capacity.batch_span` gives
    for the fitted fixed cost (a fixed cost above three quarters of the headroom makes it
    decide every few intervals, with a budget that grows with them; capacity at one interval
    understated such a node by half or more: 11,770 tuples/s fitted, 61,430 processed per
    second of batch time at span 2 in a kafka-overload run). ``fallback`` (say, rows over
    batch time) when the fit cannot separate the terms (sizes too alike, a negative term, a
    fixed cost filling the span), and ``capacity_method`` says which.

    >>> b = [{"rows": r, "duration_s": 0.5 + 1e-5 * r} for r in (20_000, 40_000, 80_000)]
    >>> operating_capacity(b, 2.0, fallback=9e9)
    {'capacity_tuples_per_s': 75000.0, 'capacity_method': 'fit', 'fixed_s': 0.5, 'per_row_s': 1e-05, 'span': 1}
    >>> operating_capacity(b, 2.0, fallback=9e9, headroom=0.8)["capacity_tuples_per_s"]
    55000.0
    >>> slow = [{"rows": r, "duration_s": 1.3 + 1e-5 * r} for r in (20_000, 40_000, 80_000)]
    >>> got = operating_capacity(slow, 2.0, fallback=9e9, headroom=0.8)
    >>> got["span"], got["capacity_tuples_per_s"]  # (0.8 * 4 - 1.3) / 1e-5 / 4
    (2, 47500.0)
    >>> operating_capacity(b[:1] * 3, 2.0, fallback=40_000.0)["capacity_method"]
    'rows over batch time (fit not possible)'
    """
    fixed, per_row = fit_batch_cost(batches)
    span, capacity = 1, math.nan
    if math.isfinite(fixed) and fixed >= 0:
        span = batch_span(fixed, trigger_s, headroom)
        capacity = sustainable_rows_per_s(fixed, per_row, span * trigger_s, headroom)
    if math.isfinite(capacity) and capacity > 0:
        return {"capacity_tuples_per_s": round(capacity, 6), "capacity_method": "fit",
                "fixed_s": fixed, "per_row_s": per_row, "span": span}  # fmt: skip
    return {"capacity_tuples_per_s": fallback,
            "capacity_method": "rows over batch time (fit not possible)",
            "fixed_s": fixed, "per_row_s": per_row, "span": span}  # fmt: skip
