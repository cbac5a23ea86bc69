"""Seeded node configs for the property suite: the configs a new user might write.

Each config is a pure function of its index: kinds, window lengths, rates, profiles, every
policy, and an overload factor between 0.5 and 3 (or none: rates as written, nothing shed). CoD
above 2x overload is left out (its stability at high overload belongs to the real-streams work).
"""

from __future__ import annotations

import numpy as np

from spillway.config import NodeConfig, QuerySpec

KINDS = ("avg", "max", "count", "avg_all", "top5", "cov", "group_avg")
FEEDS = {
    "avg": ("gaussian", "uniform", "exponential", "mixed"),
    "max": ("gaussian", "uniform", "exponential", "mixed"),
    "count": ("gaussian", "uniform", "exponential", "mixed"),
    "avg_all": ("cluster",),
    "top5": ("cluster",),
    "cov": ("cluster",),
    "group_avg": ("taxi", "tasks"),
}
PROFILES = ("constant", "constant", "step", "bursty", "pareto")
POLICIES = ("random", "balance-sic", "uniform", "cod")
OVERLOADS = (None, None, 0.5, 1.0, 2.0, 3.0)
WINDOWS = (0.5, 1.0, 2.0)

#: Every config streams this long after its start (calibration comes first when overloaded).
DURATION_S = 14.0


def _profile(name: str, rng: np.random.Generator) -> dict[str, object]:
    if name == "step":
        return {"times": [float(rng.integers(4, 8))], "factors": [float(rng.choice([0.5, 2.0]))]}
    if name == "bursty":
        return {"fraction": 0.2, "factor": 4.0}
    if name == "pareto":
        return {"alpha": 1.5, "spread": 4.0}
    return {}


def property_config(index: int) -> NodeConfig:
    """The ``index``-th config of the suite (deterministic).

    >>> property_config(3) == property_config(3)
    True
    >>> len({property_config(i).policy for i in range(8)})
    4
    """
    rng = np.random.default_rng(np.random.SeedSequence([20261126, index]))
    policy = POLICIES[index % len(POLICIES)]
    overload = OVERLOADS[int(rng.integers(len(OVERLOADS)))]
    if policy == "cod" and overload is not None and overload > 2.0:
        overload = 2.0
    trigger = float(rng.choice([0.5, 1.0]))
    queries = []
    for j in range(int(rng.integers(1, 5))):
        kind = str(rng.choice(KINDS))
        window = max(float(rng.choice(WINDOWS)), trigger / 2)
        profile = str(rng.choice(PROFILES))
        sources = {"avg_all": 10, "top5": 20, "cov": 2}.get(kind, 1)
        queries.append(
            QuerySpec(
                name=f"q{j}-{kind}",
                kind=kind,
                feed=str(rng.choice(FEEDS[kind])),
                rate=float(rng.choice([100.0, 400.0, 1000.0])) / sources,
                window_s=window,
                profile=profile,
                profile_options=_profile(profile, rng),
            )
        )
    return NodeConfig(
        queries=tuple(queries),
        policy=policy,
        seed=index,
        trigger_s=trigger,
        stw_s=4.0,
        overload=overload,
        calibrate_s=2.0,
    )
