from __future__ import annotations

import numpy as np
import pytest

from spillway.control.delay_control import controller_output, gains_for_pole
from spillway.errors import ConfigError


@pytest.mark.parametrize("pole", [0.0, 0.3, 0.5, 0.7, 0.9])
def test_closed_loop_poles_are_where_placed(pole):
    a, b0, b1 = gains_for_pole(pole)
    assert a == -1.0
    # negative-feedback gains are the opposites; plant 1/(H(z-1)): (z-1)^2 + b0' z + b1'
    roots = np.roots([1.0, -b0 - 2.0, 1.0 - b1])
    assert np.allclose(np.sort(np.abs(roots)), [pole, pole], atol=1e-6)


def test_default_pole_is_stable_with_a_one_period_lag():
    a, b0, b1 = gains_for_pole(0.7)
    lagged = np.roots([1.0, -2.0, 1.0 - b0, -b1])  # plant 1/(H z (z-1))
    assert np.abs(lagged).max() < 0.85
    a5, b05, b15 = gains_for_pole(0.5)
    assert np.abs(np.roots([1.0, -2.0, 1.0 - b05, -b15])).max() > 1.0  # why 0.7 is the default


def test_the_loop_settles_on_the_target_whatever_the_headroom_error():
    """Integral action: a wrong H leaves no steady offset of the estimate (SEaMLeSS needs it)."""
    a, b0, b1 = gains_for_pole(0.7)
    h_model, h_true, target, period = 1.2, 1.0, 2.0, 0.5
    queue, e_prev, u_prev = 0.0, 0.0, 0.0
    for _ in range(200):
        y = queue / h_model
        e = y - target
        u = controller_output(h_model, e, e_prev, u_prev, a, b0, b1)
        queue = max(0.0, queue + u + (h_model - h_true) * period)
        e_prev, u_prev = e, u
    assert queue / h_model == pytest.approx(target, rel=1e-6)


@pytest.mark.parametrize("pole", [-0.1, 1.0, float("nan")])
def test_bad_pole_is_refused(pole):
    with pytest.raises(ConfigError, match=r"pole must be a finite number >= 0 and < 1"):
        gains_for_pole(pole)
