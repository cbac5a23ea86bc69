from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds.inputs import INPUTS, SD_P_CLASS1_RANGES, stream_input


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_input_builds_and_counts_independently_of_anything_else(name):
    p = INPUTS[name].build(n_sources=3, seed=2)
    counts = np.array([p.count(t) for t in np.linspace(0, 120, 241)])
    assert counts.dtype == np.int64 and (np.diff(counts, axis=0) >= 0).all()
    again = INPUTS[name].build(n_sources=3, seed=2)  # a pure function of the settings and time
    assert np.array_equal(again.count(77.7), p.count(77.7))
    assert INPUTS[name].description


def test_s_c_and_s_step_rates():
    sc = INPUTS["S_c"].build()
    assert (sc.count(30.0) - sc.count(20.0)).tolist() == [3500]
    step = INPUTS["S_step"].build()
    per_second = [int(step.count(t + 1.0)[0] - step.count(t)[0]) for t in (5.0, 20.0, 60.0, 450.0)]
    assert per_second == [200, 300, 400, 1400]


def test_sd_p_class_ranges_and_cycle():
    for name, (low, high) in (("SD_p-2", (800, 1300)), ("SD_p-3", (300, 800))):
        p = INPUTS[name].build(n_sources=13, seed=1)
        r = p.slot_rates(np.arange(13)[:, None], np.arange(2000)[None, :])
        assert r.min() >= low - 1e-9 and r.max() <= high + 1e-9
        assert p.slot_s == 0.15
    c1 = INPUTS["SD_p-1"].build()
    epochs = [c1.slot_rates(np.array(0), np.arange(k * 334, k * 334 + 300)) for k in range(8)]
    for (low, high), r in zip(SD_P_CLASS1_RANGES, epochs, strict=True):
        assert r.min() >= low - 1e-9 and r.max() <= high + 1e-9


def test_scale_multiplies_every_rate():
    full, tenth = INPUTS["S_c"].build(), INPUTS["S_c"].build(scale=0.1)
    assert (full.count(100.0) // 10).tolist() == tenth.count(100.0).tolist()
    with pytest.raises(ConfigError, match="scale must be a finite number > 0, got 0"):
        INPUTS["S_c"].build(scale=0)


def test_unknown_input():
    with pytest.raises(UnknownNameError, match="unknown input stream 'SD_x'"):
        stream_input("SD_x")
    assert stream_input("SD_c").rate == 950.0
