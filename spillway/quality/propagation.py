"""SIC propagation through operators (THEMIS Eq. 3; Fiscato Eq. 3.3 and §3.5).

An operator fires atomically on a window of input tuples ``T_in`` and emits ``T_out``; every
output carries an equal share of the input SIC::

    t_out_SIC = sum(t_SIC for t in T_in) / |T_out|                       (THEMIS Eq. 3)

so SIC is conserved from sources to results, and whatever is shed takes its SIC with it. The
functions below apply that rule per operator type. They are small and pure, accept Python
numbers (``float`` or :class:`fractions.Fraction`, for exact tests) or numpy arrays (vectorised
over many firings at once), and are shared by the Spark helpers (:mod:`spillway.spark.sic_ops`)
and by the exact reference evaluator of whole query DAGs,
:class:`~spillway.quality.reference.OperatorGraph` (:mod:`spillway.quality.reference`).

Rules
-----
=======================  ==============================================================
operator                 SIC of each output row of one firing
=======================  ==============================================================
filter / map             ``total_in / n_out`` (a row-wise map keeps each row's SIC,
                         which has the same total)
tumbling aggregate       ``total_in`` on its single output
sliding window W/s       each tuple enters ``W/s`` windows and gives each ``sic * s/W``
group-by                 ``total_in / G`` on each of the G group rows (literal Eq. 3:
                         uniform over rows, not per group)
join                     ``(total_left + total_right) / n_out``
top-k                    ``total_in / min(k, n_candidates)``
union, partition         unchanged (pass-through; DISSP's round-robin split)
replication to k         ``sic / k`` on every copy (DISSP Assumption 9, Fig. 3.9)
=======================  ==============================================================

Decision: empty outputs
-----------------------
When a firing produces no rows (a filter or HAVING rejects everything, a join finds no match)
Eq. 3 would divide by zero and the firing's SIC would vanish, so a perfectly processed query
would look degraded. Following DISSP (Fiscato §3.2, Assumption 6: "the system still needs to
produce an *empty batch*, containing no tuples but with a total quality metadata value equal to
the sum of the values received in the input"), such a firing emits an **empty result that
carries the whole input SIC**: :func:`spread` with ``n_out = 0`` returns ``total_in``, to be put
on one payload-less marker row (on Spark: keep the window's row with a null or zero value, e.g.
COUNT = 0). Reason: an unshed filter that empties a window is a correct answer, not lost data;
only shedding may lower query SIC. Empty results are never shed themselves.

Decision: sliding windows
-------------------------
THEMIS (§6) mentions "a practical way to divide the SIC value of an input tuple across all its
derived tuples per slide" without giving it; DISSP does not cover overlapping windows. Here a
tuple's SIC is divided evenly over the windows that contain it (:func:`sliding_window_share`),
which conserves SIC over all firings.

Examples
--------
THEMIS Fig. 2 with exact fractions: operator b gets 4 tuples of 1/8 and emits 2 tuples.

>>> from fractions import Fraction
>>> spread(4 * Fraction(1, 8), 2)
Fraction(1, 4)
>>> spread(Fraction(1, 2), 0)        # empty result carries the firing's SIC
Fraction(1, 2)
"""

from __future__ import annotations

import math
import operator as _op
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from spillway.errors import ConfigError

#: A SIC value or an array of them: ``float``, ``Fraction`` or ``numpy.ndarray``.
S = TypeVar("S", float, Fraction, np.ndarray)

__all__ = [
    "GroupedSic",
    "filter_or_map",
    "group_by",
    "grouped_window_sic",
    "join",
    "partition",
    "partition_totals",
    "replicate",
    "sliding_window_share",
    "spread",
    "top_k",
    "top_k_rows",
    "tumbling_aggregate",
    "union",
    "window_totals",
    "windows_entered",
]


def _count(n: Any, name: str) -> Any:
    """Validate a non-negative whole count (int or int array)."""
    if isinstance(n, np.ndarray):
        if n.dtype.kind not in "iu" or (n.size and n.min() < 0):
            raise ConfigError(f"{name} must hold whole numbers >= 0, got {n!r}")
        return n
    if isinstance(n, bool):
        raise ConfigError(f"{name} must be a whole number >= 0, got {n!r}")
    try:
        v = _op.index(n)
    except TypeError:
        raise ConfigError(f"{name} must be a whole number >= 0, got {n!r}") from None
    if v < 0:
        raise ConfigError(f"{name} must be a whole number >= 0, got {n!r}")
    return v


