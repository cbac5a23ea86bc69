"""Replay a user's CSV or Parquet file as a feed, at the pace of its timestamp column.

The file is read once, at construction (pyarrow). Each valid row becomes a tuple; its arrival
time is ``(timestamp − first timestamp) / speed`` seconds, its ``value`` the value column, its
``key`` the key column (0 without one). Rows go to sources by the source column (its distinct
labels, sorted, are sources 0, 1, ...; there must be exactly ``n_sources`` of them), or without
one, in time order, round-robin over the ``n_sources`` sources. ``event_time`` is the recorded
timestamp in seconds (epoch seconds for date-times).

Timestamps may be numbers (seconds), ISO 8601 date-time strings, or Parquet date/timestamp
columns. A string column is read as numbers when most of its entries are numbers, else as
date-times.

Keys may be integers or texts (``"JFK-LAX"``; a column is read as integers when most of its
entries are, and its other entries are then malformed): a text key becomes a stable int64
(:func:`spillway.feeds.hashing.text_keys`) for groups and joins, and the text is kept in the
payload's ``key_text``. Event times are the recorded times (:meth:`ReplayFeed.event_clock`), so
windows are in the data's own time: with ``speed`` 43,200 a recorded day passes in 2 s and a
1-day window closes every 2 s.

Malformed rows (a wrong number of fields, a missing field, a timestamp or value that does not
parse) are never dropped silently and never stop the replay: they are set
aside with their line number, reason and text in :attr:`ReplayFeed.rejects`, counted by
:meth:`ReplayFeed.rejected`, and written to ``rejects_path`` (CSV) when one is given. A missing
or unreadable file, an unsupported file type or a missing column raises
:class:`spillway.errors.InputDataError` with one line naming the file and the problem.

Replay is finite (``count`` stops growing after the last row) unless ``loop=True``: then the file
repeats every ``period_s`` (its span plus one mean gap between rows).

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "cpu.csv").write_text("ts,cpu\\n0.0,10\\n0.5,oops\\n1.0,30\\n2.0\\n3.0,50\\n")
>>> f = ReplayFeed(path=d / "cpu.csv", time_column="ts", value_column="cpu")
>>> f.count(1.5).tolist(), f.payload(0, np.arange(3))["value"].tolist(), f.rejected()
([2], [10.0, 30.0, 50.0], 2)
>>> f.rejects[["line", "reason"]].values.tolist()
[[3, "value column 'cpu': cannot parse 'oops'"], [5, 'expected 2 fields, got 1']]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from spillway.errors import ConfigError, InputDataError
from spillway.feeds.base import Feed
from spillway.feeds.hashing import text_keys
from spillway.feeds.options import check_index, check_source, check_time, count_of, positive

_CSV_SUFFIXES = (".csv", ".tsv", ".txt")
_PARQUET_SUFFIXES = (".parquet", ".pq")
REJECT_COLUMNS = ("line", "reason", "text")


def _fmt(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if path.is_dir() or any(s in _PARQUET_SUFFIXES for s in suffixes):
        return "parquet"
    if any(s in _CSV_SUFFIXES for s in suffixes):
        return "csv"
    raise InputDataError(
        f"replay file {str(path)!r}: unsupported file type {''.join(path.suffixes) or '(none)'}; "
        "use .csv (optionally compressed, e.g. .csv.gz) or .parquet"
    )


def _why(e: BaseException) -> str:
    return (getattr(e, "strerror", None) or str(e)).strip().splitlines()[0]


class _Reader:
    """Reads the needed columns as a table plus the rows the parser itself rejected."""

    def __init__(self, path: Path, needed: list[str]) -> None:
        self.path = path
        self.name = str(path)
        self.bad: list[tuple[int, str, str]] = []  # (line, reason, text)
        if not path.exists():
            raise InputDataError(f"cannot read replay file {self.name!r}: no such file")
        self.fmt = _fmt(path)
        try:
            names = self._columns()
        except (OSError, pa.ArrowException, ValueError) as e:
            raise InputDataError(f"cannot read replay file {self.name!r}: {_why(e)}") from None
        missing = [c for c in needed if c not in names]
        if missing:
            raise InputDataError(
                f"replay file {self.name!r} has no column {missing[0]!r} "
                f"(columns: {', '.join(names) or 'none'})"
            )
        try:
            self.table = self._read(needed)
        except (OSError, pa.ArrowException, ValueError) as e:
            raise InputDataError(f"cannot read replay file {self.name!r}: {_why(e)}") from None
        if self.fmt == "csv":
            # Line numbers of the rows that were parsed (header = line 1; blank lines skipped).
            bad_lines = np.array(sorted(b[0] for b in self.bad), dtype=np.int64)
            every = np.arange(2, 2 + self.table.num_rows + len(bad_lines), dtype=np.int64)
            self.lines = np.setdiff1d(every, bad_lines, assume_unique=True)
        else:
            self.lines = np.arange(1, self.table.num_rows + 1, dtype=np.int64)

    def _delimiter(self) -> str:
        return "\t" if ".tsv" in [s.lower() for s in self.path.suffixes] else ","

    def _columns(self) -> list[str]:
        if self.fmt == "parquet":
            return (
                list(pq.read_schema(self.path).names)
                if self.path.is_file()
                else list(pq.ParquetDataset(self.path).schema.names)
            )
        opts = pacsv.ParseOptions(delimiter=self._delimiter(), invalid_row_handler=lambda r: "skip")
        with pacsv.open_csv(self.path, parse_options=opts) as reader:
            return list(reader.schema.names)

    def _on_invalid(self, row: Any) -> str:
        reason = f"expected {row.expected_columns} fields, got {row.actual_columns}"
        self.bad.append((int(row.number) if row.number is not None else -1, reason, row.text))
        return "skip"

    def _read(self, needed: list[str]) -> pa.Table:
        if self.fmt == "parquet":
            return pq.read_table(self.path, columns=needed)
        return pacsv.read_csv(
            self.path,
            read_options=pacsv.ReadOptions(use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=self._delimiter(), invalid_row_handler=self._on_invalid
            ),
            convert_options=pacsv.ConvertOptions(
                include_columns=needed,
                column_types={c: pa.string() for c in needed},
                strings_can_be_null=True,
            ),
        )


def _to_seconds(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(seconds as float64, ok mask) of a timestamp column of any supported type."""
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        ns = col.cast(pa.timestamp("ns", tz=getattr(t, "tz", None))).cast(pa.int64())
        arr = ns.to_numpy(zero_copy_only=False).astype(np.float64)
        ok = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        return np.where(ok, arr / 1e9, np.nan), ok
    s = col.to_pandas()
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        num = s.astype(np.float64).to_numpy()
        return num, np.isfinite(num)
    num = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
    present = s.notna().to_numpy()
    if present.sum() == 0 or np.isfinite(num).sum() * 2 >= present.sum():
        return num, np.isfinite(num)
    dt = pd.to_datetime(s, errors="coerce", utc=True, format="ISO8601")
    ok = dt.notna().to_numpy()
    secs = np.full(len(s), np.nan)
    if ok.any():
        secs[ok] = dt[ok].astype("int64").to_numpy() / 1e9
    return secs, ok


