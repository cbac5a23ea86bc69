"""A node's view of its queries' global SIC: the coordinator's values, projected (THEMIS §6).

The query coordinator sends each node the result SIC of its queries (Eq. 4 over the STW,
:class:`~spillway.federation.update.NodeUpdate`); between two updates the node projects its own
shedding onto them (:class:`~spillway.quality.LocalProjection`: "subtracts the sum of the SIC
values of batches from the current updated query result SIC", then adds back what it keeps).
:class:`CoordinatorView` holds the last update a node received and the node's own admissions,
and gives its controller, at every decision, the base BALANCE-SIC balances: each hosted query's
global SIC, not the share of what reached this node (THEMIS §5.2 ``updateSIC``, Fig. 4).

Without a usable update the node falls back to its local view (THEMIS Fig. 4, top: each node
balances the SIC its own fragments secured) and says so: :meth:`CoordinatorView.base` returns
None, counted in :attr:`CoordinatorView.fallbacks`, and the first fallback is logged once
with its reason (no update yet, or the last one older than ``stale_s``). A report that cannot
reach the coordinator is counted in :attr:`CoordinatorView.failures` and logged once; the
updates then stop, so the view goes stale and the node falls back.

Thread-safe: the result sink (:class:`spillway.spark.fed_results.ResultReporter`) delivers
updates from Spark's batch threads while the controller decides.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §5.2 (``updateSIC``, Fig. 4) and §6 "Tuple shedder"
and "query coordinator".

Examples
--------
A node hosting global queries 4 and 1 (local 0 and 1) hears at 10 s that query 4's results
carry 0.2 of its SIC and query 1's 0.9; its own admissions since then are added.

>>> from spillway.quality.sic import StwConfig
>>> view = CoordinatorView([4, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0)
>>> view.base(10.0) is None, view.fallbacks   # nothing heard yet: the local view
(True, 1)
>>> view.receive(NodeUpdate(node=1, as_of=10.0, queries=np.array([1, 4]),
...     sic=np.array([0.9, 0.2]), ceiling=np.array([1.0, 1.0]), lost_nodes=(),
...     orphaned=np.array([], dtype=np.int64)))
>>> view.record(10.0, [0.05, 0.0])
>>> got = view.base(11.0, waiting=[0.1, 0.1])
>>> got.base.round(3).tolist(), got.ceiling.tolist()
([0.15, 0.8], [1.0, 1.0])
>>> view.base(12.5) is None, view.fallbacks   # older than stale_s: the local view again
(True, 2)

Not coordinated, the node keeps the updates but balances its local view at every decision:

>>> own = CoordinatorView([4, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0,
...                       coordinated=False)
>>> own.receive(view.update)
>>> own.base(10.5) is None, own.counters()
(True, {'used': 0, 'fallbacks': 0, 'local': 1, 'failures': 0})
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.federation.update import NodeUpdate
from spillway.quality.projection import LocalProjection
from spillway.quality.sic import StwConfig

_LOG = logging.getLogger("spillway.federation")


@dataclass(frozen=True, kw_only=True, eq=False)
class ProjectedBase:
    """What a decision balances: per local query, the projected global SIC over its ceiling
    (``base``) and the ceiling the node's tuple SICs are divided by (0 kept as 0); ``reported``:
    the update's SIC over its ceiling, before the projection (0 where the ceiling is 0)."""

    base: np.ndarray
    ceiling: np.ndarray
    reported: np.ndarray | None = None


