"""The ``spillway`` Python data source: the node's input buffer, with shedding in the offsets.

One streaming query per Spark plan reads ``spark.readStream.format("spillway")``; the plan's
lanes are the (query, source) streams of every logical query of that plan (docs/design.md). Rows have
one schema (:data:`SCHEMA`): ``query_id, source_id, key, value, sic, event_ts, arrival_ts``.

How a micro-batch is made (docs/design.md, "Data flow on Spark")
---------------------------------------------------------------
``latestOffset(start, limit)``
    asks the NodeController (over :mod:`spillway.spark.channel`) for the plan's next end offset
    and sends ``start`` along, so a controller that restarted re-syncs to Spark's position. The
    offset (:class:`PlanOffset`) holds the feed time it ends at (a window boundary, so a batch
    holds whole windows), every lane's end index, and the admission decision: how many of the
    lane's tuples in ``[start.end, end.end)`` are kept, and the lane's tuple SIC (THEMIS Eq. 1).
    The decision lives INSIDE the offset: Spark writes it to the offset log before the batch
    runs, so a restarted query replays exactly the same shedding, whatever the live controller
    would decide now.
``partitions(start, end)``
    a pure function of the two offsets and the plan's description (lanes and feed specs, fetched
    once from the controller): lanes with something to keep are spread over a few partitions
    (greedy longest-first on ``keep + n / 8``, see :func:`plan_partitions`).
``read(partition)``
    runs on executors and never calls the controller: it rebuilds the feeds from their specs
    (cached per worker process), picks WHICH ``k`` of a lane's ``n`` tuples to keep
    (:func:`select_kept`) and generates the rows with numpy into ``pyarrow.RecordBatch`` chunks
    (no per-row Python).

Which tuples are kept
---------------------
All tuples of a lane carry the same SIC, so the policy only decides how many (``k``); the data
path keeps the ``k`` tuples with the smallest 64-bit hash of (seed, plan, query, source, tuple
index) among the lane's ``n`` (``numpy.argpartition``, then sorted back into arrival order). The
hash is SplitMix64's finaliser, so the kept set is a uniform sample spread over the interval (no
bias toward early or late arrivals), a pure function of the offsets, and identical on replay.

A policy that admits per group (CoD grouped and join, ``Policy.needs_groups``) decides ``k`` per
(lane, group); the offset then also carries, per lane, the groups kept only in part with their
counts (:attr:`PlanOffset.groups`; a group not listed is kept whole). ``read`` regenerates the
lane's keys (``feed.keys`` over ``[lo, hi)``, one vectorised scan) and applies the same rule
within each group: the ``k_g`` smallest hashes of the group's tuples, every tuple of an unlisted
group, then the payload of the kept indices only (:func:`select_kept_groups`: the group sizes are
counted, only the tuples whose hash is below the group's quantile ``k_g / n_g`` plus four standard
deviations are sorted by (group, hash) and ranked, a group with too few of them has all its
tuples sorted; the kept set is exactly the ``k_g`` smallest hashes). Choices, and why:

- the keys are regenerated, not shipped: a feed is a pure function of the tuple index, so the
  offset stays a few numbers per partly kept group and replays need nothing else;
- same hash, same rule: a group's kept tuples are a uniform sample of the group spread over the
  interval, and with one group the kept set is exactly :func:`select_kept`'s;
- exact ``k_g``, not a threshold: keeping a tuple when its hash is below ``k_g / n_g`` would need
  no sort at all but keeps a binomial number of tuples per group (CoD's per-group estimates would
  then rest on a random, not the decided, sample size); sorting only the candidates costs about
  the kept tuples plus a few vectorised passes over the arrived ones, so the exact rule stays;
- every arrived tuple's key is still derived: whether a tuple is kept depends on its group
  (groups kept whole are not listed), and under CoD's equal allocation the largest partly kept
  fraction is close to 1, so a filter on the hash alone could not skip key derivation
  (``scripts/bench_cod_keep.py``; docs/design.md, "Known limits");
- only partly kept groups are listed, so the offset log grows with the groups actually cut, not
  with all the groups of the batch;
- the key scan and the per-group selection cost about 0.55 of a generated row per candidate
  (:data:`GROUP_SCAN_WEIGHT`), so a grouped lane weighs ``GROUP_SCAN_WEIGHT · n`` more when
  partitions are planned.

Batch reads (exact answers)
---------------------------
``spark.read.format("spillway")`` with options ``from_s`` and ``until_s`` (feed seconds) reads
every tuple that arrived in ``[from_s, until_s)``: nothing is shed (keep-all), which is the
ground truth shed results are compared with (:mod:`spillway.spark.exact`). Lanes are split into chunks of at most
``chunk_rows`` tuples. Their tuple SIC is Eq. 1 with the lane's STW count estimated from its mean
rate over the range: ``sic = range_s / (stw_s · |S_q| · n_lane)``.

Options: ``address`` (``127.0.0.1:<port>``), ``authkey`` (hex), ``plan`` (plan name), and
optionally ``partitions`` (default 2), ``timeout_s`` (default 30), ``from_s``/``until_s``/
``chunk_rows`` (batch reads).

Examples
--------
>>> import numpy as np
>>> start = PlanOffset.initial("avg", n_lanes=2, epoch_us=0)
>>> end = PlanOffset(plan="avg", epoch_us=0, boundary=1, t_us=1_000_000,
...                  end=(10, 4), keep=(5, 4), sic=(0.01, 0.025))
>>> PlanOffset.from_json(end.to_json()) == end
True
>>> select_kept(0, 10, 5, lane_key(7, "avg", 0, 0)).tolist() == sorted(
...     select_kept(0, 10, 5, lane_key(7, "avg", 0, 0)).tolist())
True
>>> len(select_kept(0, 10, 5, lane_key(7, "avg", 0, 0)))
5
"""

from __future__ import annotations

import hashlib
import json
import pickle
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spillway.errors import ConfigError, InputDataError
from spillway.feeds.base import Feed

#: Name the source is registered under (``spark.readStream.format(SOURCE_NAME)``).
SOURCE_NAME = "spillway"

#: Version of the offset layout; an offset of another version is refused.
OFFSET_VERSION = 1

#: The rows the source emits, for every plan.
SCHEMA = StructType(
    [
        StructField("query_id", IntegerType()),
        StructField("source_id", IntegerType()),
        StructField("key", LongType()),
        StructField("value", DoubleType()),
        StructField("sic", DoubleType()),
        StructField("event_ts", TimestampType()),
        StructField("arrival_ts", TimestampType()),
        StructField("key_text", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("error", StringType()),
        StructField("raw", StringType()),
    ]
)

#: The same schema in Arrow form (timestamps in microseconds, UTC), as Spark checks it.
ARROW_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.int32()),
        pa.field("source_id", pa.int32()),
        pa.field("key", pa.int64()),
        pa.field("value", pa.float64()),
        pa.field("sic", pa.float64()),
        pa.field("event_ts", pa.timestamp("us", tz="UTC")),
        pa.field("arrival_ts", pa.timestamp("us", tz="UTC")),
        pa.field("key_text", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("raw", pa.string()),
    ]
)

#: The ``error`` of a log record whose timestamp is before the cut its lane's previous batch
#: ended at: its window has been evaluated, so it is counted as lost (never a second result).
LATE = "late: its window was already evaluated"

#: Columns of :data:`SCHEMA` that only external logs (Kafka, folders) fill; null otherwise.
LOG_COLUMNS: tuple[str, ...] = ("key_text", "topic", "partition", "offset", "error", "raw")

_MASK64 = (1 << 64) - 1

#: Partition weight of one candidate of a lane kept per group (its key derived, its group's
#: candidate selection, beyond what :func:`select_kept` costs a lane), in units of generating
#: one kept row: 0.44-0.66 on the taxi and tasks feeds at 3x and 10x overload, 1,000,000
#: arrivals (``flock /tmp/spillway-heavy.lock .venv/bin/python scripts/bench_cod_keep.py``,
#: ``group_scan_weight``; a shared 2-core machine). A feed without a cheaper ``keys`` pays a
#: whole payload per candidate, more than this weight says.
GROUP_SCAN_WEIGHT = 0.55


