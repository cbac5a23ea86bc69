"""One view across a federation's nodes: per query SIC, kept share, latency; global Jain.

``spillway federation up`` gathers, every second, each node's last update from the query
coordinator (:class:`~spillway.federation.update.NodeUpdate`: its queries' result SIC over the
STW, THEMIS Eq. 4, and the nodes the coordinator lost) and each node's status file (what its
controller kept of every query's tuples and its p95 result latency), and
:func:`federation_view` folds them into one :class:`FederationView`: per query the SIC the
coordinator computed, the share of its source tuples kept over the recent STW (summed over
the nodes hosting its fragments), the p95 latency at its root, and Jain's index over the
queries' SIC (THEMIS §7.2). :func:`render` draws it as text. No Spark, no I/O here.

Examples
--------
>>> import numpy as np
>>> from spillway.federation.config import FederationConfig
>>> fed = FederationConfig.from_dict({"nodes": [{"name": "a"}, {"name": "b"}],
...     "queries": [{"name": "q", "fragments": [
...         {"name": "leaf", "node": "a", "sources": 2, "to": ["root"]},
...         {"name": "root", "node": "b", "sources": 2}]}]})
>>> u = NodeUpdate(node=1, as_of=5.0, queries=np.array([0]), sic=np.array([0.4]),
...                ceiling=np.array([1.0]), lost_nodes=(0,), orphaned=np.array([], int))
>>> status = {"queries": [{"query_id": 0, "role": "sources", "root": True,
...     "arrived_recent": 100, "kept_recent": 40, "latency_p95_s": 2.5}]}
>>> view = federation_view(fed, {"a": None, "b": u}, {"a": {"queries": []}, "b": status})
>>> view.queries[0].sic, view.queries[0].kept_fraction, view.lost_nodes
(0.4, 0.4, ('a',))
>>> print(render(view).splitlines()[1])
query        SIC  kept %  p95 latency s
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spillway.federation.config import FederationConfig
from spillway.federation.update import NodeUpdate
from spillway.quality import jain_index


@dataclass(frozen=True, kw_only=True)
class QueryView:
    """One query across the federation (NaN: not known yet); ``sic_as_of``: when the
    coordinator computed ``sic`` (its clock; -inf before any update); ``stw_end``: where the
    STW it summed ends in source time (NaN: not known); ``arrived`` and ``kept``: its source
    tuples decided and kept over the recent STW, summed over its fragments (``kept_fraction``
    is their ratio)."""

    name: str
    sic: float
    kept_fraction: float
    latency_p95_s: float
    sic_as_of: float = -math.inf
    stw_end: float = math.nan
    arrived: int = 0
    kept: int = 0


@dataclass(frozen=True, kw_only=True)
class FederationView:
    """The federation now: every query, Jain over their SIC, the lost nodes, node states."""

    queries: tuple[QueryView, ...]
    jain: float
    lost_nodes: tuple[str, ...]
    nodes: Mapping[str, str]


def federation_view(
    fed: FederationConfig,
    updates: Mapping[str, NodeUpdate | None],
    statuses: Mapping[str, Mapping[str, Any] | None],
    states: Mapping[str, str] | None = None,
) -> FederationView:
    """Fold the nodes' coordinator updates and status files into one view.

    Parameters
    ----------
    fed : the federation.
    updates : per node name, its latest update from the coordinator (or None).
    statuses : per node name, its status file's content (or None before it writes one).
    states : per node name, a word on its process (``running``, ``exited 1``); default
        ``running`` once it has a status, ``starting`` before.
    """
    n_q = len(fed.queries)
    sic = np.full(n_q, np.nan)
    as_of = np.full(n_q, -np.inf)
    end = np.full(n_q, np.nan)
    lost: set[int] = set()
    newest = -math.inf
    for u in updates.values():
        if u is None:
            continue
        ends = u.ends(u.queries)
        for q, s, e in zip(u.queries.tolist(), u.sic.tolist(), ends.tolist(), strict=True):
            if u.as_of >= as_of[q]:
                sic[q], as_of[q], end[q] = s, u.as_of, e
        if u.as_of >= newest:
            newest, lost = u.as_of, set(u.lost_nodes)
    arrived = np.zeros(n_q)
    kept = np.zeros(n_q)
    latency = np.full(n_q, np.nan)
    for status in statuses.values():
        for lq in (status or {}).get("queries", []):
            q = int(lq["query_id"])
            if lq["role"] == "sources":
                arrived[q] += lq["arrived_recent"]
                kept[q] += lq["kept_recent"]
            p95 = lq.get("latency_p95_s")
            if lq["root"] and p95 is not None:
                latency[q] = np.fmax(latency[q], p95)
    frac = np.full(n_q, np.nan)
    np.divide(kept, arrived, out=frac, where=arrived > 0)
    known = sic[np.isfinite(sic)]
    words = {
        n: (states or {}).get(n) or ("running" if statuses.get(n) else "starting")
        for n in fed.nodes
    }
    return FederationView(
        queries=tuple(
            QueryView(
                name=q.name,
                sic=float(sic[i]),
                kept_fraction=float(frac[i]),
                latency_p95_s=float(latency[i]),
                sic_as_of=float(as_of[i]),
                stw_end=float(end[i]),
                arrived=int(arrived[i]),
                kept=int(kept[i]),
            )
            for i, q in enumerate(fed.queries)
        ),  # fmt: skip
        jain=float(jain_index(known)) if known.size else math.nan,
        # a node not up yet is starting, not lost
        lost_nodes=tuple(fed.nodes[n] for n in sorted(lost) if statuses.get(fed.nodes[n])),
        nodes=words,
    )


def _num(x: float, fmt: str) -> str:
    return format(x, fmt) if math.isfinite(x) else "-"


def render(view: FederationView, *, elapsed_s: float | None = None) -> str:
    """The view as text: a line per query, then Jain and the nodes (lost ones marked)."""
    head = "spillway federation" + (f" · {elapsed_s:.0f} s" if elapsed_s is not None else "")
    lines = [head, f"{'query':<10} {'SIC':>5} {'kept %':>7} {'p95 latency s':>14}"]
    for q in view.queries:
        lines.append(
            f"{q.name:<10} {_num(q.sic, '5.3f'):>5} {_num(100 * q.kept_fraction, '7.1f'):>7} "
            f"{_num(q.latency_p95_s, '14.2f'):>14}"
        )
    lines.append(f"Jain over the queries' SIC: {_num(view.jain, '.3f')}")
    nodes = ", ".join(
        f"{n} {'LOST (no heartbeat)' if n in view.lost_nodes else w}" for n, w in view.nodes.items()
    )
    lines.append(f"nodes: {nodes}")
    return "\n".join(lines)


__all__ = ["FederationView", "QueryView", "federation_view", "render"]
