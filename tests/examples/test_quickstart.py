"""The README's quickstart works as written, without the test suite running itself.

The two commands are read from the fenced block right under ``## Quickstart``. Each does its
own set-up on a fresh machine; ``.ci/run`` runs exactly these commands, in order, on a clean
clone, so that set-up is exercised there (checked here). This module runs both commands
literally in a fresh copy of the repository's files (``git ls-files``) whose ``.venv`` is this
run's environment: the demo in full, the test command with a one-file selection, so it shows
that the script lints, type-checks and runs pytest without the suite running itself again.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from _support.repo import fresh_copy
from examples.support import REPO, assert_all_rows_passed, count_rows, run

INNER_ENV = "OSMOSIS_QUICKSTART_INNER"

pytestmark = pytest.mark.skipif(
    bool(os.environ.get(INNER_ENV)),
    reason=f"inside the quickstart's own test run ({INNER_ENV} is set)",
)

QUICKSTART_TIMEOUT = 600

#: What the test command runs in the copy: one small file of the suite's own.
INNER_SELECTION = "tests/packaging/test_version.py"


def quickstart_commands(readme: str) -> list[str]:
    """The lines of the first fenced code block after the ``## Quickstart`` heading."""
    match = re.search(r"^## Quickstart\s*$(.*?)^```[^\n]*\n(.*?)^```", readme, re.M | re.S)
    assert match is not None, "README.md has no fenced block under '## Quickstart'"
    assert "\n## " not in match.group(1), "the block under '## Quickstart' is in a later section"
    return [line.strip() for line in match.group(2).splitlines() if line.strip()]


def script_commands(path: Path) -> list[str]:
    """The command lines of a shell script: no comments, no blank lines, no shell settings."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [
        line
        for line in lines
        if line and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]


def install_stamp(repo: Path) -> str:
    """The marker ``scripts/_venv.sh`` leaves in ``.venv`` once it installed these files."""
    digest = hashlib.sha1(
        (repo / "pyproject.toml").read_bytes() + (repo / "constraints.txt").read_bytes()
    ).hexdigest()
    return f".installed-{digest[:12]}"


def this_runs_venv() -> Path:
    """This run's environment, when ``scripts/_venv.sh`` made it from the current files.

    Only then may a copy borrow it: the scripts would otherwise reinstall the project into it,
    from the copy.
    """
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix) or not (venv / install_stamp(REPO)).is_file():
        pytest.skip(
            f"this run's environment ({venv}) was not installed by scripts/_venv.sh from the "
            "current pyproject.toml and constraints.txt; run `bash scripts/test.sh` to make it"
        )
    return venv


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the repository whose ``.venv`` is this run's environment."""
    venv = this_runs_venv()
    repo = fresh_copy(tmp_path_factory.mktemp("quickstart") / "repo")
    (repo / ".venv").symlink_to(venv, target_is_directory=True)
    return repo


def test_the_quickstart_block_is_exactly_the_demo_and_the_test_suite() -> None:
    commands = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_ci_runs_the_quickstart_commands_in_order_on_its_clean_clone() -> None:
    commands = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    ci = script_commands(REPO / ".ci" / "run")
    # Each command is a line of its own (in the foreground, so ``set -e`` sees it fail), in order.
    assert all(command in ci for command in commands), f".ci/run does not run {commands}: {ci}"
    positions = [ci.index(command) for command in commands]
    assert positions == sorted(positions), f".ci/run runs {commands} out of order: {ci}"


def test_the_test_command_runs_lint_format_types_venvs_then_pytest_with_its_arguments() -> None:
    script = script_commands(REPO / "scripts" / "test.sh")
    assert script[0] == "source scripts/_venv.sh", script
    steps = [re.sub(r"^echo [^;]*;\s*", "", line) for line in script[1:]]
    assert steps[0].startswith(".venv/bin/ruff check "), steps
    assert steps[1].startswith(".venv/bin/ruff format --check "), steps
    assert steps[2] == ".venv/bin/mypy", steps
    # The venvs from the package index are built before pytest, never inside a test.
    assert steps[3] == ".venv/bin/python scripts/build_test_venvs.py", steps
    assert steps[4].startswith(".venv/bin/python -m pytest "), steps
    assert '"$@" || status=$?' in steps[4], steps


@pytest.mark.timeout(QUICKSTART_TIMEOUT + 60)
def test_the_demo_command_passes_every_row_on_a_fresh_copy(copy: Path) -> None:
    demo, _ = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    result = run(["bash", "-c", demo], copy, timeout=QUICKSTART_TIMEOUT, **{INNER_ENV: "1"})
    rows = count_rows(copy / "example_rollouts" / "multiply-openai" / "data" / "test.jsonl")
    assert_all_rows_passed(result, rows)


@pytest.mark.timeout(QUICKSTART_TIMEOUT + 60)
def test_the_test_command_passes_on_a_fresh_copy_with_a_small_selection(
    copy: Path, tmp_path: Path
) -> None:
    _, suite = quickstart_commands((REPO / "README.md").read_text(encoding="utf-8"))
    # The inner run's pytest tmp dirs and mypy cache stay apart from this run's; the cache
    # starts as a copy of this checkout's (the copy's files keep their times), so mypy only
    # re-checks what differs instead of the whole tree.
    mypy_cache = tmp_path / "mypy-cache"
    if (REPO / ".mypy_cache").is_dir():
        shutil.copytree(REPO / ".mypy_cache", mypy_cache)
    env = {
        INNER_ENV: "1",
        "PYTEST_DEBUG_TEMPROOT": str(tmp_path),
        "MYPY_CACHE_DIR": str(mypy_cache),
        # Only reports the venvs: nothing is installed from inside this test.
        "PYTEST_OSMOSIS_VENV_BUILD_TIMEOUT": "0",
    }
    result = run(
        ["bash", "-c", f"{suite} {INNER_SELECTION}"], copy, timeout=QUICKSTART_TIMEOUT, **env
    )
    assert result.returncode == 0, result.explain()
    for step in ("== ruff", "== ruff format", "== mypy", "== test venvs", "== pytest"):
        assert re.search(rf"^{step}$", result.stdout, re.M), result.explain()
    final = re.findall(r"^=*\s*(\d+) passed(.*) in [\d.]+s", result.stdout, re.M)
    assert final, result.explain()
    passed, rest = final[-1]
    assert int(passed) > 0 and "failed" not in rest and "error" not in rest, result.explain()
