"""Cluster mode: a Spark standalone master and one worker on loopback run a spillway query.

The master and the worker are started with ``spark-class`` from the installed pyspark package,
bound to 127.0.0.1 on free ports. The driver runs in a subprocess (one SparkContext per
process: the suite's local session lives in this one). Everything started here is killed by
process group at the end, pass or fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 85.0

# The driver starts its JVM gateway at once (overlapping the cluster's start-up), then waits
# for the master URL on stdin, sent once the worker has registered.
DRIVER = """
import json, sys
import pandas as pd
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession, functions as F
from spillway.spark.session import LOCAL_CONF, SPARK_CONF, TEST_CONF
from spillway.spark.queries import QUERIES, SOURCE_COLUMNS
from spillway.testing import ListFeed
from tests.spark.test_queries import feed_rows

times, values = json.loads(sys.argv[1]), json.loads(sys.argv[2])
conf = SparkConf().setAll([*SPARK_CONF.items(), *LOCAL_CONF.items(), *TEST_CONF.items()])
conf = conf.set("spark.executor.memory", "512m")
conf = conf.set("spark.cores.max", "1").set("spark.sql.shuffle.partitions", "1")
SparkContext._ensure_initialized(conf=conf)
url = sys.stdin.readline().strip()
spark = SparkSession.builder.master(url).appName("spillway-cluster").config(conf=conf).getOrCreate()
feeds = [ListFeed(times=[t], values=[v]) for t, v in zip(times, values)]
cols = ["query_id", "source_id", "key", "value", "sic", "t"]
pdf = pd.DataFrame(feed_rows(feeds, 2.0, 1.0), columns=cols).astype({"query_id": "int32",
                   "source_id": "int32"})
ts = F.timestamp_seconds("t")
rows = spark.createDataFrame(pdf).withColumn("event_ts", ts).withColumn("arrival_ts", ts)
out = QUERIES["avg"].apply(rows.select(*SOURCE_COLUMNS), 1.0)
executors = spark.sparkContext._jsc.sc().getExecutorIds().size()
print("RESULT " + json.dumps({"executors": executors, "rows": out.assign(
    w=out.window_start.astype("int64") // 10**9)[["query_id", "w", "value", "sic"]].values.tolist()}))
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill(proc: subprocess.Popen) -> None:
    """End a process started in its own session, with everything it started (executors)."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group (executor JVMs)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@pytest.fixture
def standalone(tmp_path) -> Iterator[Callable[[], str]]:
    """A standalone master + one worker (1 core, 1 GiB) on loopback, starting.

    Yields ``ready()``: waits until the worker has registered and returns the master URL.
    """
    import pyspark

    env = dict(
        os.environ,
        SPARK_HOME=str(Path(pyspark.__file__).parent),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path / "logs"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        procs.append(
            subprocess.Popen(
                [str(_spark_class()), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def ready() -> str:
        deadline = time.monotonic() + 60.0
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    state = json.load(r)
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    return url
            except OSError:
                pass
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(
                    (tmp_path / f"{n}.log").read_text()[-2000:] for n in ("master", "worker")
                )
                pytest.fail(f"worker did not register (exited: {dead}):\n{logs}")
            time.sleep(0.5)

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui))  # fmt: skip
        start("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
              "--port", str(_free_port()), "--webui-port", str(_free_port()), "--cores", "1",
              "--memory", "1g", "--work-dir", str(tmp_path / "work"))  # fmt: skip
        yield ready
    finally:
        for p in reversed(procs):
            _kill(p)


@pytest.mark.timeout(120)
def test_avg_query_runs_on_a_standalone_worker(standalone):
    t0 = time.monotonic()  # the cluster is starting since the fixture ran (a few ms ago)
    rng = np.random.default_rng(1)
    times = [np.sort(rng.uniform(0.0, 2.0, 12)).round(3).tolist() for _ in range(2)]
    values = [rng.uniform(0.0, 100.0, 12).round(2).tolist() for _ in range(2)]
    driver = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n{DRIVER}",
         json.dumps(times), json.dumps(values)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        url = standalone()
        left = max(10.0, DEADLINE_S - (time.monotonic() - t0))
        out, err = driver.communicate(input=(url + "\n").encode(), timeout=left)
    finally:
        _kill(driver)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("RESULT ")]
    assert driver.returncode == 0 and lines, err.decode()[-3000:]
    got = json.loads(lines[0][len("RESULT ") :])
    assert got["executors"] >= 1
    expected = []
    for q in range(2):
        t, v = np.asarray(times[q]), np.asarray(values[q])
        for w in range(2):
            sel = np.floor(t) == w
            expected.append([q, w, v[sel].mean(), 1.0])
    rows = sorted(got["rows"])
    assert len(rows) == 4
    for r, e in zip(rows, expected, strict=True):
        assert r[:2] == e[:2] and r[2:] == pytest.approx(e[2:])
