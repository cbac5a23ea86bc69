"""The live terminal view of a running node: a pure renderer and a writer that redraws in place.

:func:`render` turns a :class:`~spillway.status.NodeSnapshot` into a block of text that fits a
terminal width: a header (policy, elapsed time), the node line (estimated capacity, processed
rate, utilisation, Jain's index over query SIC) and one row per query (kind, arrival rate, kept
share, result SIC, p95 latency against its target, ``MISS`` when the target is missed); on a
node with priority classes (``dilos`` policy), one row per class under them (its queries, kept
share over the STW, loss since the run began, p95 latency against its delay target D, its load
manager's headroom H and its capacity share).
:class:`LiveWriter` redraws that block in place with ANSI cursor movement (no curses) when the
output is a terminal, and falls back to one plain line every few seconds otherwise (logs, CI).

Examples
--------
>>> q = QueryStatus(name="avg-gaussian", kind="avg", arrival_rate=1200.0, kept_fraction=0.25,
...                 sic=0.25, latency_p95_s=1.5, latency_target_s=4.0, rows_in=4, rows_kept=1)
>>> snap = NodeSnapshot(t=30.0, capacity_tuples_per_s=400.0, processed_tuples_per_s=300.0,
...                     jain=1.0, queries=(q,), policy="balance-sic")
>>> print(render(snap, 80, duration_s=120))  # doctest: +NORMALIZE_WHITESPACE
spillway  policy balance-sic  elapsed 30 / 120 s  [#####---------------]
node  capacity 400 t/s  processed 300 t/s  utilisation 75%  Jain 1.000
query         kind    rate t/s  kept %    SIC  p95 s  target
avg-gaussian  avg        1,200    25.0  0.250   1.50    4.00
all 1 queries meet their latency target
>>> c = ClassStatus(klass=1, weight=6, queries=("avg-gaussian",), arrived=400, dropped=100,
...                 latency_p95_s=3.5, latency_target_s=3.0, headroom=0.48, share=0.6,
...                 arrived_total=8000, dropped_total=1000)
>>> from dataclasses import replace
>>> for line in render(replace(snap, classes=(c,)), 80).splitlines()[4:]:
...     print(line)
all 1 queries meet their latency target
class  wt  queries       kept %  loss %  p95 s    D s      H  share
1       6  avg-gaussian    75.0    12.5   3.50   3.00  0.480    60%  MISS
>>> plain_line(snap, duration_s=120)
't=30s/120s policy=balance-sic capacity=400/s processed=300/s util=75% jain=1.000 kept=25.0% latency_misses=0/1'
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

from spillway.status import CalibrationProgress, ClassStatus, NodeSnapshot, QueryStatus

#: ANSI: move the cursor to the start of the line ``n`` lines up, and clear to the end of screen.
_UP = "\x1b[{n}F"
_CLEAR_DOWN = "\x1b[J"

_HEADER_LINES = 4  # title, node line(s), column header
_CALIBRATION_LINES = 6  # progress lines under the calibration view
_MIN_NAME = 6


def _num(x: float) -> str:
    """A compact count or rate: ``1,234``, ``12.3k``, ``4.5M``; ``-`` when unknown."""
    if not math.isfinite(x):
        return "-"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.1f}M"
    if a >= 1e5:
        return f"{x / 1e3:.0f}k"
    if a >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:,.0f}"


def _fixed(x: float, digits: int) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "-"


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%" if math.isfinite(x) else "-"


def _bar(done: float, width: int = 20) -> str:
    done = min(max(done, 0.0), 1.0) if math.isfinite(done) else 0.0
    n = round(done * width)
    return "[" + "#" * n + "-" * (width - n) + "]"


def _elapsed(t: float, duration_s: float | None) -> str:
    if duration_s is None or not duration_s > 0:
        return f"elapsed {t:.0f} s"
    return f"elapsed {t:.0f} / {duration_s:.0f} s  {_bar(t / duration_s)}"


def _query_row(q: QueryStatus, name_w: int) -> str:
    name = q.name if len(q.name) <= name_w else q.name[: name_w - 1] + "~"
    row = (
        f"{name:<{name_w}}  {q.kind:<7} {_num(q.arrival_rate):>8}  "
        f"{_fixed(100 * q.kept_fraction, 1):>6}  {_fixed(q.sic, 3):>5}  "
        f"{_fixed(q.latency_p95_s, 2):>5}  {_fixed(q.latency_target_s, 2):>6}"
    )
    if q.ended:
        row += "  (feed ended)"
    elif not q.on_target:
        row += "  MISS" if math.isfinite(q.latency_p95_s) else "  (no result yet)"
    return row


def _class_lines(classes: Sequence[ClassStatus], width: int) -> list[str]:
    """The priority classes' block: per class its weight, queries, kept share over the STW,
    loss since the run began, p95 latency against its delay target D, and its manager's
    headroom H (``MISS`` when p95 > D)."""
    fixed_w = 56  # every column but the queries, MISS mark included
    q_w = max(len("queries"), min(max(len(", ".join(c.queries)) for c in classes), width - fixed_w))
    lines = [
        f"class  wt  {'queries':<{q_w}}  {'kept %':>6}  {'loss %':>6}  {'p95 s':>5}  "
        f"{'D s':>5}  {'H':>5}  {'share':>5}"
    ]
    for c in classes:
        names = ", ".join(c.queries)
        names = names if len(names) <= q_w else names[: q_w - 1] + "~"
        row = (
            f"{c.klass:<5}  {c.weight:>2}  {names:<{q_w}}  {_fixed(100 * c.kept_fraction, 1):>6}  "
            f"{_fixed(100 * c.loss, 1):>6}  {_fixed(c.latency_p95_s, 2):>5}  "
            f"{_fixed(c.latency_target_s, 2):>5}  {_fixed(c.headroom, 3):>5}  "
            f"{_pct(c.share):>5}"
        )
        if not c.on_target:
            row += "  MISS" if math.isfinite(c.latency_p95_s) else "  (no result yet)"
        lines.append(row)
    return lines


def render(
    snapshot: NodeSnapshot,
    width: int = 100,
    *,
    duration_s: float | None = None,
    max_rows: int | None = None,
) -> str:
    """The live view of ``snapshot`` as text, every line at most ``width`` characters.

    Parameters
    ----------
    snapshot : the node now.
    width : terminal width in characters; longer lines are cut (a wrapped line would break the
        in-place redraw).
    duration_s : planned run length, for the elapsed/duration part of the header.
    max_rows : at most this many query rows (the rest are summarised in one line), so the view
        fits the terminal height; None shows every query.

    Returns
    -------
    str
        Lines separated by ``\\n``, no trailing newline.
    """
    width = max(int(width), 20)
    s = snapshot
    rates = (
        f"capacity {_num(s.capacity_tuples_per_s)} t/s  "
        f"processed {_num(s.processed_tuples_per_s)} t/s"
    )
    shares = f"utilisation {_pct(s.utilisation)}  Jain {_fixed(s.jain, 3)}"
    node = [f"node  {rates}  {shares}"]
    if len(node[0]) > width:  # narrow terminal: two lines rather than a cut
        node = [f"node  {rates}", f"      {shares}"]
    lines = [f"spillway  policy {s.policy or '?'}  {_elapsed(s.t, duration_s)}", *node]
    longest = max((len(q.name) for q in s.queries), default=_MIN_NAME)
    fixed_w = 56  # every column after the name, MISS mark included
    name_w = max(_MIN_NAME, min(longest, width - fixed_w), len("query"))
    lines.append(
        f"{'query':<{name_w}}  {'kind':<7} {'rate t/s':>8}  {'kept %':>6}  {'SIC':>5}  "
        f"{'p95 s':>5}  {'target':>6}"
    )
    shown = s.queries if max_rows is None else s.queries[: max(max_rows, 0)]
    lines += [_query_row(q, name_w) for q in shown]
    hidden = len(s.queries) - len(shown)
    misses = sum(not q.on_target for q in s.queries)
    if hidden:
        lines.append(f"... {hidden} more queries not shown (enlarge the terminal)")
    if misses:
        lines.append(f"{misses} of {len(s.queries)} queries miss their latency target")
    else:
        lines.append(f"all {len(s.queries)} queries meet their latency target")
    if s.classes:
        lines += _class_lines(s.classes, width)
    return "\n".join(line[:width].rstrip() for line in lines)


def render_calibration(progress: CalibrationProgress, width: int = 100) -> str:
    """The capacity measurement under way as text (the live view before the run starts).

    >>> from spillway.status import CalibrationProgress
    >>> p = CalibrationProgress(round=2, elapsed_s=14.0, min_s=20.0, arrival_rate=32000.0,
    ...                         batches=6, largest_batch=61000, best_tuples_per_s=98000.0,
    ...                         capacity_tuples_per_s=4975.0, rounds=((3200.0, 4975.0),))
    >>> print(render_calibration(p))
    spillway  measuring capacity: round 2 (of at most 5)  elapsed 14 s  [##############------]
    round 2: 32.0k t/s arriving, 6 batches, largest 61.0k rows, best 98.0k t/s of batch time
    round 1: 3,200 t/s arriving: capacity 4,975 t/s
    """
    p = progress
    lines = [
        f"spillway  measuring capacity: round {p.round} (of at most {p.max_rounds})  "
        f"elapsed {p.elapsed_s:.0f} s  {_bar(p.done)}",
        f"round {p.round}: {_num(p.arrival_rate)} t/s arriving, {p.batches} batches, largest "
        f"{_num(float(p.largest_batch))} rows, best {_num(p.best_tuples_per_s)} t/s of batch time",
    ]
    for i, (rate, cap) in reversed(list(enumerate(p.rounds, start=1))):
        lines.append(f"round {i}: {_num(rate)} t/s arriving: capacity {_num(cap)} t/s")
    return "\n".join(line[: max(int(width), 20)].rstrip() for line in lines)


def plain_line(snapshot: NodeSnapshot, *, duration_s: float | None = None) -> str:
    """One log line summarising ``snapshot`` (the view when the output is not a terminal).

    ``kept`` is the node-wide kept share: admitted over arrived rows of every query; on a node
    with priority classes, ``class_kept`` is each class's kept share over the STW (class 1
    first) and ``class_latency_misses`` the classes whose p95 latency is above their D.
    """
    s = snapshot
    rows_in = sum(q.rows_in for q in s.queries)
    kept = sum(q.rows_kept for q in s.queries) / rows_in if rows_in > 0 else math.nan
    misses = sum(not q.on_target for q in s.queries)
    t = f"t={s.t:.0f}s" + (f"/{duration_s:.0f}s" if duration_s else "")
    return (
        f"{t} policy={s.policy or '?'} capacity={_num(s.capacity_tuples_per_s)}/s "
        f"processed={_num(s.processed_tuples_per_s)}/s util={_pct(s.utilisation)} "
        f"jain={_fixed(s.jain, 3)} kept={_pct(kept, 1)} latency_misses={misses}/{len(s.queries)}"
    ) + _class_summary(s.classes)


def _class_summary(classes: Sequence[ClassStatus]) -> str:
    """The classes' part of :func:`plain_line` (empty without classes)."""
    if not classes:
        return ""
    kept = "/".join(_pct(c.kept_fraction) for c in classes)
    misses = sum(not c.on_target for c in classes)
    return f" class_kept={kept} class_latency_misses={misses}/{len(classes)}"


