from __future__ import annotations

import math
import time

import pytest

from spillway.errors import ConfigError
from spillway.feeds.background import PHAM_PATTERNS, BackgroundLoad, BackgroundSchedule


def test_pham_patterns_start_at_100_s():
    s = BackgroundSchedule()
    on = s.on_intervals(math.inf)
    assert on[0] == (100.0, 110.0) and on[2] == (140.0, 150.0)  # 10 s on / 10 s off
    assert (160.0, 165.0) in on and (220.0, 222.0) in on and (280.0, 281.0) in on
    assert on[-1] == (338.0, 339.0) and s.end_s == 340.0
    per_phase = [
        sum(min(e, b + 60) - max(a, b) for a, e in on if b <= a < b + 60)
        for b in (100.0, 160.0, 220.0, 280.0)
    ]
    assert per_phase == pytest.approx([30.0, 30.0, 30.0, 30.0])  # half of every phase is on
    assert PHAM_PATTERNS[0] == (10.0, 10.0, 60.0)


def test_is_on_agrees_with_the_intervals():
    s = BackgroundSchedule(start_s=3.0, phases=((2.0, 1.0, 7.0), (0.5, 0.5, 2.0)), then_on=True)
    on = s.on_intervals(20.0)
    for i in range(2000):
        t = i * 0.01
        assert s.is_on(t) == any(a <= t < b for a, b in on), t
    assert on[-1] == (12.0, math.inf)


def test_no_off_time_merges_into_one_interval():
    s = BackgroundSchedule(start_s=1.0, phases=((1.0, 0.0, 3.0),))
    assert s.on_intervals(10.0) == [(1.0, 4.0)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start_s": -1.0}, "start_s must be a finite number >= 0, got -1.0"),
        ({"phases": ((1.0, 1.0),)}, r"phases\[0\] must be \(on_s, off_s, duration_s\)"),
        ({"phases": ((0.0, 1.0, 5.0),)}, r"phases\[0\] on_s must be a finite number > 0, got 0.0"),
        ({"phases": ((1.0, -1.0, 5.0),)}, r"phases\[0\] off_s must be a finite number >= 0"),
        ({"jobs": 0}, "jobs must be an int >= 1, got 0"),
        ({"then_on": 1}, "then_on must be true or false, got 1"),
    ],
)
def test_schedule_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        BackgroundSchedule(**kwargs)


def wait_until(epoch: float, t: float) -> None:
    time.sleep(max(0.0, epoch + t - time.monotonic()))


def test_burns_cpu_while_on_and_not_while_off_then_ends_by_itself():
    """One burner: off [0, 1.5), on [1.5, 2.3), off [2.3, 3.1): measured by its own CPU time.

    The first on-phase leaves the spawned process 1.5 s to start and import spillway.
    """
    schedule = BackgroundSchedule(start_s=1.5, phases=((0.8, 0.8, 1.6),))
    epoch = time.monotonic()
    load = BackgroundLoad(schedule).start(epoch)
    try:
        wait_until(epoch, 1.45)
        before = load.cpu_seconds()
        wait_until(epoch, 2.35)
        on = load.cpu_seconds() - before
        wait_until(epoch, 3.0)
        off = load.cpu_seconds() - before - on
        # a shared 2-core machine may give the burner less than a whole core
        assert on >= 0.3, f"burned only {on:.3f} s of CPU in a 0.8 s on-phase"
        assert off <= 0.08, f"burned {off:.3f} s of CPU in an off-phase"
        deadline = time.monotonic() + 5.0
        while load.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not load.running  # past end_s with then_on=False: the process exits
    finally:
        load.stop()


def test_stop_ends_a_burner_that_is_on_and_joins_it():
    load = BackgroundLoad(BackgroundSchedule(start_s=0.0, phases=(), then_on=True, jobs=2))
    with load:
        pids = load.pids
        assert len(pids) == 2
        deadline = time.monotonic() + 10.0  # spawned: wait until they burn
        while load.cpu_seconds() < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ConfigError, match="already runs"):
            load.start()
        started = time.monotonic()
    assert time.monotonic() - started < 2.0
    assert not load.running and load.pids == []
    used = load.cpu_seconds()
    assert used >= 0.2
    time.sleep(0.2)
    assert load.cpu_seconds() == used
    load.stop()  # a second stop is harmless