# --------------------------------------------------------------------------------------------
# Offsets


def _int_tuple(name: str, values: Any) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise InputDataError(f"offset field {name!r} must be a list of ints") from None
    if any(v < 0 for v in out):
        raise InputDataError(f"offset field {name!r} must hold values >= 0")
    return out


def _group_map(
    groups: Any, keep: tuple[int, ...]
) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Validate and normalise an offset's ``groups`` (lanes ascending, keys sorted)."""
    if not isinstance(groups, Mapping):
        raise InputDataError(
            "offset field 'groups' must map lane indices to [group keys, keep counts], got "
            f"{type(groups).__name__}"
        )
    out: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for raw, entry in groups.items():
        try:
            lane = int(raw)
        except (TypeError, ValueError):
            raise InputDataError(f"offset field 'groups': {raw!r} is not a lane index") from None
        if not 0 <= lane < len(keep):
            raise InputDataError(
                f"offset field 'groups': lane {lane} is outside 0..{len(keep) - 1}"
            )
        try:
            if isinstance(entry, str | bytes) or len(entry) != 2:
                raise TypeError
            keys = tuple(int(v) for v in entry[0])
            counts = tuple(int(v) for v in entry[1])
        except (TypeError, ValueError):
            raise InputDataError(
                f"offset field 'groups' lane {lane}: needs [group keys, keep counts], two lists "
                "of ints"
            ) from None
        if len(keys) != len(counts) or not keys:
            raise InputDataError(
                f"offset field 'groups' lane {lane}: needs as many keep counts as group keys "
                f"(at least one), got {len(keys)} keys and {len(counts)} counts"
            )
        if len(set(keys)) != len(keys):
            raise InputDataError(f"offset field 'groups' lane {lane}: group keys repeat")
        if min(counts) < 0:
            raise InputDataError(f"offset field 'groups' lane {lane}: keep counts must be >= 0")
        if sum(counts) > keep[lane]:
            raise InputDataError(
                f"offset field 'groups' lane {lane}: the groups keep {sum(counts)} tuples, more "
                f"than the lane's keep {keep[lane]}"
            )
        order = sorted(range(len(keys)), key=keys.__getitem__)
        out[lane] = (tuple(keys[i] for i in order), tuple(counts[i] for i in order))
    return dict(sorted(out.items()))


def _read_map(
    read: Any, end: tuple[int, ...], keep: tuple[int, ...]
) -> dict[int, tuple[tuple[int, int, int], ...]]:
    """Validate and normalise an offset's ``read`` (lanes ascending; triples as given)."""
    if not isinstance(read, Mapping):
        raise InputDataError(
            "offset field 'read' must map lane indices to lists of [lo, hi, m], got "
            f"{type(read).__name__}"
        )
    out: dict[int, tuple[tuple[int, int, int], ...]] = {}
    for raw, entry in read.items():
        try:
            lane = int(raw)
            triples = tuple((int(t[0]), int(t[1]), int(t[2])) for t in entry)
            if any(len(t) != 3 for t in entry):
                raise TypeError
        except (TypeError, ValueError, IndexError):
            raise InputDataError(
                f"offset field 'read' lane {raw!r}: needs a lane index and a list of "
                "[lo, hi, m] triples of ints"
            ) from None
        if not 0 <= lane < len(end) or not triples:
            raise InputDataError(
                f"offset field 'read': lane {lane} must be in 0..{len(end) - 1} with at least "
                "one [lo, hi, m] triple"
            )
        prev = 0
        for lo, hi, m in triples:
            if not (prev <= lo <= hi <= end[lane] and 0 <= m <= hi - lo):
                raise InputDataError(
                    f"offset field 'read' lane {lane}: [{lo}, {hi}, {m}] needs ranges ascending, "
                    f"disjoint, ending by the lane's end {end[lane]}, and 0 <= m <= hi - lo"
                )
            prev = hi
        if keep[lane] > sum(t[2] for t in triples):
            raise InputDataError(
                f"offset field 'read' lane {lane}: keeps {keep[lane]} tuples, more than the "
                f"{sum(t[2] for t in triples)} it reads"
            )
        out[lane] = triples
    return dict(sorted(out.items()))


