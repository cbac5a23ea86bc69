"""A node's own CPU on a shared machine: a cgroup CPU quota per node process.

THEMIS's nodes are separate machines, each with its own capacity. Several spillway nodes on one
machine share its cores instead, and the share each gets is decided by the kernel's scheduler,
not by the node: measured on 2 cores (three nodes, the broker and the coordinator), what a node
processed moved by up to 2x between runs at the same input while the three nodes' total held
(spark-federation, EXPERIMENTS.md "Runs 7 and 8" with the command), so a node's capacity was
not a property of the node. A ``cpu`` limit in the federation file (cores, e.g. 0.5) gives each node a fixed
CPU quota, as a machine of that size would: its capacity, which the node still measures itself,
no longer depends on what the other nodes do.

The quota is a cgroup's CFS bandwidth limit (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` in
v1) on a group made for the node; the node's process moves itself into the group before it
starts (:func:`limited_argv`: a shell writes its own pid to the group, then ``exec``-s the node),
so its JVM and every other child start inside it. Creating groups needs a writable cgroup CPU
controller (root, or a delegated cgroup v2 subtree): :func:`find_controller` finds one or
returns None, and ``federation up`` then refuses the limit in one line rather than run the
nodes unlimited.

Examples
--------
>>> quota_text(0.5, version=2), quota_text(0.5, version=1), quota_text(1.25, version=2)
('50000 100000', '50000', '125000 100000')
>>> limited_argv(["python", "-m", "spillway.cli"], "/sys/fs/cgroup/cpu/g/cgroup.procs")[:3]
['sh', '-c', 'echo $$ > "$0" && exec "$@"']
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import ConfigError, RunFailedError
from spillway.procfs import PROC

#: The CFS period the quotas are written for (µs): the kernel's default.
PERIOD_US = 100_000

#: Where cgroup hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def check_cores(value: object, where: str) -> float:
    """``value`` as a number of cores > 0 (a finite number), or ConfigError naming ``where``.

    >>> check_cores(0.5, "nodes[0].cpu")
    0.5
    >>> check_cores(0, "nodes[0].cpu")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: nodes[0].cpu must be a number of cores > 0 (e.g. 0.5), got 0
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise ConfigError(f"{where} must be a number of cores > 0 (e.g. 0.5), got {value!r}")
    return float(value)  # type: ignore[arg-type]


def quota_text(cores: float | None, *, version: int) -> str:
    """What the quota file takes for ``cores``: v2 ``cpu.max`` "quota period", v1
    ``cpu.cfs_quota_us`` "quota" (per :data:`PERIOD_US`); None: no limit.

    >>> quota_text(None, version=2), quota_text(None, version=1)
    ('max 100000', '-1')
    """
    if cores is None:
        return f"max {PERIOD_US}" if version == 2 else "-1"
    quota = max(1000, round(cores * PERIOD_US))  # the kernel's floor is 1 ms
    return f"{quota} {PERIOD_US}" if version == 2 else str(quota)


def limited_argv(argv: list[str], procs_file: str | os.PathLike[str]) -> list[str]:
    """``argv`` run by a shell that first moves itself into the group whose ``cgroup.procs``
    is ``procs_file``, then becomes ``argv`` (so the process and all it starts are limited)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs_file), *argv]


@dataclass(frozen=True)
class CpuController:
    """A writable cgroup CPU controller: the folder new groups go in, and its version."""

    root: Path
    version: int

    def make_group(self, name: str, cores: float | None) -> Path:
        """Create (or reuse) the group ``name`` limited to ``cores`` (None: no limit); its
        folder.

        Raises
        ------
        RunFailedError
            The kernel refused the group or its quota (one line, naming the file).
        """
        group = self.root / name
        try:
            group.mkdir(exist_ok=True)
            if self.version == 2:
                (group / "cpu.max").write_text(quota_text(cores, version=2))
            else:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(quota_text(cores, version=1))
        except OSError as e:
            raise RunFailedError(
                f"cannot limit {name} to {cores or 'all'} cores in {str(group)!r}: "
                f"{e.strerror or e}"
            ) from None
        return group

    def weigh(self, group: Path, factor: float) -> None:
        """Give ``group`` ``factor`` times the default CPU weight (v2 ``cpu.weight``, default
        100, 1-10000; v1 ``cpu.shares``, default 1024, at least 2): when the machine is busy,
        groups get CPU time in proportion to their weights (each within its quota)."""
        if self.version == 2:
            name, value = "cpu.weight", min(10_000, max(1, round(100 * factor)))
        else:
            name, value = "cpu.shares", max(2, round(1024 * factor))
        try:
            (group / name).write_text(str(value))
        except OSError as e:
            raise RunFailedError(
                f"cannot set the CPU weight of {str(group)!r}: {e.strerror or e}"
            ) from None

    def group_of(self, pid: int, proc: Path = PROC) -> Path:
        """The group ``pid`` is in, in this controller's hierarchy (from ``/proc/PID/cgroup``:
        v2's ``0::/path`` line, v1's line whose controllers include ``cpu``)."""
        for line in (proc / str(pid) / "cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            mine = controllers == "" if self.version == 2 else "cpu" in controllers.split(",")
            if mine:
                return self.root / path.lstrip("/")
        raise RunFailedError(f"process {pid} is in no cgroup v{self.version} cpu group")

    @staticmethod
    def move(pids: list[int], group: Path) -> None:
        """Put every process of ``pids`` (all its threads) in ``group``; a process that has
        ended meanwhile is skipped."""
        for pid in pids:
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                continue
            except OSError as e:
                raise RunFailedError(
                    f"cannot move process {pid} into {str(group)!r}: {e.strerror or e}"
                ) from None

    @staticmethod
    def members(group: Path) -> list[int]:
        """The processes in ``group`` now."""
        return [int(x) for x in (group / "cgroup.procs").read_text().split()]

    @staticmethod
    def remove_group(group: Path, timeout_s: float = 5.0) -> None:
        """Remove ``group`` once its processes are gone (a group with members cannot be
        removed; it is left after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                group.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.1)


def find_controller(root: Path = CGROUP_ROOT) -> CpuController | None:
    """The CPU controller this process may create groups in, or None.

    cgroup v2 (one hierarchy, ``cpu`` among ``cgroup.controllers``, and enabled for children
    in ``cgroup.subtree_control``), else a v1 ``cpu`` hierarchy (``cpu`` or ``cpu,cpuacct``);
    writable either way.
    """
    v2 = root / "cgroup.controllers"
    with contextlib.suppress(OSError):
        if "cpu" in v2.read_text().split() and os.access(root, os.W_OK):
            enabled = (root / "cgroup.subtree_control").read_text().split()
            if "cpu" in enabled:
                return CpuController(root, 2)
    for name in ("cpu", "cpu,cpuacct"):
        v1 = root / name
        if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
            return CpuController(v1, 1)
    return None


__all__ = [
    "CpuController",
    "PERIOD_US",
    "check_cores",
    "find_controller",
    "limited_argv",
    "quota_text",
]
