"""The live view: render() fits the width, marks misses, and the writer redraws in place."""

from __future__ import annotations

import io
import math

from spillway.live import LiveWriter, plain_line, render
from spillway.status import NodeSnapshot, QueryStatus


def _q(name: str, p95: float, target: float = 4.0, kept: float = 0.5) -> QueryStatus:
    return QueryStatus(
        name=name,
        kind="avg",
        arrival_rate=2500.0,
        kept_fraction=kept,
        sic=0.42,
        latency_p95_s=p95,
        latency_target_s=target,
        rows_in=1000,
        rows_kept=int(1000 * kept),
    )


def _snap(*qs: QueryStatus, t: float = 60.0) -> NodeSnapshot:
    return NodeSnapshot(
        t=t,
        capacity_tuples_per_s=12_345.0,
        processed_tuples_per_s=11_000.0,
        jain=0.987,
        queries=qs,
        policy="balance-sic",
    )


def test_render_shows_node_and_every_query_column() -> None:
    text = render(_snap(_q("fast", 1.25), _q("slow", 5.5)), 120, duration_s=120)
    lines = text.splitlines()
    assert "policy balance-sic" in lines[0] and "elapsed 60 / 120 s" in lines[0]
    assert "[##########----------]" in lines[0]  # half-way
    node = lines[1]
    for part in ("capacity 12.3k t/s", "processed 11.0k t/s", "utilisation 89%", "Jain 0.987"):
        assert part in node
    fast = next(line for line in lines if line.startswith("fast"))
    slow = next(line for line in lines if line.startswith("slow"))
    assert fast.split() == ["fast", "avg", "2,500", "50.0", "0.420", "1.25", "4.00"]
    assert slow.endswith("MISS") and "5.50" in slow
    assert lines[-1] == "1 of 2 queries miss their latency target"


def test_render_unknown_values_show_dash_and_no_result_is_not_on_target() -> None:
    snap = NodeSnapshot(
        t=0.0,
        capacity_tuples_per_s=math.nan,
        processed_tuples_per_s=0.0,
        jain=math.nan,
        queries=(_q("q", math.nan),),
    )
    text = render(snap, 100)
    assert "capacity - t/s" in text and "utilisation -" in text and "Jain -" in text
    assert "(no result yet)" in text
    assert "policy ?" in text and "elapsed 0 s" in text


def test_render_fits_width_and_cuts_long_names() -> None:
    long = "a-very-long-query-name-that-would-wrap-the-terminal-line-" * 2
    text = render(_snap(_q(long, 1.0), _q("b", 9.0)), 70, duration_s=10)
    assert all(len(line) <= 70 for line in text.splitlines())
    assert "~" in text  # the name was cut, marked with ~
    assert long not in text
    assert "Jain 0.987" in text  # the node line wraps instead of losing its end


def test_render_limits_rows_to_the_terminal_height() -> None:
    qs = [_q(f"q{i}", 1.0 if i % 2 else 9.0) for i in range(10)]
    text = render(_snap(*qs), 100, max_rows=3)
    rows = [line for line in text.splitlines() if line.startswith("q") and "kind" not in line]
    assert [r.split()[0] for r in rows] == ["q0", "q1", "q2"]
    assert "7 more queries not shown" in text
    assert "5 of 10 queries miss" in text  # counted over all queries, shown or not


def test_plain_line_summarises_node() -> None:
    line = plain_line(_snap(_q("a", 1.0, kept=0.25), _q("b", 9.0, kept=0.75)), duration_s=120)
    assert line.startswith("t=60s/120s policy=balance-sic")
    assert "kept=50.0%" in line and "latency_misses=1/2" in line and "\n" not in line


def test_writer_redraws_in_place_with_ansi() -> None:
    out = io.StringIO()
    w = LiveWriter(out, duration_s=120, live=True)
    w.update(_snap(_q("a", 1.0), t=1.0))
    first = out.getvalue()
    assert first.startswith("\x1b[J")  # nothing drawn yet: no cursor-up
    w.update(_snap(_q("a", 1.0), t=2.0))
    second = out.getvalue()[len(first) :]
    n_lines = first.count("\n")
    assert second.startswith(f"\x1b[{n_lines}F\x1b[J")  # back to the top of the block, clear
    assert "elapsed 2 / 120 s" in second


def test_writer_plain_mode_when_not_a_terminal() -> None:
    out = io.StringIO()  # StringIO.isatty() is False
    w = LiveWriter(out, duration_s=30, every_s=10)
    assert not w.live
    for t in range(31):
        w.update(_snap(_q("a", 1.0), t=float(t)))
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == [
        "t=0s/30s",
        "t=10s/30s",
        "t=20s/30s",
        "t=30s/30s",
    ]
    assert "\x1b" not in out.getvalue()


def test_note_starts_a_new_block() -> None:
    out = io.StringIO()
    w = LiveWriter(out, live=True)
    w.update(_snap(t=1.0))
    w.note("stopping")
    before = len(out.getvalue())
    w.update(_snap(t=2.0))
    assert out.getvalue()[before:].startswith("\x1b[J")  # no cursor-up over the note
