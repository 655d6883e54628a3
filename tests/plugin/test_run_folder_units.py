"""The run folder on its own: claimed once, refused when foreign, left as found when unused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from osmosis_rollout.errors import RunFolderError
from osmosis_rollout.runs.journal import RUN_SCHEMA
from pytest_osmosis.results.run_folder import RunFolder


def test_a_second_claim_names_the_holder_and_a_released_folder_can_be_claimed(
    tmp_path: Path,
) -> None:
    first = RunFolder(tmp_path / "out", run_id="a")
    first.claim(resume=False)
    second = RunFolder(tmp_path / "out", run_id="b")
    with pytest.raises(
        RunFolderError, match=rf"in use by another run \(pid {os.getpid()}, started "
    ):
        second.claim(resume=False)
    first.release()
    assert not (tmp_path / "out" / "run.lock").exists()
    second.claim(resume=False)
    assert second.claimed
    second.release()


def test_an_unused_claim_leaves_no_folder_behind(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / ".osmosis" / "runs" / "x", run_id="x")
    folder.claim(resume=False)
    folder.abandon()
    assert list(tmp_path.iterdir()) == []


def test_an_earlier_versions_run_folder_is_refused_with_how_to_reuse_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema": RUN_SCHEMA, "config": {}}))
    with pytest.raises(RunFolderError, match=r"run\.json.*earlier version's: remove the folder"):
        RunFolder(out, run_id="new").claim(resume=False)
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]


def test_a_resume_cuts_a_torn_last_journal_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema": RUN_SCHEMA, "run_id": "old"}))
    (out / "rows.jsonl").write_bytes(b'{"nodeid": "a"}\n{"nodeid": "b", "rew')
    folder = RunFolder(out, run_id="new")
    folder.claim(resume=True)
    assert folder.torn_bytes == len(b'{"nodeid": "b", "rew')
    assert (out / "rows.jsonl").read_bytes() == b'{"nodeid": "a"}\n'
    folder.release()
