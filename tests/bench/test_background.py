"""Background load: the burn pattern (pure) and the worker process it runs."""

from __future__ import annotations

import time

import pytest

from spillway.bench.background import BackgroundLoad, BurnPattern, burn
from spillway.errors import ConfigError, SpillwayError


def test_pattern_errors_name_the_setting():
    with pytest.raises(ConfigError, match="start_s must be a finite number >= 0"):
        BurnPattern(start_s=-1)
    with pytest.raises(ConfigError, match="off_s must be a finite number >= 0"):
        BurnPattern(off_s=float("nan"))
    with pytest.raises(ConfigError, match="workers must be an int >= 1"):
        BurnPattern(workers=0)
    with pytest.raises(ConfigError, match="until_s must be a finite number > 0"):
        BackgroundLoad(BurnPattern(), until_s=0)


def test_on_off_pattern_and_its_burn_fraction():
    p = BurnPattern(start_s=1.0, on_s=1.0, off_s=3.0)
    assert [p.burning_at(t) for t in (0.5, 1.5, 2.5, 5.2)] == [False, True, False, True]
    assert p.burn_fraction(1.0, 9.0) == pytest.approx(0.25)
    assert BurnPattern(start_s=2.0).burn_fraction(0.0, 4.0) == pytest.approx(0.5)
    assert p.burn_fraction(3.0, 3.0) == 0.0


def test_burn_spends_cpu_only_while_the_pattern_burns():
    p = BurnPattern(start_s=0.1, on_s=0.1, off_s=0.1)
    c0 = time.process_time()
    burnt = burn(p, 0.5)
    used = time.process_time() - c0
    assert 0.1 <= burnt <= 0.3  # two on-phases of 0.1 s in 0.5 s (slices of 10 ms)
    assert used == pytest.approx(burnt, abs=0.1)


def test_the_worker_process_runs_and_stops():
    load = BackgroundLoad(BurnPattern(on_s=0.05, off_s=0.05), until_s=30.0)
    with load:
        procs = list(load._procs)
        assert len(procs) == 1 and procs[0].poll() is None
        with pytest.raises(SpillwayError, match="already running"):
            load.start()
    assert procs[0].poll() is not None  # stopped on exit, long before until_s
