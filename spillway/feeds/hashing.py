"""Counter-based randomness: random numbers as a pure function of (seed, stream, source, index).

A feed must regenerate any tuple anywhere, in any order (``spillway.feeds.base``), so it cannot
draw from a sequential generator. Instead each number is a hash of its coordinates:

    key  = mix(mix(mix(seed) ^ stream) ^ mix(source · C))
    h(i) = mix(key + (i + 1) · γ)

where ``mix`` is the SplitMix64 finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom
number generators", OOPSLA 2014) and ``γ`` its golden-ratio increment: for one key, ``h(i)`` is
exactly the SplitMix64 output sequence started at ``key``. Streams separate independent
quantities of one source (the value, the choice of distribution, a burst flag...); a stream is an
int or a string (hashed with FNV-1a, stable across processes, unlike ``hash()``).

Everything is vectorised over numpy uint64 arrays (wrap-around arithmetic); ``source`` and
``index`` may be scalars or arrays that broadcast together.

Examples
--------
>>> import numpy as np
>>> u = uniform(7, "value", 3, np.arange(5))
>>> bool(np.array_equal(u, uniform(7, "value", 3, np.arange(5))))
True
>>> bool(np.array_equal(u[2:4], uniform(7, "value", 3, np.array([2, 3]))))
True
>>> bool(((u > 0) & (u < 1)).all())
True
>>> bool(np.array_equal(u, uniform(8, "value", 3, np.arange(5))))
False
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from spillway.errors import ConfigError

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SOURCE_MULT = np.uint64(0xD6E8FEB86659FD93)
_SOURCE_MULT_INT = int(_SOURCE_MULT)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_MASK = (1 << 64) - 1
_TWO_M53 = 2.0**-53
_TWO_PI = 2.0 * np.pi

Stream = int | str


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 values (vectorised, wraps around; at least 1-d out).

    >>> int(mix64(np.array([0], dtype=np.uint64))[0])
    0
    >>> int(mix64(np.array([1], dtype=np.uint64))[0]) != 1
    True
    """
    z = np.array(x, dtype=np.uint64, ndmin=1)  # arrays wrap silently; numpy scalars would warn
    return _mix_inplace(z)


def _mix_inplace(z: np.ndarray) -> np.ndarray:
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


def _mix_int(x: int) -> int:
    """:func:`mix64` of one int (taken modulo 2**64), in Python ints: a feed hashes its
    (seed, stream, source) key on every call, and for a small lane (a hundred tuples a
    micro-batch) the numpy calls of the same arithmetic on one-element arrays cost more than
    the tuples themselves.

    >>> all(_mix_int(x) == int(mix64(np.array([x % 2**64], dtype=np.uint64))[0])
    ...     for x in (0, 1, 12345, -7, 2**64 - 1, 2**70 + 3))
    True
    """
    x &= _MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@functools.lru_cache(maxsize=4096)
def _stream_base(seed: int, stream: Stream) -> int:
    """``mix(mix(seed) ^ stream)``, the part of a key shared by every source of a stream."""
    return _mix_int(_mix_int(seed & _MASK) ^ stream_id(stream))


def stream_id(stream: Stream) -> int:
    """A stable 64-bit id of a stream name (FNV-1a of its UTF-8 bytes); ints are kept as is.

    >>> stream_id("value") == stream_id("value") != stream_id("burst")
    True
    >>> stream_id(5)
    5
    """
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream & _MASK
    if not isinstance(stream, str):
        raise ConfigError(f"stream must be an int or a str, got {type(stream).__name__}")
    return _text_id(stream)


@functools.lru_cache(maxsize=4096)
def _text_id(stream: str) -> int:
    h = 0xCBF29CE484222325
    for byte in stream.encode():
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h


def hash64(
    seed: int, stream: Stream, source: int | np.ndarray, index: int | np.ndarray
) -> np.ndarray:
    """64-bit hash of every (source, index) pair of one (seed, stream).

    Returns a uint64 array of the broadcast shape of ``source`` and ``index`` (at least 1-d).

    Parameters
    ----------
    seed : the feed's seed (any int; taken modulo 2**64).
    stream : which quantity (int or name).
    source, index : non-negative ints or int arrays that broadcast together.

    >>> hash64(0, "x", 0, np.arange(3)).dtype
    dtype('uint64')
    """
    if isinstance(stream, bool) or not isinstance(stream, int | str):
        stream_id(stream)  # its ConfigError, before the cache (True would find 1's entry)
    base = _stream_base(seed, stream)
    z = np.array(index, ndmin=1).astype(np.uint64)  # a fresh array: modified in place below
    z += np.uint64(1)
    z *= _GAMMA
    if np.ndim(source) == 0:  # one source: its key in Python ints (see _mix_int)
        z += np.uint64(_mix_int(base ^ _mix_int(int(source) * _SOURCE_MULT_INT)))
        return _mix_inplace(z)
    src = np.array(source, ndmin=1).astype(np.uint64)
    key = mix64(np.uint64(base) ^ mix64(src * _SOURCE_MULT))
    if z.shape == np.broadcast_shapes(z.shape, key.shape):
        z += key
    else:
        z = z + key
    return _mix_inplace(z)


