"""kafka-overload's restart: the run's driver killed after its sinks wrote a batch and before
Spark recorded it, restarted from its checkpoint in a new Python process.

The run's user queries write to Parquet sinks (:mod:`spillway.sinks.parquet`: one file per
batch, a replayed batch replacing its own file). When the run has stopped, :func:`uncommit_last`
leaves the checkpoint as a driver killed at the worst moment would: the last batch Spark
committed is marked unfinished (its commit file removed) while its results are already in the
sinks, and the offsets of later batches, which the stop cut short, are removed. A new process
(:func:`spillway.spark.restart.run_fresh`, running :func:`main`) builds the same node on the
same checkpoint, lets Spark run that batch again (its shedding decision is in the offset log),
writes what it computed for it beside the sinks and stops. :func:`compare_restart` then checks
the claim of the issue: the sinks hold each result once, with the values and SIC the run gave,
and the batch run again gave the same rows.

    python -m spillway.experiments._kafka_replay SPEC.json

Examples
--------
>>> first = {"q": pd.DataFrame({"batch_id": [0, 1], "window_start": [0, 2], "key": [1, 1],
...                             "mean_fare": [10.0, 12.0], "sic": [0.2, 0.3]})}
>>> compare_restart(first, first, {"q": first["q"].iloc[1:]}, batch=1)["replay_identical"]
True
>>> sink = {"q": first["q"].assign(sic=[0.2, 0.31])}
>>> r = compare_restart(first, sink, {"q": first["q"].iloc[1:]}, batch=1)
>>> r["replay_identical"], r["replay_why"][:61]
(False, 'q: the sink after the restart differs from what the run wrote')
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from spillway.errors import SpillwayError
from spillway.spark.restart import run_fresh, run_until

if TYPE_CHECKING:
    from spillway.experiments.kafka_overload import KafkaOverloadConfig

#: Relative tolerance of a value compared across the restart (Spark may add in another order).
RTOL = 1e-9

#: Seconds the restarted driver may take (a JVM start, the batch, the stop).
TIMEOUT_S = 300.0


def uncommit_last(checkpoint: str | Path) -> int | None:
    """Mark the last committed batch of every plan under ``checkpoint`` (``*/commits``)
    unfinished and drop the offsets of later batches; that batch's id (None: none committed).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> for d, names in {"commits": ["0", "1", ".1.crc"], "offsets": ["0", "1", "2"]}.items():
    ...     (root / "user" / d).mkdir(parents=True)
    ...     for n in names:
    ...         _ = (root / "user" / d / n).write_text("x")
    >>> uncommit_last(root)
    1
    >>> sorted(p.name for p in (root / "user").rglob("*"))
    ['0', '0', '1', 'commits', 'offsets']
    """
    plans = [p for p in Path(checkpoint).glob("*/commits") if p.is_dir()]
    commits = sorted((f for d in plans for f in d.glob("[0-9]*")), key=lambda f: int(f.name))
    if not commits:
        return None
    batch = int(commits[-1].name)
    for d in plans:
        # Spark runs again the latest batch of its offset log when the commit log lacks it:
        # make the last committed batch the latest (a batch the stop cut short is planned anew)
        doomed = [f for f in (d.parent / "offsets").glob("[0-9]*") if int(f.name) > batch]
        doomed += [f for f in d.glob("[0-9]*") if int(f.name) == batch]
        for f in doomed:
            f.unlink()
            f.with_name(f".{f.name}.crc").unlink(missing_ok=True)  # Spark refuses a stale one
    return batch


def _canonical(rows: pd.DataFrame, upto: int, only: bool = False) -> pd.DataFrame:
    """``rows`` of batches ``<= upto`` (``== upto`` with ``only``), in a comparable form."""
    if rows.empty or "batch_id" not in rows:
        return pd.DataFrame()
    sel = rows[rows["batch_id"] == upto] if only else rows[rows["batch_id"] <= upto]
    sel = sel.drop(columns=["plan"], errors="ignore").copy()
    for c in sel.columns:
        if pd.api.types.is_datetime64_any_dtype(sel[c]):  # parquet keeps µs, pandas ns
            sel[c] = pd.to_datetime(sel[c], utc=True).astype("datetime64[us, UTC]")
    order = [c for c in ("batch_id", "window_start", "key") if c in sel]
    return sel[sorted(sel.columns)].sort_values(order).reset_index(drop=True)


def _differs(a: pd.DataFrame, b: pd.DataFrame) -> str | None:
    """Why ``a`` and ``b`` differ (rows, columns or a value beyond :data:`RTOL`), or None."""
    if a.empty and b.empty:
        return None
    try:
        pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=RTOL, atol=0.0)
    except AssertionError as e:
        return " ".join(str(e).split())[:200]
    return None


def compare_restart(
    first: Mapping[str, pd.DataFrame],
    sink: Mapping[str, pd.DataFrame],
    replayed: Mapping[str, pd.DataFrame],
    *,
    batch: int,
) -> dict[str, Any]:
    """The restart's verdict, per query of ``first`` (what the run's sinks were given, by
    query): the sink after the restart holds every batch up to ``batch`` exactly as the run
    wrote it, each (window, key) once, and ``replayed`` (what the new driver computed for
    ``batch``) equals the run's rows of that batch. ``replay_identical`` is False with the
    first difference found (``replay_why``)."""
    problems, shown = [], 0
    for q, rows in first.items():
        mine = _canonical(rows, batch)
        got = _canonical(sink.get(q, pd.DataFrame()), batch)
        again = _canonical(replayed.get(q, pd.DataFrame()), batch, only=True)
        before = _canonical(rows, batch, only=True)
        keys = [c for c in ("window_start", "key") if c in got]
        if len(got) and keys and got.duplicated(keys).any():
            n = int(got.duplicated(keys).sum())
            problems.append(f"{q}: the sink holds {n} result(s) more than once")
        elif (why := _differs(mine, got)) is not None:
            problems.append(
                f"{q}: the sink after the restart differs from what the run wrote "
                f"(batches <= {batch}): {why}"
            )
        elif (why := _differs(before, again)) is not None:
            problems.append(f"{q}: batch {batch} run again differs from the run's: {why}")
        shown += len(before)
    if not problems and shown == 0:
        problems.append(f"no query had a result row in batch {batch}: nothing to compare")
    ok = not problems
    return {
        "replay_identical": ok,
        "replay_batch": batch,
        "replay_rows": shown,
        "replay_why": (
            f"batch {batch} run again in a new process gave the same {shown} rows (values and "
            f"SIC); the sinks hold every result up to it once, as the run wrote it"
            if ok
            else "; ".join(problems)
        ),
    }


def restart(
    cfg: KafkaOverloadConfig,
    *,
    topics: Mapping[str, str],
    bootstrap: str,
    checkpoint: str,
    sinks: Mapping[str, str],
    epoch_s: float,
    first: Mapping[str, pd.DataFrame],
    work: str | Path,
) -> dict[str, Any]:
    """Uncommit the run's last batch, restart the driver in a new process, compare (module
    docstring). A restart that fails is a False verdict with its reason."""
    from spillway.sinks.parquet import read_parquet_sink

    batch = uncommit_last(Path(checkpoint) / "run")
    if batch is None:
        return {"replay_identical": False, "replay_why": "no committed batch to replay"}
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    spec = {"config": asdict(cfg), "topics": dict(topics), "bootstrap": bootstrap,
            "checkpoint": checkpoint, "sinks": dict(sinks), "epoch_s": epoch_s,
            "batch": batch, "out": str(work)}  # fmt: skip
    (work / "spec.json").write_text(json.dumps(spec))
    try:
        done = run_fresh(["-m", __name__, str(work / "spec.json")], timeout_s=TIMEOUT_S)
    except SpillwayError as e:
        return {"replay_identical": False, "replay_batch": batch, "replay_why": str(e)}
    if done.returncode != 0:
        tail = " ".join(done.stderr.split())[-300:]
        return {"replay_identical": False, "replay_batch": batch,
                "replay_why": f"the restarted driver failed ({done.returncode}): {tail}"}  # fmt: skip
    replayed = {q: pd.read_parquet(work / f"{q}.parquet") for q in first}
    sunk = {q: read_parquet_sink(sinks[q]) for q in first}
    return compare_restart(first, sunk, replayed, batch=batch)


def main(argv: Sequence[str] | None = None) -> int:
    """The restarted driver (``python -m spillway.experiments._kafka_replay SPEC.json``)."""
    from spillway.experiments._spark_runs import experiment_spark
    from spillway.experiments.kafka_overload import KafkaOverloadConfig, node_config
    from spillway.kafka.connection import KafkaConnection
    from spillway.spark.node import Node

    args = list(sys.argv[1:] if argv is None else argv)
    spec = json.loads(Path(args[0]).read_text())
    cfg = KafkaOverloadConfig(**spec["config"])
    conn = KafkaConnection(bootstrap_servers=spec["bootstrap"])
    config = node_config(cfg, spec["topics"], conn, spec["checkpoint"], sinks=spec["sinks"])
    node = Node(config, spark=experiment_spark(cfg.master), epoch_s=float(spec["epoch_s"]))
    batch = int(spec["batch"])

    def ran() -> bool:  # the listener saw the batch end in this process
        return all(
            any(b["batch_id"] >= batch for b in node.controller.batches(p)) for p in node.plans
        )

    try:
        run_until(node, ran, timeout_s=TIMEOUT_S - 60)
    except SpillwayError as e:
        print(e, file=sys.stderr)
        return 1
    for q in spec["sinks"]:
        rows = node.user_results(q)
        rows = rows[rows["batch_id"] == batch] if len(rows) else rows
        rows.to_parquet(Path(spec["out"]) / f"{q}.parquet", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
