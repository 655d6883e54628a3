"""The README's quickstart works as written, on a fresh copy of the repository.

The two commands are read from the fenced block right under ``## Quickstart`` and run
literally in a temporary copy of the repository's files (``git ls-files``), where each
creates its own ``.venv``. The second command runs the whole suite again, inside which
this module skips itself (``OSMOSIS_QUICKSTART_INNER``) so the check does not recurse.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from examples.support import REPO, assert_all_rows_passed, count_rows, run

INNER_ENV = "OSMOSIS_QUICKSTART_INNER"

pytestmark = pytest.mark.skipif(
    bool(os.environ.get(INNER_ENV)),
    reason=f"inside the quickstart's own test run ({INNER_ENV} is set)",
)

QUICKSTART_TIMEOUT = 1500


def quickstart_commands(readme: str) -> list[str]:
    """The lines of the first fenced code block after the ``## Quickstart`` heading."""
    match = re.search(r"^## Quickstart\s*$(.*?)^```[^\n]*\n(.*?)^```", readme, re.M | re.S)
    assert match is not None, "README.md has no fenced block under '## Quickstart'"
    assert "\n## " not in match.group(1), "the block under '## Quickstart' is in a later section"
    return [line.strip() for line in match.group(2).splitlines() if line.strip()]


def tracked_files() -> list[str]:
    """The repository's files as a clone would have them (tracked, plus new unignored ones)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: cannot list the repository's files")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return [path for path in listed.split("\0") if path and (REPO / path).is_file()]


def fresh_copy(destination: Path) -> Path:
    """Copy the repository's files (no .venv, no caches) to ``destination``."""
    for rel in tracked_files():
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return destination


def test_the_quickstart_block_is_exactly_the_demo_and_the_test_suite() -> None:
    commands = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]


@pytest.mark.timeout(QUICKSTART_TIMEOUT * 2 + 120)
def test_the_readme_quickstart_runs_green_on_a_fresh_copy(tmp_path: Path) -> None:
    demo, suite = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    copy = fresh_copy(tmp_path / "repo")
    assert not (copy / ".venv").exists()
    # The inner runs' pytest tmp dirs stay apart from this run's.
    inner_tmp = tmp_path / "inner-tmp"
    inner_tmp.mkdir()
    env = {INNER_ENV: "1", "PYTEST_DEBUG_TEMPROOT": str(inner_tmp)}

    first = run(["bash", "-c", demo], copy, timeout=QUICKSTART_TIMEOUT, **env)
    rows = count_rows(copy / "example_rollouts" / "multiply-openai" / "data" / "test.jsonl")
    assert_all_rows_passed(first, rows)
    assert (copy / ".venv" / "bin" / "python").is_file(), "the demo did not create .venv"

    second = run(["bash", "-c", suite], copy, timeout=QUICKSTART_TIMEOUT, **env)
    assert second.returncode == 0, second.explain()
    final = re.findall(r"^=*\s*(\d+ passed.*) in [\d.]+s", second.stdout, re.MULTILINE)
    assert final, second.explain()
    assert "failed" not in final[-1] and "error" not in final[-1], second.explain()