def spread(total_in: S, n_out: Any) -> S:
    """THEMIS Eq. 3: SIC of each of the ``n_out`` outputs of one firing.

    Parameters
    ----------
    total_in : float, Fraction or ndarray
        Summed SIC of the firing's input tuples (shed tuples excluded).
    n_out : int or int ndarray (>= 0)
        Output rows of the firing. ``0`` means an empty result, which carries ``total_in``
        (see the module docstring).

    Returns
    -------
    Same kind as ``total_in`` (an ndarray when ``n_out`` is one).

    Raises
    ------
    ConfigError
        When ``n_out`` is negative or not a whole number.

    Examples
    --------
    >>> import numpy as np
    >>> spread(1.0, 4)
    0.25
    >>> spread(np.array([1.0, 0.5, 0.3]), np.array([2, 1, 0])).tolist()
    [0.5, 0.5, 0.3]
    """
    n = _count(n_out, "n_out")
    if isinstance(total_in, np.ndarray) or isinstance(n, np.ndarray):
        t = np.asarray(total_in, dtype=np.float64)
        nn = np.asarray(n)
        return np.where(nn > 0, t / np.maximum(nn, 1), t)  # type: ignore[return-value]
    return total_in / n if n > 0 else total_in


def filter_or_map(total_in: S, n_out: Any) -> S:
    """Filter, select, project or map within one firing: ``total_in / n_out`` (Eq. 3).

    A filter that keeps 5 of 10 tuples doubles their SIC (Fiscato Assumption 6); a filter that
    keeps none emits an empty result carrying ``total_in``.

    >>> from fractions import Fraction
    >>> filter_or_map(10 * Fraction(1, 10), 5), filter_or_map(Fraction(1), 0)
    (Fraction(1, 5), Fraction(1, 1))
    """
    return spread(total_in, n_out)


def tumbling_aggregate(sic_in: Any) -> Any:
    """A tumbling-window aggregate (AVG, MAX, COUNT, COV, ...) emits one row with ``sum(sic_in)``.

    Parameters
    ----------
    sic_in : sequence of numbers or ndarray
        SIC of the firing's input tuples.

    >>> from fractions import Fraction
    >>> tumbling_aggregate([Fraction(1, 4)] * 3)      # Fiscato Fig. 3.7: AVG after a loss
    Fraction(3, 4)
    """
    if isinstance(sic_in, np.ndarray):
        return sic_in.sum()
    values = list(sic_in)
    return sum(values[1:], start=values[0]) if values else 0.0


def window_totals(sic: np.ndarray, firing: np.ndarray, n_firings: int | None = None) -> np.ndarray:
    """Summed input SIC of many firings at once (vectorised ``tumbling_aggregate``).

    Parameters
    ----------
    sic : float ndarray (N,)
        SIC of each input row.
    firing : int ndarray (N,)
        Index of the firing (window, or window x query) each row belongs to.
    n_firings : int, optional
        Length of the result (default ``firing.max() + 1``).

    >>> import numpy as np
    >>> window_totals(np.array([0.1, 0.2, 0.3]), np.array([0, 1, 1])).tolist()
    [0.1, 0.5]
    """
    f = np.asarray(firing)
    _count(f, "firing")
    s = np.asarray(sic, dtype=np.float64)
    if s.shape != f.shape:
        raise ConfigError(f"sic and firing must have one shape, got {s.shape} and {f.shape}")
    m = int(f.max(initial=-1)) + 1 if n_firings is None else _count(n_firings, "n_firings")
    return np.bincount(f, weights=s, minlength=m)


