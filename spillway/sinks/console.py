"""A sink that prints each batch's rows (for trying a query; it guarantees nothing).

>>> import pandas as pd
>>> ConsoleSink(query="q", rows=1).write(2, pd.DataFrame({"v": [1.0, 2.0], "sic": [0.5, 0.5]}))
-- query q, batch 2: 2 rows
  v  sic
1.0  0.5
... 1 more
True
"""

from __future__ import annotations

import sys
from typing import TextIO

import pandas as pd

from spillway.errors import ConfigError
from spillway.sinks.base import check_batch_id


class ConsoleSink:
    """Prints up to ``rows`` rows of each batch to ``out`` (default standard output)."""

    def __init__(
        self, *, query: str, rows: int = 20, out: TextIO | None = None, lineage: str = "0"
    ) -> None:
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ConfigError(f"query {query!r}: console sink 'rows' must be an int >= 0")
        self.query, self.rows, self.out = query, rows, out

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        out = self.out or sys.stdout
        print(
            f"-- query {self.query}, batch {check_batch_id(batch_id)}: {len(rows)} rows", file=out
        )
        shown = rows.drop(columns=["query", "batch_id"], errors="ignore").head(self.rows)
        if len(shown):
            print(shown.to_string(index=False), file=out)
        if len(rows) > len(shown):
            print(f"... {len(rows) - len(shown)} more", file=out)
        return True

    def close(self) -> None:
        return None
