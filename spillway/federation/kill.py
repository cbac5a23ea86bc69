"""Killing one node of a running federation and restarting it: ``federation up --kill``.

``--kill NODE@T[+R]`` kills node ``NODE`` (SIGKILL of its whole process group: a crash, its
Spark application with it) ``T`` seconds after every node is up and, with ``+R``, starts it
again ``R`` seconds after the kill with the same arguments, so it resumes from its checkpoint
(``OUT/nodes/NODE/checkpoint``: Spark's offset log, its topics' offsets). Everything here is
pure: :func:`parse_kill` reads the option, :class:`KillRecord` says when to act and keeps
what happened (seconds since every node was up, and Unix times), and :func:`caught_up` judges
from the restarted node's own status (the offsets Spark committed, how far in source time each
query was decided) whether every offset of its input that existed when it restarted was
processed or recorded as shed: a decided tuple is one or the other (the offset log keeps how
many of each range were kept).

Examples
--------
>>> plan = parse_kill("c@30+15", ("a", "b", "c"), duration_s=90.0)
>>> plan
KillPlan(node='c', at_s=30.0, down_s=15.0)
>>> rec = KillRecord(plan)
>>> rec.due(29.0), rec.due(30.2)
(None, 'kill')
>>> rec.note("kill", 30.2, wall=1000.0)
>>> rec.due(44.0), rec.due(45.3)
(None, 'restart')
>>> rec.note("restart", 45.3, wall=1015.1, log_ends={"t/0": 7})
>>> rec.down
False
>>> rec.summary()["restarted_at_s"], rec.summary()["log_ends_at_restart"]
(45.3, {'t/0': 7})
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spillway.errors import ConfigError

_KILL = re.compile(r"^(?P<node>[^@]+)@(?P<at>[^+]+)(?:\+(?P<down>.+))?$")


@dataclass(frozen=True)
class KillPlan:
    """Kill ``node`` ``at_s`` seconds after every node is up; restart it ``down_s`` seconds
    after the kill (None: never)."""

    node: str
    at_s: float
    down_s: float | None = None


def _seconds(text: str, what: str, option: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(
            f"--kill {option!r}: {what} must be a number of seconds > 0, got {text!r}"
        )
    return x


def parse_kill(text: str, nodes: Sequence[str], *, duration_s: float | None = None) -> KillPlan:
    """``NODE@T[+R]`` as a :class:`KillPlan`, checked against the federation's ``nodes`` and
    the run's ``duration_s`` (the kill must fall inside the run).

    Raises
    ------
    ConfigError
        Not of that form, an unknown node, a time not > 0, or a kill at or after the end.

    >>> parse_kill("a@10", ["a"])
    KillPlan(node='a', at_s=10.0, down_s=None)
    >>> parse_kill("x@10", ["a", "b"])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: --kill 'x@10': no node 'x' in the federation (its nodes: a, b)
    >>> parse_kill("a@10+0", ["a"])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: --kill 'a@10+0': the restart delay R must be a number of seconds > 0, got '0'
    """
    m = _KILL.match(text.strip())
    if m is None:
        raise ConfigError(
            f"--kill {text!r}: expected NODE@T or NODE@T+R (kill NODE T s after every node is up, "
            "restart it R s later), e.g. c@60+20"
        )
    node = m["node"].strip()
    if node not in nodes:
        raise ConfigError(
            f"--kill {text!r}: no node {node!r} in the federation (its nodes: {', '.join(nodes)})"
        )
    at = _seconds(m["at"].strip(), "the kill time T", text)
    down = None if m["down"] is None else _seconds(m["down"].strip(), "the restart delay R", text)
    if duration_s is not None and at >= duration_s:
        raise ConfigError(
            f"--kill {text!r}: the kill at {at:g} s falls after the run's end (--duration "
            f"{duration_s:g})"
        )
    return KillPlan(node=node, at_s=at, down_s=down)


class KillRecord:
    """When to kill and restart (:meth:`due`), and what happened (:meth:`note`,
    :meth:`observe`, :meth:`summary`). Times ``*_at_s`` are seconds since every node was up;
    ``*_wall`` Unix seconds."""

    def __init__(self, plan: KillPlan) -> None:
        self.plan = plan
        self.killed_at_s: float | None = None
        self.killed_wall: float | None = None
        self.restarted_at_s: float | None = None
        self.restarted_wall: float | None = None
        self.log_ends: dict[str, int] = {}
        self.lost_seen_at_s: float | None = None
        self.alive_again_at_s: float | None = None
        self.caught_up_at_s: float | None = None
        self.catch_up: dict[str, Any] | None = None

    @property
    def down(self) -> bool:
        """Killed and not restarted yet."""
        return self.killed_at_s is not None and self.restarted_at_s is None

    def due(self, elapsed_s: float) -> str | None:
        """``"kill"``, ``"restart"`` or None: what to do ``elapsed_s`` after every node is up."""
        if self.killed_at_s is None:
            return "kill" if elapsed_s >= self.plan.at_s else None
        if self.down and self.plan.down_s is not None:
            return "restart" if elapsed_s >= self.killed_at_s + self.plan.down_s else None
        return None

    def note(
        self, event: str, elapsed_s: float, *, wall: float, log_ends: Mapping[str, int] = {}
    ) -> None:
        """Record the kill or the restart (with the node's input logs' ends at that moment)."""
        if event == "kill":
            self.killed_at_s, self.killed_wall = round(elapsed_s, 1), wall
        elif event == "restart":
            self.restarted_at_s, self.restarted_wall = round(elapsed_s, 1), wall
            self.log_ends = dict(log_ends)
        else:
            raise ConfigError(f"event must be 'kill' or 'restart', got {event!r}")

    def observe(
        self,
        elapsed_s: float,
        *,
        lost: bool,
        status: Mapping[str, Any] | None,
        final: bool = False,
    ) -> None:
        """One second of the run: whether the coordinator shows the node lost, and its status
        file. Records when it was first seen lost after the kill, alive again after the
        restart (a status written by the new process and the coordinator hearing it), and
        caught up (:func:`caught_up`). ``final``: the status the node wrote as it stopped
        (only the catch-up is judged again).

        >>> rec = KillRecord(KillPlan("c", 5.0, 5.0))
        >>> rec.note("kill", 5.0, wall=100.0); rec.observe(9.0, lost=True, status=None)
        >>> rec.note("restart", 10.0, wall=105.0, log_ends={"t/0": 3})
        >>> st = {"t": 120.0, "intervals": 2, "queries": [
        ...     {"name": "q.in", "role": "link", "committed": {"t/0": 4}, "done_s": 119.0}]}
        >>> rec.observe(31.0, lost=False, status=st)
        >>> rec.lost_seen_at_s, rec.alive_again_at_s, rec.caught_up_at_s
        (9.0, 31.0, 31.0)
        """
        if self.killed_at_s is None:
            return
        if lost and self.lost_seen_at_s is None:
            self.lost_seen_at_s = round(elapsed_s, 1)
        if self.restarted_wall is None or status is None:
            return
        if float(status.get("t") or 0.0) <= self.restarted_wall or not status.get("intervals"):
            return  # the killed process's last status, or the new one not deciding yet
        if not lost and self.alive_again_at_s is None and not final:
            self.alive_again_at_s = round(elapsed_s, 1)
        self.catch_up = caught_up(status, self.log_ends, self.restarted_wall)
        if self.catch_up["caught_up"] and self.caught_up_at_s is None and not final:
            self.caught_up_at_s = round(elapsed_s, 1)

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` keeps under ``kill``."""
        return {
            "node": self.plan.node,
            "at_s": self.plan.at_s,
            "down_s": self.plan.down_s,
            "killed_at_s": self.killed_at_s,
            "killed_wall": self.killed_wall,
            "lost_seen_at_s": self.lost_seen_at_s,
            "restarted_at_s": self.restarted_at_s,
            "restarted_wall": self.restarted_wall,
            "alive_again_at_s": self.alive_again_at_s,
            "log_ends_at_restart": self.log_ends,
            "caught_up_at_s": self.caught_up_at_s,
            "caught_up": None if self.catch_up is None else self.catch_up["caught_up"],
            "catch_up": self.catch_up,
        }


