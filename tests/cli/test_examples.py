"""The shipped example config parses, documents every key, and its replay file exists."""

from __future__ import annotations

import dataclasses
import re
from importlib.resources import files
from pathlib import Path

import pytest

from spillway.cli import build_parser, node_config_from_args
from spillway.config import NodeConfig, QuerySpec, load_config
from spillway.feeds import make_feed

EXAMPLE = Path(str(files("spillway") / "examples" / "node.toml"))


def test_example_parses() -> None:
    cfg = load_config(EXAMPLE)
    assert len(cfg.queries) >= 5
    assert {q.kind for q in cfg.queries} >= {"avg", "count", "max", "top5", "cov"}
    assert cfg.overload is not None and cfg.seed == 42


def test_example_replays_a_csv_shipped_beside_it() -> None:
    cfg = load_config(EXAMPLE)
    (replay,) = [q for q in cfg.queries if q.feed == "replay"]
    csv = EXAMPLE.parent / replay.feed_options["path"]
    header = csv.read_text().splitlines()[0]
    assert header == "time_s,key,value"


def test_example_explains_every_key() -> None:
    lines = EXAMPLE.read_text().splitlines()
    for key in (f.name for f in dataclasses.fields(NodeConfig) if f.name != "queries"):
        # set (or shown commented out) right under a comment explaining it
        at = [i for i, line in enumerate(lines) if re.match(rf"#? ?{key} = ", line)]
        assert at, f"node key {key} is missing from {EXAMPLE.name}"
        assert lines[at[0] - 1].startswith("#"), f"node key {key} has no comment above it"
    table = "\n".join(line for line in lines if line.startswith("#   "))
    for key in (f.name for f in dataclasses.fields(QuerySpec)):
        assert re.search(rf"^#   {key} ", table, re.M), f"query key {key} is not explained"


def test_every_example_feed_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE.parent.parent.parent)  # anywhere but the example's folder
    args = build_parser().parse_args(["run", "--config", str(EXAMPLE)])
    cfg = node_config_from_args(args)  # resolves the replay path beside the file
    for q in cfg.queries:
        feed = make_feed(
            q.feed,
            n_sources=q.n_sources,
            rate=q.rate,
            profile=q.profile,
            profile_options=q.profile_options,
            seed=cfg.seed,
            **q.feed_options,
        )
        assert feed.n_sources == q.n_sources
        assert int(feed.count(5.0).sum()) > 0, q.name
        assert feed.rejected() == 0


CLASSES = Path(str(files("spillway") / "examples" / "classes.toml"))


def test_classes_example_runs_three_classes_and_explains_its_keys() -> None:
    cfg = load_config(CLASSES)
    cc = cfg.class_control()
    assert cfg.policy == "dilos" and cc.query_class == (1, 2, 3) and cc.dilos
    assert cc.weights == (6, 3, 1) and cc.target_intervals == (3.0, 4.0, 5.0)
    lines = CLASSES.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"([a-z_]+) = ", line)
        if m and m.group(1) not in {f.name for f in dataclasses.fields(QuerySpec)}:
            assert lines[i - 1].startswith("#"), f"node key {m.group(1)} has no comment above it"
    table = "\n".join(line for line in lines if line.startswith("#   "))
    used = {m.group(1) for line in lines if (m := re.match(r"([a-z_]+) = ", line))}
    for key in used & {f.name for f in dataclasses.fields(QuerySpec)}:
        assert re.search(rf"^#   {key} ", table, re.M), f"query key {key} is not explained"
