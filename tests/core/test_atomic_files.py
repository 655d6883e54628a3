"""The one atomic-write helper: all or nothing, no temporary file left behind."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from osmosis_rollout._internal.atomic import (
    atomic_file,
    copy_atomic,
    write_json_atomic,
    write_text_atomic,
)


def test_a_write_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "report.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "path": tmp_path})
    assert json.loads(target.read_text()) == {"a": 2, "path": str(tmp_path)}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_file(target) as handle:
        handle.write("half")
        raise RuntimeError("the renderer failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_an_unencodable_character_fails_cleanly_unless_asked_to_escape(tmp_path: Path) -> None:
    target = tmp_path / "trajectory.json"
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "lone \ud800")
    assert list(tmp_path.iterdir()) == []
    write_text_atomic(target, "lone \ud800", errors="backslashreplace")
    assert target.read_text() == "lone \\ud800"


def test_concurrent_writers_of_one_file_never_share_a_temporary(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for _ in range(20):
                write_json_atomic(target, {"writer": i, "filler": "x" * 10_000})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert json.loads(target.read_text())["writer"] in range(4)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_a_copy_is_atomic_too(tmp_path: Path) -> None:
    source = tmp_path / "a.json"
    write_text_atomic(source, "{}\n")
    copy_atomic(source, tmp_path / "out" / "b.json")
    assert (tmp_path / "out" / "b.json").read_text() == "{}\n"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["b.json"]


def test_a_stale_temporary_of_a_reused_pid_does_not_block_the_write(tmp_path: Path) -> None:
    from osmosis_rollout._internal import atomic as _atomic

    target = tmp_path / "trajectory.json"
    taken = _atomic._temporary(target).name  # .trajectory.json.<pid>.<serial>.tmp
    stem, serial, _ = taken.rsplit(".", 2)
    stale = tmp_path / f"{stem}.{int(serial) + 1}.tmp"  # what the next write would pick
    stale.write_text("left by a crashed process")
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([stale.name, "trajectory.json"])


def test_a_text_write_has_the_bytes_and_permissions_of_a_text_file_write(tmp_path: Path) -> None:
    text = "line one\nünïcödé ✓ \U0001f600\nlone \ud800 end\n" * 50
    plain = tmp_path / "plain.json"
    with plain.open("w", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(text)
    atomic = tmp_path / "new" / "atomic.json"  # its directory is made too
    write_text_atomic(atomic, text, errors="backslashreplace")
    assert atomic.read_bytes() == plain.read_bytes()
    assert atomic.stat().st_mode == plain.stat().st_mode
    write_text_atomic(atomic, "")
    assert atomic.read_bytes() == b""
    assert sorted(p.name for p in atomic.parent.iterdir()) == ["atomic.json"]


def test_a_text_write_that_cannot_finish_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    target = tmp_path / "trajectory.json"
    write_text_atomic(target, "old")

    def full_disk(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["trajectory.json"]
