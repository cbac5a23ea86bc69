"""A node reading a folder while files keep arriving: results with their SIC and key texts,
malformed rows set aside exactly once, every valid row accounted for; and a query killed inside
a micro-batch and restarted from its checkpoint replays exactly the same shedding."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.run_exact import compute_exact
from spillway.spark.dead_letters import LATE

pytestmark = pytest.mark.spark

ROUTES = ("JFK-LAX", "SFO-SEA", "ORD-MIA")
OPTS = {
    "format": "json",
    "schema": "route string, fare double",
    "key_column": "route",
    "value_column": "fare",
}


def _rows(i0: int, n: int, malformed_every: int) -> list[str]:
    rng = np.random.default_rng(i0)
    out = []
    for i in range(i0, i0 + n):
        if i % malformed_every == malformed_every - 1:
            out.append("{not json " + str(i))
        else:
            fare = round(float(rng.gamma(4, 10)), 2)
            out.append(json.dumps({"route": ROUTES[i % 3], "fare": fare}))
    return out


def _write_files(folder, seconds, every_s, rows, malformed_every, stop, written):
    """A file of ``rows`` rows every ``every_s`` seconds, written aside and renamed in."""
    t0 = time.time()
    i = 0
    while time.time() < t0 + seconds and not stop.is_set():
        lines = _rows(i * rows, rows, malformed_every)
        tmp = folder / f".part-{i:04d}.jsonl.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, folder / f"part-{i:04d}.jsonl")
        written.extend(lines)
        i += 1
        time.sleep(every_s)


def test_a_node_follows_files_written_while_it_runs(spark, tmp_path) -> None:
    from spillway.spark.node import Node

    folder = tmp_path / "in"
    folder.mkdir()
    opts = {**OPTS, "path": str(folder), "dead_letter": str(tmp_path / "dead")}
    q = QuerySpec(name="fares", kind="group_avg", feed="folder", feed_options=opts, sources=2)
    cfg = NodeConfig(queries=(q,), trigger_s=1.0, stw_s=4.0, checkpoint_dir=str(tmp_path / "c"))
    node = Node(cfg, spark=spark, keep_source_mass=True)
    stop, written = threading.Event(), []
    writer = threading.Thread(target=_write_files, args=(folder, 7.0, 0.25, 60, 50, stop, written))
    node.start()
    writer.start()
    try:
        writer.join()
        time.sleep(4.0)  # the last windows close and their batches run
        node.halt()
        exact = compute_exact(node)
    finally:
        stop.set()
        node.stop()
    res = node.results()
    hist = node.history()
    assert set(res["key_text"].dropna()) == set(ROUTES)
    counts = node.dead_letters.counts()["fares"]
    everything = node.dead_letters.to_pandas()
    dead = everything[everything["error"] != LATE]
    bad = [v for v in written if v.startswith("{not json")]
    # every malformed row is set aside once, with its file, lane, offset, row and reason
    assert not everything.duplicated(["partition", "offset"]).any()
    # A slow batch on a loaded machine may make the node shed (the CI run once shed 3 of 33
    # malformed rows): the accounting holds over what was admitted, all of it when nothing was.
    shed = sum(r.arrived_tuples - r.admitted_tuples for r in hist)
    assert counts["malformed"] <= len(bad) and set(dead["raw"]) <= set(bad)
    if shed == 0:
        assert counts["malformed"] == len(bad)  # (a file renamed in just after its cut is late)
    assert dead["error"].str.match(r"row \d+: not JSON").all()
    assert dead["topic"].str.match(r"part-\d{4}\.jsonl").all()
    lines = [
        json.loads(x) for f in (tmp_path / "dead").iterdir() for x in f.read_text().split("\n") if x
    ]
    assert len(lines) == counts["malformed"] + counts["late"]
    assert {(d["partition"], d["offset"]) for d in lines} == set(
        zip(everything["partition"], everything["offset"], strict=True)
    )
    # every row written was decided, and every valid one admitted is in a window's input
    assert sum(r.arrived_tuples for r in hist) == len(written)
    assert all(r.admitted_tuples == r.processed_tuples for r in hist)
    admitted = sum(r.query_admitted["fares"] for r in hist)
    windows = res.drop_duplicates("window_start")
    assert windows["n_in"].sum() + counts["malformed"] + counts["late"] == admitted
    # every result carries its SIC (THEMIS Eq. 3), never above 1
    assert len(res) > 0 and res["sic"].between(0.0, 1.02, inclusive="right").all()
    sic = [r.query_sic["fares"] for r in hist if np.isfinite(r.query_sic["fares"])]
    assert max(sic, default=0.0) <= 1.02
    # the exact answer reads the same files, malformed rows left out, keys whole: every window
    # has the three routes, and the node's windows found them (a few rows shed at most)
    w = exact.windows
    assert exact.computed and len(w) >= 3 and (w["groups"] == len(ROUTES)).all()
    assert w["missing_groups"].mean() < 0.5 and w["error"].mean() < 0.2


# ---- restart: files already written (their modification times set), a logical clock, shedding

EPOCH = 1_700_000_000.0
N_BATCHES = 6
COLUMNS = ["query", "window_start", "key", "value", "sic", "n_in"]


def _prewritten(folder) -> None:
    """40 files of 50 rows, one every 0.2 s of feed time from the epoch on (1 in 25 malformed)."""
    folder.mkdir()
    for i in range(40):
        p = folder / f"part-{i:04d}.jsonl"
        p.write_text("\n".join(_rows(i * 50, 50, 25)) + "\n")
        t = EPOCH + 0.2 * i + 0.05
        os.utime(p, (t, t))


def _run(spark, folder, checkpoint, on_batch=None, restart=False):
    from spillway.spark.node import Node

    opts = {**OPTS, "path": str(folder), "dead_letter": str(checkpoint / "dead")}
    q = QuerySpec(name="fares", kind="group_avg", feed="folder", feed_options=opts, sources=2)
    cfg = NodeConfig(
        queries=(q,),
        trigger_s=1.0,
        stw_s=4.0,
        seed=3,
        policy="random",
        checkpoint_dir=str(checkpoint),
    )
    node = Node(
        cfg,
        spark=spark,
        clock="logical",
        epoch_s=EPOCH,
        capacity_tuples_per_s=150,
        on_batch=on_batch,
    )

    def wait(predicate, timeout_s=60.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.1)
        assert predicate(), "the streaming query did not get there in time"

    node.start()
    try:
        (plan,) = node.plans
        if restart:
            wait(lambda: node.query_error(plan) is not None)
            assert "injected failure in batch 2" in node.query_error(plan)
            node.restart_plan(plan)
        wait(lambda: {b for _, b in node.store.batches()} >= set(range(N_BATCHES)))
        assert node.query_error(plan) is None
        results = node.results()
        history = node.history()[:N_BATCHES]
        dead = node.dead_letters.to_pandas()
    finally:
        node.stop()
    batches = results.merge(node.store.to_pandas()[["batch_id"]], left_index=True, right_index=True)
    batches = batches[batches.batch_id < N_BATCHES]
    dead = dead[dead.batch_id < N_BATCHES].drop(columns=["batch_id"])
    files = sorted((checkpoint / "dead").iterdir())
    texts = {f.name: f.read_text() for f in files if int(f.stem.split("-")[1]) < N_BATCHES}
    return (
        batches.sort_values(["window_start", "key"]).reset_index(drop=True),
        history,
        dead.sort_values(["partition", "offset"]).reset_index(drop=True),
        texts,
    )


def test_a_restart_inside_a_batch_replays_the_same_shedding(spark, tmp_path) -> None:
    folder = tmp_path / "in"
    _prewritten(folder)
    clean, clean_hist, clean_dead, clean_texts = _run(spark, folder, tmp_path / "clean")
    failed = []

    def fail_once(plan, batch_id):
        if batch_id == 2 and not failed:
            failed.append(batch_id)
            raise RuntimeError("injected failure in batch 2")

    again, again_hist, again_dead, again_texts = _run(
        spark, folder, tmp_path / "crash", on_batch=fail_once, restart=True
    )
    assert failed == [2]
    # shedding happened: 250 rows arrive per second, 150 fit
    assert all(r.admitted_tuples < r.arrived_tuples for r in clean_hist[1:])
    pd.testing.assert_frame_equal(clean[COLUMNS], again[COLUMNS])
    assert [r.admitted_tuples for r in clean_hist] == [r.admitted_tuples for r in again_hist]
    np.testing.assert_array_equal(
        [r.query_sic["fares"] for r in clean_hist], [r.query_sic["fares"] for r in again_hist]
    )
    assert len(clean_dead) > 0
    pd.testing.assert_frame_equal(clean_dead, again_dead)
    assert clean_texts == again_texts
