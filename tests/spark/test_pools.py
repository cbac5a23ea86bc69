"""Priority classes in FAIR scheduler pools: one plan (streaming query) per class, each in the
pool weighted by its class (``NodeConfig.class_plans = "pools"``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.policies import make_policy
from spillway.spark.class_control import SHARED_BATCHES, ClassControlConfig
from spillway.spark.controller import ControllerConfig, NodeController
from spillway.spark.node import Node, plan_layout
from spillway.spark.pools import allocation_xml, check_pools, pool_names
from tests.spark.test_controller import _plans

ROOT = Path(__file__).resolve().parents[2]


def _config(class_plans="pools", rate=200.0, **kw):
    qs = tuple(
        QuerySpec(name=f"c{c}", kind="avg", feed="gaussian", rate=rate, priority_class=c)
        for c in (1, 2, 3)
    )
    return NodeConfig(
        queries=qs,
        policy="dilos",
        load_manager="aurora",
        class_plans=class_plans,
        class_redistribution=False,
        **kw,
    )


def test_class_plans_is_checked():
    with pytest.raises(ConfigError, match="class_plans must be one of lanes, pools, got 'fair'"):
        _config(class_plans="fair")
    q = QuerySpec(name="q", kind="avg", feed="gaussian")
    with pytest.raises(ConfigError, match="class_plans 'pools' runs priority classes.*dilos"):
        NodeConfig(queries=(q,), class_plans="pools")
    assert _config(class_plans="lanes").class_plans == "lanes"
    with pytest.raises(ConfigError, match="class_scheduler 'cqc' runs priority classes.*dilos"):
        NodeConfig(queries=(q,), class_scheduler="cqc")
    with pytest.raises(ConfigError, match="scheduler must be one of none, cqc, got 'fifo'"):
        _config(class_scheduler="fifo")
    assert _config(class_scheduler="cqc").class_control().scheduler == "cqc"


def test_pools_give_one_plan_per_class_in_its_pool():
    layout = plan_layout(_config())
    assert [(p.name, p.query_ids, p.pool) for p in layout] == [
        ("class1", [0], "spillway-class1"),
        ("class2", [1], "spillway-class2"),
        ("class3", [2], "spillway-class3"),
    ]
    assert [(p.name, p.pool) for p in plan_layout(_config(class_plans="lanes"))] == [("avg", None)]


def test_allocation_file_weights_each_pool_by_its_class():
    root = ET.fromstring(allocation_xml((6, 3, 1)))
    pools = {p.get("name"): p for p in root.iter("pool")}
    assert list(pools) == pool_names(3)
    assert [int(p.findtext("weight")) for p in pools.values()] == [6, 3, 1]
    assert {p.findtext("schedulingMode") for p in pools.values()} == {"FIFO"}


def _session(mode, pools):
    """A stand-in session: its scheduler mode and its pools' weights (name -> weight)."""

    def pool(name):
        w = pools.get(name)
        return SimpleNamespace(
            isDefined=lambda: w is not None, get=lambda: SimpleNamespace(weight=lambda: w)
        )

    conf = {} if mode is None else {"spark.scheduler.mode": mode}
    jsc = SimpleNamespace(sc=lambda: SimpleNamespace(getPoolForName=pool))
    sc = SimpleNamespace(getConf=lambda: SimpleNamespace(get=conf.get), _jsc=jsc)
    return SimpleNamespace(sparkContext=sc)


def test_a_session_without_the_pools_is_refused():
    with pytest.raises(ConfigError, match="session's spark.scheduler.mode is FIFO.*FAIR"):
        check_pools(_session(None, {}), (6, 3, 1))
    with pytest.raises(ConfigError, match="pool 'spillway-class3' with weight 1, .* missing"):
        check_pools(_session("FAIR", {"spillway-class1": 6, "spillway-class2": 3}), (6, 3, 1))
    wrong = {"spillway-class1": 6, "spillway-class2": 1, "spillway-class3": 1}
    with pytest.raises(ConfigError, match="'spillway-class2' with weight 3, .* has it weight 1"):
        check_pools(_session("fair", wrong), (6, 3, 1))
    check_pools(_session("FAIR", dict(zip(pool_names(3), (6, 3, 1), strict=True))), (6, 3, 1))
    # the node checks a session it is given before anything starts
    with pytest.raises(ConfigError, match="spark.scheduler.mode is FIFO"):
        Node(_config(), spark=_session("FIFO", {}))
    Node(_config(class_plans="lanes"), spark=_session("FIFO", {}))  # lanes need no pools


