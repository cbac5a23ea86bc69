"""The folder manifest: which files are admitted, in what order, shared and kept on disk."""

from __future__ import annotations

import os

import pytest

from spillway.errors import InputDataError
from spillway.feeds.manifest import DEFAULT_MANIFEST, Manifest, admissible


def _write(path, lines: int, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n" * lines)
    os.utime(path, (mtime, mtime))


def test_hidden_temp_and_underscore_files_are_not_admitted() -> None:
    assert admissible("part-1.jsonl")
    assert not any(admissible(n) for n in (".part", "_SUCCESS", "x.tmp", "x._COPYING_"))


def test_new_files_are_admitted_by_modification_time_then_name(tmp_path) -> None:
    _write(tmp_path / "b.jsonl", 1, 200.0)
    _write(tmp_path / "c.jsonl", 2, 100.0)
    _write(tmp_path / "a.jsonl", 3, 200.0)
    m = Manifest(tmp_path, fmt="json")
    assert [(e.file, e.records) for e in m.refresh()] == [
        ("c.jsonl", 2),
        ("a.jsonl", 3),
        ("b.jsonl", 1),
    ]
    _write(tmp_path / "0.jsonl", 1, 50.0)  # older, but seen later: it goes last
    assert [e.file for e in m.refresh()] == ["0.jsonl"]
    assert m.refresh() == []
    assert (tmp_path / DEFAULT_MANIFEST).exists()


def test_two_readers_of_one_folder_share_one_order(tmp_path) -> None:
    a = Manifest(tmp_path, fmt="json")
    b = Manifest(tmp_path, fmt="json")
    _write(tmp_path / "x.jsonl", 1, 10.0)
    a.refresh()
    _write(tmp_path / "w.jsonl", 1, 5.0)
    b.refresh()
    a.refresh()
    assert [e.file for e in a.entries] == [e.file for e in b.entries] == ["x.jsonl", "w.jsonl"]


def test_glob_and_recursive_lookup(tmp_path) -> None:
    _write(tmp_path / "a.csv", 1, 1.0)
    _write(tmp_path / "a.json", 1, 1.0)
    _write(tmp_path / "day=1" / "b.csv", 1, 2.0)
    _write(tmp_path / "_tmp" / "c.csv", 1, 3.0)
    flat = Manifest(tmp_path, fmt="csv", glob="*.csv", path=tmp_path.parent / "m1.jsonl")
    assert [e.file for e in flat.refresh()] == ["a.csv"]
    deep = Manifest(
        tmp_path, fmt="csv", glob="*.csv", recursive=True, path=tmp_path.parent / "m2.jsonl"
    )
    assert [e.file for e in deep.refresh()] == ["a.csv", "day=1/b.csv"]


def test_a_line_being_appended_is_read_later(tmp_path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"file": "a", "mtime": 1.0, "records": 2}\n{"file": "b", "mt')
    m = Manifest(tmp_path, fmt="json", path=path)
    assert [e.file for e in m.load()] == ["a"]
    with path.open("a") as f:
        f.write('ime": 2.0, "records": 1}\n')
    assert [e.file for e in m.load()] == ["a", "b"]


def test_a_damaged_manifest_is_an_input_error(tmp_path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("not a file entry\n")
    with pytest.raises(InputDataError, match="not a file entry.*delete the manifest"):
        Manifest(tmp_path, fmt="json", path=path).load()
