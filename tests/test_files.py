"""Atomic whole-file replacement (spillway.files)."""

from __future__ import annotations

import pytest

from spillway.files import replace_text


def test_a_replacement_leaves_the_new_content_and_no_aside_file(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old")
    replace_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_failed_write_keeps_the_old_content_and_removes_the_aside_file(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        replace_text(path, "bad \udc80 text")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_missing_folder_is_an_error_not_a_silent_skip(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file"):
        replace_text(tmp_path / "gone" / "state.json", "x")
