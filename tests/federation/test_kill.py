"""``federation up --kill NODE@T[+R]``: the option and the kill/restart bookkeeping (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spillway.cli import main
from spillway.errors import ConfigError
from spillway.federation.kill import KillPlan, KillRecord, caught_up, parse_kill

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spillway" / "examples" / "federation.toml"
NODES = ("a", "b", "c")


def test_the_option_reads_node_time_and_restart_delay() -> None:
    assert parse_kill("c@60", NODES) == KillPlan("c", 60.0, None)
    assert parse_kill(" b@12.5+7 ", NODES, duration_s=30) == KillPlan("b", 12.5, 7.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("c", "expected NODE@T or NODE@T\\+R"),
        ("c@", "expected NODE@T"),
        ("d@10", "no node 'd' in the federation \\(its nodes: a, b, c\\)"),
        ("c@ten", "the kill time T must be a number of seconds > 0, got 'ten'"),
        ("c@-5", "the kill time T must be a number of seconds > 0"),
        ("c@nan", "the kill time T must be"),
        ("c@10+", "expected NODE@T"),
        ("c@10+inf", "the restart delay R must be a number of seconds > 0, got 'inf'"),
        ("c@10+-1", "the restart delay R must be"),
        ("c@90+5", "the kill at 90 s falls after the run's end \\(--duration 90\\)"),
    ],
)
def test_a_bad_kill_is_refused_with_its_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_kill(text, NODES, duration_s=90.0)


def test_a_bad_kill_is_one_line_and_exit_2_before_anything_starts(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["federation", "up", str(EXAMPLE), "--out", str(out), "--kafka-dir",
            str(tmp_path / "kafka"), "--duration", "30", "--kill", "z@10+5"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("spillway: error: --kill 'z@10+5': no node 'z' in the federation")
    assert not out.exists() and not (tmp_path / "kafka").exists()  # nothing started


def test_the_record_kills_once_then_restarts_once_after_the_delay() -> None:
    rec = KillRecord(KillPlan("c", 10.0, 5.0))
    assert [rec.due(t) for t in (0.0, 9.9)] == [None, None]
    assert rec.due(10.4) == "kill"
    rec.note("kill", 10.4, wall=500.0)
    assert rec.down
    assert rec.due(15.0) is None  # 5 s after the kill itself, not after the planned time
    assert rec.due(15.5) == "restart"
    rec.note("restart", 15.5, wall=505.1, log_ends={"t/0": 40})
    assert not rec.down
    assert [rec.due(t) for t in (16.0, 100.0)] == [None, None]
    never = KillRecord(KillPlan("c", 10.0))  # no +R: killed for good
    never.note("kill", 10.0, wall=1.0)
    assert never.down and never.due(1e6) is None
    with pytest.raises(ConfigError, match="event must be 'kill' or 'restart'"):
        rec.note("pause", 1.0, wall=1.0)


def _status(t: float, committed: int, done: float, intervals: int = 3) -> dict:
    return {"t": t, "intervals": intervals, "queries": [
        {"name": "q.f", "role": "sources", "done_s": done},
        {"name": "q.f.in", "role": "link", "done_s": done, "committed": {"t/0": committed}},
    ]}  # fmt: skip


def test_alive_again_and_caught_up_come_from_the_new_process_only() -> None:
    rec = KillRecord(KillPlan("c", 10.0, 5.0))
    rec.observe(5.0, lost=False, status=_status(400.0, 10, 399.0))
    assert rec.lost_seen_at_s is None  # nothing before the kill
    rec.note("kill", 10.0, wall=500.0)
    rec.observe(11.0, lost=False, status=_status(499.0, 30, 498.0))
    rec.observe(12.0, lost=True, status=_status(499.0, 30, 498.0))
    rec.note("restart", 15.0, wall=505.0, log_ends={"t/0": 40})
    # the killed process's last status, then the new process before its first decision
    rec.observe(16.0, lost=True, status=_status(499.0, 30, 498.0))
    rec.observe(30.0, lost=True, status=_status(530.0, 30, 498.0, intervals=0))
    assert (rec.lost_seen_at_s, rec.alive_again_at_s, rec.catch_up) == (12.0, None, None)
    rec.observe(31.0, lost=False, status=_status(531.0, 38, 506.0))  # alive, 2 offsets behind
    assert rec.alive_again_at_s == 31.0 and rec.caught_up_at_s is None
    assert rec.catch_up["partitions"]["t/0"] == {"end_at_restart": 40, "committed": 38,
                                                 "behind": 2}  # fmt: skip
    rec.observe(32.0, lost=False, status=_status(532.0, 45, 507.0))
    assert rec.caught_up_at_s == 32.0
    s = rec.summary()
    assert s["caught_up"] is True and s["killed_wall"] == 500.0 and s["restarted_wall"] == 505.0
    rec.observe(90.0, lost=False, status=_status(590.0, 60, 580.0), final=True)
    assert rec.alive_again_at_s == 31.0 and rec.caught_up_at_s == 32.0  # final: catch-up only


def test_caught_up_fails_on_a_source_decided_short_of_the_restart_or_a_missing_partition() -> None:
    st = _status(600.0, 50, 504.0)
    got = caught_up(st, {"t/0": 40}, 505.0)
    assert not got["caught_up"] and got["sources"]["q.f"]["behind_s"] == 1.0
    assert caught_up(st, {"t/0": 40}, 504.0)["caught_up"]
    lost = caught_up(st, {"t/0": 40, "t/1": 3}, 504.0)  # a partition the node never read
    assert not lost["caught_up"] and lost["partitions"]["t/1"]["committed"] is None
    undecided = {"queries": [{"name": "q.f", "role": "sources", "done_s": None}]}
    assert not caught_up(undecided, {}, 504.0)["caught_up"]