def uniform(
    seed: int, stream: Stream, source: int | np.ndarray, index: int | np.ndarray
) -> np.ndarray:
    """Uniform(0, 1) floats, both ends excluded (53-bit resolution).

    >>> float(uniform(1, 0, 0, np.arange(100_000)).mean().round(2))
    0.5
    """
    h = hash64(seed, stream, source, index)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_M53


def normal(
    seed: int, stream: Stream, source: int | np.ndarray, index: int | np.ndarray
) -> np.ndarray:
    """Standard normal floats (Box-Muller over two hashed uniforms of sub-streams of ``stream``).

    >>> z = normal(1, "z", 0, np.arange(200_000))
    >>> round(float(z.mean()), 1) + 0.0, round(float(z.std()), 1)
    (0.0, 1.0)
    """
    sid = stream_id(stream)
    u1 = uniform(seed, _mix_int(sid ^ 0x5851F42D4C957F2D), source, index)
    u2 = uniform(seed, _mix_int(sid ^ 0x14057B7EF767814F), source, index)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(_TWO_PI * u2)


def exponential(
    seed: int, stream: Stream, source: int | np.ndarray, index: int | np.ndarray
) -> np.ndarray:
    """Exponential floats of mean 1 (inverse CDF, ``-log(u)``).

    >>> round(float(exponential(2, "e", 0, np.arange(200_000)).mean()), 1)
    1.0
    """
    return -np.log(uniform(seed, stream, source, index))


def lognormal(
    seed: int,
    stream: Stream,
    source: int | np.ndarray,
    index: int | np.ndarray,
    *,
    cv: float,
) -> np.ndarray:
    """Log-normal factors of mean 1 and coefficient of variation ``cv``.

    ``exp(σ z − σ²/2)`` with ``σ² = log(1 + cv²)`` and ``z`` the :func:`normal` of ``stream``.

    >>> x = lognormal(4, "f", 0, np.arange(200_000), cv=0.5)
    >>> round(float(x.mean()), 2), round(float(x.std() / x.mean()), 2)
    (1.0, 0.5)
    >>> lognormal(4, "f", 0, np.arange(3), cv=0.0).tolist()
    [1.0, 1.0, 1.0]
    """
    z = normal(seed, stream, source, index)
    sig = float(np.sqrt(np.log1p(cv * cv)))
    return np.exp(sig * z - 0.5 * sig * sig)


def pareto(
    seed: int,
    stream: Stream,
    source: int | np.ndarray,
    index: int | np.ndarray,
    *,
    alpha: float,
    low: float = 1.0,
    high: float = np.inf,
) -> np.ndarray:
    """Pareto floats of shape ``alpha`` on ``[low, high]`` (bounded when ``high`` is finite).

    Inverse CDF of the (truncated) Pareto law ``P(X > x) ∝ (low / x) ** alpha``.

    >>> x = pareto(3, "p", 0, np.arange(10_000), alpha=1.0, low=2.0, high=20.0)
    >>> bool(x.min() >= 2.0 and x.max() <= 20.0)
    True
    """
    if not alpha > 0 or not 0 < low < high:
        raise ConfigError(
            f"pareto needs alpha > 0 and 0 < low < high, got alpha={alpha}, low={low}, high={high}"
        )
    u = uniform(seed, stream, source, index)
    tail = 0.0 if np.isinf(high) else (low / high) ** alpha
    return low * (1.0 - u * (1.0 - tail)) ** (-1.0 / alpha)


def text_keys(texts: Any) -> np.ndarray:
    """Stable int64 keys (63 bits, non-negative) for text keys such as ``"JFK-LAX"``.

    Groups and joins run on int64 keys (the shedder's per-group lanes, the sink's group-bys);
    a text key becomes the first 8 bytes of its BLAKE2b digest, the same in every process and
    run (Python's ``hash`` is salted per process). Each distinct text is hashed once.

    >>> text_keys(["JFK-LAX", "SFO-SEA", "JFK-LAX"]).tolist() == [
    ...     int(text_keys(["JFK-LAX"])[0]), int(text_keys(["SFO-SEA"])[0]),
    ...     int(text_keys(["JFK-LAX"])[0])]
    True
    >>> bool((text_keys(["a", "b"]) >= 0).all())
    True
    """
    import hashlib

    arr = np.asarray(texts, dtype=object)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    uniq, inv = np.unique(arr.astype(str), return_inverse=True)
    codes = np.array(
        [
            int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "little")
            & 0x7FFF_FFFF_FFFF_FFFF
            for u in uniq
        ],
        dtype=np.int64,
    )
    return codes[inv.reshape(-1)]
