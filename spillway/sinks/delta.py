"""A Delta Lake table, each batch appended once, keyed by Delta's own transaction identifiers.

Batch ``b`` of query ``q`` (checkpoint lineage ``l``) is appended in one Delta commit that also
records the transaction identifier ``appId = "spillway:<q>:<l>"``, ``version = b`` (the
protocol's ``txn`` action, the one Delta-Spark's ``txnAppId``/``txnVersion`` writer options
set). Before writing, the sink reads the table's last committed version for its ``appId`` and
skips a batch whose id is not above it: a batch Spark runs again after a restart finds its own
commit in the table's log and adds nothing, so its SIC is counted once. The rows and the
identifier go in the same commit (Delta commits are atomic), so a crash can leave no batch half
written nor written without its identifier. The writer is delta-rs (the ``deltalake`` package);
it records the identifier but does not compare it itself, so the comparison is here, as it is
inside Delta-Spark's writer. One writer per lineage is assumed (the node's own driver).

Why not Delta-Spark: no release runs on PySpark 4.3.0 (checked 2026-11-27). The newest
``delta-spark`` on PyPI, 4.4.1, requires ``pyspark<=4.2.0``; its jar
``io.delta:delta-spark_2.13:4.4.1`` is not on Maven Central ("Could not find artifact"). The
newest there, 4.4.0 (built against Spark 4.2.0), loads on Spark 4.3.0 and commits a new table,
then fails on the first read of the table's state (the second write, or any read) with
``java.lang.NoSuchMethodError: 'void org.apache.spark.sql.execution.LogicalRDD.<init>(...)'``
in ``org.apache.spark.sql.delta.util.StateCache``: Spark 4.3 changed a constructor Delta calls.
Delta 4.3.1 (built against Spark 4.1.0) fails likewise. The check is
``flock /tmp/spillway-heavy.lock .venv/bin/python scripts/probe_delta_spark.py --delta 4.4.0``
(it fetches the two jars into spillway's jar cache and prints ``OK`` or the error). So the table is written from the driver
(the sink gets each batch's rows as pandas there anyway) and read with ``deltalake``, pandas or
any Delta reader; Spark reads it with ``format("delta")`` once a Delta-Spark for its version
exists.

>>> import pandas as pd, tempfile
>>> sink = DeltaSink(query="q", path=tempfile.mkdtemp(), lineage="a1")
>>> rows = pd.DataFrame({"route": ["JFK-LAX"], "sic": [0.5]})
>>> sink.write(0, rows), sink.write(1, rows), sink.write(1, rows)  # the replay is skipped
(True, True, False)
>>> float(read_delta_sink(sink.root)["sic"].sum())
1.0
>>> sink.app_id, sink.committed()
('spillway:q:a1', 1)
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pandas as pd
import pyarrow as pa

from spillway.errors import ConfigError
from spillway.sinks.base import check_batch_id


def _deltalake() -> ModuleType:
    try:
        import deltalake
    except ImportError:  # pragma: no cover - installed with spillway's dev/delta extras
        raise ConfigError(
            "the delta sink needs the 'deltalake' package: pip install 'spillway[delta]'"
        ) from None
    return deltalake


class DeltaSink:
    """Appends each batch to the Delta table at ``path`` (created by the first batch)."""

    def __init__(self, *, query: str, path: str | os.PathLike[str], lineage: str = "0") -> None:
        if path in (None, ""):
            raise ConfigError(f"query {query!r}: delta sink needs a 'path' (the table's folder)")
        self.query, self.lineage = query, str(lineage)
        self.root = Path(path).expanduser()
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(
                f"query {query!r}: delta sink path {str(self.root)!r} is a file, not a folder"
            )
        self.app_id = f"spillway:{query}:{self.lineage}"
        self._last: int | None = None
        self._read = False

    def committed(self) -> int | None:
        """The last batch id this query's lineage committed to the table (None: none yet)."""
        if not self._read:
            dl = _deltalake()
            if dl.DeltaTable.is_deltatable(str(self.root)):
                self._last = dl.DeltaTable(str(self.root)).transaction_version(self.app_id)
            self._read = True
        return self._last

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        b = check_batch_id(batch_id)
        last = self.committed()
        if last is not None and b <= last:
            return False
        if rows.empty:
            return True
        dl = _deltalake()
        table = pa.Table.from_pandas(rows, preserve_index=False)
        txn = dl.CommitProperties(app_transactions=[dl.Transaction(self.app_id, b)])
        self.root.mkdir(parents=True, exist_ok=True)
        dl.write_deltalake(str(self.root), table, mode="append", commit_properties=txn)
        self._last = b
        return True

    def close(self) -> None:
        return None


def read_delta_sink(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The rows of the Delta table at ``path``, sorted by ``batch_id`` when it has that column.

    >>> read_delta_sink("/nonexistent/table")
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: no Delta table at '/nonexistent/table' (no _delta_log there)
    """
    dl = _deltalake()
    if not dl.DeltaTable.is_deltatable(str(path)):
        raise ConfigError(f"no Delta table at {str(path)!r} (no _delta_log there)")
    got = dl.DeltaTable(str(path)).to_pandas()
    if "batch_id" in got.columns:
        got = got.sort_values("batch_id", kind="stable", ignore_index=True)
    return got
