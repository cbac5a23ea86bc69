"""CPU that `spillway produce`'s pacing loop takes, without a broker.

Runs :func:`spillway.kafka.produce.run_paced` on a feed for a few seconds of wall time with a
writer that only counts, and prints the write calls made and the CPU seconds spent (payload,
encoding and pacing; what librdkafka costs per message is left out, it does not depend on how
the tuples are batched)::

    .venv/bin/python scripts/bench_produce_cpu.py --rate 4350 --seconds 8 --feed taxi
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

from spillway.kafka.produce import ProduceConfig, run_paced


class CountingWriter:
    """Counts the messages and calls it is given."""

    failed = 0

    def __init__(self) -> None:
        self.messages = 0
        self.calls = 0

    def write(self, topic: str, values: Any, **kw: Any) -> int:
        self.messages += len(values)
        self.calls += 1
        return len(values)

    def flush(self) -> None:
        pass


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=4350.0, help="tuples/s per source")
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--feed", default="taxi")
    args = ap.parse_args()
    cfg = ProduceConfig(
        topic="t", rate=args.rate, sources=args.sources, duration_s=args.seconds, feed=args.feed
    )
    writer = CountingWriter()
    cpu0, t0 = _cpu_s(), time.monotonic()
    summary = run_paced(cfg, cfg.make_feed(), writer, partitions=args.sources)
    cpu, wall = _cpu_s() - cpu0, time.monotonic() - t0
    print(
        f"{summary.sent:,} tuples in {writer.calls:,} writes over {wall:.1f} s: "
        f"{cpu:.2f} CPU s, {100 * cpu / wall:.0f} % of a core"
    )


if __name__ == "__main__":
    main()
