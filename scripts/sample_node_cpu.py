"""Every 5 s, the CPU the experiments' node and input groups used, and the node's throttling.

Usage (beside a run with ``node_cpu``, e.g. ``scripts/profile_kafka_batch.py --node-cpu 1.0``)::

    .venv/bin/python scripts/sample_node_cpu.py > cpu.log &

Prints one line per group (``spillway-node-*``: the node; ``spillway-input-*``: the producers)
and 5 s: the cores its processes used (their user and system time from ``/proc/PID/stat``,
threads included) and the seconds its threads waited throttled by the quota (``cpu.stat``).
Reads a cgroup v1 ``cpu`` hierarchy (``/sys/fs/cgroup/cpu``) or v2 (``/sys/fs/cgroup``).
"""

from __future__ import annotations

import time
from pathlib import Path

from spillway.federation.cpu import find_controller
from spillway.procfs import read_stat


def cpu_seconds(group: Path) -> float:
    """User and system CPU seconds of the processes in ``group`` now."""
    stats = (read_stat(int(pid)) for pid in (group / "cgroup.procs").read_text().split())
    return sum(s.cpu_s for s in stats if s is not None)


def throttled_s(group: Path) -> float:
    """Seconds the group's threads have waited throttled (v1 ``throttled_time`` in ns, v2
    ``throttled_usec``)."""
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    if "throttled_usec" in stat:
        return int(stat["throttled_usec"]) / 1e6
    return int(stat.get("throttled_time", 0)) / 1e9


def main() -> None:
    controller = find_controller()
    if controller is None:
        raise SystemExit("no writable cgroup CPU controller here")
    last: dict[Path, tuple[float, float, float]] = {}
    while True:
        now = time.monotonic()
        for group in sorted(controller.root.glob("spillway-*")):
            try:
                used, waited = cpu_seconds(group), throttled_s(group)
            except OSError:
                last.pop(group, None)
                continue
            if group in last:
                t0, u0, w0 = last[group]
                print(f"{time.time():.0f} {group.name} cores={(used - u0) / (now - t0):.2f} "
                      f"throttled_s={waited - w0:.2f}", flush=True)  # fmt: skip
            last[group] = (now, used, waited)
        time.sleep(5.0)


if __name__ == "__main__":
    main()
