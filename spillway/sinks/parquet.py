"""A folder of Parquet files, one per batch, each batch there exactly once.

Batch ``b`` goes to ``part-<b>-<lineage>.parquet`` (zero-padded, so names sort by batch),
written first under a hidden name and then renamed over its own name (an atomic replace on one
file system): a reader never sees half a file, and a batch Spark runs again after a failure
replaces the file its first run wrote instead of adding a second one. The lineage names one
checkpoint's history of batch ids (the node keeps it in the checkpoint folder), so a run from a
fresh checkpoint adds its own files instead of replacing an earlier run's. Spark (``spark.read.parquet(path)``),
pandas and pyarrow read the folder as one table; hidden names (``.``) are ignored by all three.
A batch without rows writes no file. Times are stored in microseconds (Spark's unit; pandas
holds nanoseconds, which Spark refuses to read).

>>> import pandas as pd, tempfile
>>> sink = ParquetSink(query="q", path=tempfile.mkdtemp(), lineage="a1")
>>> sink.write(0, pd.DataFrame({"v": [1.0]})), sink.write(1, pd.DataFrame({"v": [2.0]}))
(True, True)
>>> sorted(p.name for p in sink.root.iterdir())
['part-000000000000-a1.parquet', 'part-000000000001-a1.parquet']
>>> read_parquet_sink(sink.root)["v"].tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spillway.errors import ConfigError
from spillway.sinks.base import check_batch_id


def batch_file(root: Path, batch_id: int, lineage: str) -> Path:
    """The file of batch ``batch_id`` of ``lineage``."""
    return root / f"part-{batch_id:012d}-{lineage}.parquet"


class ParquetSink:
    """Writes each batch to its own Parquet file in ``path`` (created if missing)."""

    def __init__(self, *, query: str, path: str | os.PathLike[str], lineage: str = "0") -> None:
        if path in (None, ""):
            raise ConfigError(f"query {query!r}: parquet sink needs a 'path' (a folder)")
        self.query, self.lineage = query, str(lineage)
        self.root = Path(path).expanduser()
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(
                f"query {query!r}: parquet sink path {str(self.root)!r} is a file, not a folder"
            )
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        b = check_batch_id(batch_id)
        if rows.empty:
            return True
        final = batch_file(self.root, b, self.lineage)
        aside = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        table = pa.Table.from_pandas(rows, preserve_index=False)
        # microseconds: Spark reads no nanosecond timestamps (pandas' own unit)
        pq.write_table(table, aside, coerce_timestamps="us", allow_truncated_timestamps=True)
        os.replace(aside, final)
        return True

    def close(self) -> None:
        return None


def read_parquet_sink(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Every batch a :class:`ParquetSink` wrote to ``path``, in batch order (empty if none)."""
    files = sorted(Path(path).glob("part-*.parquet"))
    if not files:
        return pd.DataFrame()
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
