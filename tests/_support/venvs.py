"""Throwaway virtualenvs installed from the package index, for tests of what users install.

Each venv is made ``--without-pip``; this run's own pip installs into it (``pip --python``), so
no pip is downloaded or bootstrapped per venv. A test that needs the index calls
:func:`require_package_index` first: where the index cannot be reached it is skipped, with the
reason, instead of failing on the network.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PIP_TIMEOUT = 900
"""Seconds one ``pip install`` may take (resolution and downloads of a large extra)."""

PYTHON312_ENV = "PYTEST_OSMOSIS_INTEROP_PYTHON"
"""Set to a Python >= 3.12 interpreter for the tests that need one (else it is searched)."""


@dataclass(frozen=True)
class Finished:
    """A finished subprocess: its command, exit status and output."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """Standard output, then standard error."""
        return self.stdout + self.stderr

    def explain(self) -> str:
        """Everything needed to see why an assertion on this run failed."""
        return (
            f"$ {' '.join(self.args)}\nexit status {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


def run(args: list[str], *, cwd: Path | None = None, timeout: float) -> Finished:
    """Run ``args`` (bounded by ``timeout`` seconds) and capture its output."""
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    return Finished(args, done.returncode, done.stdout, done.stderr)


@functools.cache
def _index_problem() -> str | None:
    """Why the package index cannot serve a download, or None when it can."""
    with tempfile.TemporaryDirectory() as tmp:
        done = run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", tmp, "setuptools>=77"],
            timeout=180,
        )
    if done.returncode == 0:
        return None
    lines = [line for line in done.output.splitlines() if line.strip()]
    return lines[-1] if lines else f"pip exited with {done.returncode}"


def require_package_index() -> None:
    """Skip the calling test where pip cannot download from the package index."""
    problem = _index_problem()
    if problem is not None:
        pytest.skip(f"the package index cannot be reached: {problem}")


def create_venv(path: Path, python: str = sys.executable) -> Path:
    """Make a virtualenv at ``path`` with ``python`` (no pip in it); return its interpreter."""
    done = run([python, "-m", "venv", "--without-pip", str(path)], timeout=120)
    assert done.returncode == 0, done.explain()
    return path / "bin" / "python"


def pip_install(
    python: Path, *requirements: str, cwd: Path | None = None, timeout: float = PIP_TIMEOUT
) -> Finished:
    """``pip install REQUIREMENTS`` into the virtualenv of ``python``, with this run's pip."""
    return run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", *requirements],
        cwd=cwd,
        timeout=timeout,
    )


def _python_version(python: str) -> tuple[int, int] | None:
    try:
        done = run([python, "-c", "import sys; print(*sys.version_info[:2])"], timeout=30)
        major, minor = done.stdout.split()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def find_python312() -> str | None:
    """A Python >= 3.12 interpreter (the official SDK's floor): ``$PYTEST_OSMOSIS_INTEROP_PYTHON``,
    pyenv's versions, ``python3.1x`` on ``PATH`` or this one; None when there is none."""
    candidates: list[str] = []
    if os.environ.get(PYTHON312_ENV):
        candidates.append(os.environ[PYTHON312_ENV])
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted(pyenv_root.glob("versions/3.1[2-9]*/bin/python"))]
    candidates += [
        found
        for name in ("python3.12", "python3.13", "python3.14")
        if (found := shutil.which(name))
    ]
    candidates.append(sys.executable)
    for candidate in candidates:
        if Path(candidate).is_file():
            version = _python_version(candidate)
            if version is not None and version >= (3, 12):
                return candidate
    return None
