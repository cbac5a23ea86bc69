"""The shared plumbing of generated feeds: settings, signatures, options, payload assembly."""

from __future__ import annotations

import inspect
from typing import Unpack

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.feeds import FEEDS, FeedSettings, GeneratedFeed, make_feed
from spillway.feeds.options import construct, in_range
from spillway.feeds.synthetic import GaussianFeed
from spillway.feeds.taxi import TaxiFeed

GENERATED = sorted(n for n, cls in FEEDS.items() if issubclass(cls, GeneratedFeed))
SHARED = ["n_sources", "rate", "profile", "profile_options", "seed"]


class Scaled(GeneratedFeed):
    name = "scaled"

    def __init__(self, *, scale: float = 2.0, **settings: Unpack[FeedSettings]) -> None:
        super().__init__(**settings)
        self.scale = in_range("scaled scale", scale, 0.0, 10.0)

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.scale * index


class ScaledSettings(FeedSettings, total=False):
    scale: float


class Shifted(Scaled):
    name = "shifted"

    def __init__(self, *, shift: float = 1.0, **settings: Unpack[ScaledSettings]) -> None:
        super().__init__(**settings)
        self.shift = shift

    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        return super().values(source, index) + self.shift


def test_feed_settings_are_the_shared_constructor_arguments():
    params = inspect.signature(GeneratedFeed).parameters
    # Which are required mypy checks (``super().__init__(**settings)`` in every feed).
    assert list(params) == SHARED == list(FeedSettings.__annotations__)


@pytest.mark.parametrize("name", GENERATED)
def test_signature_lists_shared_settings_then_own_options(name):
    cls = FEEDS[name]
    params = inspect.signature(cls).parameters
    assert list(params) == SHARED + list(cls.option_names)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    f = make_feed(name, n_sources=2, rate=10.0, seed=1)
    assert list(f.options()) == list(cls.option_names)
    assert f.options() == {n: params[n].default for n in cls.option_names}
    assert repr(f).startswith(f"{cls.__name__}(seed=1, profile=ConstantProfile(n_sources=2")


def test_a_subclass_states_only_its_own_options():
    assert list(inspect.signature(Scaled).parameters) == [*SHARED, "scale"]
    assert list(inspect.signature(Shifted).parameters) == [*SHARED, "scale", "shift"]
    f = construct("feed", {"shifted": Shifted}, "shifted", n_sources=1, rate=5.0, shift=0.5)
    assert f.options() == {"scale": 2.0, "shift": 0.5}
    assert f.payload(0, np.arange(3))["value"].tolist() == [0.5, 2.5, 4.5]
    assert repr(f) == (
        "Shifted(seed=0, profile=ConstantProfile(n_sources=1, rate=5.0), scale=2.0, shift=0.5)"
    )
    with pytest.raises(
        ConfigError, match=r"feed 'scaled': unknown option\(s\) shift; known: .*, scale, seed"
    ):
        construct("feed", {"scaled": Scaled}, "scaled", n_sources=1, rate=1.0, shift=1.0)
    with pytest.raises(ConfigError, match=r"scaled scale must be a number in \[0, 10\], got 11"):
        Shifted(n_sources=1, rate=1.0, scale=11)


@pytest.mark.parametrize("name", GENERATED)
def test_payload_is_keys_and_keyed_values(name):
    f = make_feed(name, n_sources=2, rate=50.0, seed=4)
    idx = np.array([7, 0, 300, 7])
    p = f.payload(1, idx)
    assert np.array_equal(p["key"], f.keys(1, idx))
    assert np.array_equal(p["value"], f.values(1, idx))
    assert np.array_equal(p["value"], f.keyed_values(1, idx, p["key"]))
    empty = f.payload(1, np.zeros(0, dtype=np.int64))
    assert empty["key"].dtype == np.int64 and empty["value"].dtype == np.float64
    assert empty["key"].shape == empty["value"].shape == (0,)


def test_a_keyed_payload_computes_its_keys_once(monkeypatch):
    calls = []
    keys = TaxiFeed.keys

    def counted(self: TaxiFeed, source: int, index: np.ndarray) -> np.ndarray:
        calls.append(index.size)
        return keys(self, source, index)

    monkeypatch.setattr(TaxiFeed, "keys", counted)
    TaxiFeed(n_sources=1, rate=100.0).payload(0, np.arange(50))
    assert calls == [50]


def test_epoch_of_follows_arrival_times():
    f = make_feed("packets", n_sources=1, rate=100.0, profile="bursty", seed=2)
    idx = np.arange(2_000)
    t = f.arrival_time(0, idx)
    assert np.array_equal(f.epoch_of(0, idx, 0.5), np.floor(t / 0.5).astype(np.int64))


def test_a_built_profile_must_have_the_feeds_sources():
    other = GaussianFeed(n_sources=3, rate=1.0).profile
    with pytest.raises(ConfigError, match=r"profile has 3 sources but the feed 2: build the"):
        GaussianFeed(n_sources=2, rate=1.0, profile=other)