def windows_entered(event_time: Any, size: Any, slide: Any, offset: Any = 0) -> Any:
    """How many sliding windows ``[offset + k*slide, offset + k*slide + size)`` contain a time.

    ``size / slide`` for every tuple when the size is a whole multiple of the slide; otherwise
    the count depends on where the tuple falls.

    >>> windows_entered(7.0, size=3.0, slide=1.0)
    3
    >>> windows_entered(0.7, size=1.0, slide=0.4), windows_entered(0.9, size=1.0, slide=0.4)
    (2, 3)
    """
    if not size > 0 or not slide > 0:
        raise ConfigError(f"size and slide must be > 0, got size={size!r}, slide={slide!r}")
    if isinstance(event_time, np.ndarray):
        t = np.asarray(event_time, dtype=np.float64) - offset
        return (np.floor(t / slide) - np.floor((t - size) / slide)).astype(np.int64)
    t = event_time - offset
    return math.floor(t / slide) - math.floor((t - size) / slide)


def sliding_window_share(
    sic: S, *, size: Any, slide: Any, event_time: Any = None, offset: Any = 0
) -> S:
    """SIC a tuple contributes to each sliding window it enters: ``sic / windows entered``.

    Each firing then sums the shares of its tuples (:func:`tumbling_aggregate`), so a tuple's
    SIC is counted once over all its windows instead of ``size/slide`` times.

    Parameters
    ----------
    sic : number or ndarray
        SIC of the tuple(s).
    size, slide : number > 0
        Window length and slide (same unit as ``event_time``).
    event_time : number or ndarray, optional
        Needed only when ``size`` is not a whole multiple of ``slide``.
    offset : number
        Start of window 0.

    Raises
    ------
    ConfigError
        When ``size``/``slide`` is fractional and no ``event_time`` is given, or either is <= 0.

    Examples
    --------
    >>> from fractions import Fraction
    >>> sliding_window_share(Fraction(1, 10), size=30, slide=10)
    Fraction(1, 30)
    """
    if event_time is None:
        if not size > 0 or not slide > 0:
            raise ConfigError(f"size and slide must be > 0, got size={size!r}, slide={slide!r}")
        ratio = Fraction(size) / Fraction(slide)
        if ratio.denominator != 1:
            raise ConfigError(
                f"size/slide = {float(ratio):.4g} is not a whole number, so tuples enter "
                "different numbers of windows; pass event_time to count them per tuple"
            )
        return spread(sic, int(ratio))
    return spread(sic, windows_entered(event_time, size, slide, offset))


def group_by(total_in: S, n_groups: Any) -> S:
    """Group-by aggregate: each of the G group rows gets ``total_in / G`` (literal Eq. 3).

    Uniform over output rows, not proportional to the group's own input: THEMIS Eq. 3 spreads a
    firing's input evenly over its outputs.

    >>> group_by(1.0, 4)
    0.25
    """
    return spread(total_in, n_groups)


def join(total_left: S, total_right: S, n_out: Any) -> S:
    """Window join: ``(total_left + total_right) / n_out``; no match gives an empty result.

    Both inputs' windows are the firing's input (THEMIS A1.6); the output count can exceed the
    input count (up to N x M), which lowers the per-row SIC but keeps the total.

    >>> from fractions import Fraction
    >>> join(Fraction(1, 4), Fraction(1, 4), 5)
    Fraction(1, 10)
    """
    return spread(total_left + total_right, n_out)


def top_k_rows(k: Any, n_candidates: Any) -> Any:
    """Rows a top-k emits: ``min(k, n_candidates)``.

    >>> top_k_rows(5, 3), top_k_rows(5, 20)
    (3, 5)
    """
    kk = _count(k, "k")
    nc = _count(n_candidates, "n_candidates")
    if isinstance(kk, np.ndarray) or isinstance(nc, np.ndarray):
        return np.minimum(kk, nc)
    return min(kk, nc)


def top_k(total_in: S, k: Any, n_candidates: Any) -> S:
    """Top-k: the ``min(k, n_candidates)`` rows share ``total_in`` (Fiscato Fig. 3.8).

    >>> from fractions import Fraction
    >>> top_k(300 * Fraction(1, 300), 10, 300)
    Fraction(1, 10)
    """
    return spread(total_in, top_k_rows(k, n_candidates))


def union(sic: S) -> S:
    """Union of same-schema streams forwards tuples unchanged (pass-through).

    >>> union(0.25)
    0.25
    """
    return sic