def caught_up(
    status: Mapping[str, Any], log_ends: Mapping[str, int], restarted_wall: float
) -> dict[str, Any]:
    """Whether a restarted node decided every offset of its input that existed at its restart.

    ``status``: the node's status file (:func:`spillway.spark.fed_node.node_status`): per
    query ``committed`` (a log's partitions, ``topic/partition``: the end of the last batch
    Spark acknowledged) and ``done_s`` (Unix seconds: every window before it decided, None
    before any batch). ``log_ends``: each input partition's end offset when the node was
    restarted. Caught up when every partition's committed end reached its end at the restart
    and every query of generated sources was decided past the restart (the tuples that arrived
    while it was down all decided: kept, or counted shed in the offset log); per source
    ``past_restart_s``: how far past the restart (s, negative: short of it).

    >>> st = {"queries": [{"name": "q.f", "role": "sources", "done_s": 101.0},
    ...                   {"name": "q.f.in", "role": "link", "done_s": 99.0,
    ...                    "committed": {"t/0": 12, "t/1": 5}}]}
    >>> got = caught_up(st, {"t/0": 12, "t/1": 6}, 100.0)
    >>> got["caught_up"], got["partitions"]["t/1"], got["sources"]
    (False, {'end_at_restart': 6, 'committed': 5, 'behind': 1}, {'q.f': {'past_restart_s': 1.0, 'behind_s': 0.0}})
    """
    committed: dict[str, int] = {}
    sources: dict[str, dict[str, float | None]] = {}
    for q in status.get("queries", []):
        committed.update({k: int(v) for k, v in (q.get("committed") or {}).items()})
        if q.get("role") == "sources":
            done = q.get("done_s")  # relative to the restart: Unix times do not survive rounding
            past = None if done is None else round(float(done) - restarted_wall, 3)
            behind = None if past is None else max(-past, 0.0)
            sources[q["name"]] = {"past_restart_s": past, "behind_s": behind}
    parts = {}
    for tp, end in sorted(log_ends.items()):
        got = committed.get(tp)
        parts[tp] = {
            "end_at_restart": int(end),
            "committed": got,
            "behind": None if got is None else max(int(end) - got, 0),
        }
    ok = all(p["behind"] == 0 for p in parts.values()) and all(
        s["behind_s"] == 0.0 for s in sources.values()
    )
    return {"caught_up": ok, "partitions": parts, "sources": sources}


__all__ = ["KillPlan", "KillRecord", "caught_up", "parse_kill"]
