"""A node's CPU limit: finding a cgroup controller, writing its quota, entering the group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spillway.errors import RunFailedError
from spillway.federation.cpu import CpuController, find_controller, limited_argv


def _v2(root: Path, subtree: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text(subtree)
    return root


def test_a_v2_hierarchy_with_cpu_enabled_for_children_is_found(tmp_path: Path) -> None:
    assert find_controller(_v2(tmp_path / "a", "cpu memory\n")) == CpuController(tmp_path / "a", 2)
    assert find_controller(_v2(tmp_path / "b", "memory\n")) is None  # cpu not delegated


def test_a_v1_cpu_hierarchy_is_found_and_nothing_else_is(tmp_path: Path) -> None:
    assert find_controller(tmp_path) is None
    (tmp_path / "cpu,cpuacct").mkdir()
    (tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    assert find_controller(tmp_path) == CpuController(tmp_path / "cpu,cpuacct", 1)


@pytest.mark.parametrize(
    ("version", "files"),
    [(2, {"cpu.max": "50000 100000"}),
     (1, {"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"})],
)  # fmt: skip
def test_a_group_gets_the_quota_of_its_cores(tmp_path: Path, version: int, files: dict) -> None:
    group = CpuController(tmp_path, version).make_group("spillway-1-a", 0.5)
    assert group == tmp_path / "spillway-1-a"
    assert {f: (group / f).read_text() for f in files} == files


def test_a_group_the_kernel_refuses_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "spillway-1-a").write_text("")  # a file where the group's folder would go
    with pytest.raises(RunFailedError, match="cannot limit spillway-1-a to 0.5 cores in"):
        CpuController(tmp_path, 1).make_group("spillway-1-a", 0.5)


def test_the_limited_command_enters_the_group_before_it_runs(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"  # a plain file stands in for the group's
    out = subprocess.run(
        limited_argv([sys.executable, "-c", "import os; print(os.getpid())"], procs),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    # the shell wrote its own pid, then became the command: the same process
    assert procs.read_text().strip() == out.stdout.strip()


def _cpu_seconds_of_a_busy_second(argv_of) -> float:
    busy = [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.0: pass"]
    t0 = os.times()
    subprocess.run(argv_of(busy), check=True)
    t1 = os.times()
    return (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)


@pytest.mark.skipif(find_controller() is None, reason="no writable cgroup CPU controller here")
def test_a_process_in_a_limited_group_gets_no_more_than_its_cores() -> None:
    controller = find_controller()
    assert controller is not None
    group = controller.make_group(f"spillway-test-{os.getpid()}-{time.monotonic_ns()}", 0.25)
    try:
        limited = _cpu_seconds_of_a_busy_second(lambda a: limited_argv(a, group / "cgroup.procs"))
        free = _cpu_seconds_of_a_busy_second(lambda a: a)
    finally:
        CpuController.remove_group(group)
    # one busy wall second: about 0.25 CPU s in the group, about 1 s (a core) outside it
    assert limited < 0.45, (limited, free)
    assert free > 2 * limited, (limited, free)
    assert not group.exists()
