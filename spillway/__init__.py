"""spillway: quality-aware overload management for Spark Structured Streaming.

When input outpaces capacity, spillway sheds load so results stay on time, tags every result
with its source information content (SIC: the fraction of source data it reflects, THEMIS Eq. 1-4),
and decides what to drop by a pluggable policy (``spillway.policies.POLICIES``).

Layers (imports only flow this way): ``quality`` <- ``policies`` <- ``control`` <- ``spark`` /
``sim`` <- ``experiments`` <- ``cli``; ``feeds`` is used by the runtime, the experiments and
``control``'s queue model (arrival profiles, background schedule).
``quality``, ``policies`` and ``control`` never import pyspark.
"""

from __future__ import annotations

from spillway.errors import ConfigError, SpillwayError

__version__ = "0.1.0"
__all__ = ["ConfigError", "SpillwayError", "__version__"]
