"""scripts/sample_node_cpu.py: a group's CPU seconds and throttled time (no run)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts._load import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("sample_node_cpu")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("nr_periods 10\nnr_throttled 4\nthrottled_time 2500000000\n", 2.5),
     ("usage_usec 9\nnr_throttled 4\nthrottled_usec 1500000\n", 1.5)],
)  # fmt: skip
def test_throttled_time_is_read_in_either_cgroup_version(
    script: ModuleType, tmp_path: Path, text: str, seconds: float
) -> None:
    (tmp_path / "cpu.stat").write_text(text)
    assert script.throttled_s(tmp_path) == seconds


def test_a_groups_cpu_seconds_are_its_processes_user_and_system_time(
    script: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n999999999\n")  # one long gone
    before = script.cpu_seconds(tmp_path)
    t = os.times()
    while os.times().user - t.user < 0.2:  # burn a little CPU
        pass
    assert script.cpu_seconds(tmp_path) - before >= 0.15
