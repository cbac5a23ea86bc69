"""Where malformed and late records of a log go: counted, kept, written exactly once per batch.

A record of a Kafka topic (or a folder) that does not parse with the query's schema, or that
arrives after its window was evaluated (:data:`spillway.spark.source.LATE`), never stops the
query and is never lost silently: the result sink hands each batch's such rows, with their
topic, partition, offset, reason and raw text, to :class:`DeadLetters`, which

- counts them per query and kind (``malformed``, ``late``);
- keeps them, keyed by batch id: a batch Spark replays after a failure has the same offsets, so
  the same rows, and *replaces* its entry instead of adding it again;
- sends them, when a query names a dead-letter topic, to that topic exactly once per record
  (:class:`~spillway.kafka.dead_letter.DeadLetterTopic`, keyed by topic, partition and offset);
- writes them, when a query names a dead-letter folder, to ``<folder>/batch-<id>.jsonl``
  (one JSON object per record), replaced atomically (written aside, then renamed), so a replayed
  batch rewrites the same file and no record appears twice.

Examples
--------
>>> import pandas as pd, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> dl = DeadLetters(["fares"], folders={"fares": d})
>>> rows = pd.DataFrame({"query_id": [0, 0], "topic": ["t", "t"], "partition": [0, 1],
...                      "offset": [7, 3], "error": ["not JSON: x", LATE], "raw": ["{", None]})
>>> dl.record(4, rows); dl.record(4, rows)          # a replayed batch: counted once
>>> dl.counts()
{'fares': {'malformed': 1, 'late': 1}}
>>> sorted(p.name for p in d.iterdir())
['batch-000004.jsonl']
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spillway.errors import InputDataError
from spillway.files import replace_text
from spillway.spark.source import LATE

#: Rows kept in memory across batches (counts are always exact).
KEEP_ROWS = 100_000


class DeadLetters:
    """Malformed and late records of a node's queries (see the module docstring).

    Parameters
    ----------
    names : query names by query id.
    folders : optional dead-letter folder per query name.
    topics : optional dead-letter topic per query name (anything with ``write(rows)``, e.g. a
        :class:`~spillway.kafka.dead_letter.DeadLetterTopic`).
    logs : names of the queries that read a log (their counts start at zero).
    """

    def __init__(
        self,
        names: Sequence[str],
        folders: Mapping[str, str | Path] | None = None,
        topics: Mapping[str, Any] | None = None,
        logs: Sequence[str] = (),
    ) -> None:
        self.names = list(names)
        #: Queries that read a log: counted (zeros included) even before anything is set aside.
        self.logs = list(dict.fromkeys([*logs, *(folders or {}), *(topics or {})]))
        self.folders = {n: Path(f) for n, f in (folders or {}).items()}
        self.topics = dict(topics or {})
        self._batches: dict[int, pd.DataFrame] = {}
        self._spilled: dict[str, dict[str, int]] = {}  # counts of batches no longer kept
        self._lock = threading.Lock()
        for name, folder in self.folders.items():
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise InputDataError(
                    f"query {name!r}: cannot create the dead-letter folder {str(folder)!r}: "
                    f"{e.strerror or e}"
                ) from None

    def record(self, batch_id: int, rows: pd.DataFrame) -> None:
        """The set-aside rows of micro-batch ``batch_id`` (replaces a replayed batch's)."""
        if rows is None or rows.empty:
            with self._lock:
                self._batches.pop(int(batch_id), None)
            return
        rows = rows.reset_index(drop=True)
        for qid, part in rows.groupby("query_id"):
            name = self.names[int(qid)]
            folder = self.folders.get(name)
            if folder is not None:
                _write_atomically(folder / f"batch-{int(batch_id):06d}.jsonl", part)
            if name in self.topics:
                self.topics[name].write(part)
        with self._lock:
            self._batches[int(batch_id)] = rows
            while (
                sum(len(b) for b in self._batches.values()) > KEEP_ROWS and len(self._batches) > 1
            ):
                oldest = min(self._batches)
                self._counts_of_dropped(self._batches.pop(oldest))

    def _counts_of_dropped(self, rows: pd.DataFrame) -> None:
        for name, kinds in _count(rows, self.names).items():
            mine = self._spilled.setdefault(name, {"malformed": 0, "late": 0})
            for k, v in kinds.items():
                mine[k] += v

    def counts(self) -> dict[str, dict[str, int]]:
        """Per query name, the records set aside: ``malformed`` and ``late``."""
        with self._lock:
            rows = list(self._batches.values())
            out = {n: {"malformed": 0, "late": 0} for n in self.logs}
            out.update({n: dict(v) for n, v in self._spilled.items()})
        for r in rows:
            for name, kinds in _count(r, self.names).items():
                mine = out.setdefault(name, {"malformed": 0, "late": 0})
                for k, v in kinds.items():
                    mine[k] += v
        return out

    def to_pandas(self) -> pd.DataFrame:
        """The set-aside rows kept in memory, with the query's name."""
        with self._lock:
            frames = [b.assign(batch_id=i) for i, b in sorted(self._batches.items())]
        if not frames:
            return pd.DataFrame(
                columns=["batch_id", "query", "topic", "partition", "offset", "error", "raw"]
            )
        out = pd.concat(frames, ignore_index=True)
        out.insert(1, "query", [self.names[int(q)] for q in out["query_id"]])
        return out.drop(columns=["query_id"])


def _count(rows: pd.DataFrame, names: Sequence[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    late = rows["error"] == LATE
    for qid, part in rows.groupby("query_id"):
        n_late = int(late[part.index].sum())
        out[names[int(qid)]] = {"malformed": int(len(part) - n_late), "late": n_late}
    return out


def _write_atomically(path: Path, rows: pd.DataFrame) -> None:
    replace_text(path, "".join(
        json.dumps({k: (None if pd.isna(v) else v) for k, v in rec.items()}, default=str) + "\n"
        for rec in rows.drop(columns=["query_id"]).to_dict("records")
    ))  # fmt: skip
