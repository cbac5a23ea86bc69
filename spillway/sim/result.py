"""What a simulation measured: per-query SIC over time, per-node counters, tuple accounting.

:class:`SimResult` holds the query coordinator's Eq. 4 value of every query sampled every
``sample_s`` (the same value the nodes are sent), the counters of every node and the tuple
accounting that the conservation tests check: every source tuple that arrived was kept,
shed or lost (on a node that was down), and every derived row sent was delivered or is still
in transit, and every delivered row was kept, shed or lost.

The headline numbers (:meth:`SimResult.per_query_sic`, :meth:`SimResult.summary`) average each
query's samples from ``warmup_s`` to the end, then take Jain's index, the mean and the standard
deviation over queries, as THEMIS Fig. 10 does over "5 minutes of execution".

Examples
--------
>>> import numpy as np
>>> acc = Accounting(source_arrived=10, source_kept=6, source_shed=3, source_lost=1)
>>> acc.balanced()
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from spillway.quality.metrics import jain_index, sic_spread
from spillway.sim.config import SimConfig


@dataclass(kw_only=True)
class Accounting:
    """Tuple counters of a whole run (sources and derived rows between fragments).

    ``*_orphaned``: tuples a node shed because the coordinator reported their fragment's
    output could no longer reach a result (included in ``*_shed``).
    """

    source_arrived: int = 0
    source_kept: int = 0
    source_shed: int = 0
    source_lost: int = 0
    source_orphaned: int = 0
    derived_sent: int = 0
    derived_delivered: int = 0
    derived_in_transit: int = 0
    derived_kept: int = 0
    derived_shed: int = 0
    derived_lost: int = 0
    derived_orphaned: int = 0
    results_sent: int = 0

    def balanced(self) -> bool:
        """Whether every tuple is accounted for (kept, shed, lost or in transit)."""
        return (
            self.source_arrived == self.source_kept + self.source_shed + self.source_lost
            and self.derived_sent == self.derived_delivered + self.derived_in_transit
            and self.derived_delivered == self.derived_kept + self.derived_shed + self.derived_lost
        )

    def as_dict(self) -> dict[str, Any]:
        """The counters and whether they balance."""
        return {**asdict(self), "balanced": self.balanced()}


@dataclass(frozen=True, kw_only=True, eq=False)
class NodeStats:
    """Per-node totals (arrays of length N).

    ``arrived`` counts source tuples and derived rows reaching the node's input buffer;
    ``overloaded_share`` is the share of the node's decisions that shed; ``utilisation`` the
    mean processing time over the interval; ``capacity`` the mean capacity (tuples/s) its cost
    model estimated; ``decisions`` the intervals it decided (alive and with input).
    """

    arrived: np.ndarray
    kept: np.ndarray
    shed: np.ndarray
    lost: np.ndarray
    overloaded_share: np.ndarray
    utilisation: np.ndarray
    capacity: np.ndarray
    decisions: np.ndarray

    def rows(self) -> list[dict[str, Any]]:
        """One dict per node (for CSV)."""
        n = self.arrived.shape[0]
        return [
            {
                "node": i,
                "arrived": int(self.arrived[i]),
                "kept": int(self.kept[i]),
                "shed": int(self.shed[i]),
                "lost": int(self.lost[i]),
                "kept_share": float(self.kept[i] / self.arrived[i])
                if self.arrived[i]
                else float("nan"),
                "overloaded_share": float(self.overloaded_share[i]),
                "utilisation": float(self.utilisation[i]),
                "capacity_tuples_per_s": float(self.capacity[i]),
            }
            for i in range(n)
        ]


@dataclass(frozen=True, kw_only=True, eq=False)
class FragmentStats:
    """Per fragment (arrays of length F, in the deployment's order: query by query, each
    query's fragments in their order), the source tuples that arrived at it after
    ``warmup_s`` and those its node kept (derived rows are not counted).

    >>> f = FragmentStats(query=np.array([0, 0]), index=np.array([0, 1]),
    ...                   arrived=np.array([10, 0]), kept=np.array([4, 0]))
    >>> f.kept_share().tolist()
    [0.4, nan]
    """

    query: np.ndarray
    index: np.ndarray
    arrived: np.ndarray
    kept: np.ndarray

    def kept_share(self) -> np.ndarray:
        """Kept over arrived per fragment (NaN where none arrived) (F,)."""
        out = np.full(self.arrived.shape, np.nan)
        np.divide(self.kept, self.arrived, out=out, where=self.arrived > 0)
        return out


@dataclass(frozen=True, kw_only=True, eq=False)
class SimResult:
    """Everything a run measured.

    Parameters
    ----------
    config : the run's settings.
    kinds : query kind labels; ``query_kind`` indexes them (Q,).
    query_fragments : fragments of every query (Q,).
    sample_times : when the query SIC was sampled (T,).
    query_sic : Eq. 4 value of every query at every sample (T, Q).
    accounting : tuple counters.
    nodes : per-node counters.
    fragments : per-fragment source tuples arrived and kept after the warm-up.
    lost_nodes : ``(time, nodes)`` whenever the set of nodes the coordinator counts as lost
        changed.
    wall_s : wall-clock seconds the run took.
    """

    config: SimConfig
    kinds: tuple[str, ...]
    query_kind: np.ndarray
    query_fragments: np.ndarray
    sample_times: np.ndarray
    query_sic: np.ndarray
    accounting: Accounting
    nodes: NodeStats
    fragments: FragmentStats
    lost_nodes: tuple[tuple[float, tuple[int, ...]], ...] = ()
    wall_s: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_queries(self) -> int:
        """Queries Q."""
        return int(self.query_kind.shape[0])

    def measured(self, from_s: float | None = None) -> np.ndarray:
        """Samples at or after ``from_s`` (default ``config.warmup_s``): (T', Q)."""
        start = self.config.warmup_s if from_s is None else from_s
        return self.query_sic[self.sample_times >= start - 1e-9]

    def per_query_sic(self, from_s: float | None = None) -> np.ndarray:
        """Each query's mean SIC over the samples after the warm-up (Q,).

        Negative values cannot occur (Eq. 4 sums non-negative SIC); queries are never clipped
        at 1 (THEMIS §7 measured up to 1.0086).
        """
        m = self.measured(from_s)
        return m.mean(axis=0) if m.shape[0] else np.full(self.n_queries, np.nan)

    def summary(self, mask: np.ndarray | None = None) -> dict[str, Any]:
        """Jain's index, mean, std, IQR and 5-95 % range of the per-query SIC, the mean of the
        per-sample Jain's index, and the mean SIC per kind and per fragment count.

        ``mask`` selects queries (e.g. those with no fragment on a failed node).
        """
        per_q = self.per_query_sic()
        sel = np.ones(self.n_queries, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        spread = sic_spread(per_q[sel])
        m = self.measured()[:, sel]
        per_sample = jain_index(m, axis=1) if m.size else np.array([np.nan])
        by_kind = {
            k: float(per_q[sel & (self.query_kind == i)].mean())
            for i, k in enumerate(self.kinds)
            if (sel & (self.query_kind == i)).any()
        }
        by_frag = {
            int(f): float(per_q[sel & (self.query_fragments == f)].mean())
            for f in np.unique(self.query_fragments[sel])
        }
        return {
            "queries": int(sel.sum()),
            "jain": spread.jain,
            "mean_sic": spread.mean,
            "std_sic": spread.std,
            "iqr_sic": spread.iqr,
            "range_90_sic": spread.range_90,
            "min_sic": float(per_q[sel].min()) if sel.any() else float("nan"),
            "max_sic": float(per_q[sel].max()) if sel.any() else float("nan"),
            "jain_per_sample_mean": float(np.mean(per_sample)),
            "mean_sic_by_kind": by_kind,
            "mean_sic_by_fragments": by_frag,
        }

    def query_rows(self) -> list[dict[str, Any]]:
        """One dict per query: index, kind, fragments, mean SIC (for CSV)."""
        per_q = self.per_query_sic()
        return [
            {
                "query": i,
                "kind": self.kinds[int(self.query_kind[i])],
                "fragments": int(self.query_fragments[i]),
                "sic": float(per_q[i]),
            }
            for i in range(self.n_queries)
        ]


__all__ = ["Accounting", "FragmentStats", "NodeStats", "SimResult"]
