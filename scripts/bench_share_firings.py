"""What giving a micro-batch's results their SIC costs on the driver: ``share_firings`` timed.

Builds the statement rows of one micro-batch of ``--queries`` TOP-5-like queries (one window
each, ``--ranks`` result rows per window, the first carrying the firing's totals), then times
``spillway.spark.statement.share_firings`` on them (the best of ``--repeat`` rounds of
``--calls`` calls, ms a call). It runs on the driver in every batch of a plan of built-in
queries, before the batch's results are stamped.

    .venv/bin/python scripts/bench_share_firings.py
"""

from __future__ import annotations

import argparse
import time

import pandas as pd


def statement_rows(queries: int, ranks: int) -> pd.DataFrame:
    """One window's statement rows per query: ``ranks`` results, the first also its firing.

    >>> rows = statement_rows(2, 3)
    >>> rows["rank"].tolist(), rows["n_in"].notna().tolist()
    ([1.0, 2.0, 3.0, 1.0, 2.0, 3.0], [True, False, False, True, False, False])
    """
    rows = [
        (q, 1_000_000, r, float(r), *((0.1, 200.0, 5e6) if r == 1 else (None, None, None)))
        for q in range(queries)
        for r in range(1, ranks + 1)
    ]
    cols = ["query_id", "window_start", "rank", "value", "sic", "n_in", "last_arrival_ts"]
    df = pd.DataFrame(rows, columns=cols).astype({"query_id": "int32", "rank": "float64"})
    df.insert(2, "key", pd.array([None] * len(df), dtype="Int64"))
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from spillway.spark.statement import share_firings

    rows = statement_rows(args.queries, args.ranks)
    share_firings(rows)
    best = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        for _ in range(args.calls):
            share_firings(rows)
        best = min(best, (time.perf_counter() - t) / args.calls)
    print(f"{len(rows)} statement rows, share_firings {best * 1e3:.2f} ms a call")


if __name__ == "__main__":
    main()