def partition(sic: S) -> S:
    """Partitioning (round-robin split, routing) sends each tuple to one consumer: unchanged.

    Fiscato §3.5 (Fig. 3.8): 300 tuples of 1/300 split into 3 streams of 100 tuples of 1/300.

    >>> from fractions import Fraction
    >>> partition(Fraction(1, 300))
    Fraction(1, 300)
    """
    return sic


def replicate(sic: S, k: Any) -> S:
    """Replication (multiplexing) to ``k`` consumers: each copy carries ``sic / k``.

    Fiscato Assumption 9 and Fig. 3.9: a filter output duplicated to 2 filters, 1/2 -> 1/4.

    Raises
    ------
    ConfigError
        When ``k`` is below 1.

    >>> from fractions import Fraction
    >>> replicate(Fraction(1, 2), 2)
    Fraction(1, 4)
    """
    kk = _count(k, "k")
    if (np.asarray(kk) < 1).any():
        raise ConfigError(f"replicate needs k >= 1 consumers, got {k!r}")
    return spread(sic, kk)


def partition_totals(total: Any, n_rows: int, split: Sequence[int]) -> list[Any]:
    """Total SIC each consumer of a partitioned batch receives.

    Per-row SIC is unchanged, so a consumer receiving ``split[j]`` of the ``n_rows`` rows gets
    ``total * split[j] / n_rows``. An empty batch (``n_rows = 0``) is sent to every consumer
    with an equal share of its SIC, so the marker reaches each branch and SIC is conserved.

    >>> from fractions import Fraction
    >>> partition_totals(Fraction(1), 300, [100, 100, 100])
    [Fraction(1, 3), Fraction(1, 3), Fraction(1, 3)]
    """
    n = _count(n_rows, "n_rows")
    parts = [_count(x, "split") for x in split]
    if not parts:
        raise ConfigError("split must name at least one consumer")
    if sum(parts) != n:
        raise ConfigError(f"split {list(split)} must add up to the {n} rows being partitioned")
    if n == 0:
        return [spread(total, len(parts))] * len(parts)
    return [total * p / n for p in parts]


@dataclass(frozen=True)
class GroupedSic:
    """Output rows of a windowed group-by with their SIC (:func:`grouped_window_sic`).

    >>> import numpy as np
    >>> grouped_window_sic(np.array([0.5, 0.5]), np.array([0, 0]), np.array([1, 2])).sic.tolist()
    [0.5, 0.5]
    """

    window: np.ndarray
    group: np.ndarray
    sic: np.ndarray


def grouped_window_sic(sic: Any, window: Any, group: Any) -> GroupedSic:
    """Reference for a windowed group-by: one row per (window, group), ``total(window) / G``.

    Parameters
    ----------
    sic : float array (N,)
        SIC of every input row.
    window, group : int arrays (N,)
        Window (or window x query) and group key of every input row.

    Returns
    -------
    GroupedSic
        One entry per distinct (window, group), sorted by window then group.

    Examples
    --------
    >>> import numpy as np
    >>> out = grouped_window_sic(np.full(4, 0.25), np.array([0, 0, 0, 1]), np.array([7, 7, 8, 7]))
    >>> out.window.tolist(), out.group.tolist(), out.sic.tolist()
    ([0, 0, 1], [7, 8, 7], [0.375, 0.375, 0.25])
    """
    s = np.asarray(sic, dtype=np.float64)
    w = np.asarray(window, dtype=np.int64)
    g = np.asarray(group, dtype=np.int64)
    if not (s.shape == w.shape == g.shape) or s.ndim != 1:
        raise ConfigError(
            f"sic, window and group must be 1-D of one length, got {s.shape}, {w.shape}, {g.shape}"
        )
    pairs = np.unique(np.stack([w, g], axis=1), axis=0).reshape(-1, 2)
    uw, w_idx = np.unique(w, return_inverse=True)
    totals = np.bincount(w_idx, weights=s, minlength=uw.shape[0])
    rows_per_window = np.bincount(np.searchsorted(uw, pairs[:, 0]), minlength=uw.shape[0])
    per_row = spread(totals, rows_per_window)
    return GroupedSic(
        window=pairs[:, 0], group=pairs[:, 1], sic=per_row[np.searchsorted(uw, pairs[:, 0])]
    )