def _class_block(snapshot: NodeSnapshot) -> int:
    """Lines the classes' block takes (0 without classes)."""
    return len(snapshot.classes) + 1 if snapshot.classes else 0


class LiveWriter:
    """Shows snapshots on a stream: redrawn in place on a terminal, plain lines otherwise.

    Parameters
    ----------
    stream : where to write (default ``sys.stdout``).
    duration_s : planned run length, shown beside the elapsed time.
    live : redraw in place; None means "when ``stream`` is a terminal".
    every_s : in plain mode, at most one line per this many seconds of node time.

    Examples
    --------
    >>> import io
    >>> from spillway.status import NodeSnapshot
    >>> out = io.StringIO()
    >>> w = LiveWriter(out, duration_s=10, live=False, every_s=5)
    >>> for t in range(0, 11):
    ...     w.update(NodeSnapshot(t=float(t), capacity_tuples_per_s=10.0,
    ...                           processed_tuples_per_s=10.0, jain=1.0))
    >>> len(out.getvalue().splitlines())
    3
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        duration_s: float | None = None,
        live: bool | None = None,
        every_s: float = 5.0,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.duration_s = duration_s
        isatty = getattr(self.stream, "isatty", None)
        self.live = bool(isatty and isatty()) if live is None else live
        self.every_s = every_s
        self._drawn = 0  # lines of the block currently on screen
        self._last_plain: float | None = None
        self._last_cal: float | None = None

    def update(self, snapshot: NodeSnapshot) -> None:
        """Show ``snapshot`` (pass this method as the node's ``on_tick``)."""
        if self.live:
            size = shutil.get_terminal_size()
            # 2 summary lines + the prompt, and the classes' block (its header and a line each)
            rows = max(size.lines - _HEADER_LINES - 3 - _class_block(snapshot), 1)
            self._draw(
                render(snapshot, size.columns - 1, duration_s=self.duration_s, max_rows=rows)
            )
        else:
            if self._last_plain is not None and snapshot.t - self._last_plain < self.every_s:
                return
            self._last_plain = snapshot.t
            self.stream.write(plain_line(snapshot, duration_s=self.duration_s) + "\n")
        self.stream.flush()

    def calibrating(self, progress: CalibrationProgress, lines: Sequence[str] = ()) -> None:
        """Show the capacity measurement under way (in place on a terminal, where ``lines``,
        the latest progress lines, appear under it; a plain line every ``every_s`` seconds
        otherwise)."""
        if self.live:
            width = shutil.get_terminal_size().columns - 1
            text = render_calibration(progress, width)
            tail = [ln[:width] for ln in list(lines)[-_CALIBRATION_LINES:]]
            self._draw("\n".join([text, *tail]))
        else:
            t = progress.elapsed_s
            if self._last_cal is not None and t - self._last_cal < self.every_s:
                return
            self._last_cal = t
            self.stream.write(render_calibration(progress, 200).splitlines()[0] + "\n")
        self.stream.flush()

    def _draw(self, text: str) -> None:
        prefix = _UP.format(n=self._drawn) if self._drawn else ""
        self.stream.write(prefix + _CLEAR_DOWN + text + "\n")
        self._drawn = text.count("\n") + 1

    def note(self, message: str) -> None:
        """Print a message below the view (the next redraw starts under it)."""
        self.stream.write(message + "\n")
        self.stream.flush()
        self._drawn = 0