@dataclass(frozen=True, kw_only=True)
class PlanOffset:
    """A spillway offset: where a plan's micro-batch ends, and what it keeps of its range.

    Parameters
    ----------
    plan : the plan's name.
    epoch_us : the node's start (Unix microseconds); feed time 0. Kept in the offset so replayed
        rows get the same timestamps.
    boundary : index of the controller's decision (interval boundary) this offset ends at.
    t_us : feed time (microseconds) the batch ends at: a window boundary of the plan.
    end : per-lane end index (exclusive): tuples ``[previous end, end)`` belong to this batch.
    keep : per-lane number of those tuples that are kept (the admission decision).
    sic : per-lane SIC of each kept tuple (THEMIS Eq. 1, estimated over the STW).
    groups : per-group keep counts of the lanes a per-group policy decided
        (``Policy.needs_groups``): lane index -> (group keys, keep counts), listing only the
        groups of which fewer tuples are kept than ``[previous end, end)`` holds; a group not
        listed is kept whole, and a lane not listed is kept by ``keep`` alone. Keys are sorted
        ascending. Omitted from the JSON when empty, so offsets without it (and checkpoints
        written before it existed) parse unchanged.
    cut : per lane, the feed time (µs) up to which its query's tuples are decided (the end of
        its last whole window): a Kafka record at an offset after the previous cut but with a
        timestamp before it is late for its window. All zeros (omitted from the JSON) for
        feeds that cannot be late.
    read : per lane a per-group decision read only in part (a bounded group read, see
        :func:`read_index`): lane index -> ``(lo, hi, m)`` triples, ascending and disjoint, one
        per decided range: the lane's tuples are the ``m`` of ``[lo, hi)`` that
        :func:`read_index` picks, every other tuple of the range is shed unread. Omitted from
        the JSON when empty; a lane not listed is read over its whole range.

    Examples
    --------
    >>> o = PlanOffset(plan="avg", epoch_us=0, boundary=1, t_us=10**6, end=(10,), keep=(4,),
    ...                sic=(0.1,), groups={0: ((9, 3), (0, 1))})
    >>> o.groups, o.to_json()["groups"]
    ({0: ((3, 9), (1, 0))}, {'0': [[3, 9], [1, 0]]})
    """

    plan: str
    epoch_us: int
    boundary: int
    t_us: int
    end: tuple[int, ...]
    keep: tuple[int, ...]
    sic: tuple[float, ...]
    groups: Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict, hash=False
    )
    cut: tuple[int, ...] = ()
    read: Mapping[int, tuple[tuple[int, int, int], ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "end", _int_tuple("end", self.end))
        object.__setattr__(self, "keep", _int_tuple("keep", self.keep))
        object.__setattr__(self, "sic", tuple(float(v) for v in self.sic))
        if not (len(self.end) == len(self.keep) == len(self.sic)):
            raise InputDataError(
                f"offset of plan {self.plan!r}: end, keep and sic need one entry per lane, got "
                f"{len(self.end)}, {len(self.keep)}, {len(self.sic)}"
            )
        object.__setattr__(self, "groups", _group_map(self.groups, self.keep))
        cut = _int_tuple("cut", self.cut) if self.cut else (0,) * len(self.end)
        if len(cut) != len(self.end):
            raise InputDataError(
                f"offset of plan {self.plan!r}: cut needs one entry per lane, got {len(cut)}"
            )
        object.__setattr__(self, "cut", cut)
        object.__setattr__(self, "read", _read_map(self.read, self.end, self.keep))

    @property
    def n_lanes(self) -> int:
        """Number of lanes."""
        return len(self.end)

    @classmethod
    def initial(cls, plan: str, *, n_lanes: int, epoch_us: int) -> PlanOffset:
        """The offset before anything arrived: every lane at index 0."""
        zeros = (0,) * n_lanes
        return cls(
            plan=plan,
            epoch_us=epoch_us,
            boundary=0,
            t_us=0,
            end=zeros,
            keep=zeros,
            sic=(0.0,) * n_lanes,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON-able dict Spark stores in its offset log (``groups`` only when set)."""
        out: dict[str, Any] = {
            "v": OFFSET_VERSION,
            "plan": self.plan,
            "epoch_us": self.epoch_us,
            "b": self.boundary,
            "t_us": self.t_us,
            "end": list(self.end),
            "keep": list(self.keep),
            "sic": list(self.sic),
        }
        if self.groups:
            out["groups"] = {str(j): [list(k), list(n)] for j, (k, n) in self.groups.items()}
        if any(self.cut):
            out["cut"] = list(self.cut)
        if self.read:
            out["read"] = {str(j): [list(t) for t in r] for j, r in self.read.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> PlanOffset:
        """Parse an offset written by :meth:`to_json` (a dict, or its JSON text).

        Raises
        ------
        InputDataError
            Not a spillway offset, of another version, or with a malformed field.
        """
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise InputDataError(f"a spillway offset must be JSON: {e}") from None
        if not isinstance(data, Mapping) or data.get("v") != OFFSET_VERSION:
            got = data.get("v") if isinstance(data, Mapping) else type(data).__name__
            raise InputDataError(
                f"not a spillway offset of version {OFFSET_VERSION} (got {got!r}); the checkpoint "
                "was written by another spillway version: start from a new checkpoint"
            )
        try:
            return cls(
                plan=str(data["plan"]),
                epoch_us=int(data["epoch_us"]),
                boundary=int(data["b"]),
                t_us=int(data["t_us"]),
                end=data["end"],
                keep=data["keep"],
                sic=data["sic"],
                groups=data.get("groups", {}),
                cut=data.get("cut", ()),
                read=data.get("read", {}),
            )
        except KeyError as e:
            raise InputDataError(f"spillway offset lacks the field {e.args[0]!r}") from None


# --------------------------------------------------------------------------------------------
# Which tuples are kept


def _mix64(x: int) -> int:
    """SplitMix64 finaliser on a Python int (mod 2**64)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def plan_code(plan: str) -> int:
    """A stable 32-bit code of a plan name (CRC-32; Python's ``hash`` differs per process).

    >>> plan_code("avg")
    484921998
    """
    return zlib.crc32(plan.encode("utf-8"))


def lane_key(seed: int, plan: str, query_id: int, source_id: int) -> int:
    """The 64-bit key of one lane, from which its tuples' hashes are drawn.

    >>> lane_key(0, "avg", 0, 0) != lane_key(0, "avg", 0, 1)
    True
    """
    h = _mix64(int(seed) & _MASK64)
    for part in (plan_code(plan), int(query_id), int(source_id)):
        h = _mix64(h ^ (part & _MASK64))
    return h


def tuple_hashes(key: int, index: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of ``key ⊕ index·φ`` for every tuple index (uint64, vectorised).

    >>> tuple_hashes(1, np.arange(3)).dtype
    dtype('uint64')
    """
    with np.errstate(over="ignore"):
        x = np.asarray(index, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x ^= np.uint64(key & _MASK64)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def select_kept(lo: int, hi: int, keep: int, key: int) -> np.ndarray:
    """The indices of the ``keep`` tuples kept out of ``[lo, hi)``, in arrival order.

    The kept tuples are those with the ``keep`` smallest :func:`tuple_hashes` (a deterministic
    uniform sample); ``keep >= hi - lo`` keeps all, ``keep <= 0`` none.

    Examples
    --------
    >>> select_kept(10, 14, 9, 0).tolist()
    [10, 11, 12, 13]
    >>> a = select_kept(0, 1000, 100, lane_key(1, "avg", 0, 0))
    >>> len(a), bool((np.diff(a) > 0).all())
    (100, True)
    >>> bool((a == select_kept(0, 1000, 100, lane_key(1, "avg", 0, 0))).all())
    True
    """
    n = hi - lo
    if keep >= n:
        return np.arange(lo, hi, dtype=np.int64)
    if keep <= 0:
        return np.empty(0, dtype=np.int64)
    idx = np.arange(lo, hi, dtype=np.int64)
    h = tuple_hashes(key, idx)
    chosen = np.argpartition(h, keep - 1)[:keep]
    chosen.sort()
    return idx[chosen]


#: Runs a log lane's kept records are read in at most (:func:`select_kept_runs`,
#: :func:`log_runs`).
LOG_RUNS = 16


def log_runs(n: int, keep: int, gap: int) -> int:
    """Runs a log lane keeps ``keep`` of its ``n`` records in, for a reader that reads through
    a gap of fewer than ``gap`` shed records (:attr:`Feed.read_gap
    <spillway.feeds.base.Feed.read_gap>`): :data:`LOG_RUNS`, or fewer so the shed records put
    ``2 * gap`` between two runs on average (at least one run).

    Why: each run sits at a hashed place in its block, so the gap between two runs is the sum
    of two uniform parts; with 16 runs in a lane of 10,000 records the gaps are a few hundred
    records, every one read through, and shedding there saves no reading at all (node ``c``
    of the spark-federation runs, EXPERIMENTS.md "Node c reads its input whole"). At twice
    ``gap`` on average, the records read through are at most about 1/24 of the shed ones (a
    gap shorter than ``gap`` is read, and it is short with a triangular chance). The cost:
    fewer, longer runs spread the kept records less evenly over the batch's time.

    >>> log_runs(10_000, 4_000, 2048), log_runs(1_000_000, 4_000, 2048), log_runs(100, 50, 0)
    (1, 16, 16)
    >>> log_runs(60_000, 4_000, 2048), log_runs(10_000, 10_000, 2048)
    (13, 1)
    """
    if gap <= 0:
        return LOG_RUNS
    return int(max(1, min(LOG_RUNS, (n - keep) // (2 * gap))))


def select_kept_runs(lo: int, hi: int, keep: int, key: int, runs: int = LOG_RUNS) -> np.ndarray:
    """The ``keep`` indices kept out of ``[lo, hi)`` of a log, as at most ``runs`` contiguous
    runs, in arrival order: what is shed is never fetched.

    ``[lo, hi)`` is cut into ``min(runs, keep)`` equal blocks; each keeps its share of ``keep``
    as one run starting at a hashed position inside the block (deterministic in ``key``, so a
    replay keeps the same records). A systematic sample spread over the batch's time, so every
    window of the batch keeps its share; a Kafka partition then reads ``runs`` short ranges
    instead of the whole range (THEMIS's shedder drops before processing; on a log, dropping
    what is never read is the cheap way).

    Examples
    --------
    >>> a = select_kept_runs(0, 100, 8, 3, runs=4)
    >>> len(a), bool((np.diff(a) > 0).all()), int((np.diff(a) > 1).sum()) <= 3
    (8, True, True)
    >>> [int(((a >= b) & (a < b + 25)).sum()) for b in (0, 25, 50, 75)]  # 2 per block
    [2, 2, 2, 2]
    >>> select_kept_runs(5, 9, 10, 0).tolist(), select_kept_runs(5, 9, 0, 0).tolist()
    ([5, 6, 7, 8], [])
    """
    n = hi - lo
    if keep >= n:
        return np.arange(lo, hi, dtype=np.int64)
    if keep <= 0:
        return np.empty(0, dtype=np.int64)
    start, take = _kept_runs(lo, hi, keep, key, runs)
    pos = np.repeat(start - np.cumsum(take) + take, take) + np.arange(int(take.sum()))
    return pos.astype(np.int64)


def _kept_runs(lo: int, hi: int, keep: int, key: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`select_kept_runs`'s runs as (first index, length) per block, for
    ``0 < keep < hi - lo`` (a block's run may be empty)."""
    n = hi - lo
    r = int(min(runs, keep))
    j = np.arange(r + 1, dtype=np.int64)
    edges = lo + (j * n) // r
    size = np.diff(edges)
    want = np.diff((j * keep) // r)
    take = np.minimum(want, size)
    short = int(keep - take.sum())
    while short > 0:  # integer rounding: give what a full block could not hold to the others
        room = np.flatnonzero(take < size)
        add = np.zeros(r, dtype=np.int64)
        add[room[:short]] = 1
        take += add
        short = int(keep - take.sum())
    slack = (size - take).astype(np.uint64)
    start = edges[:-1] + (tuple_hashes(key, j[:-1]) % (slack + np.uint64(1))).astype(np.int64)
    return start, take


def shed_read(lo: int, hi: int, keep: int, key: int, gap: int, runs: int | None = None) -> int:
    """Shed records of ``[lo, hi)`` a log reader fetches all the same: those between two of
    :func:`select_kept_runs`'s runs fewer than ``gap`` apart, which the reader reads through
    as one range (a seek costs more than a short gap: :attr:`Feed.read_gap
    <spillway.feeds.base.Feed.read_gap>`). With ``gap`` 0 none are. The runs are
    :func:`log_runs`'s unless ``runs`` is given.

    With ``runs`` fixed at 16, a lane that arrives fewer than ``16 * gap`` records in a
    decision is read whole whatever it keeps (every gap is shorter than ``gap``): shedding
    there saves only the processing of what is shed, not its reading. :func:`log_runs` takes
    fewer runs there.

    >>> shed_read(0, 10_000, 4_000, 3, gap=2048, runs=16)  # gaps of about 375: read through
    5661
    >>> shed_read(0, 10_000, 4_000, 3, gap=2048)  # log_runs: one run, nothing between
    0
    >>> shed_read(0, 10_000, 4_000, 3, gap=0), shed_read(0, 10, 10, 3, gap=2048)
    (0, 0)
    """
    if gap <= 0 or keep <= 0 or keep >= hi - lo:
        return 0
    r = log_runs(hi - lo, keep, gap) if runs is None else runs
    start, take = _kept_runs(lo, hi, keep, key, r)
    first, end = start[take > 0], (start + take)[take > 0]
    between = first[1:] - end[:-1]
    return int(between[between < gap].sum())


#: Runs a bounded group read takes from each decided range of a lane (:func:`read_index`).
READ_RUNS = 64

#: Salt of the read key (:func:`read_index`), so the runs read do not follow the tuple hashes.
_READ_SALT = 0x5A3B1E


def read_index(
    reads: Sequence[tuple[int, int, int]], key: int, *, log: bool = False, gap: int = 0
) -> np.ndarray:
    """The tuple indices a bounded group read covers, ascending: for every ``(lo, hi, m)``,
    the ``m`` indices of ``[lo, hi)`` in :data:`READ_RUNS` contiguous runs, or
    :func:`log_runs` for a ``log`` whose reader reads through gaps under ``gap`` (each run is a
    seek there, :func:`select_kept_runs`), keyed by the lane's ``key`` and ``lo``, so the
    driver that decides and the executor that reads pick the same tuples, and a replay too.

    Why: a per-group decision (CoD) needs every tuple's group key, and deriving it costs about
    as much as generating the row (a log's record is fetched and parsed for it); under heavy
    overload the controller reads only a bounded sample of the range, decides on its group
    counts, and sheds the rest unread (docs/design.md, "Bounded group reads").

    >>> read_index([(0, 100, 8), (100, 104, 4)], 3).tolist()[-4:]
    [100, 101, 102, 103]
    >>> len(read_index([(0, 1000, 50)], 7)), read_index([(5, 5, 0)], 7).tolist()
    (50, [])
    >>> int((np.diff(read_index([(0, 10_000, 640)], 7, log=True)) > 1).sum())  # 16 runs
    15
    """
    parts = [
        select_kept_runs(
            lo,
            hi,
            m,
            _mix64(key ^ _READ_SALT ^ lo),
            runs=log_runs(hi - lo, m, gap) if log else READ_RUNS,
        )
        for lo, hi, m in reads
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def select_kept_groups(
    lo: int,
    hi: int,
    key: int,
    keys: np.ndarray,
    group_keys: Any,
    group_keep: Any,
    *,
    candidates: bool = True,
    index: np.ndarray | None = None,
) -> np.ndarray:
    """The indices kept out of ``[lo, hi)`` under a per-group decision, in arrival order.

    ``keys`` are the tuples' group keys (one per index of ``[lo, hi)``). Within every group of
    ``group_keys`` the ``group_keep`` tuples with the smallest :func:`tuple_hashes` are kept (a
    deterministic uniform sample of the group, as :func:`select_kept` is of a lane); tuples of
    groups not listed are all kept. With ``index`` (a bounded group read, :func:`read_index`)
    the tuples are those indices instead of all of ``[lo, hi)``, ``keys`` one per index.

    How, with ``candidates`` (default): the group sizes ``n_g`` are counted (one ``bincount``)
    and only the tuples whose hash lies below the group's quantile ``q_g`` are sorted, with
    ``q_g = p_g + 4·sqrt(p_g(1 − p_g)/n_g) + 4/n_g`` and ``p_g = k_g / n_g``: the hashes are
    uniform, so about ``k_g`` plus a few standard deviations of a group's tuples are candidates,
    and the ``k_g`` smallest hashes of a group are all among them whenever it has at least
    ``k_g`` candidates (the candidates are a prefix of the group's hash order). A group with
    fewer (a rare tail event) has all its tuples sorted. The kept set is therefore EXACTLY the
    ``k_g`` smallest hashes per group, the same as sorting every tuple (``candidates=False``,
    the rule as first built, kept for comparison); only the cost changes: a few vectorised
    passes per arrived tuple and a sort of about the kept tuples, instead of a sort of all of
    them (``scripts/bench_cod_keep.py``).

    Examples
    --------
    >>> keys = np.array([5, 7, 5, 5, 9, 7])
    >>> kept = select_kept_groups(10, 16, 3, keys, [5, 7], [1, 0])   # group 9 is not listed
    >>> keys[kept - 10].tolist()
    [5, 9]
    >>> a = select_kept_groups(0, 1000, 1, np.zeros(1000, np.int64), [0], [100])
    >>> bool((a == select_kept(0, 1000, 100, 1)).all())   # one group: the lane's sample
    True
    >>> g = np.arange(5000) % 7
    >>> b = select_kept_groups(0, 5000, 2, g, [0, 3, 4], [10, 500, 700])
    >>> c = select_kept_groups(0, 5000, 2, g, [0, 3, 4], [10, 500, 700], candidates=False)
    >>> bool(np.array_equal(b, c)), [int((g[b] == v).sum()) for v in (0, 3, 4, 1)]
    (True, [10, 500, 700, 715])
    >>> select_kept_groups(0, 0, 3, keys, [5, 7], [1, 0], index=np.arange(10, 16)).tolist()
    [10, 14]
    """
    idx = (
        np.arange(lo, hi, dtype=np.int64)
        if index is None
        else np.asarray(index, dtype=np.int64).reshape(-1)
    )
    k = np.asarray(keys, dtype=np.int64).reshape(-1)
    if k.shape[0] != idx.shape[0]:
        where = f"of [{lo}, {hi})" if index is None else f"of the {idx.shape[0]} indices"
        raise InputDataError(f"need one key per tuple {where}, got {k.shape[0]}")
    gk = np.asarray(group_keys, dtype=np.int64).reshape(-1)
    gn = np.asarray(group_keep, dtype=np.int64).reshape(-1)
    if gk.size == 0 or idx.size == 0:
        return idx
    pos = group_positions(k, gk)
    kept = pos < 0
    li = np.flatnonzero(~kept)
    if li.size:
        g = pos[li]
        h = tuple_hashes(key, idx[li])
        if candidates:
            size = np.bincount(g, minlength=gk.size)
            want = np.minimum(gn, size)
            cand = h < _quantile_hashes(want, size)[g]
            short = np.bincount(g[cand], minlength=gk.size) < want
            if short.any():
                cand |= short[g]
            li, g, h = li[cand], g[cand], h[cand]
        # Sort by (group, hash): hashes of distinct indices never tie (the finaliser is a
        # bijection), so an argsort by hash then a stable sort by group is exact, and with
        # fewer than 65,536 groups the second sort is a radix sort of 16-bit ids (measured on
        # 47,000 tuples: 1.4 ms, against 13 ms for np.lexsort).
        o = np.argsort(h)
        by_group = g[o].astype(np.uint16) if gk.size <= 1 << 16 else g[o]
        o = o[np.argsort(by_group, kind="stable")]
        gs = g[o]
        size = np.bincount(gs, minlength=gk.size)
        rank = np.arange(gs.size) - (np.cumsum(size) - size)[gs]
        kept[li[o[rank < gn[gs]]]] = True
    return idx[kept]


#: Largest hash threshold a float quantile is mapped to (a float just below 2^64).
_TOP = float(np.nextafter(2.0**64, 0.0))


def _quantile_hashes(want: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per group, the hash below which its candidates lie (uint64; all of it when ``q_g >= 1``).

    >>> t = _quantile_hashes(np.array([0, 50, 10]), np.array([100, 100, 10]))
    >>> bool(t[0] < t[1] < t[2]), bool(t[2] == np.iinfo(np.uint64).max)
    (True, True)
    """
    n = np.maximum(size, 1).astype(np.float64)
    p = want / n
    q = p + 4.0 * np.sqrt(p * (1.0 - p) / n) + 4.0 / n
    q[want <= 0] = 0.0
    out = np.minimum(q * 2.0**64, _TOP).astype(np.uint64)
    out[q >= 1.0] = np.iinfo(np.uint64).max
    return out


def group_positions(keys: np.ndarray, group_keys: np.ndarray) -> np.ndarray:
    """For every key, its position in ``group_keys`` (distinct), or -1 when not listed.

    A lookup table when the keys span a small range (route or class ids: one gather, O(n)),
    else a binary search over the sorted group keys.

    >>> group_positions(np.array([7, 3, 9, 7]), np.array([7, 9])).tolist()
    [0, -1, 1, 0]
    """
    k = np.asarray(keys, dtype=np.int64)
    gk = np.asarray(group_keys, dtype=np.int64)
    if k.size == 0 or gk.size == 0:
        return np.full(k.shape, -1, dtype=np.int64)
    lo = min(int(k.min()), int(gk.min()))
    span = max(int(k.max()), int(gk.max())) - lo + 1
    if span <= 4 * (k.size + gk.size) + 1024:
        table = np.full(span, -1, dtype=np.int64)
        table[gk - lo] = np.arange(gk.size)
        return table[k - lo]
    order = np.argsort(gk, kind="stable")
    sk = gk[order]
    at = np.minimum(np.searchsorted(sk, k), sk.size - 1)
    return np.where(sk[at] == k, order[at], -1)


# --------------------------------------------------------------------------------------------
# Feeds on executors


@dataclass(frozen=True, kw_only=True)
class FeedSpec:
    """How an executor rebuilds a feed: a registered feed (name + settings) or a pickled object.

    Feeds are deterministic (``spillway.feeds.base``), so a rebuilt feed yields exactly the
    tuples of the original. Registered feeds travel as their settings (small); others (e.g.
    :class:`spillway.testing.ListFeed`) as a pickle.

    Examples
    --------
    >>> from spillway.testing import ListFeed
    >>> spec = FeedSpec.of(ListFeed(times=[[0.1, 0.2]], values=[[1.0, 2.0]]))
    >>> FeedSpec.load(spec.dump()).build().count(1.0).tolist()
    [2]
    """

    name: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    blob: bytes | None = None

    @classmethod
    def registered(cls, name: str, **settings: Any) -> FeedSpec:
        """A feed built by ``spillway.feeds.make_feed(name, **settings)``."""
        return cls(name=name, settings=dict(settings))

    @classmethod
    def of(cls, feed: Feed) -> FeedSpec:
        """A feed object shipped as a pickle."""
        return cls(blob=pickle.dumps(feed, protocol=pickle.HIGHEST_PROTOCOL))

    def dump(self) -> bytes:
        """Bytes to ship in an input partition."""
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def load(data: bytes) -> FeedSpec:
        """Inverse of :meth:`dump`."""
        spec = pickle.loads(data)
        if not isinstance(spec, FeedSpec):
            raise InputDataError(f"expected a FeedSpec, got {type(spec).__name__}")
        return spec

    def build(self) -> Feed:
        """Make the feed."""
        if self.blob is not None:
            feed = pickle.loads(self.blob)
        elif self.name is not None:
            from spillway.feeds import make_feed

            feed = make_feed(self.name, **dict(self.settings))
        else:
            raise ConfigError("a FeedSpec needs a feed name or a pickled feed")
        if not isinstance(feed, Feed):
            raise ConfigError(f"a FeedSpec must build a Feed, got {type(feed).__name__}")
        return feed


_FEED_CACHE: OrderedDict[str, Feed] = OrderedDict()
_FEED_CACHE_LOCK = threading.Lock()
_FEED_CACHE_SIZE = 64


def cached_feed(spec_bytes: bytes) -> Feed:
    """The feed of a dumped :class:`FeedSpec`, built once per process (small LRU cache)."""
    digest = hashlib.blake2b(spec_bytes, digest_size=16).hexdigest()
    with _FEED_CACHE_LOCK:
        feed = _FEED_CACHE.get(digest)
        if feed is not None:
            _FEED_CACHE.move_to_end(digest)
            return feed
    feed = FeedSpec.load(spec_bytes).build()
    with _FEED_CACHE_LOCK:
        _FEED_CACHE[digest] = feed
        while len(_FEED_CACHE) > _FEED_CACHE_SIZE:
            _FEED_CACHE.popitem(last=False)
    return feed


# --------------------------------------------------------------------------------------------
# Plan description and partitions


@dataclass(frozen=True, kw_only=True)
class PlanDescription:
    """What the source needs to know about a plan (static for the plan's life).

    Parameters
    ----------
    plan : the plan's name.
    seed : node seed (keep selection).
    epoch_us : node start (Unix microseconds).
    stw_s : source time window (s), for the SIC of batch reads.
    lane_query, lane_source : node-wide query id and source id of every lane.
    lane_feed : index into ``feeds`` of every lane's feed.
    lane_n_sources : number of sources of every lane's query (``|S_q|``, Eq. 1).
    feeds : dumped :class:`FeedSpec` of each feed.
    """

    plan: str
    seed: int
    epoch_us: int
    stw_s: float
    lane_query: tuple[int, ...]
    lane_source: tuple[int, ...]
    lane_feed: tuple[int, ...]
    lane_n_sources: tuple[int, ...]
    feeds: tuple[bytes, ...]

    @property
    def n_lanes(self) -> int:
        """Number of lanes."""
        return len(self.lane_query)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (for the control channel)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanDescription:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


class SpillwayPartition(InputPartition):
    """A slice of a micro-batch: some lanes, each with its tuple range, keep count and SIC.

    Attributes are plain numpy arrays (one entry per lane of the slice) plus the feed specs the
    slice uses, so the partition pickles small and ``read`` needs nothing else. ``groups`` is
    None or one entry per lane: None, or the lane's (group keys, keep counts) of
    :attr:`PlanOffset.groups`; ``reads`` likewise, the lane's ``(lo, hi, m)`` triples of
    :attr:`PlanOffset.read`.
    """

    def __init__(
        self,
        *,
        plan: str,
        seed: int,
        epoch_us: int,
        feeds: tuple[bytes, ...],
        query_id: np.ndarray,
        source_id: np.ndarray,
        feed: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        keep: np.ndarray,
        sic: np.ndarray,
        groups: tuple[tuple[np.ndarray, np.ndarray] | None, ...] | None = None,
        since_us: np.ndarray | None = None,
        reads: tuple[tuple[tuple[int, int, int], ...] | None, ...] | None = None,
    ) -> None:
        self.plan = plan
        self.reads = reads
        self.since_us = since_us if since_us is not None else np.zeros(len(lo), np.int64)
        self.seed = seed
        self.epoch_us = epoch_us
        self.feeds = feeds
        self.query_id = query_id
        self.source_id = source_id
        self.feed = feed
        self.lo = lo
        self.hi = hi
        self.keep = keep
        self.sic = sic
        self.groups = groups

    @property
    def rows(self) -> int:
        """Rows this partition yields."""
        return int(np.minimum(self.keep, self.hi - self.lo).sum())

    def __repr__(self) -> str:
        return f"SpillwayPartition(plan={self.plan!r}, lanes={len(self.lo)}, rows={self.rows})"


def balance(weights: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Greedy longest-first assignment of items to ``n_bins`` bins; each bin's items sorted.

    Deterministic: ties go to the lower item and the lower bin. Empty bins are dropped.

    >>> [b.tolist() for b in balance(np.array([5.0, 1.0, 4.0, 2.0]), 2)]
    [[0, 1], [2, 3]]
    """
    order = np.argsort(-np.asarray(weights, dtype=np.float64), kind="stable")
    loads = np.zeros(max(1, n_bins))
    bins: list[list[int]] = [[] for _ in range(max(1, n_bins))]
    for i in order:
        b = int(np.argmin(loads))
        bins[b].append(int(i))
        loads[b] += float(weights[i])
    return [np.array(sorted(b), dtype=np.int64) for b in bins if b]


def plan_partitions(
    desc: PlanDescription, start: PlanOffset, end: PlanOffset, n_partitions: int = 2
) -> list[SpillwayPartition]:
    """Split the micro-batch ``(start, end]`` into at most ``n_partitions`` balanced partitions.

    Lanes that keep nothing are left out; lanes are weighted by ``keep + n / 8`` (generating a
    kept row costs more than hashing a candidate), plus ``GROUP_SCAN_WEIGHT · n`` for a lane
    with per-group keep counts (its keys are scanned first), and assigned longest-first.

    Raises
    ------
    InputDataError
        The offsets do not belong to this plan, or an end index moves backwards.

    Examples
    --------
    >>> from spillway.testing import ListFeed
    >>> feed = FeedSpec.of(ListFeed(times=[[0.1] * 4, [0.2] * 6], values=[[1.0] * 4, [2.0] * 6]))
    >>> desc = PlanDescription(plan="avg", seed=0, epoch_us=0, stw_s=10.0, lane_query=(0, 0),
    ...     lane_source=(0, 1), lane_feed=(0, 0), lane_n_sources=(2, 2), feeds=(feed.dump(),))
    >>> start = PlanOffset.initial("avg", n_lanes=2, epoch_us=0)
    >>> end = PlanOffset(plan="avg", epoch_us=0, boundary=1, t_us=10**6, end=(4, 6),
    ...                  keep=(2, 6), sic=(0.125, 1 / 12))
    >>> [p.rows for p in plan_partitions(desc, start, end)]
    [6, 2]
    """
    for name, off in (("start", start), ("end", end)):
        if off.plan != desc.plan or off.n_lanes != desc.n_lanes:
            raise InputDataError(
                f"{name} offset is for plan {off.plan!r} with {off.n_lanes} lanes, but the source "
                f"reads plan {desc.plan!r} with {desc.n_lanes} lanes: the checkpoint belongs to "
                "another node config; use a new checkpoint directory"
            )
    lo = np.asarray(start.end, dtype=np.int64)
    hi = np.asarray(end.end, dtype=np.int64)
    if (hi < lo).any():
        lane = int(np.argmax(hi < lo))
        raise InputDataError(
            f"plan {desc.plan!r} lane {lane}: end offset {hi[lane]} is before start {lo[lane]}"
        )
    keep = np.minimum(np.asarray(end.keep, dtype=np.int64), hi - lo)
    live = np.flatnonzero(keep > 0)
    if live.size == 0:
        return []
    for j, triples in end.read.items():
        if triples[0][0] < lo[j] or triples[-1][1] > hi[j]:
            raise InputDataError(
                f"plan {desc.plan!r} lane {j}: the ranges read {list(triples)} are not within "
                f"the batch's [{lo[j]}, {hi[j]})"
            )
        if j not in end.groups and keep[j] != sum(t[2] for t in triples):
            raise InputDataError(
                f"plan {desc.plan!r} lane {j}: keeps {keep[j]} of the "
                f"{sum(t[2] for t in triples)} tuples it reads, but lists no group kept in part"
            )
    grouped = np.array([int(j) in end.groups for j in live], dtype=bool)
    n = (hi - lo)[live]
    # a bounded read looks at its tuples only: they are what is hashed and scanned
    n = np.array(
        [sum(t[2] for t in end.read[int(j)]) if int(j) in end.read else v
         for j, v in zip(live.tolist(), n.tolist(), strict=True)],
        dtype=np.float64,
    )  # fmt: skip
    weights = keep[live] + n / 8.0 + GROUP_SCAN_WEIGHT * n * grouped
    sic = np.asarray(end.sic, dtype=np.float64)
    parts = []
    for b in balance(weights, n_partitions):
        ln = live[b]
        groups = None
        if grouped[b].any():
            groups = tuple(_lane_groups(end, int(j)) for j in ln)
        reads = None
        if any(int(j) in end.read for j in ln):
            reads = tuple(end.read.get(int(j)) for j in ln)
        since = np.asarray(start.cut, dtype=np.int64)[ln]
        parts.append(
            _partition(
                desc, ln, lo[ln], hi[ln], keep[ln], sic[ln], end.epoch_us, groups, since, reads
            )
        )
    return parts


def _lane_groups(off: PlanOffset, lane: int) -> tuple[np.ndarray, np.ndarray] | None:
    entry = off.groups.get(lane)
    if entry is None:
        return None
    return np.asarray(entry[0], dtype=np.int64), np.asarray(entry[1], dtype=np.int64)


def _partition(
    desc: PlanDescription,
    lanes: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    keep: np.ndarray,
    sic: np.ndarray,
    epoch_us: int,
    groups: tuple[tuple[np.ndarray, np.ndarray] | None, ...] | None = None,
    since_us: np.ndarray | None = None,
    reads: tuple[tuple[tuple[int, int, int], ...] | None, ...] | None = None,
) -> SpillwayPartition:
    """A partition of ``lanes`` (lane indices); the other arrays are already one per entry."""
    lane_feed = np.asarray(desc.lane_feed, dtype=np.int64)[lanes]
    used = sorted(set(lane_feed.tolist()))
    remap = {f: i for i, f in enumerate(used)}
    return SpillwayPartition(
        plan=desc.plan,
        seed=desc.seed,
        epoch_us=epoch_us,
        feeds=tuple(desc.feeds[f] for f in used),
        query_id=np.asarray(desc.lane_query, dtype=np.int32)[lanes],
        source_id=np.asarray(desc.lane_source, dtype=np.int32)[lanes],
        feed=np.array([remap[f] for f in lane_feed.tolist()], dtype=np.int64),
        lo=lo,
        hi=hi,
        keep=keep,
        sic=sic,
        groups=groups,
        since_us=since_us,
        reads=reads,
    )


def plan_batch_partitions(
    desc: PlanDescription,
    *,
    from_s: float,
    until_s: float,
    n_partitions: int = 2,
    chunk_rows: int = 500_000,
) -> list[SpillwayPartition]:
    """Partitions of a keep-all batch read of the tuples that arrived in ``[from_s, until_s)``.

    Each lane is cut into chunks of at most ``chunk_rows`` tuples; every tuple of a lane gets the
    SIC ``range_s / (stw_s · |S_q| · n_lane)`` (Eq. 1, STW count from the lane's mean rate).

    Raises
    ------
    ConfigError
        ``until_s <= from_s``, a negative ``from_s``, or ``chunk_rows < 1``.
    """
    if not (0 <= from_s < until_s):
        raise ConfigError(f"batch read needs 0 <= from_s < until_s, got {from_s!r}, {until_s!r}")
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    lo_l, hi_l = [], []
    for lane in range(desc.n_lanes):
        feed = cached_feed(desc.feeds[desc.lane_feed[lane]])
        # a log's time index needs the node's epoch (a worker's copy of the feed has none)
        if getattr(feed, "epoch_s", None) != desc.epoch_us / 1e6:
            feed.attach(desc.epoch_us / 1e6)
        s = desc.lane_source[lane]
        lo_l.append(int(feed.count(from_s)[s]))
        hi_l.append(int(feed.count(until_s)[s]))
    lo, hi = np.array(lo_l, dtype=np.int64), np.array(hi_l, dtype=np.int64)
    n = hi - lo
    with np.errstate(divide="ignore"):
        sic = np.where(
            n > 0,
            (until_s - from_s)
            / (desc.stw_s * np.asarray(desc.lane_n_sources, dtype=np.float64) * np.maximum(n, 1)),
            0.0,
        )
    # Chunks: (lane, lo, hi).
    c_lane, c_lo, c_hi = [], [], []
    for lane in np.flatnonzero(n > 0).tolist():
        for a in range(int(lo[lane]), int(hi[lane]), chunk_rows):
            c_lane.append(lane)
            c_lo.append(a)
            c_hi.append(min(a + chunk_rows, int(hi[lane])))
    if not c_lane:
        return []
    lanes = np.array(c_lane, dtype=np.int64)
    clo, chi = np.array(c_lo, dtype=np.int64), np.array(c_hi, dtype=np.int64)
    parts = []
    for b in balance((chi - clo).astype(np.float64), n_partitions):
        sel = lanes[b]
        parts.append(
            _partition(desc, sel, clo[b], chi[b], chi[b] - clo[b], sic[sel], desc.epoch_us)
        )
    return parts


# --------------------------------------------------------------------------------------------
# Reading rows


#: Most rows in one Arrow batch handed to Spark. A calibration or catch-up micro-batch can hold
#: millions of rows; generated and sent whole, one partition's batch needed an 834 MB buffer and
#: exhausted the JVM's direct memory (1 GiB). Chunks bound the memory of the hand-off.
MAX_BATCH_ROWS = 1 << 18


def read_batches(
    partition: SpillwayPartition, max_rows: int = MAX_BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Generate the partition's rows (numpy, vectorised) as Arrow batches of :data:`SCHEMA`, of
    at most ``max_rows`` rows each (the kept tuples of a lane are generated chunk by chunk).

    Examples
    --------
    >>> from spillway.testing import ListFeed
    >>> feed = FeedSpec.of(ListFeed(times=[[0.1, 0.2, 0.3]], values=[[1.0, 2.0, 3.0]]))
    >>> p = SpillwayPartition(plan="avg", seed=0, epoch_us=0, feeds=(feed.dump(),),
    ...     query_id=np.array([0], np.int32), source_id=np.array([0], np.int32),
    ...     feed=np.array([0]), lo=np.array([0]), hi=np.array([3]), keep=np.array([3]),
    ...     sic=np.array([0.1]))
    >>> [b.column("value").to_pylist() for b in read_batches(p, max_rows=2)]
    [[1.0, 2.0], [3.0]]
    """
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise ConfigError(f"max_rows must be an int >= 1, got {max_rows!r}")
    cols: dict[str, list[Any]] = {f.name: [] for f in ARROW_SCHEMA}
    held = 0
    for j in range(len(partition.lo)):
        qid, sid = int(partition.query_id[j]), int(partition.source_id[j])
        lo, hi = int(partition.lo[j]), int(partition.hi[j])
        key = lane_key(partition.seed, partition.plan, qid, sid)
        feed = cached_feed(partition.feeds[int(partition.feed[j])])
        groups = partition.groups[j] if partition.groups is not None else None
        reads = getattr(partition, "reads", None)
        read = reads[j] if reads is not None else None
        fetched = None  # a log's records read once for their keys: the kept are taken from them
        if read is not None:  # a bounded group read: only these tuples are looked at
            idx = read_index(read, key, log=feed.log, gap=feed.read_gap)
        if groups is None and read is not None:
            kept = idx
        elif groups is None and feed.log:  # a log: read only what is kept
            keep = int(partition.keep[j])
            kept = select_kept_runs(lo, hi, keep, key, log_runs(hi - lo, keep, feed.read_gap))
        elif groups is None:
            kept = select_kept(lo, hi, int(partition.keep[j]), key)
        else:
            scan = idx if read is not None else np.arange(lo, hi, dtype=np.int64)
            if feed.log:
                fetched = feed.records(sid, scan, partition.epoch_us / 1e6)
                if fetched.get("offset") is not None:  # less the offsets a compaction removed
                    scan = np.asarray(fetched["offset"], dtype=np.int64)
                keys = np.asarray(fetched["key"], dtype=np.int64)
            else:
                keys = feed.keys(sid, scan)
            index = scan if read is not None or fetched is not None else None
            kept = select_kept_groups(lo, hi, key, keys, groups[0], groups[1], index=index)
        at = 0
        while at < kept.size:
            idx = kept[at : at + max_rows - held]
            at += idx.size
            r = (
                feed.records(sid, idx, partition.epoch_us / 1e6)
                if fetched is None
                else _taken(fetched, np.searchsorted(scan, idx))
            )
            n = len(r["key"])
            cols["query_id"].append(np.full(n, qid, dtype=np.int32))
            cols["source_id"].append(np.full(n, sid, dtype=np.int32))
            cols["key"].append(np.asarray(r["key"], dtype=np.int64))
            cols["value"].append(np.asarray(r["value"], dtype=np.float64))
            carried = r.get("sic")  # a link lane: each record keeps the SIC it carries
            cols["sic"].append(
                np.full(n, float(partition.sic[j]), dtype=np.float64)
                if carried is None
                else np.asarray(carried, dtype=np.float64)
            )
            cols["event_ts"].append(_micros(r["event_ts"], 0))
            cols["arrival_ts"].append(_micros(r["arrival_ts"], 0))
            if r.get("topic") is not None and carried is None and int(partition.since_us[j]) > 0:
                # a log: a record from before the last cut is late (before the first cut, a
                # record older than the node is a backlog the first batch processes). A link
                # lane's record is never late: its timestamp is the source time of the upstream
                # window it carries (LinkWriter), so it comes after the cut of that time, and
                # its result counts in the STW of that source time at the coordinator.
                since = (partition.epoch_us + int(partition.since_us[j])) / 1e6
                late = np.asarray(r["event_ts"], dtype=np.float64) < since
                if late.any():
                    err = r.get("error")
                    error = np.array(err if err is not None else [None] * n, dtype=object)
                    error[late & np.array([e is None for e in error], dtype=bool)] = LATE
                    r = {**r, "error": error}
            for c in LOG_COLUMNS:
                v = r.get(c)
                cols[c].append(_log_column(c, v, n))
            held += n
            if held == max_rows:
                yield _arrow_batch(cols)
                cols = {f.name: [] for f in ARROW_SCHEMA}
                held = 0
    if held:
        yield _arrow_batch(cols)


def _taken(records: Mapping[str, Any], pos: np.ndarray) -> dict[str, Any]:
    """The rows ``pos`` of a feed's :meth:`~spillway.feeds.base.Feed.records` (its per-row
    arrays sliced; a column given once for all rows, such as a Kafka lane's topic, kept).

    >>> r = {"key": np.array([4, 5, 6]), "topic": "t", "sic": None}
    >>> t = _taken(r, np.array([2, 0]))
    >>> t["key"].tolist(), t["topic"], t["sic"]
    ([6, 4], 't', None)
    """
    n = len(records["key"])
    return {
        c: v[pos] if isinstance(v, np.ndarray) and v.ndim == 1 and len(v) == n else v
        for c, v in records.items()
    }


def _log_column(name: str, value: Any, n: int) -> Any:
    """One lane chunk of a :data:`LOG_COLUMNS` column: an int (all nulls, ``n`` of them), a
    scalar for a whole chunk (the topic, the partition), or one value per row."""
    if value is None:
        return n
    if np.ndim(value) == 0:
        return np.full(n, value, dtype=object if name == "topic" else np.int64)
    return np.asarray(value)


def _arrow_batch(cols: Mapping[str, list[Any]]) -> pa.RecordBatch:
    arrays = []
    for f in ARROW_SCHEMA:
        parts = cols.get(f.name, [])
        if f.name in LOG_COLUMNS:
            chunks = [
                pa.nulls(p, type=f.type) if isinstance(p, int) else pa.array(p, type=f.type)
                for p in parts
            ]
            arrays.append(pa.concat_arrays(chunks) if chunks else pa.array([], type=f.type))
            continue
        data = np.concatenate(parts) if parts else np.empty(0, dtype=_NP_TYPES[f.name])
        arrays.append(pa.array(data, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def read_partition(partition: SpillwayPartition) -> pa.RecordBatch:
    """All of the partition's rows as ONE Arrow batch (:func:`read_batches` joined; for tests
    and measurements: Spark reads the chunks).

    Examples
    --------
    >>> from spillway.testing import ListFeed
    >>> feed = FeedSpec.of(ListFeed(times=[[0.1, 0.2, 0.3]], values=[[1.0, 2.0, 3.0]]))
    >>> p = SpillwayPartition(plan="avg", seed=0, epoch_us=0, feeds=(feed.dump(),),
    ...     query_id=np.array([0], np.int32), source_id=np.array([0], np.int32),
    ...     feed=np.array([0]), lo=np.array([0]), hi=np.array([3]), keep=np.array([3]),
    ...     sic=np.array([0.1]))
    >>> read_partition(p).column("value").to_pylist()
    [1.0, 2.0, 3.0]
    """
    batches = list(read_batches(partition))
    if len(batches) == 1:
        return batches[0]
    table = pa.Table.from_batches(batches, schema=ARROW_SCHEMA).combine_chunks()
    return table.to_batches()[0] if table.num_rows else _arrow_batch({})


_NP_TYPES = {
    "query_id": np.int32,
    "source_id": np.int32,
    "key": np.int64,
    "value": np.float64,
    "sic": np.float64,
    "event_ts": np.int64,
    "arrival_ts": np.int64,
}


def _micros(seconds: np.ndarray, epoch_us: int) -> np.ndarray:
    return np.rint(np.asarray(seconds, dtype=np.float64) * 1e6).astype(np.int64) + np.int64(
        epoch_us
    )


# --------------------------------------------------------------------------------------------
# The PySpark data source


@dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """The data source's options, parsed and validated.

    Raises
    ------
    ConfigError
        A missing or malformed option (the message names it).

    Examples
    --------
    >>> o = SourceOptions.parse({"address": "127.0.0.1:9", "authkey": "00ff", "plan": "avg"})
    >>> o.plan, o.partitions
    ('avg', 2)
    """

    address: str
    authkey: str
    plan: str
    partitions: int = 2
    timeout_s: float = 30.0
    from_s: float | None = None
    until_s: float | None = None
    chunk_rows: int = 500_000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Read the options Spark passes (case-insensitive string map)."""
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        for required in ("address", "authkey", "plan"):
            if not opts.get(required):
                raise ConfigError(
                    f"the spillway source needs the option {required!r}; a Node sets it "
                    "(see spillway.spark.node.Node)"
                )
        from spillway.spark.channel import parse_address

        parse_address(opts["address"])
        try:
            bytes.fromhex(opts["authkey"])
        except ValueError:
            raise ConfigError("option 'authkey' must be hex text") from None

        def num(name: str, kind: type, default: Any) -> Any:
            if name not in opts:
                return default
            try:
                return kind(opts[name])
            except ValueError:
                raise ConfigError(
                    f"option {name!r} must be a {kind.__name__}, got {opts[name]!r}"
                ) from None

        parts = num("partitions", int, 2)
        if parts < 1:
            raise ConfigError(f"option 'partitions' must be >= 1, got {parts}")
        return cls(
            address=opts["address"],
            authkey=opts["authkey"],
            plan=opts["plan"],
            partitions=parts,
            timeout_s=num("timeout_s", float, 30.0),
            from_s=num("from_s", float, None),
            until_s=num("until_s", float, None),
            chunk_rows=num("chunk_rows", int, 500_000),
        )


def source_options(address: str, authkey: bytes, plan: str, **extra: Any) -> dict[str, str]:
    """The option map a reader of ``plan`` needs (all values as strings).

    >>> source_options("127.0.0.1:9", b"\\x01", "avg")["authkey"]
    '01'
    """
    out = {"address": address, "authkey": authkey.hex(), "plan": plan}
    out.update({k: str(v) for k, v in extra.items()})
    return out


class _ControllerLink:
    """Lazily connected client + the plan description (never pickled to executors)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: Any = None
        self._desc: PlanDescription | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from spillway.spark.channel import ControlClient

            self._client = ControlClient(
                self.options.address, self.options.authkey, timeout_s=self.options.timeout_s
            )
        return self._client

    def describe(self) -> PlanDescription:
        if self._desc is None:
            self._desc = PlanDescription.from_dict(
                self.client.call("describe", plan=self.options.plan)
            )
        return self._desc

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_client": None, "_desc": self._desc}


class SpillwayStreamReader(DataSourceStreamReader):
    """Driver side: offsets from the controller; executors: rows from the offsets alone."""

    def __init__(self, options: SourceOptions) -> None:
        self._link = _ControllerLink(options)

    def initialOffset(self) -> dict:
        o = self._link.options
        return dict(self._link.client.call("initial", plan=o.plan))

    def latestOffset(self, start: dict, limit: Any) -> dict:
        o = self._link.options
        return dict(self._link.client.call("latest", plan=o.plan, start=start))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        desc = self._link.describe()
        return plan_partitions(
            desc,
            PlanOffset.from_json(start),
            PlanOffset.from_json(end),
            self._link.options.partitions,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SpillwayPartition):
            raise InputDataError(f"unexpected partition {partition!r}")
        yield from read_batches(partition)

    def commit(self, end: dict) -> None:
        o = self._link.options
        self._link.client.call("commit", plan=o.plan, end=end)

    def stop(self) -> None:
        self._link.close()


class SpillwayBatchReader(DataSourceReader):
    """Keep-all batch read of ``[from_s, until_s)`` (exact answers)."""

    def __init__(self, options: SourceOptions) -> None:
        if options.from_s is None or options.until_s is None:
            raise ConfigError(
                "a batch read of the spillway source needs the options 'from_s' and 'until_s' "
                "(feed seconds); use readStream for streaming"
            )
        self._link = _ControllerLink(options)

    def partitions(self) -> Sequence[InputPartition]:
        o = self._link.options
        assert o.from_s is not None and o.until_s is not None
        desc = self._link.describe()
        self._link.close()
        return plan_batch_partitions(
            desc,
            from_s=o.from_s,
            until_s=o.until_s,
            n_partitions=o.partitions,
            chunk_rows=o.chunk_rows,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SpillwayPartition):
            raise InputDataError(f"unexpected partition {partition!r}")
        yield from read_batches(partition)


class SpillwayDataSource(DataSource):
    """``format("spillway")``: a node's plan as a stream (shed) or a time range (keep-all)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SpillwayStreamReader(SourceOptions.parse(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SpillwayBatchReader(SourceOptions.parse(self.options))


def register_source(spark: Any) -> None:
    """Register ``format("spillway")`` with a SparkSession (once per session)."""
    if getattr(spark, "_spillway_source_registered", False):
        return
    spark.dataSource.register(SpillwayDataSource)
    spark._spillway_source_registered = True
