"""Base class of generated feeds: arrivals from a profile, payloads from counter-based hashes.

A generated feed is fully described by its settings: the ones every generated feed takes
(:class:`FeedSettings`: ``n_sources``, ``rate`` in mean tuples per second per source, an
arrival-rate ``profile`` of :data:`spillway.feeds.profiles.PROFILES` with its
``profile_options``, and a ``seed``) plus its own. Subclasses only compute the columns of tuples
``index`` of a source, vectorised, from :mod:`spillway.feeds.hashing` (and, if they like, from
the tuples' arrival times, which are themselves a pure function of seed, source and index).

To add a feed: subclass :class:`GeneratedFeed`, set ``name`` and implement :meth:`values` (and
:meth:`keys` if the key column is used). A feed with settings of its own declares them as
keyword-only arguments of its ``__init__`` ahead of ``**settings: Unpack[FeedSettings]``, passes
``settings`` on to ``super().__init__`` first, then validates its own and stores each as the
attribute of the same name. Its public signature is then the shared settings followed by its
own (what :func:`spillway.feeds.options.construct` and ``make_feed`` read), and
:meth:`GeneratedFeed.options` and ``repr`` list its own settings. (A subclass of such a feed
does the same, typing ``**settings`` with a ``TypedDict`` that extends :class:`FeedSettings`
by its parent's options.) Register the class in ``spillway.feeds.FEEDS``.

Examples
--------
>>> from typing import Unpack
>>> class Ramp(GeneratedFeed):
...     name = "ramp"
...     def __init__(self, *, step: float = 1.0, **settings: Unpack[FeedSettings]) -> None:
...         super().__init__(**settings)
...         self.step = step
...     def values(self, source, index):
...         return self.step * index
>>> f = Ramp(n_sources=2, rate=10.0, step=0.5)
>>> f.count(1.0).tolist(), f.payload(1, np.arange(3))["value"].tolist(), f.options()
([10, 10], [0.0, 0.5, 1.0], {'step': 0.5})
>>> list(inspect.signature(Ramp).parameters)
['n_sources', 'rate', 'profile', 'profile_options', 'seed', 'step']
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Required, TypedDict

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds.base import Feed
from spillway.feeds.options import check_index, check_source, seed_of
from spillway.feeds.profiles import Profile, make_profile


class FeedSettings(TypedDict, total=False):
    """The settings every generated feed takes; see :class:`GeneratedFeed` for their meaning."""

    n_sources: Required[int]
    rate: Required[float]
    profile: str | Profile
    profile_options: Mapping[str, Any] | None
    seed: int


class GeneratedFeed(Feed):
    """A feed whose arrivals follow a profile and whose payloads are hashed.

    Parameters
    ----------
    n_sources : number of sources.
    rate : mean tuples per second per source (the profile's ``rate``).
    profile : profile name in ``PROFILES`` (or a built :class:`Profile` with ``n_sources``
        sources, then ``rate`` and ``profile_options`` are ignored).
    profile_options : the profile's own settings.
    seed : seed of arrivals and values.
    """

    #: Names of the subclass's own settings, in signature order (filled in per subclass).
    option_names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        n_sources: int,
        rate: float,
        profile: str | Profile = "constant",
        profile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.seed = seed_of(seed)
        if isinstance(profile, Profile):
            self.profile = profile
        else:
            self.profile = make_profile(
                profile,
                n_sources=n_sources,
                rate=rate,
                seed=self.seed,
                **dict(profile_options or {}),
            )
        if self.profile.n_sources != n_sources:
            raise ConfigError(
                f"profile has {self.profile.n_sources} sources but the feed {n_sources}: "
                "build the profile with the same n_sources"
            )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            init.__signature__ = _spelled_out(cls, init)
        shared = inspect.signature(GeneratedFeed).parameters
        cls.option_names = tuple(n for n in inspect.signature(cls).parameters if n not in shared)

    @property
    def n_sources(self) -> int:
        return self.profile.n_sources

    def count(self, t: float) -> np.ndarray:
        return self.profile.count(t)

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        return self.profile.arrival_time(source, index)

    def epoch_of(self, source: int, index: np.ndarray, epoch_s: float) -> np.ndarray:
        """Epoch (slot of ``epoch_s`` seconds from 0) each tuple arrives in: int64 like ``index``.

        >>> class Zero(GeneratedFeed):
        ...     def values(self, source, index):
        ...         return np.zeros(index.shape)
        >>> Zero(n_sources=1, rate=4.0).epoch_of(0, np.arange(0, 12, 3), 0.5).tolist()
        [0, 1, 3, 4]
        """
        return np.floor(self.arrival_time(source, index) / epoch_s).astype(np.int64)

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        s = check_source(self.n_sources, source)
        idx = check_index(index)
        if idx.size == 0:
            return {"key": np.zeros(0, dtype=np.int64), "value": np.zeros(0)}
        key = self.keys(s, idx)
        return {"key": key, "value": self.keyed_values(s, idx, key)}

    @abstractmethod
    def values(self, source: int, index: np.ndarray) -> np.ndarray:
        """``value`` column (float64) of tuples ``index`` (int64, >= 0) of ``source``."""

    def keys(self, source: int, index: np.ndarray) -> np.ndarray:
        """``key`` column (int64); 0 unless the feed has keys."""
        return np.zeros(index.shape, dtype=np.int64)

    def keyed_values(self, source: int, index: np.ndarray, key: np.ndarray) -> np.ndarray:
        """``value`` column of tuples whose :meth:`keys` are ``key`` (what :meth:`payload` uses).

        A feed whose values depend on its keys overrides this, so a payload computes the keys
        once, and defines :meth:`values` from it; others keep this default, :meth:`values`.
        """
        return self.values(source, index)

    def options(self) -> dict[str, Any]:
        """The feed's own settings (for reports and repr): its attributes of those names."""
        return {n: getattr(self, n) for n in self.option_names}

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}(seed={self.seed}, profile={self.profile!r}{opts})"


def _spelled_out(cls: type[GeneratedFeed], init: Any) -> inspect.Signature:
    """``init``'s signature with ``**settings`` replaced by the parent's keyword arguments.

    So ``inspect.signature`` (hence ``construct`` and ``make_feed``) sees every setting the
    constructor takes, the parent's first, as if each were written out.
    """
    sig = inspect.signature(init)
    params = list(sig.parameters.values())
    if not params or params[-1].kind is not inspect.Parameter.VAR_KEYWORD:
        return sig
    parent = inspect.signature(super(cls, cls).__init__).parameters.values()
    inherited = [p for p in parent if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return sig.replace(parameters=[params[0], *inherited, *params[1:-1]])