def test_a_plan_per_class_compares_the_classes_latencies():
    def controller(query_class):
        cc = ClassControlConfig(manager="aurora", query_class=query_class, dilos=False)
        cfg = ControllerConfig(clock="logical", stw_s=4.0, seed=9, class_control=cc)
        return NodeController(cfg, _plans(), make_policy("random", seed=1), epoch_s=100.0)

    shared = controller((1, 2, 3)).class_control  # plan "avg" holds classes 1 and 2
    assert shared.shared_batches and shared.summary()["latency_order"] == SHARED_BATCHES
    own = controller((1, 1, 2)).class_control  # plan "avg": class 1, plan "max": class 2
    assert not own.shared_batches
    own.observe(0, rows=10, response_s=1.0, t=1.0)
    own.observe(1, rows=10, response_s=2.0, t=1.0)
    assert own.summary()["latency_order"].startswith("no: p95 1, 2, nan s (class 2")
    own.observe(2, rows=10, response_s=3.0, t=1.0)
    assert own.summary()["latency_order"] == "yes: p95 1 < 2 < 3 s"


#: Run in a process of its own: the FAIR scheduler and its pools are read when the
#: SparkContext starts, and the tests' shared session is FIFO.
CHILD = """
import json, time
from spillway.spark.node import Node
from tests.spark.test_pools import _config
seen = {}
node = None
def hook(plan, batch_id):
    pool = node.spark.sparkContext.getLocalProperty("spark.scheduler.pool")
    seen.setdefault(plan, []).append(pool)
node = Node(_config(trigger_s=0.5, stw_s=2.0), on_batch=hook, log_level="ERROR",
            capacity_tuples_per_s=10_000.0)
try:
    node.start()
    sc = node.spark.sparkContext
    deadline = time.monotonic() + 90.0  # until every class has results (first batches: slow)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        res = node.results()
        if all((res["query"] == q).any() for q in ("c1", "c2", "c3")):
            break
    queries = {q.name: q for q in node.spark.streams.active}
    store = sc._jsc.sc().statusStore()
    stages = store.stageList(None, False, False, getattr(store, "stageList$default$4")(),
                             getattr(store, "stageList$default$5")())
    stage_pools = {}
    for i in range(stages.size()):
        s = stages.apply(i)
        desc = s.description()
        name = desc.get().split("\\n")[0] if desc.isDefined() else ""
        stage_pools.setdefault(name, set()).add(s.schedulingPool())
    res = node.results()
    all_pools = sc._jsc.sc().getAllPools()
    out = {
        "mode": sc.getConf().get("spark.scheduler.mode"),
        "weights": {p.name(): p.weight() for p in
                    (all_pools.apply(i) for i in range(all_pools.size()))},
        "plans": node.plans,
        "queries": sorted(queries),
        "names": node._query_names,
        "hook_pools": {p: sorted(set(v)) for p, v in seen.items()},
        "stage_pools": {k: sorted(v) for k, v in stage_pools.items()},
        "results": {q: int((res["query"] == q).sum()) for q in ("c1", "c2", "c3")},
        "driver_pool": sc.getLocalProperty("spark.scheduler.pool"),
    }
finally:
    node.stop()
print("RESULT " + json.dumps(out))
"""


@pytest.mark.spark
def test_a_pools_node_runs_each_class_in_its_weighted_pool():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["mode"] == "FAIR"
    assert {k: v for k, v in out["weights"].items() if k.startswith("spillway")} == {
        "spillway-class1": 6,
        "spillway-class2": 3,
        "spillway-class3": 1,
    }
    plans = ["class1", "class2", "class3"]
    assert out["plans"] == plans
    # one streaming query per class
    assert out["queries"] == sorted(out["names"][p] for p in plans)
    for c, p in enumerate(plans, start=1):
        pool = f"spillway-class{c}"
        # the class's foreachBatch ran in its pool, and so did every Spark stage of its query
        assert out["hook_pools"][p] == [pool], out["hook_pools"]
        assert out["stage_pools"][out["names"][p]] == [pool], out["stage_pools"]
        assert out["results"][f"c{c}"] > 0, out["results"]
    assert out["driver_pool"] is None  # the starting thread is back in the default pool
