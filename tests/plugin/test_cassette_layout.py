"""Where cassettes live: a folder per dataset path from the rootdir, and the old layout still read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows, write_rows

POLICY = "--osmosis-policy=policy.py:policy"
SHARED = "--osmosis-cassette-dir=cassettes"
PREFLIGHT = 2


def two_suites(workspace: Callable[..., Path]) -> Path:
    """``suite_a/data/test.jsonl`` and ``suite_b/data/test.jsonl``: same file name, same row
    keys (row-0..row-3), different prompts."""
    root = workspace()
    (root / "data" / "test.jsonl").unlink()
    write_rows(root / "suite_a" / "data" / "test.jsonl", multiply_rows(4))
    write_rows(root / "suite_b" / "data" / "test.jsonl", multiply_rows(8)[4:])
    return root


def test_two_datasets_with_one_file_name_record_and_replay_without_colliding(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = two_suites(workspace)
    for suite in ("suite_a", "suite_b"):
        recorded = pytester.runpytest(
            f"--osmosis-dataset={suite}/data/test.jsonl",
            POLICY,
            SHARED,
            "--osmosis-record-mode=once",
        )
        recorded.assert_outcomes(passed=4 + PREFLIGHT)
    for suite in ("suite_a", "suite_b"):
        folder = root / "cassettes" / suite / "data" / "test.jsonl"
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.json")) == [
            f"row-{i}/attempt-0.json" for i in range(4)
        ]
    (root / "policy.py").unlink()
    # Both suites in one fresh process, as CI would run them: no policy, only the cassettes.
    replayed = pytester.runpytest_subprocess(
        "--osmosis-dataset=suite_a/data/test.jsonl",
        "--osmosis-dataset=suite_b/data/test.jsonl",
        SHARED,
    )
    replayed.assert_outcomes(passed=8 + PREFLIGHT + 1)  # a contract check per dataset


def to_old_layout(cassettes: Path, dataset: str) -> None:
    """Move recorded cassettes to ``<cassette_dir>/<file name>.<row key>/`` with the row key
    the old releases wrote, as a cassette folder recorded before this layout looks."""
    namespace = cassettes / dataset
    for row in sorted(p for p in namespace.iterdir() if p.is_dir()):
        old = cassettes / f"{Path(dataset).name}.{row.name}"
        row.rename(old)
        for file in old.glob("*.json"):
            document = json.loads(file.read_text(encoding="utf-8"))
            document["row_key"] = old.name
            file.write_text(json.dumps(document, indent=2, sort_keys=True), encoding="utf-8")
    for folder in [namespace, *namespace.parents]:
        if folder == cassettes:
            break
        folder.rmdir()


def test_a_cassette_folder_of_the_old_layout_still_replays(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    cassettes = root / "data" / "cassettes"
    recorded = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-record-mode=once"
    )
    recorded.assert_outcomes(passed=4 + PREFLIGHT)
    to_old_layout(cassettes, "data/test.jsonl")
    assert sorted(p.name for p in cassettes.iterdir()) == [f"test.jsonl.row-{i}" for i in range(4)]
    (root / "policy.py").unlink()

    replayed = pytester.runpytest_subprocess("--osmosis-dataset=data/test.jsonl")

    replayed.assert_outcomes(passed=4 + PREFLIGHT)
    # Read where they are: nothing was written in the new layout beside them.
    assert sorted(p.name for p in cassettes.iterdir()) == [f"test.jsonl.row-{i}" for i in range(4)]


def test_a_row_recorded_in_the_new_layout_wins_over_its_old_folder(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(1))
    cassettes = root / "data" / "cassettes"
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-record-mode=once")
    new = cassettes / "data" / "test.jsonl" / "row-0" / "attempt-0.json"
    # An old folder for the same row whose recording answers wrongly.
    old = cassettes / "test.jsonl.row-0" / "attempt-0.json"
    old.parent.mkdir()
    old.write_text(new.read_text(encoding="utf-8").replace("The answer is 6", "no idea"))
    assert "no idea" in old.read_text(encoding="utf-8")
    (root / "policy.py").unlink()

    replayed = pytester.runpytest_subprocess("--osmosis-dataset=data/test.jsonl")

    replayed.assert_outcomes(passed=1 + PREFLIGHT)
