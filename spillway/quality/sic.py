"""Source tuple SIC (THEMIS Eq. 1) over a sliding source time window (STW).

Every source gives its tuples of one STW a total SIC of ``1/|S|``, so a query whose results
reflect every source tuple of the window has query SIC 1 (THEMIS §4, Eq. 1; Fiscato Eq. 3.2,
where the metric is called SCR). A tuple's SIC is therefore ``1 / (n_s(STW) * |S|)``: the more
tuples a source sends, the less each one is worth.

THEMIS §6 slides the STW continuously and re-estimates ``n_s(STW)`` every slide so that
time-varying rates are tracked. :class:`StwCounter` does that for many lanes at once: it keeps
the arrivals of every lane in one bucket per slide (a numpy ring buffer) and answers, after each
:meth:`StwCounter.push`, the arrivals in the last STW and the SIC of a tuple arriving now.

Decisions (not in the papers)
-----------------------------
*Before the STW has filled.* The node controller stamps tuples from ``t = 0``. Counting only the
elapsed part of the first window would stamp the first tuples as if they were the whole window
(a constant source would sum to ``1 + 1/2 + 1/3 + ...`` per source). Instead, while a lane has
seen fewer than ``STW/slide`` slides, its window count is *extrapolated* from the elapsed part at
the observed rate: ``n_hat = arrivals_so_far * n_slots / slides_seen``. Tuples of a constant-rate
source then carry exactly the SIC they will carry once the window is full, the stamps of the
elapsed part sum to ``elapsed / STW`` per source, and :class:`spillway.quality.QuerySicLedger`
extrapolates its partial-window sum by the same factor ``STW / elapsed``, so an unshed query
reads about 1 from the start instead of ramping up over the first STW (a ramp would make queries
deployed later look starved next to older ones).

*Lanes with no arrivals in the window* hold no tuples to stamp; their tuple SIC is 0, which also
keeps ``count * sic`` exactly 0. Call :meth:`StwCounter.push` with a slide's arrivals *before*
stamping them, so a source that has just (re)started is counted.

*Step changes of rate.* After a step the per-slide re-estimate lags by up to one STW (the window
still holds slides at the old rate); the stamps then sum to a little more than 1 per source when
the rate rises and a little less when it falls, and settle after one STW. This is THEMIS's own
estimator; the paper notes measured SIC "can slightly exceed 1" (§7), so nothing is clipped.

References
----------
Kalyvianaki et al., THEMIS, SIGMOD 2016, §4 Eq. 1 and §6 "SIC maintenance".
Fiscato, PhD thesis 2012, §3.4 Eq. 3.2 and §4.2 Eq. 4.1.

Examples
--------
>>> counter = StwCounter(StwConfig(stw_s=1.0, slide_s=0.25), n_lanes=2)
>>> for _ in range(4):
...     counter.push([10, 30])
>>> counter.totals().tolist()
[40, 120]
>>> counter.tuple_sic(n_sources_per_lane=2).tolist() == [1 / 80, 1 / 240]
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from spillway.errors import ConfigError

_RATIO_TOL = 1e-9


@dataclass(frozen=True, kw_only=True)
class StwConfig:
    """Size and slide of the source time window (THEMIS §6, §7: STW 10 s sliding every 250 ms).

    Parameters
    ----------
    stw_s : float
        Length of the source time window in seconds. THEMIS uses 10 s, "an order of magnitude
        larger than the end-to-end processing delay".
    slide_s : float
        Slide of the window in seconds; the shedding interval (250 ms in THEMIS; about the
        trigger interval on Spark). ``stw_s`` must be a whole multiple of it.

    Raises
    ------
    ConfigError
        When either value is not a finite positive number, or ``stw_s / slide_s`` is not a whole
        number.

    Examples
    --------
    >>> StwConfig(stw_s=10.0, slide_s=0.25).n_slots
    40
    >>> StwConfig.from_dict(StwConfig().to_dict()) == StwConfig()
    True
    >>> try:
    ...     StwConfig(stw_s=1.0, slide_s=0.3)
    ... except ConfigError as e:
    ...     print(str(e).split(",")[0])
    stw_s must be a whole multiple of slide_s
    """

    stw_s: float = 10.0
    slide_s: float = 0.25

    def __post_init__(self) -> None:
        for name in ("stw_s", "slide_s"):
            v = getattr(self, name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or v <= 0:
                raise ConfigError(f"{name} must be a finite number > 0 (seconds), got {v!r}")
        ratio = self.stw_s / self.slide_s
        if ratio < 1 - _RATIO_TOL or abs(ratio - round(ratio)) > _RATIO_TOL * max(1.0, ratio):
            raise ConfigError(
                f"stw_s must be a whole multiple of slide_s, got stw_s={self.stw_s} and "
                f"slide_s={self.slide_s} (ratio {ratio:.3f}...); pick a slide that divides the "
                "window"
            )

    @property
    def n_slots(self) -> int:
        """Number of slides in one window (``stw_s / slide_s``)."""
        return int(round(self.stw_s / self.slide_s))

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict (TOML-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StwConfig:
        """Build a config from :meth:`to_dict` output."""
        unknown = set(data) - {"stw_s", "slide_s"}
        if unknown:
            raise ConfigError(
                f"StwConfig has no setting(s) {sorted(unknown)}; allowed: stw_s, slide_s"
            )
        return cls(**dict(data))


def _as_counts(values: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        arr = np.asarray(arr, dtype=np.float64)
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ConfigError(f"{name} must hold whole numbers, got {values!r}")
    arr = arr.astype(np.int64)
    if shape is not None and arr.shape != shape:
        raise ConfigError(f"{name} must have shape {shape}, got {arr.shape}")
    if arr.size and arr.min() < 0:
        raise ConfigError(f"{name} must be >= 0, got a value of {int(arr.min())}")
    return arr


def source_tuple_sic(count_in_stw: Any, n_sources: Any) -> np.ndarray:
    """SIC of one source tuple, ``1 / (count_in_stw * n_sources)`` (THEMIS Eq. 1).

    Vectorised: both arguments broadcast. A source with no tuples in the window has nothing to
    stamp, so a zero count gives 0 (never a division by zero).

    Parameters
    ----------
    count_in_stw : array-like of float >= 0
        Tuples the source sends in one STW (``|T^S_s|``); may be an extrapolated estimate.
    n_sources : array-like of int >= 1
        Sources of the tuple's query (``|S|``), over all its fragments.

    Returns
    -------
    numpy.ndarray of float64
        Per-tuple SIC, shaped like the broadcast inputs (0-d for two scalars).

    Raises
    ------
    ConfigError
        When a count is negative or not finite, or ``n_sources`` is below 1.

    Examples
    --------
    THEMIS Fig. 2: 4 and 2 tuples from 2 sources.

    >>> source_tuple_sic([4, 2, 0], 2).tolist()
    [0.125, 0.25, 0.0]
    >>> float(source_tuple_sic(4000, 1))
    0.00025
    """
    n = np.asarray(count_in_stw, dtype=np.float64)
    s = np.asarray(n_sources)
    if s.dtype.kind not in "iu" or (s.size and s.min() < 1):
        raise ConfigError(f"n_sources must be whole numbers >= 1, got {n_sources!r}")
    if not np.isfinite(n).all() or (n.size and n.min() < 0):
        raise ConfigError(f"count_in_stw must be finite and >= 0, got {count_in_stw!r}")
    denom = n * s
    out = np.zeros(np.broadcast(n, s).shape, dtype=np.float64)
    np.divide(1.0, denom, out=out, where=denom > 0)
    return out


class StwCounter:
    """Arrivals per lane over a sliding STW, one bucket per slide (THEMIS §6).

    A lane is a stream of tuples sharing one tuple SIC: a (query, source) pair, or a
    (query, source, group) triple when lanes are pooled per source with ``source_of_lane``.
    Call :meth:`push` once per slide with the lane's arrivals in that slide; then
    :meth:`totals` and :meth:`tuple_sic` describe the window ending now. Before a lane has seen
    a full window, its count is extrapolated from the slides seen (see the module docstring).

    Parameters
    ----------
    config : StwConfig
        Window length and slide.
    n_lanes : int
        Number of lanes to start with (more can be added with :meth:`add_lanes`).

    Raises
    ------
    ConfigError
        When ``config`` is not a :class:`StwConfig` or ``n_lanes`` is negative.

    Examples
    --------
    A source whose rate doubles: the window re-estimates every slide and has forgotten the old
    rate one STW (4 slides) later.

    >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.25), n_lanes=1)
    >>> c.push([10]); c.estimated_counts().tolist()   # 1 slide seen: extrapolated to 4
    [40.0]
    >>> for _ in range(3):
    ...     c.push([10])
    >>> for _ in range(4):
    ...     c.push([20])
    ...     print(c.totals().tolist(), float(c.tuple_sic(1)[0]))
    [50] 0.02
    [60] 0.016666666666666666
    [70] 0.014285714285714285
    [80] 0.0125
    """

    def __init__(self, config: StwConfig, n_lanes: int) -> None:
        if not isinstance(config, StwConfig):
            raise ConfigError(f"config must be a StwConfig, got {type(config).__name__}")
        if isinstance(n_lanes, bool) or not isinstance(n_lanes, int | np.integer) or n_lanes < 0:
            raise ConfigError(f"n_lanes must be an int >= 0, got {n_lanes!r}")
        self.config = config
        self._buf = np.zeros((config.n_slots, int(n_lanes)), dtype=np.int64)
        self._totals = np.zeros(int(n_lanes), dtype=np.int64)
        self._seen = np.zeros(int(n_lanes), dtype=np.int64)
        self._pos = 0
        self._slides = 0

    @property
    def n_lanes(self) -> int:
        """Number of lanes."""
        return int(self._totals.shape[0])

    @property
    def slides(self) -> int:
        """Number of :meth:`push` calls so far."""
        return self._slides

    def slides_seen(self) -> np.ndarray:
        """Slides each lane has been counted over, capped at the window's ``n_slots`` (L,).

        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1)
        >>> for _ in range(3):
        ...     c.push([1])
        >>> c.slides_seen().tolist(), c.slides
        ([2], 3)
        """
        return self._seen.copy()

    def add_lanes(self, n: int) -> np.ndarray:
        """Append ``n`` empty lanes (e.g. a newly deployed query); returns their indices.

        New lanes start with an empty window and are extrapolated until they have seen one.

        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1)
        >>> c.add_lanes(2).tolist(), c.n_lanes
        ([1, 2], 3)
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ConfigError(f"add_lanes needs an int n >= 0, got {n!r}")
        start = self.n_lanes
        self._buf = np.concatenate(
            [self._buf, np.zeros((self._buf.shape[0], int(n)), dtype=np.int64)], axis=1
        )
        self._totals = np.concatenate([self._totals, np.zeros(int(n), dtype=np.int64)])
        self._seen = np.concatenate([self._seen, np.zeros(int(n), dtype=np.int64)])
        return np.arange(start, start + int(n), dtype=np.int64)

    def push(self, counts: Any) -> None:
        """Record the arrivals of every lane in the slide that just ended.

        Parameters
        ----------
        counts : array-like of int >= 0, shape (L,)
            Tuples that arrived on each lane during the slide.

        Raises
        ------
        ConfigError
            When ``counts`` has the wrong shape or holds negative or fractional values.

        Examples
        --------
        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=2)
        >>> c.push([3, 0]); c.push([1, 2]); c.push([5, 5])
        >>> c.totals().tolist()
        [6, 7]
        """
        c = _as_counts(counts, "counts", (self.n_lanes,))
        self._totals += c - self._buf[self._pos]
        self._buf[self._pos] = c
        self._pos = (self._pos + 1) % self._buf.shape[0]
        np.minimum(self._seen + 1, self._buf.shape[0], out=self._seen)
        self._slides += 1

    def totals(self) -> np.ndarray:
        """Arrivals per lane in the last STW (fewer slides while a lane's window fills) (L,).

        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1); c.push([4])
        >>> c.totals().tolist()
        [4]
        """
        return self._totals.copy()

    def estimated_counts(self, source_of_lane: Any = None) -> np.ndarray:
        """Estimated tuples per STW of every lane's source, ``n_s(STW)`` (L,), float.

        Equal to :meth:`totals` once a lane has seen a whole window; before that, the arrivals
        so far scaled by ``n_slots / slides_seen`` (the rate seen so far, over a full window).

        Parameters
        ----------
        source_of_lane : array-like of int >= 0, shape (L,), optional
            Label of the (query, source) stream each lane belongs to. Lanes with the same label
            (e.g. one lane per group of one source) pool their counts, because THEMIS Eq. 1
            counts the tuples of a *source*. By default every lane is its own source.

        Examples
        --------
        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=3)
        >>> c.push([1, 3, 5]); c.push([1, 3, 5])
        >>> c.estimated_counts(source_of_lane=[0, 0, 1]).tolist()
        [8.0, 8.0, 10.0]
        """
        totals = self._totals.astype(np.float64)
        if source_of_lane is not None:
            key = _as_counts(source_of_lane, "source_of_lane", (self.n_lanes,))
            pooled = np.bincount(key, weights=totals, minlength=int(key.max(initial=-1)) + 1)
            totals = pooled[key]
        scale = np.zeros(self.n_lanes, dtype=np.float64)
        np.divide(self._buf.shape[0], self._seen, out=scale, where=self._seen > 0)
        return totals * scale

    def tuple_sic(self, n_sources_per_lane: Any, source_of_lane: Any = None) -> np.ndarray:
        """SIC of a tuple arriving now on every lane, ``1 / (n_s(STW) * |S|)`` (THEMIS Eq. 1).

        Parameters
        ----------
        n_sources_per_lane : int or array-like of int >= 1, shape (L,)
            ``|S|``: the number of sources of each lane's query (broadcast if a scalar).
        source_of_lane : array-like of int, shape (L,), optional
            Pools lanes of one source, see :meth:`estimated_counts`.

        Returns
        -------
        numpy.ndarray of float64, shape (L,)
            0 for lanes with no arrivals in the window.

        Raises
        ------
        ConfigError
            When ``n_sources_per_lane`` is below 1 or has the wrong shape.

        Examples
        --------
        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=1.0), n_lanes=3); c.push([4, 2, 0])
        >>> c.tuple_sic([2, 2, 1]).tolist()                  # THEMIS Fig. 2 sources, an idle lane
        [0.125, 0.25, 0.0]
        """
        s = np.asarray(n_sources_per_lane)
        if s.ndim not in (0, 1) or (s.ndim == 1 and s.shape[0] != self.n_lanes):
            raise ConfigError(
                f"n_sources_per_lane must be a scalar or have one entry per lane "
                f"({self.n_lanes}), got shape {s.shape}"
            )
        return source_tuple_sic(self.estimated_counts(source_of_lane), s)

    def snapshot(self) -> dict[str, Any]:
        """The counter's state as plain picklable values (config included).

        >>> import pickle
        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1); c.push([3])
        >>> d = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=0)
        >>> d.restore(pickle.loads(pickle.dumps(c.snapshot()))); d.totals().tolist()
        [3]
        """
        return {
            "config": self.config.to_dict(),
            "buf": self._buf.copy(),
            "totals": self._totals.copy(),
            "seen": self._seen.copy(),
            "pos": self._pos,
            "slides": self._slides,
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot` (lanes and config included).

        Raises
        ------
        ConfigError
            When the snapshot's window differs from this counter's config.

        Examples
        --------
        >>> c = StwCounter(StwConfig(stw_s=1.0, slide_s=0.5), n_lanes=1); snap = c.snapshot()
        >>> c.push([9]); c.restore(snap); c.totals().tolist(), c.slides
        ([0], 0)
        """
        cfg = StwConfig.from_dict(snapshot["config"])
        if cfg != self.config:
            raise ConfigError(
                f"snapshot was taken with {cfg}, this counter has {self.config}; restore into a "
                "counter built with the same StwConfig"
            )
        self._buf = np.array(snapshot["buf"], dtype=np.int64)
        self._totals = np.array(snapshot["totals"], dtype=np.int64)
        self._seen = np.array(snapshot["seen"], dtype=np.int64)
        self._pos = int(snapshot["pos"])
        self._slides = int(snapshot["slides"])

    def __repr__(self) -> str:
        return f"StwCounter({self.config!r}, n_lanes={self.n_lanes}, slides={self._slides})"
