"""CPU that ``spillway produce`` and the broker take at a given rate, on this machine.

Usage (under the shared lock, with nothing else heavy running; Linux, it reads ``/proc``)::

    flock /tmp/spillway-heavy.lock .venv/bin/python scripts/kafka_producer_cpu.py \
        --rate 50000 [--rate 150000 ...] [--seconds 12]

Starts its own broker, then per ``--rate`` one ``spillway produce`` process (gaussian feed, two
sources, two partitions) for ``--seconds``, and prints one JSON line: the rate asked and
achieved (end offsets over the run), the producer's and the broker's CPU seconds, and the cores
each took (CPU over wall). A Kafka experiment's producers share the node's cores: what they
take is what the node does not get.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import time

from spillway.kafka.admin import create_topic, partition_offsets
from spillway.procfs import read_stat
from spillway.testing import running_broker


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (0 once it is gone)."""
    stat = read_stat(pid)
    return 0.0 if stat is None else stat.cpu_s


def broker_pids() -> list[int]:
    """The Java processes whose command line names Kafka."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"java" in cmd and b"kafka" in cmd.lower():
            out.append(int(d.rsplit("/", 1)[1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, action="append", help="tuples/s in all (repeatable)")
    ap.add_argument("--seconds", type=float, default=12.0)
    args = ap.parse_args()
    cli = "import sys; from spillway.cli import main; sys.exit(main(sys.argv[1:]))"
    with running_broker() as state:
        conn = state.connection()
        brokers = broker_pids()
        for i, rate in enumerate(args.rate or [50_000.0]):
            topic = f"cpu-{i}"
            create_topic(conn, topic, partitions=2)
            b0 = sum(cpu_s(p) for p in brokers)
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-c", cli, "produce", topic, "--feed", "gaussian",
                 "--sources", "2", "--rate", f"{rate / 2:.3f}", "--duration",
                 f"{args.seconds:g}", "--bootstrap", conn.bootstrap_servers],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            used = 0.0
            while proc.poll() is None:
                used = max(used, cpu_s(proc.pid))  # read until it exits: gone, it reads 0
                time.sleep(0.1)
            wall = time.monotonic() - t0
            broker = sum(cpu_s(p) for p in brokers) - b0
            sent = sum(p.latest - p.earliest for p in partition_offsets(conn, topic))
            print(json.dumps({
                "asked_rate": rate, "achieved_rate": round(sent / args.seconds),
                "producer_cpu_s": round(used, 2), "broker_cpu_s": round(broker, 2),
                "wall_s": round(wall, 1), "producer_cores": round(used / wall, 2),
                "broker_cores": round(broker / wall, 2),
                "producer_us_per_message": round(1e6 * used / max(sent, 1), 2),
            }))  # fmt: skip


if __name__ == "__main__":
    main()
