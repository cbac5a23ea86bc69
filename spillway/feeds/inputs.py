"""The input streams of Pham's thesis as named rate profiles.

Each :class:`StreamInput` names a profile of :data:`spillway.feeds.profiles.PROFILES` with the
thesis's rates (tuples per second per stream); :meth:`StreamInput.build` makes the profile,
``scale`` multiplying every rate (Spark runs at other throughputs than AQSIOS). Arrivals are
pure functions of time, so the count of tuples that arrived never depends on how far
processing got (Pham §4.4, footnote 4).

================  ==============================================================================
name              definition (Pham section)
================  ==============================================================================
``S_c``           200 t/s for 10 s, then 350 t/s (§4.3.1): a step into overload, not a ramp
``S_step``        200 t/s for 10 s, then +100 t/s every 40 s, 12 steps (§5.3.1; the step size is
                  not given: chosen so the rate passes 1,000 t/s, where §5.3.2.6 sees H fall)
``S_r``           packet-trace-like pattern around 250 t/s (stand-in for LBL-PKT-4, Fig. 7)
``SD_c``          950 t/s on every stream (§6.2.1)
``SD_p-1``        Pareto per 150 ms cycle, shape 1, the range changing every 50 s (Fig. 24; the
                  ranges are not in the text: chosen to vary class 1's spare capacity)
``SD_p-2``        Pareto per cycle in [800, 1300], shape 1
``SD_p-3``        Pareto per cycle in [300, 800], shape 1
``SD_r-1``        class 1 of SD_r: the S_r pattern
``probe``         5,000 t/s, +5,000 every 20 s (Fig. 13's capacity probe)
================  ==============================================================================

Examples
--------
>>> p = INPUTS["S_c"].build()
>>> p.count(10.0).tolist(), p.count(12.0).tolist()      # 200 · 10, then + 350 · 2
([2000], [2700])
>>> import numpy as np
>>> q = INPUTS["SD_p-3"].build(n_sources=2, seed=1)
>>> r = q.slot_rates(np.arange(2)[:, None], np.arange(1000)[None, :])
>>> bool(r.min() >= 300 and r.max() <= 800), INPUTS["SD_p-3"].options["slot_s"]
(True, 0.15)
>>> INPUTS["SD_c"].build(scale=0.1).rate                 # a tenth of the thesis's rate
95.0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spillway.errors import UnknownNameError
from spillway.feeds.options import positive
from spillway.feeds.profiles import Profile, make_profile

#: Pham's load-management cycle in the DILoS experiments (§6.2.1): one Pareto rate per cycle.
CYCLE_S = 0.15

#: Class 1's SD_p ranges (t/s), one per 50 s (the values of Fig. 24 are not in the text).
SD_P_CLASS1_RANGES: tuple[tuple[float, float], ...] = (
    (100.0, 300.0),
    (300.0, 700.0),
    (700.0, 1100.0),
    (900.0, 1300.0),
    (500.0, 900.0),
    (100.0, 400.0),
    (300.0, 800.0),
    (700.0, 1200.0),
)


def _ladder(base: float, step: float, first_s: float, every_s: float, n: int) -> dict[str, Any]:
    times = [first_s + i * every_s for i in range(n)]
    factors = [(base + (i + 1) * step) / base for i in range(n)]
    return {"times": times, "factors": factors}


@dataclass(frozen=True, kw_only=True)
class StreamInput:
    """A named input stream: a profile, its rate (t/s per stream) and its options.

    Parameters
    ----------
    profile : a name in :data:`spillway.feeds.profiles.PROFILES`.
    rate : the profile's ``rate`` at scale 1 (for ``pareto_ranges`` the ranges are relative
        to it, so they are in t/s at ``rate = 1``).
    options : the profile's own settings.
    description : one line for reports.
    """

    profile: str
    rate: float
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def build(self, *, n_sources: int = 1, seed: int = 0, scale: float = 1.0) -> Profile:
        """The profile for ``n_sources`` streams, every rate multiplied by ``scale``.

        Raises
        ------
        ConfigError
            ``scale`` not a finite number > 0, or a bad ``n_sources`` / ``seed``.
        """
        s = positive("scale", scale)
        return make_profile(
            self.profile, n_sources=n_sources, rate=self.rate * s, seed=seed, **dict(self.options)
        )


#: Every input stream of the thesis by name (see the module docstring).
INPUTS: dict[str, StreamInput] = {
    "S_c": StreamInput(
        profile="step",
        rate=200.0,
        options={"times": [10.0], "factors": [1.75]},
        description="200 t/s for 10 s, then 350 t/s (Pham S_c)",
    ),
    "S_step": StreamInput(
        profile="step",
        rate=200.0,
        options=_ladder(200.0, 100.0, 10.0, 40.0, 12),
        description="200 t/s for 10 s, then +100 t/s every 40 s (Pham S_step)",
    ),
    "S_r": StreamInput(
        profile="trace",
        rate=250.0,
        options={},
        description="packet-trace-like rate around 250 t/s (stand-in for Pham S_r)",
    ),
    "SD_c": StreamInput(
        profile="constant",
        rate=950.0,
        description="950 t/s on every stream (Pham SD_c)",
    ),
    "SD_p-1": StreamInput(
        profile="pareto_ranges",
        rate=1.0,
        options={
            "ranges": [list(r) for r in SD_P_CLASS1_RANGES],
            "epoch_s": 50.0,
            "alpha": 1.0,
            "slot_s": CYCLE_S,
        },
        description="Pareto per cycle, range changing every 50 s (Pham SD_p class 1)",
    ),
    "SD_p-2": StreamInput(
        profile="pareto_ranges",
        rate=1.0,
        options={"ranges": [[800.0, 1300.0]], "alpha": 1.0, "slot_s": CYCLE_S},
        description="Pareto per cycle in [800, 1300] t/s (Pham SD_p class 2)",
    ),
    "SD_p-3": StreamInput(
        profile="pareto_ranges",
        rate=1.0,
        options={"ranges": [[300.0, 800.0]], "alpha": 1.0, "slot_s": CYCLE_S},
        description="Pareto per cycle in [300, 800] t/s (Pham SD_p class 3)",
    ),
    "SD_r-1": StreamInput(
        profile="trace",
        rate=250.0,
        options={},
        description="the S_r pattern for class 1 (Pham SD_r)",
    ),
    "probe": StreamInput(
        profile="step",
        rate=5000.0,
        options=_ladder(5000.0, 5000.0, 20.0, 20.0, 9),
        description="5,000 t/s, +5,000 every 20 s (Pham Fig. 13)",
    ),
}


def stream_input(name: str) -> StreamInput:
    """The input stream registered as ``name``.

    Raises
    ------
    UnknownNameError
        ``name`` is not in :data:`INPUTS`.

    >>> stream_input("S_x")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: unknown input stream 'S_x'; known: SD_c, SD_p-1, SD_p-2, SD_p-3, SD_r-1, S_c, S_r, S_step, probe
    """
    try:
        return INPUTS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown input stream {name!r}; known: {', '.join(sorted(INPUTS))}"
        ) from None


__all__ = ["CYCLE_S", "INPUTS", "SD_P_CLASS1_RANGES", "StreamInput", "stream_input"]
