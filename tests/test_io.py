"""headlab.io's atomic writes: the file appears whole or not at all, and a write that fails
leaves nothing behind, not even the folders it made for its file."""
from __future__ import annotations

import os

import pytest

from headlab.io import atomic_write


def test_a_write_appears_whole_with_ordinary_permissions(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    with atomic_write(target) as handle:
        handle.write("one\n")
        assert not target.exists()                  # not before the write is complete
    assert target.read_text() == "one\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(path.name for path in target.parent.iterdir()) == ["out.txt"]


def test_a_failed_write_leaves_no_file_and_no_folder_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    target = tmp_path / "kept" / "new" / "deeper" / "out.txt"
    with pytest.raises(ValueError):
        with atomic_write(target) as handle:
            handle.write("half")
            raise ValueError("input went bad halfway")
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["kept"]


def test_a_failed_write_keeps_a_folder_that_holds_something_else(tmp_path):
    target = tmp_path / "new" / "out.txt"
    with pytest.raises(ValueError):
        with atomic_write(target):
            (tmp_path / "new" / "other.txt").write_text("another writer's\n")
            raise ValueError
    assert sorted(path.name for path in (tmp_path / "new").iterdir()) == ["other.txt"]


def test_a_failed_rewrite_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(ValueError):
        with atomic_write(target) as handle:
            handle.write("new")
            raise ValueError
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
