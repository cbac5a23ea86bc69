"""Checks shared by feeds and profiles: option names, numbers, sources and tuple indices.

Every message names the setting, the rule, the value received and what to do, in one line.

Examples
--------
>>> positive("rate", 400)
400.0
>>> positive("rate", -1)
Traceback (most recent call last):
...
spillway.errors.ConfigError: rate must be a finite number > 0, got -1
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

import numpy as np

from spillway.errors import ConfigError, UnknownNameError

T = TypeVar("T")


def positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """``value`` as a float, checked finite and > 0 (>= 0 with ``allow_zero``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {rule}, got {value!r}")
    return float(value)


def in_range(name: str, value: Any, low: float, high: float) -> float:
    """``value`` as a float, checked to be a number in ``[low, high]``.

    >>> in_range("drift", 0.3, 0.0, 0.5)
    0.3
    >>> in_range("drift", 0.6, 0.0, 0.5)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: drift must be a number in [0, 0.5], got 0.6
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or not low <= value <= high:
        raise ConfigError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def count_of(name: str, value: Any, *, low: int = 1) -> int:
    """``value`` checked to be an int ``>= low``.

    >>> count_of("n_sources", 3)
    3
    """
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def seed_of(value: Any) -> int:
    """A seed checked to be a non-negative int.

    >>> seed_of(7)
    7
    """
    return count_of("seed", value, low=0)


def check_source(n_sources: int, source: Any) -> int:
    """``source`` checked to be a valid source id ``0 .. n_sources - 1``.

    >>> check_source(2, 1)
    1
    """
    if (
        not isinstance(source, int | np.integer)
        or isinstance(source, bool)
        or not 0 <= source < n_sources
    ):
        raise ConfigError(f"source must be an int in 0..{n_sources - 1}, got {source!r}")
    return int(source)


def check_index(index: Any) -> np.ndarray:
    """Tuple indices as an int64 array (at least 1-d), checked >= 0.

    >>> check_index([0, 2]).tolist(), check_index(5).tolist()
    ([0, 2], [5])
    """
    idx = np.atleast_1d(np.asarray(index))
    if idx.size and idx.dtype.kind not in "iu":
        raise ConfigError(f"tuple indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size and idx.min() < 0:
        raise ConfigError(f"tuple indices must be >= 0, got {int(idx.min())}")
    return idx


def check_time(t: Any) -> float:
    """A time (s) checked to be a finite number.

    >>> check_time(1)
    1.0
    """
    if isinstance(t, bool) or not isinstance(t, int | float | np.integer | np.floating):
        raise ConfigError(f"time must be a number of seconds, got {t!r}")
    if not math.isfinite(t):
        raise ConfigError(f"time must be finite, got {t!r}")
    return float(t)


def construct(
    family: str,
    registry: Mapping[str, type[T]],
    name: Any,
    /,
    *,
    fixed: Collection[str] = (),
    **kwargs: Any,
) -> T:
    """Look ``name`` up in ``registry`` and build it, rejecting options its class does not take.

    ``fixed`` names the keyword arguments the caller always passes (left out of messages).

    Raises
    ------
    UnknownNameError
        ``name`` is not registered.
    ConfigError
        An option the class does not accept, or a required option missing.

    Examples
    --------
    >>> class A:
    ...     def __init__(self, *, path: str, x: int = 0) -> None:
    ...         self.x = x
    >>> construct("thing", {"a": A}, "a", path="f", x=3).x
    3
    >>> construct("thing", {"a": A}, "b")
    Traceback (most recent call last):
    ...
    spillway.errors.UnknownNameError: thing must be one of a; got 'b'
    >>> construct("thing", {"a": A}, "a", path="f", y=1)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: thing 'a': unknown option(s) y; known: path, x
    >>> construct("thing", {"a": A}, "a")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: thing 'a': missing option(s) path
    """
    if not isinstance(name, str) or name not in registry:
        raise UnknownNameError(
            f"{family} must be one of {', '.join(sorted(registry))}; got {name!r}"
        )
    cls = registry[name]
    params = {
        n: p
        for n, p in inspect.signature(cls).parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        known = ", ".join(sorted(set(params) - set(fixed))) or "none"
        raise ConfigError(
            f"{family} {name!r}: unknown option(s) {', '.join(unknown)}; known: {known}"
        )
    missing = sorted(
        n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs
    )
    if missing:
        raise ConfigError(f"{family} {name!r}: missing option(s) {', '.join(missing)}")
    return cls(**kwargs)
