"""The feedback controller CTRL and SEaMLeSS share (Pham Eq. 4.3), and its gains.

Both managers estimate the delay ``y`` of the next tuples from what is queued (CTRL Eq. 3.3,
SEaMLeSS Eq. 4.2) and let a controller decide how much may be *added* to the queue in the next
period:

    ``u^k = H · [b0·e^k + b1·e^(k−1)] − a·u^(k−1)``,   ``e^k = y^k − D``      (Pham Eq. 4.3)

The thesis does not give ``a``, ``b0``, ``b1`` ("details … in [76]"); they are derived here.
At decision time ``k`` the queue ``qL^k`` has just been measured, the estimate is
``y^k = qL^k / H`` and the load added in the next period moves it by ``u^k / H``: the plant is
an integrator, ``Y/U = 1 / (H·(z − 1))``. SEaMLeSS's headroom rule ``H ← H·D/D'`` (§4.2.2)
is exact only if the controller drives the *estimate* ``y`` to ``D`` whatever error ``H``
has: a wrong ``H`` adds a constant per-period disturbance ``(H − H_true)·T`` to the queue,
which a controller without integral action leaves as a steady offset of ``y`` (and the outer
loop then oscillates instead of converging). So the controller integrates: ``a = −1``, the
velocity form ``u^k = u^(k−1) + H·(b0·e^k + b1·e^(k−1))``. With the negative-feedback error
``D − y`` and gains ``b0'``, ``b1'`` the closed loop is ``(z − 1)² + b0'·z + b1'``; a double
pole at ``p`` gives ``b0' = 2 − 2p`` and ``b1' = p² − 1``, and Eq. 4.3's error ``y − D`` flips
their signs. The default ``p = 0.7`` (``b0 = −0.6``, ``b1 = 0.51``) keeps every pole inside the
unit circle (about 0.8) also when the statistics lag one period (a micro-batch engine reports a
batch after it ran), where ``p = 0.5`` would not. The realised output, after the drop fraction
is clamped to ``[0, max_drop]``, is fed back as ``u^(k−1)`` (anti-windup): below the target
the integrator does not pile up admission the queue never used.

Examples
--------
>>> a, b0, b1 = gains_for_pole(0.7)
>>> a, round(b0, 2), round(b1, 2)
(-1.0, -0.6, 0.51)
>>> # the estimate is 1 s over a 2 s target at H = 1: the controller asks to remove load
>>> round(controller_output(1.0, 1.0, 0.0, 0.0, a, b0, b1), 2)
-0.6

References
----------
Pham (2016) §3.3.1 (Eq. 3.3) and §4.2.1 (Eqs. 4.2-4.3); Tu et al., "Load shedding in stream
databases: a control-based approach", VLDB 2006.
"""

from __future__ import annotations

from spillway.control.load_manager import check_number


def gains_for_pole(pole: float) -> tuple[float, float, float]:
    """Gains ``(a, b0, b1)`` of Eq. 4.3 (error ``y − D``): integral action, double pole ``pole``.

    Parameters
    ----------
    pole : the closed-loop pole, in [0, 1): 0 is dead-beat, closer to 1 is slower and smoother.

    Raises
    ------
    ConfigError
        ``pole`` outside [0, 1).

    >>> gains_for_pole(0.0)                   # dead-beat: u = u_prev − H·(2e − e_prev)
    (-1.0, -2.0, 1.0)
    """
    p = check_number("pole", pole, low=0, high=1, high_ok=False)
    return (-1.0, -(2.0 - 2.0 * p), 1.0 - p * p)


def controller_output(
    headroom: float,
    error: float,
    previous_error: float,
    previous_output: float,
    a: float,
    b0: float,
    b1: float,
) -> float:
    """Eq. 4.3: ``H · (b0·e + b1·e_prev) − a·u_prev``.

    >>> controller_output(2.0, -1.0, 0.0, 0.0, -1.0, -0.6, 0.51)   # below target: may add
    1.2
    """
    return headroom * (b0 * error + b1 * previous_error) - a * previous_output