class CoordinatorView:
    """The last coordinator update a node received, projected over its own shedding.

    Parameters
    ----------
    query_ids : int array (Q,)
        The global query index of each of the node's local queries (local order).
    stw : StwConfig
        The source time window (its slide is the shedding interval).
    stale_s : float
        An update whose ``as_of`` is more than this before the decision no longer counts: the
        node falls back to its local view (> 0; a few shedding intervals).
    lag_s : float or array (Q,)
        Time from an admission to its effect on the query's results
        (:class:`~spillway.quality.LocalProjection`).
    fragment_ids : int array (Q,), optional
        The global index of each local query's fragment (the layout's numbering), so that
        :meth:`orphaned` can name the queries of fragments the update marks orphaned; None:
        no query is ever orphaned.
    history_s : float, optional
        How far back the node keeps its own admissions: an update whose STW ends at
        ``stw_end`` (its queries' watermark) reflects them up to there, so the projection
        subtracts those from ``stw_end`` on, as far back as this. Default: one STW plus
        ``stale_s`` and ``lag_s`` (what an update without ``stw_end`` needs).
    coordinated : bool
        False: the node keeps the updates it receives (for its reports) but never balances
        them: :meth:`base` always returns None, counted in :attr:`local` (not a fallback, not
        logged), and :meth:`orphaned` marks nothing (THEMIS Fig. 4, top: every node balances
        its local SIC only; the federation file's ``coordinated = false``).

    Raises
    ------
    ConfigError
        A negative query index, fragment indices not one per query, a bad ``stale_s``, or what
        ``LocalProjection`` refuses.
    """

    def __init__(
        self,
        query_ids: Any,
        stw: StwConfig,
        *,
        stale_s: float,
        lag_s: Any = 0.0,
        fragment_ids: Any = None,
        history_s: float | None = None,
        coordinated: bool = True,
    ) -> None:
        if not isinstance(coordinated, bool):
            raise ConfigError(f"coordinated must be True or False, got {coordinated!r}")
        self.coordinated = coordinated
        ids = np.atleast_1d(np.asarray(query_ids, dtype=np.int64))
        if ids.ndim != 1 or (ids.size and ids.min() < 0):
            raise ConfigError(
                f"query_ids must list each local query's global index (>= 0), got {query_ids!r}"
            )
        frags = None if fragment_ids is None else np.asarray(fragment_ids, dtype=np.int64)
        if frags is not None and (frags.shape != ids.shape or (frags.size and frags.min() < 0)):
            raise ConfigError(
                f"fragment_ids must give each of the {ids.size} local queries its fragment's "
                f"global index (>= 0), got {fragment_ids!r}"
            )
        self.fragment_ids = frags
        if (
            isinstance(stale_s, bool)
            or not isinstance(stale_s, int | float)
            or not math.isfinite(stale_s)
            or stale_s <= 0
        ):
            raise ConfigError(
                f"stale_s must be a finite number of seconds > 0, got {stale_s!r}: how old a "
                "coordinator update may be before the node falls back to its local view"
            )
        self.query_ids = ids
        self.stale_s = float(stale_s)
        lag = np.asarray(lag_s, dtype=np.float64)
        reach = float(lag.max()) if lag.size and np.isfinite(lag).all() else 0.0
        floor = stw.stw_s + float(stale_s) + reach + 1.0  # own(as_of - lag): stale_s + lag back
        self.projection = LocalProjection(
            stw, int(ids.size), lag_s=lag_s, history_s=max(floor, float(history_s or 0.0))
        )
        self._lock = threading.Lock()
        self._update: NodeUpdate | None = None
        #: Decisions that fell back to the local view (no usable update).
        self.fallbacks = 0
        #: Reports that did not reach the coordinator.
        self.failures = 0
        #: Decisions that balanced the coordinator's values.
        self.used = 0
        #: Decisions that balanced the local view because the node is not coordinated.
        self.local = 0
        self._logged: set[str] = set()

    @property
    def update(self) -> NodeUpdate | None:
        """The last update received, or None."""
        with self._lock:
            return self._update

    def receive(self, update: NodeUpdate) -> None:
        """Keep ``update`` (a later one replaces it; an older one is ignored).

        Raises
        ------
        ConfigError
            ``update`` is not a :class:`NodeUpdate`, or lacks one of the node's queries.
        """
        if not isinstance(update, NodeUpdate):
            raise ConfigError(f"update must be a NodeUpdate, got {type(update).__name__}")
        update.for_queries(self.query_ids)  # refuses an update for another node's queries
        with self._lock:
            if self._update is None or update.as_of >= self._update.as_of:
                self._update = update

    def unreachable(self, error: str) -> None:
        """A report failed to reach the coordinator: counted, logged once."""
        with self._lock:
            self.failures += 1
            first = "failure" not in self._logged
            self._logged.add("failure")
        if first:
            _LOG.warning(
                "the query coordinator is unreachable (%s): this node keeps its results for "
                "the next report and falls back to its local view once its last update is "
                "older than %g s",
                error,
                self.stale_s,
            )

    def record(self, now: float, gained: Any) -> None:
        """The SIC this node admitted per local query in its decision at ``now`` (absolute:
        the SIC its kept tuples carry)."""
        with self._lock:
            self.projection.record(now, gained)

    def base(self, now: float, waiting: Any = 0.0) -> ProjectedBase | None:
        """The projected base at ``now``, or None (counted, logged once) to fall back.

        Parameters
        ----------
        now : float
            The decision's time, on the coordinator's clock (one machine: Unix seconds).
        waiting : float or array (Q,)
            SIC of each query's tuples this decision decides (THEMIS §6: "as if discarded";
            the policy adds back what it keeps).
        """
        with self._lock:
            if not self.coordinated:
                self.local += 1
                return None
            u = self._update
            reason = None
            if u is None:
                reason = "no update from the query coordinator yet"
            elif float(now) - u.as_of > self.stale_s:
                reason = (
                    f"the coordinator's last update is {float(now) - u.as_of:.3g} s old "
                    f"(stale_s={self.stale_s:g})"
                )
            if reason is not None:
                self.fallbacks += 1
                first = "fallback" not in self._logged
                self._logged.add("fallback")
            else:
                assert u is not None
                sic, ceiling = u.for_queries(self.query_ids)
                # the update reflects this node's admissions up to its STW's end
                as_of = (
                    u.as_of if u.stw_end is None else u.ends(self.query_ids) + self.projection.lag_s
                )
                base = self.projection.base(
                    float(now), sic=sic, as_of=as_of, ceiling=ceiling, waiting=waiting
                )
                self.used += 1
                reported = np.zeros(ceiling.size)
                np.divide(sic, ceiling, out=reported, where=ceiling > 0)
                return ProjectedBase(base=base, ceiling=ceiling.copy(), reported=reported)
        if first:
            _LOG.warning("%s: this node balances its local view of its queries' SIC", reason)
        return None

    def orphaned(self, now: float) -> np.ndarray:
        """Per local query, whether the last update (if not older than ``stale_s`` at ``now``)
        marks its fragment orphaned: its output no longer reaches a result, so its tuples are
        shed (Fiscato §4.3; the coordinator's ``orphaned``). All False without an update or
        ``fragment_ids``.

        >>> from spillway.quality.sic import StwConfig
        >>> view = CoordinatorView([0, 0, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0,
        ...                        fragment_ids=[3, 3, 5])
        >>> view.receive(NodeUpdate(node=1, as_of=10.0, queries=np.array([0, 1]),
        ...     sic=np.zeros(2), ceiling=np.array([0.0, 1.0]), lost_nodes=(2,),
        ...     orphaned=np.array([3])))
        >>> view.orphaned(11.0).tolist(), view.orphaned(13.0).tolist()  # then stale
        ([True, True, False], [False, False, False])
        """
        out = np.zeros(self.query_ids.size, dtype=bool)
        with self._lock:
            u = self._update
        if (
            not self.coordinated
            or u is None
            or self.fragment_ids is None
            or float(now) - u.as_of > self.stale_s
        ):
            return out
        return np.isin(self.fragment_ids, u.orphaned)

    def counters(self) -> dict[str, int]:
        """``used``, ``fallbacks``, ``local`` and ``failures`` so far."""
        with self._lock:
            return {"used": self.used, "fallbacks": self.fallbacks, "local": self.local,
                    "failures": self.failures}  # fmt: skip

    def __repr__(self) -> str:
        return f"CoordinatorView(queries={self.query_ids.tolist()}, stale_s={self.stale_s:g})"


__all__ = ["CoordinatorView", "ProjectedBase"]
