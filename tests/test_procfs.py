"""One parser of /proc/PID/stat: names with spaces and parentheses, CPU fields, process trees
and their CPU, and a /proc that is missing or changes underneath."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spillway.procfs import TICKS, all_stats, parse_stat, process_tree, read_stat, tree_cpu_s


def _line(pid: int, comm: str, ppid: int, state: str = "S", ticks=(0, 0, 0, 0)) -> str:
    """A /proc/PID/stat line as the kernel writes it (52 fields), CPU ticks in fields 14-17."""
    utime, stime, cutime, cstime = ticks
    rest = [state, ppid, 1, 1, 0, -1, 4194560, 0, 0, 0, 0, utime, stime, cutime, cstime]
    rest += [20, 0, 1, 0, 12345] + [0] * 32
    return f"{pid} ({comm}) " + " ".join(map(str, rest)) + "\n"


def _proc(root: Path, pid: int, ppid: int, comm: str = "python", ticks=(0, 0, 0, 0)) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "stat").write_text(_line(pid, comm, ppid, ticks=ticks))


def test_a_process_tree_follows_parents_whatever_the_command_name(tmp_path: Path) -> None:
    _proc(tmp_path, 10, 1)
    _proc(tmp_path, 11, 10, "java) S 99 (odd")  # a name with spaces and parentheses
    _proc(tmp_path, 12, 11)
    _proc(tmp_path, 13, 1)  # not a descendant
    (tmp_path / "self").mkdir()  # not a process folder
    assert process_tree(10, proc=tmp_path) == [10, 11, 12]
    assert process_tree(13, proc=tmp_path) == [13]
    assert read_stat(11, tmp_path).comm == "java) S 99 (odd"  # type: ignore[union-attr]


def test_the_cpu_of_a_tree_adds_its_processes_and_their_reaped_children(tmp_path: Path) -> None:
    _proc(tmp_path, 10, 1, ticks=(TICKS, TICKS, 0, 0))  # 2 s
    _proc(tmp_path, 11, 10, ticks=(TICKS // 2, 0, TICKS, 0))  # 0.5 s + a reaped child's 1 s
    _proc(tmp_path, 13, 1, ticks=(5 * TICKS, 0, 0, 0))  # not in the tree
    assert tree_cpu_s(10, tmp_path) == pytest.approx(3.5)
    assert math.isnan(tree_cpu_s(99, tmp_path))  # no such process
    assert math.isnan(tree_cpu_s(10, tmp_path / "nope"))  # no /proc at all


def test_a_stat_line_that_is_not_one_is_refused_and_read_as_gone(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a /proc/PID/stat line"):
        parse_stat("12 (python S 1")
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "stat").write_text("garbage")
    assert read_stat(12, tmp_path) is None and all_stats(tmp_path) == {}
    assert parse_stat(_line(7, "z", 1, state="Z")).state == "Z"


def test_the_cpu_of_a_real_busy_child_is_counted_in_its_parent_s_tree() -> None:
    before = tree_cpu_s()
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    child = subprocess.Popen([sys.executable, "-c", busy + "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            stat = read_stat(child.pid)
            if stat is not None and stat.cpu_s >= 0.5:
                break
            time.sleep(0.05)
        assert child.pid in process_tree(os.getpid())
        assert tree_cpu_s() - before >= 0.45
    finally:
        child.kill()
        child.wait()


def test_the_cpu_of_this_process_grows_as_it_works() -> None:
    before = tree_cpu_s()
    sum(i * i for i in range(300_000))
    assert tree_cpu_s() > before > 0
    assert math.isnan(tree_cpu_s(root=10**9))  # no such process
