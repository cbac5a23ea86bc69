"""Processes as Linux's ``/proc`` shows them: state, parent, CPU time and descendants.

One parser of ``/proc/PID/stat`` for everything that measures processes (the exact job's CPU
cost, the node's cgroups, the scripts that sample CPU). The line is ``pid (comm) state ppid
...``; ``comm`` may hold spaces and parentheses, so the fields are counted from the last ``)``.
Where there is no ``/proc`` (macOS) or a process ended meanwhile, a reader returns None or
leaves the process out.

>>> s = parse_stat("42 (a) b) (c) S 7 1 1 0 -1 0 0 0 0 0 250 50 10 5 20 0 1 0 99 0 0")
>>> s.pid, s.comm, s.state, s.ppid, s.start_ticks
(42, 'a) b) (c', 'S', 7, 99)
>>> round(s.cpu_s * TICKS), round(s.children_cpu_s * TICKS)
(300, 15)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

#: Where the kernel shows its processes.
PROC = Path("/proc")

#: Clock ticks a second (the unit of the CPU fields of ``/proc/PID/stat``).
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcStat:
    """One process's ``/proc/PID/stat``.

    Attributes
    ----------
    pid, ppid : the process and its parent.
    comm : its command name (as the kernel truncates it).
    state : one letter (``R`` running, ``S`` sleeping, ``Z`` zombie, ...).
    cpu_s : user plus system CPU seconds of the process (all its threads).
    children_cpu_s : user plus system CPU seconds of its children it has waited for.
    start_ticks : when it started, in clock ticks since boot.
    """

    pid: int
    comm: str
    state: str
    ppid: int
    cpu_s: float
    children_cpu_s: float
    start_ticks: int


def parse_stat(text: str) -> ProcStat:
    """The fields of a ``/proc/PID/stat`` line (see the module's example).

    Raises
    ------
    ValueError
        Not such a line.
    """
    head, sep, tail = text.rpartition(")")
    pid, _, comm = head.partition(" (")
    rest = tail.split()
    if not sep or len(rest) < 20:
        raise ValueError(f"not a /proc/PID/stat line: {text[:80]!r}")
    return ProcStat(
        pid=int(pid),
        comm=comm,
        state=rest[0],
        ppid=int(rest[1]),
        cpu_s=(int(rest[11]) + int(rest[12])) / TICKS,
        children_cpu_s=(int(rest[13]) + int(rest[14])) / TICKS,
        start_ticks=int(rest[19]),
    )


def read_stat(pid: int, proc: Path = PROC) -> ProcStat | None:
    """Process ``pid``'s stat, or None when it cannot be read (gone, no ``/proc``).

    >>> read_stat(os.getpid()).pid == os.getpid()
    True
    >>> read_stat(-1) is None
    True
    """
    try:
        return parse_stat((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def all_stats(proc: Path = PROC) -> dict[int, ProcStat]:
    """Every process's stat, by pid (empty without ``/proc``).

    >>> os.getpid() in all_stats()
    True
    """
    try:
        names = [e.name for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return {}
    stats = (read_stat(int(n), proc) for n in names)
    return {s.pid: s for s in stats if s is not None}


def process_tree(
    pid: int, proc: Path = PROC, *, stats: dict[int, ProcStat] | None = None
) -> list[int]:
    """``pid`` and every process descended from it (by each process's parent), parents
    before their children; processes that end meanwhile are left out. ``stats``: a snapshot
    of :func:`all_stats` to walk instead of reading ``proc``.

    >>> os.getpid() in process_tree(os.getpid())
    True
    """
    stats = all_stats(proc) if stats is None else stats
    children: dict[int, list[int]] = {}
    for s in stats.values():
        children.setdefault(s.ppid, []).append(s.pid)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(sorted(children.get(p, []), reverse=True))
    return out


def tree_cpu_s(root: int | None = None, proc: Path = PROC) -> float:
    """CPU seconds (user + system, with the children each has waited for) of process ``root``
    (default this one) and every live descendant. NaN where ``/proc`` cannot be read.

    >>> cpu = tree_cpu_s()
    >>> math.isnan(cpu) or cpu > 0
    True
    """
    root = os.getpid() if root is None else root
    stats = all_stats(proc)
    if root not in stats:
        return math.nan
    tree = process_tree(root, stats=stats)
    return float(sum(stats[p].cpu_s + stats[p].children_cpu_s for p in tree if p in stats))


__all__ = [
    "PROC",
    "TICKS",
    "ProcStat",
    "all_stats",
    "parse_stat",
    "process_tree",
    "read_stat",
    "tree_cpu_s",
]
