"""The repository under test: its root, its tracked files and a fresh copy of them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
"""The repository's root (the folder holding ``pyproject.toml``)."""


def tracked_files() -> list[str]:
    """The repository's files as a clone would have them (tracked, plus new unignored ones).

    Skips the calling test where this is not a git checkout.
    """
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
    """Copy the repository's files (no .venv, no build output, no caches) to ``destination``."""
    for rel in tracked_files():
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return destination