def _to_float(col: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        return col.to_pandas().astype(np.float64).to_numpy()
    return pd.to_numeric(col.to_pandas(), errors="coerce").to_numpy(dtype=np.float64)


class ReplayFeed(Feed):
    """A feed replaying the rows of a CSV or Parquet file by their timestamps.

    Parameters
    ----------
    path : the file (``.csv``, ``.tsv``, compressed ``.csv.gz``..., ``.parquet`` or a Parquet
        folder).
    time_column : column of timestamps (seconds, or ISO 8601 date-times).
    value_column : column of values (numbers).
    key_column : optional column of keys (groups, join keys): integers, or texts.
    source_column : optional column naming each row's source.
    speed : replay speed factor (2 plays the file twice as fast).
    loop : repeat the file for ever instead of stopping after its last row.
    rejects_path : if given, malformed rows are written there as CSV (``line, reason, text``).
    n_sources : number of sources (the number of distinct labels of ``source_column``).
    rate, profile, profile_options, seed : accepted for a uniform feed signature; the rate
        comes from the file, so ``rate`` and ``seed`` are unused and the profile must be
        ``constant`` without options.
    """

    name = "replay"

    def __init__(
        self,
        *,
        path: str | Path,
        time_column: str,
        value_column: str,
        key_column: str | None = None,
        source_column: str | None = None,
        speed: float = 1.0,
        loop: bool = False,
        rejects_path: str | Path | None = None,
        n_sources: int = 1,
        rate: float | None = None,
        profile: str = "constant",
        profile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self._n = count_of("n_sources", n_sources)
        self.speed = positive("replay speed", speed)
        if not isinstance(loop, bool):
            raise ConfigError(f"replay loop must be true or false, got {loop!r}")
        if profile != "constant" or profile_options:
            raise ConfigError(
                f"replay follows the file's timestamps: profile must be 'constant' without "
                f"options, got {profile!r} {dict(profile_options or {})}; use speed to change pace"
            )
        for opt, col in (("time_column", time_column), ("value_column", value_column)):
            if not isinstance(col, str) or not col:
                raise ConfigError(f"replay {opt} must be a column name, got {col!r}")
        self.path = Path(path)
        self.loop = loop
        cols = {"time": time_column, "value": value_column}
        if key_column is not None:
            cols["key"] = key_column
        if source_column is not None:
            cols["source"] = source_column
        self.columns = cols
        reader = _Reader(self.path, list(dict.fromkeys(cols.values())))
        self._load(reader)
        self.rejects_path = None if rejects_path is None else Path(rejects_path)
        if self.rejects_path is not None and len(self.rejects):
            try:
                self.rejects_path.parent.mkdir(parents=True, exist_ok=True)
                self.rejects.to_csv(self.rejects_path, index=False)
            except OSError as e:
                raise InputDataError(
                    f"cannot write rejected rows of {str(self.path)!r} to "
                    f"{str(self.rejects_path)!r}: {_why(e)}"
                ) from None

    # ---- loading ---------------------------------------------------------------------------

    def _load(self, reader: _Reader) -> None:
        table, cols = reader.table, self.columns
        n = table.num_rows
        reasons = np.full(n, "", dtype=object)

        def fail(mask: np.ndarray, why: Any) -> None:
            new = mask & (reasons == "")
            if new.any():
                reasons[new] = [why(i) for i in np.flatnonzero(new)]

        raw = {k: table.column(c) for k, c in cols.items()}
        text = {k: raw[k].cast(pa.string()).to_pandas().to_numpy() for k in raw}
        for k, c in cols.items():
            fail(
                np.asarray(raw[k].is_null().to_numpy(zero_copy_only=False), bool),
                lambda i, c=c: f"missing {c!r}",
            )
        secs, ok = _to_seconds(raw["time"])
        fail(~ok, lambda i: f"time column {cols['time']!r}: cannot parse {text['time'][i]!r}")
        value = _to_float(raw["value"])
        fail(
            ~np.isfinite(value),
            lambda i: f"value column {cols['value']!r}: cannot parse {text['value'][i]!r}",
        )
        key = np.zeros(n, dtype=np.int64)
        key_text = None
        if "key" in cols:
            kf = _to_float(raw["key"])
            good = np.isfinite(kf) & (np.abs(kf) < 2**62)
            good[good] &= kf[good] == np.round(kf[good])
            present = text["key"] != None  # noqa: E711 (an object array of texts and None)
            if 2 * good[present].sum() >= present.sum():  # integer keys (as most entries are)
                fail(
                    ~good,
                    lambda i: f"key column {cols['key']!r}: not an integer {text['key'][i]!r}",
                )
                key[good] = kf[good].astype(np.int64)
            else:  # text keys ("JFK-LAX"): a stable int64 per text, the text kept beside it
                key_text = np.where(present, text["key"], "").astype(object)
                key = text_keys(key_text)

        valid = reasons == ""
        rows = [
            (int(reader.lines[i]), str(reasons[i]), ",".join(str(text[k][i]) for k in cols))
            for i in np.flatnonzero(~valid)
        ]
        rows += reader.bad
        rows.sort(key=lambda r: r[0])
        self.rejects = pd.DataFrame(rows, columns=list(REJECT_COLUMNS))
        if not valid.any():
            raise InputDataError(
                f"replay file {str(self.path)!r} has no valid rows "
                f"({len(rows)} malformed, e.g. line {rows[0][0]}: {rows[0][1]})"
                if rows
                else f"replay file {str(self.path)!r} has no rows"
            )

        secs, value, key = secs[valid], value[valid], key[valid]
        if key_text is not None:
            key_text = key_text[valid]
        self._has_text = key_text is not None
        order = np.argsort(secs, kind="stable")
        if "source" in cols:
            labels = text["source"][valid]
            distinct = sorted(set(labels.tolist()), key=_label_order)
            if len(distinct) != self._n:
                raise ConfigError(
                    f"replay file {str(self.path)!r} has {len(distinct)} sources in column "
                    f"{cols['source']!r} but the query has {self._n}: set sources = {len(distinct)}"
                )
            ids = {lab: j for j, lab in enumerate(distinct)}
            src = np.array([ids[lab] for lab in labels], dtype=np.int64)
            self.source_labels: tuple[str, ...] = tuple(str(d) for d in distinct)
        else:
            src = np.empty(len(secs), dtype=np.int64)
            src[order] = np.arange(len(secs)) % self._n
            self.source_labels = tuple(str(j) for j in range(self._n))

        self.t0 = float(secs.min())
        span = (float(secs.max()) - self.t0) / self.speed
        m = len(secs)
        self.period_s = span * m / (m - 1) if m > 1 and span > 0 else max(span, 1.0 / self.speed)
        self._arr, self._evt, self._val, self._key = [], [], [], []
        self._text: list[np.ndarray] = []
        for s in range(self._n):
            sel = order[src[order] == s]
            self._evt.append(secs[sel])
            self._arr.append((secs[sel] - self.t0) / self.speed)
            self._val.append(value[sel])
            self._key.append(key[sel])
            if key_text is not None:
                self._text.append(key_text[sel])

    # ---- Feed interface --------------------------------------------------------------------

    @property
    def n_sources(self) -> int:
        return self._n

    def rejected(self) -> int:
        """Malformed rows set aside (see :attr:`rejects`)."""
        return len(self.rejects)

    def end_s(self) -> float | None:
        """Arrival time of the last row (any source), or None when the file loops."""
        if self.loop:
            return None
        last = [
            float(self.arrival_time(s, np.array([len(a) - 1]))[0])
            for s, a in enumerate(self._arr)
            if len(a)
        ]
        return max(last, default=0.0)

    def rows(self, source: int) -> int:
        """Valid rows of ``source`` in the file (tuples per pass)."""
        return len(self._arr[check_source(self._n, source)])

    def count(self, t: float) -> np.ndarray:
        t = check_time(t)
        out = np.zeros(self._n, dtype=np.int64)
        if t <= 0:
            return out
        q, r = (math.floor(t / self.period_s), t % self.period_s) if self.loop else (0, t)
        for s, arr in enumerate(self._arr):
            out[s] = q * len(arr) + int(np.searchsorted(arr, r, side="left"))
        return out

    def count_until_event(self, event_s: float) -> np.ndarray:
        """Rows of every source recorded before ``event_s`` (passes of a loop included)."""
        out = np.zeros(self._n, dtype=np.int64)
        span = self.period_s * self.speed  # recorded time of one pass
        for s, evt in enumerate(self._evt):
            if self.loop:
                q = math.floor((event_s - self.t0) / span)
                if q < 0:
                    continue
                out[s] = q * len(evt) + int(np.searchsorted(evt, event_s - q * span, "left"))
            else:
                out[s] = int(np.searchsorted(evt, event_s, side="left"))
        return out

    def _split(self, source: int, index: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        s = check_source(self._n, source)
        idx = check_index(index)
        n = len(self._arr[s])
        if idx.size and (n == 0 or (not self.loop and idx.max() >= n)):
            raise ConfigError(
                f"source {s} of replay file {str(self.path)!r} has {n} rows, asked for tuple "
                f"{int(idx.max())}"
            )
        q, j = np.divmod(idx, n) if n else (idx, idx)
        return s, q, j

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        s, q, j = self._split(source, index)
        return self._arr[s][j] + q * self.period_s

    def event_time(self, source: int, index: np.ndarray) -> np.ndarray:
        s, q, j = self._split(source, index)
        return self._evt[s][j] + q * self.period_s * self.speed

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        s, _, j = self._split(source, index)
        out = {"key": self._key[s][j], "value": self._val[s][j]}
        if self._has_text:
            out["key_text"] = self._text[s][j]
        return out

    @property
    def text_keys(self) -> bool:
        """Whether the key column holds texts (kept in ``key_text``)."""
        return self._has_text

    def key_texts(self) -> dict[int, str]:
        """Every text key of the file by its int64 key."""
        out: dict[int, str] = {}
        for k, t in zip(self._key, self._text, strict=False):
            out.update(zip(k.tolist(), t.tolist(), strict=True))
        return out

    def event_clock(self) -> tuple[float, float] | None:
        """The recorded time of the first row and the speed: a row's event time is its recorded
        timestamp, ``t0 + speed · arrival`` (Unix seconds for date-times)."""
        return (self.t0, self.speed)

    def __repr__(self) -> str:
        return (
            f"ReplayFeed(path={str(self.path)!r}, columns={self.columns}, n_sources={self._n}, "
            f"speed={self.speed}, loop={self.loop}, rejected={self.rejected()})"
        )


def _label_order(label: Any) -> tuple[int, float, str]:
    """Sort numeric labels numerically, then the others as text."""
    try:
        return (0, float(label), str(label))
    except (TypeError, ValueError):
        return (1, 0.0, str(label))
