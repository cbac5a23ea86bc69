"""A folder where files keep arriving as a spillway feed: lanes are sources, rows are indices.

THEMIS's node input buffer on a real stream (docs/design.md, "Real streams"), built as the Kafka
topic feed is (:mod:`spillway.kafka.feed`), with a folder of JSON-lines, CSV or Parquet files in
place of a topic:

- **lanes**: the feed has ``sources`` lanes (the query's ``sources``); a file belongs to lane
  ``crc32(its relative path) mod sources``, fixed by its name;
- **offsets**: a lane's tuple ``i`` is row ``i`` of the lane's files laid end to end in the
  order they were admitted (:mod:`spillway.feeds.manifest`: an append-only record of the files
  with their record counts, so a query restarted from its checkpoint maps Spark's offsets to the
  same rows, and executors read the same rows as the driver);
- **arrival**: a file's rows arrive at its modification time (a file already there when the
  node started arrives at the start); the tuples of a lane that arrived by feed time ``t`` are
  the rows before the first row whose running largest time reaches ``epoch + t``, as Kafka's
  time index cuts a partition. With ``time_column`` that time is the row's own event time
  (Unix time, as the producers' clocks give it) and the cut falls inside a file;
- **late and malformed rows**: a row admitted after the cut its window was decided at (a file
  renamed into place after a window closed with an older time) is late; a row that does not
  parse with the schema is malformed. Both are counted and set aside once into the dead-letter
  folder by the node (:mod:`spillway.spark.dead_letters`), with the file (``topic``), the lane
  (``partition``), the lane offset (``offset``) and the reason, which begins with the row's
  position in its file (``row 17: not JSON: ...``).

Options follow Spark's file source where they mean the same (``path``, ``format``, ``schema``
as a DDL string, ``header`` for CSV, ``recursiveFileLookup``, ``pathGlobFilter``) plus those of
the Kafka feed (:mod:`spillway.feeds.log_options`): ``value_column`` (required unless
``records``), ``key_column`` (integers or texts such as ``"JFK-LAX"``), ``time_column``,
``dead_letter`` (a folder), ``records`` (default false: true hands a user's query every row's
fields, as the JSON object text ``raw`` that ``from_json(raw, feed.schema_ddl)`` reads back),
and ``manifest`` (where the file record goes; default ``_spillway/manifest.jsonl`` inside the
folder).

The driver (:meth:`FolderFeed.count`) lists the folder once per decision, admits new files and
cuts; executors (:meth:`FolderFeed.records`) read the rows of an exact offset range from the
files, never list. The feed travels to executors as an object: :attr:`portable` is True.

Examples
--------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.jsonl").write_text('{"route": "JFK-LAX", "fare": 12.5}\\n{"route": 7}\\n')
>>> f = FolderFeed(n_sources=1, path=str(d), format="json", schema="route string, fare double",
...                key_column="route", value_column="fare")
>>> f.attach(epoch_s=0.0)
>>> f.count(1e10).tolist()
[2]
>>> r = f.records(0, np.array([0, 1]))
>>> r["key_text"].tolist(), r["value"].tolist(), r["error"].tolist()
(['JFK-LAX', None], [12.5, 0.0], [None, "row 1: missing field 'fare'"])
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from spillway.errors import ConfigError, InputDataError
from spillway.feeds.base import Feed
from spillway.feeds.files import FORMATS, Records, parse_records, read_records
from spillway.feeds.hashing import text_keys
from spillway.feeds.log_options import SHARED, LogFields, flag, reject_unknown
from spillway.feeds.manifest import FileEntry, Manifest
from spillway.feeds.row_json import rows_json

#: The feed's options: its own, then those every log feed shares
#: (:mod:`spillway.feeds.log_options`).
OPTIONS = ("path", "header", "recursiveFileLookup", "pathGlobFilter", "manifest", *SHARED)

#: Parsed files an executor keeps (a range often ends inside a file the next range continues).
FILE_CACHE = 4


def lane_of(file: str, n_lanes: int) -> int:
    """The lane of a file: ``crc32(relative path) mod n_lanes`` (the same in every process).

    >>> lane_of("part-0001.jsonl", 4) == lane_of("part-0001.jsonl", 4)
    True
    """
    return zlib.crc32(file.encode()) % n_lanes


class FolderFeed(LogFields, Feed):
    """The files arriving in a folder as a feed (see the module docstring).

    Parameters
    ----------
    n_sources : lanes (default 1); files are spread over them by name.
    rate, profile, profile_options, seed : the shared feed signature, unused (the folder sets
        the rate).
    **options : ``path`` (required, an existing folder), ``format`` (``json``, ``csv`` or
        ``parquet``; default ``json``), ``schema`` (required, DDL), ``header`` (CSV),
        ``recursiveFileLookup``, ``pathGlobFilter``, ``value_column`` (required unless
        ``records``), ``key_column``, ``time_column``, ``dead_letter``, ``records``,
        ``manifest``. The shared ones become the attributes of
        :class:`~spillway.feeds.log_options.LogFields` (``format``, ``schema_ddl``, ...).

    Raises
    ------
    ConfigError
        A missing, unknown or bad option; ``path`` is not a folder.
    """

    name = "folder"
    portable: ClassVar[bool] = True
    log: ClassVar[bool] = True

    def __init__(
        self,
        *,
        n_sources: int | None = None,
        rate: float | None = None,
        profile: str = "constant",
        profile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
        **options: Any,
    ) -> None:
        opts = dict(options)
        reject_unknown("folder", opts, OPTIONS)
        self.take_options("folder", opts, formats=FORMATS)
        if opts.get("path") in (None, ""):
            raise ConfigError("folder option 'path' is required: the folder files arrive in")
        self.root = Path(str(opts["path"])).expanduser()
        if not self.root.is_dir():
            raise ConfigError(
                f"folder option 'path': {str(self.root)!r} is not a folder; create it or point "
                "'path' at the folder the files arrive in"
            )
        self.header = flag("folder", "header", opts.get("header", False))
        recursive = flag("folder", "recursiveFileLookup", opts.get("recursiveFileLookup", False))
        glob = opts.get("pathGlobFilter")
        n = 1 if n_sources is None else int(n_sources)
        if n < 1:
            raise ConfigError(f"folder feed: sources must be >= 1, got {n_sources!r}")
        self._n = n
        self.manifest = Manifest(
            self.root,
            fmt=self.format,
            glob=None if glob is None else str(glob),
            recursive=recursive,
            path=opts.get("manifest"),
        )
        self.epoch_s: float | None = None
        # Lanes: per lane, the manifest index, first offset and row count of each of its files.
        self._lane_files: list[list[int]] = [[] for _ in range(n)]
        self._lane_starts: list[list[int]] = [[] for _ in range(n)]
        self._lane_end = np.zeros(n, dtype=np.int64)
        self._synced = 0
        self._reset_times()
        self._cut_cache: dict[float, np.ndarray] = {}
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Records] = OrderedDict()
        self.manifest.load()
        self._sync()

    # ---- lanes ------------------------------------------------------------------------------

    @property
    def n_sources(self) -> int:
        return self._n

    def _rows(self, e: FileEntry) -> int:
        header = 1 if self.header and self.format == "csv" else 0
        return max(e.records - header, 0)

    def _sync(self) -> None:
        """Lay the manifest's entries not yet seen onto their lanes."""
        entries = self.manifest.entries
        for j in range(self._synced, len(entries)):
            lane = lane_of(entries[j].file, self._n)
            self._lane_files[lane].append(j)
            self._lane_starts[lane].append(int(self._lane_end[lane]))
            self._lane_end[lane] += self._rows(entries[j])
        self._synced = len(entries)

    def files(self) -> list[FileEntry]:
        """The admitted files, in order."""
        return list(self.manifest.entries)

    # ---- the driver's side ------------------------------------------------------------------

    def attach(self, epoch_s: float) -> None:
        """The node's epoch (Unix seconds): feed time ``t`` is file time ``epoch_s + t``."""
        with self._lock:
            self.epoch_s = float(epoch_s)
            self._reset_times()
            self._cut_cache.clear()

    def _reset_times(self) -> None:
        # Per lane and file: the largest row time up to the end of the file, and (time_column)
        # the running largest time of each of its rows.
        self._tmax: list[list[float]] = [[] for _ in range(self._n)]
        self._rowmax: list[list[np.ndarray | None]] = [[] for _ in range(self._n)]

    def _file_time(self, e: FileEntry, epoch_s: float) -> float:
        return max(e.mtime, epoch_s)

    def _index_times(self, epoch_s: float) -> None:
        entries = self.manifest.entries
        for lane in range(self._n):
            files = self._lane_files[lane]
            tmax, rowmax = self._tmax[lane], self._rowmax[lane]
            for j in files[len(tmax) :]:
                e = entries[j]
                prev = tmax[-1] if tmax else -np.inf
                ft = self._file_time(e, epoch_s)
                if self.time_column is None:
                    tmax.append(max(prev, ft))
                    rowmax.append(None)
                    continue
                times = self._times(e)
                run = np.maximum.accumulate(np.maximum(times, prev)) if times.size else times
                tmax.append(float(run[-1]) if run.size else prev)
                rowmax.append(run)

    def _times(self, e: FileEntry) -> np.ndarray:
        """The ``time_column`` of every row of a file (Unix s; -inf where malformed)."""
        recs = self._read(e.file)
        n = self._rows(e)
        table, errors, _ = parse_records(recs, np.arange(n), self.format, self.schema)
        t = _seconds(table.column(self.time_column))
        if errors:
            t[list(errors)] = -np.inf
        return t

    def count(self, t: float) -> np.ndarray:
        """Per lane, the rows that arrived by feed time ``t``: the lane offset of the first row
        whose running largest time reaches ``epoch + t`` (the lane's end when none has yet).
        Lists the folder and admits its new files first."""
        if self.epoch_s is None:
            raise ConfigError("a folder feed needs the node's epoch (attach) before counting")
        key = round(float(t), 6)
        with self._lock:
            hit = self._cut_cache.get(key)
            if hit is not None:
                return hit.copy()
            self.manifest.refresh()
            self._sync()
            self._index_times(self.epoch_s)
            at = self.epoch_s + float(t)
            out = self._lane_end.copy()
            for lane in range(self._n):
                tmax = np.asarray(self._tmax[lane])
                j = int(np.searchsorted(tmax, at, side="left"))
                if j == tmax.size:
                    continue
                start = self._lane_starts[lane][j]
                rowmax = self._rowmax[lane][j]
                out[lane] = start + (
                    0 if rowmax is None else int(np.searchsorted(rowmax, at, side="left"))
                )
            if len(self._cut_cache) > 4096:
                self._cut_cache.clear()
            self._cut_cache[key] = out
            return out.copy()

    # ---- the executors' side ----------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_lock=None, _cache=OrderedDict(), _cut_cache={})
        state.update(_tmax=[[] for _ in range(self._n)], _rowmax=[[] for _ in range(self._n)])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _read(self, file: str) -> Records:
        recs = self._cache.get(file)
        if recs is None:
            recs = read_records(self.root / file, self.format, self.header)
            self._cache[file] = recs
            while len(self._cache) > FILE_CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(file)
        return recs

    def records(self, source: int, index: np.ndarray, epoch_s: float = 0.0) -> dict[str, Any]:
        """The tuples ``index`` (lane offsets) of lane ``source``: ``key``, ``value``,
        ``key_text`` (text keys), ``event_ts`` (the time column, or the file's time),
        ``arrival_ts`` (the file's time: its modification time, at least ``epoch_s``),
        ``offset``, ``topic`` (the file), ``partition`` (the lane), ``error`` and ``raw`` (a
        malformed row's text; with ``records``, a valid row's fields as a JSON object,
        :func:`~spillway.feeds.row_json.rows_json`)."""
        idx = np.asarray(index, dtype=np.int64)
        if idx.size == 0:
            return _empty()
        with self._lock:
            if int(idx.max()) >= int(self._lane_end[source]):
                self.manifest.load()  # files the driver admitted since this copy was made
                self._sync()
            if int(idx.max()) >= int(self._lane_end[source]):
                raise InputDataError(
                    f"folder {str(self.root)!r} lane {source}: offset {int(idx.max())} is past "
                    f"the {int(self._lane_end[source])} rows its manifest "
                    f"{str(self.manifest.path)!r} records; was the manifest deleted?"
                )
            starts = np.asarray(self._lane_starts[source], dtype=np.int64)
            files = self._lane_files[source]
            at = np.searchsorted(starts, idx, side="right") - 1
            parts = []
            for j in np.unique(at).tolist():
                sel = at == j
                entry = self.manifest.entries[files[j]]
                rows = idx[sel] - starts[j]
                table, errors, raw = parse_records(
                    self._read(entry.file), rows, self.format, self.schema
                )
                parts.append((entry, np.flatnonzero(sel), rows, table, errors, raw))
        return self._assemble(source, idx, parts, epoch_s)

    def _assemble(
        self, source: int, idx: np.ndarray, parts: list[Any], epoch_s: float
    ) -> dict[str, Any]:
        n = idx.size
        key = np.zeros(n, dtype=np.int64)
        key_text = np.full(n, None, dtype=object) if self._text_keys else None
        value = np.zeros(n)
        event = np.zeros(n)
        arrival = np.zeros(n)
        topic = np.empty(n, dtype=object)
        error = np.full(n, None, dtype=object)
        raw = np.full(n, None, dtype=object)
        for entry, s, rows, table, errors, texts in parts:
            m = rows.size
            ft = self._file_time(entry, epoch_s)
            if self.value_column is not None:
                value[s] = np.nan_to_num(
                    table.column(self.value_column)
                    .cast(pa.float64())
                    .to_numpy(zero_copy_only=False),
                    nan=0.0,
                )
            if self.record_fields:
                raw[s] = rows_json(table).to_numpy(zero_copy_only=False)
            if self.key_column is not None:
                kc = table.column(self.key_column)
                if key_text is not None:
                    kt = np.array(kc.to_pylist(), dtype=object)
                    good = np.array([k is not None for k in kt], dtype=bool)
                    k = np.zeros(m, dtype=np.int64)
                    k[good] = text_keys(kt[good])
                    key[s], key_text[s] = k, kt
                else:
                    key[s] = kc.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
            if self.time_column is not None:
                t = _seconds(table.column(self.time_column))
                event[s] = np.where(np.isfinite(t), t, ft)
            else:
                event[s] = ft
            arrival[s] = ft
            topic[s] = entry.file
            for i, why in errors.items():
                error[s[i]] = f"row {int(rows[i])}: {why}"
                raw[s[i]] = texts[i]
        return {
            "key": key,
            "key_text": key_text,
            "value": value,
            "event_ts": event,
            "arrival_ts": arrival,
            "offset": idx,
            "topic": topic,
            "partition": source,
            "error": error,
            "raw": raw,
        }

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        r = self.records(source, index, self.epoch_s or 0.0)
        out = {"key": r["key"], "value": r["value"]}
        if r["key_text"] is not None:
            out["key_text"] = r["key_text"]
        return out

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        """Rows' arrival as feed seconds (after the epoch)."""
        base = self.epoch_s or 0.0
        return np.asarray(self.records(source, index, base)["arrival_ts"]) - base

    def __repr__(self) -> str:
        return (
            f"FolderFeed(path={str(self.root)!r}, format={self.format!r}, lanes={self._n}, "
            f"files={len(self.manifest.entries)})"
        )


def _seconds(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A timestamp or numeric column as Unix seconds (NaN where null)."""
    if pa.types.is_timestamp(col.type):
        us = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        return us.cast(pa.float64()).to_numpy(zero_copy_only=False) / 1e6
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)


def _empty() -> dict[str, Any]:
    z = np.zeros(0)
    return {
        "key": np.zeros(0, np.int64),
        "key_text": None,
        "value": z,
        "event_ts": z,
        "arrival_ts": z,
        "offset": np.zeros(0, np.int64),
        "topic": "",
        "partition": -1,
        "error": np.zeros(0, object),
        "raw": np.zeros(0, object),
    }
