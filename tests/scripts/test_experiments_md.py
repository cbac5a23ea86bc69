"""scripts/experiments_md.py: the preamble kept, the sections rewritten or added to."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.scripts._load import load_script


@pytest.mark.parametrize(("add", "sections"), [(False, ["## new"]), (True, ["## old", "## new"])])
def test_sections_are_rewritten_or_added_after_the_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, add: bool, sections: list[str]
) -> None:
    script = load_script("experiments_md")
    monkeypatch.setattr(script, "section", lambda run_dir, command, **kw: f"## {run_dir}")
    out = tmp_path / "EXPERIMENTS.md"
    out.write_text(f"# Experiments\n\nby hand\n\n{script.MARK}\n\n## old\n")
    argv = ["experiments_md.py", "--out", str(out), "--run", "new", "cmd", *(["--add"] * add)]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    head, _, tail = out.read_text().partition(script.MARK)
    assert head.strip() == "# Experiments\n\nby hand"
    assert [x for x in tail.splitlines() if x.startswith("## ")] == sections
