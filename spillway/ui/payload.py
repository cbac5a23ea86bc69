"""What the dashboard's page receives: a board's state as JSON-ready values.

:func:`node_payload` turns a :class:`~spillway.telemetry.board.BoardState` into plain dicts
and lists (non-finite numbers become ``None``, JSON's null, which the page shows as ``-``).
The series is sent whole when a page connects and then only the points after the last one the
page has (``since``), so a long run costs the page a few hundred bytes a tick. ``error`` is
every query's result error against the exact answer where the node knows it; a running node
does not compute exact answers, so it is ``None`` (the page shows ``n/a``) until a source of
errors exists. ``classes`` holds the node's priority classes (:class:`~spillway.status.ClassStatus`,
empty without them): kept share over the STW, loss since the run began, p95 latency against
the delay target D, the class manager's headroom H and its capacity share; each series point
carries the classes' kept share, p95 latency and headroom (``class_*``, class 1 first).

Examples
--------
>>> from spillway.status import NodeSnapshot, QueryStatus
>>> from spillway.telemetry import NodeBoard
>>> board = NodeBoard("node", queries=("q",), stw_s=10.0, info={"policy": "random"})
>>> q = QueryStatus(name="q", kind="avg", arrival_rate=10.0, kept_fraction=0.5, sic=0.5,
...                 latency_p95_s=float("nan"), latency_target_s=4.0, rows_in=10, rows_kept=5)
>>> for t in (1.0, 2.0):
...     board.tick(NodeSnapshot(t=t, capacity_tuples_per_s=5.0, processed_tuples_per_s=5.0,
...                             jain=1.0, queries=(q,)))
>>> p = node_payload(board.state(), since=1)
>>> p["phase"], p["t"], [pt["seq"] for pt in p["points"]], p["queries"][0]["latency_p95_s"]
('running', 2.0, [2], None)
>>> p["queries"][0]["error"], p["queries"][0]["on_target"], p["classes"]
(None, False, [])
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from spillway.reporting import json_safe
from spillway.telemetry.board import BoardState


def node_payload(state: BoardState, *, since: int = 0) -> dict[str, Any]:
    """``state`` as JSON-ready values, with the series points after ``since`` (sequence
    number; 0 sends them all)."""
    s = state.snapshot
    queries = []
    by_name = {q.name: q for q in s.queries} if s is not None else {}
    for name in state.queries:
        q = by_name.get(name)
        queries.append(
            {
                "name": name,
                "kind": q.kind if q else None,
                "arrival_rate": q.arrival_rate if q else None,
                "kept_fraction": q.kept_fraction if q else None,
                "sic": q.sic if q else None,
                "latency_p95_s": q.latency_p95_s if q else None,
                "latency_target_s": q.latency_target_s if q else None,
                "on_target": q.on_target if q else None,
                "ended": q.ended if q else None,
                "error": None,
            }
        )
    classes = [c.as_dict() for c in (s.classes if s is not None else ())]
    shed = sum(c.shed for c in state.counts)
    arrived = sum(c.arrived for c in state.counts)
    out = {
        "name": state.name,
        "phase": state.phase,
        "version": state.version,
        "duration_s": state.duration_s,
        "t": s.t if s is not None else None,
        "policy": (s.policy if s is not None else "") or state.info.get("policy", ""),
        "info": dict(state.info),
        "capacity_tuples_per_s": s.capacity_tuples_per_s if s is not None else None,
        "processed_tuples_per_s": s.processed_tuples_per_s if s is not None else None,
        "capacity_measured_tuples_per_s": state.capacity_measured_tuples_per_s,
        "utilisation": s.utilisation if s is not None else None,
        "jain": s.jain if s is not None else None,
        "intervals": state.intervals,
        "tuples_arrived": arrived,
        "tuples_shed": shed,
        "queries": queries,
        "classes": classes,
        "calibration": asdict(state.calibration) if state.calibration is not None else None,
        "lines": list(state.lines),
        "report": state.report,
        "error": state.error,
        "points": [asdict(p) for p in state.series if p.seq > since],
    }
    return dict(json_safe(out))
