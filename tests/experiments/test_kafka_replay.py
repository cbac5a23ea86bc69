"""kafka-overload's restart verdict: true only when the sinks hold the run's rows once and the
batch run again gives the same rows; each way of differing makes it false."""

from __future__ import annotations

import pandas as pd
import pytest

from spillway.experiments._kafka_replay import compare_restart, uncommit_last

T = pd.to_datetime([100, 100, 102, 102, 104], unit="s", utc=True)


def _rows():
    return pd.DataFrame({"window_start": T, "key": [1, 2, 1, 2, 1], "batch_id": [0, 0, 1, 1, 2],
                         "mean_fare": [10.0, 20.0, 11.0, 21.0, 12.0],
                         "sic": [0.3, 0.3, 0.25, 0.25, 0.2], "query": "fares"})  # fmt: skip


def _verdict(sink=None, replayed=None, batch=1):
    first = {"fares": _rows()}
    sunk = {"fares": _rows() if sink is None else sink}
    again = {"fares": _rows()[_rows()["batch_id"] == batch] if replayed is None else replayed}
    return compare_restart(first, sunk, again, batch=batch)


def test_the_same_rows_everywhere_are_identical_and_counted():
    v = _verdict()
    assert v["replay_identical"] and v["replay_rows"] == 2 and v["replay_batch"] == 1
    # batch 2 was cut short by the stop: a sink that lacks it or holds another one still counts
    assert _verdict(sink=_rows().iloc[:4])["replay_identical"]


def test_parquet_timestamps_in_microseconds_compare_equal():
    sink = _rows().assign(window_start=T.astype("datetime64[us, UTC]"))
    assert _verdict(sink=sink)["replay_identical"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda s, r: (s.assign(sic=[0.3, 0.3, 0.25, 0.26, 0.2]), r), "sink after the restart"),
        (lambda s, r: (s.assign(mean_fare=s["mean_fare"] + [0, 1, 0, 0, 0]), r), "differs"),
        (lambda s, r: (s.iloc[1:], r), "differs from what the run wrote"),
        (lambda s, r: (pd.concat([s, s.iloc[[2]]]), r), "more than once"),
        (lambda s, r: (s, r.assign(sic=r["sic"] * 2)), "batch 1 run again differs"),
        (lambda s, r: (s, r.iloc[:1]), "batch 1 run again differs"),
    ],
)
def test_a_tampered_sink_or_replay_is_not_identical(change, why):
    rows = _rows()
    sink, replayed = change(rows, rows[rows["batch_id"] == 1])
    v = _verdict(sink=sink, replayed=replayed)
    assert v["replay_identical"] is False and why in v["replay_why"]


def test_a_batch_without_rows_shows_nothing_and_is_not_identical():
    v = _verdict(batch=5)
    assert v["replay_identical"] is False and "nothing to compare" in v["replay_why"]


def test_uncommit_last_of_an_empty_checkpoint_is_none(tmp_path):
    (tmp_path / "user" / "commits").mkdir(parents=True)
    assert uncommit_last(tmp_path) is None
