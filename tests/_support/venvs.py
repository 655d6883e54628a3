"""Virtualenvs installed from the package index, built before pytest and used by the tests.

Nothing is installed from inside a test: ``scripts/test.sh`` runs ``scripts/build_test_venvs.py``
first, which builds each venv below (bounded by a timeout, all at once) into :func:`cache_dir`
and keeps it while its key (what it was built from) is unchanged. A test asks for one with
:meth:`Prebuilt.require`: it gets the venv's Python, or is skipped with the reason the venv is
missing (the build failed, timed out, or never ran).

- :data:`OFFICIAL_SDK`: ``osmosis-ai[server,openai-agents,strands]==0.3.8`` on Python >= 3.12,
  for the wire-compatibility tests (``tests/interop``, ``tests/ray``, ``tests/reliability``);
- :data:`SIDE_BY_SIDE`: the official SDK and this project with their framework extras, resolved
  together in one ``pip install`` (``tests/packaging/test_side_by_side.py``);
- :data:`DISTRIBUTION`: ``pip install .`` from a fresh copy of the repository, and its wheel
  (``tests/packaging/test_distribution.py``); its key is the files a ``pip install .`` reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from _support.repo import REPO

PIP_TIMEOUT = 600
"""Seconds one ``pip install`` may take (resolution and downloads of a large extra)."""

PYTHON312_ENV = "PYTEST_OSMOSIS_INTEROP_PYTHON"
"""Set to a Python >= 3.12 interpreter for the venvs that need one (else it is searched)."""

CACHE_ENV = "PYTEST_OSMOSIS_TEST_VENVS"
"""Set to a folder to keep the venvs there instead of ``~/.cache/pytest-osmosis``."""

OFFICIAL_VERSION = "0.3.8"
BUILD_SCRIPT = "scripts/build_test_venvs.py"


class VenvUnavailable(Exception):
    """A venv cannot be had here; the reason becomes the skip message."""


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


def run(
    args: list[str], *, cwd: Path | None = None, timeout: float, env: dict[str, str] | None = None
) -> Finished:
    """Run ``args`` (bounded by ``timeout`` seconds) and capture its output."""
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    return Finished(args, done.returncode, done.stdout, done.stderr)


def cache_dir() -> Path:
    """``$PYTEST_OSMOSIS_TEST_VENVS``, else ``$XDG_CACHE_HOME/pytest-osmosis`` or
    ``~/.cache/pytest-osmosis``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-osmosis"


def _sha(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:16]


def _tracked_files() -> list[str]:
    """The repository's files as a clone would have them (tracked, plus new unignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return sorted(path for path in listed.split("\0") if path and (REPO / path).is_file())


def _copy_repository(destination: Path) -> None:
    for rel in _tracked_files():
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)


DISTRIBUTED = ("pyproject.toml", "LICENSE", "README.md", "osmosis_rollout/", "pytest_osmosis/")
"""The repository's files a ``pip install .`` reads (a folder ends with ``/``)."""


def _repository_key(prefixes: tuple[str, ...]) -> str:
    files = [rel for rel in _tracked_files() if rel.startswith(prefixes)]
    return _sha(*(part for rel in files for part in (rel.encode(), (REPO / rel).read_bytes())))


@dataclass(frozen=True)
class Prebuilt:
    """One venv the suite needs: where it lives, what it is built from, and how."""

    name: str
    """Its folder under :func:`cache_dir` (the key's first characters are appended when
    ``per_key``, so worktrees with different sources do not rebuild each other's)."""
    requirements: tuple[str, ...]
    """What ``pip install`` is given (``{source}`` stands for a fresh copy of the repository)."""
    needs_python312: bool
    """The official SDK's floor: built with a Python >= 3.12 (see :func:`find_python312`)."""
    key_of: Callable[[], str]
    """What the venv is built from, as a short hash: a different key means a rebuild."""
    check: str = ""
    """Python source run in the built venv; it must exit 0 for the venv to be kept."""
    per_key: bool = False
    wheel: bool = False
    """Also build the project's wheel into ``wheels/`` beside the venv."""

    def folder(self, key: str | None = None) -> Path:
        """Where the venv lives (``key``: the current one unless given)."""
        if not self.per_key:
            return cache_dir() / self.name
        return cache_dir() / f"{self.name}-{(key or self.key_of())[:12]}"

    def require(self) -> Path:
        """The venv's Python, or skip the calling test with the reason it is not there."""
        try:
            return self.ready()
        except VenvUnavailable as exc:
            pytest.skip(f"{self.name} venv unavailable: {exc}")

    def ready(self) -> Path:
        """The venv's Python; raises :class:`VenvUnavailable` (with the reason) without it."""
        try:
            key = self.key_of()
        except (OSError, subprocess.SubprocessError) as exc:
            return _raise(f"its key cannot be computed here (not a git checkout?): {exc}")
        folder = self.folder(key)
        if _stamp(folder) == key:
            return folder / "bin" / "python"
        failure = _failure_file(folder)
        if failure.is_file():
            return _raise(failure.read_text(encoding="utf-8"))
        return _raise(
            f"not built at {folder} for the current files: `scripts/test.sh` builds it before "
            f"pytest (or run `.venv/bin/python {BUILD_SCRIPT}`)"
        )


def _raise(reason: str) -> Path:
    raise VenvUnavailable(reason)


class InstallFailed(VenvUnavailable):
    """``pip install`` failed with the index reachable; its output is kept (``install.json``)."""


def _failure_file(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}.failed")


def _stamp(folder: Path) -> str | None:
    try:
        return (folder / ".built").read_text(encoding="utf-8")
    except OSError:
        return None


def _official_key() -> str:
    return _sha(*(r.encode() for r in OFFICIAL_SDK.requirements))


def _project_requirements() -> bytes:
    """What pip resolves for this project: ``[project]``'s Python and dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = ("requires-python", "dependencies", "optional-dependencies")
    return json.dumps({k: project.get(k) for k in wanted}, sort_keys=True).encode()


def _side_by_side_key() -> str:
    # What pip resolves; the code itself is imported from the checkout, so it is not in the key.
    return _sha(*(r.encode() for r in SIDE_BY_SIDE.requirements), _project_requirements())


def _distribution_key() -> str:
    # What goes into the distribution: a change to tests or docs does not rebuild it.
    return _repository_key(DISTRIBUTED)


OFFICIAL_SDK = Prebuilt(
    name=f"interop-venv-{OFFICIAL_VERSION}",
    requirements=(f"osmosis-ai[server,openai-agents,strands]=={OFFICIAL_VERSION}",),
    needs_python312=True,
    key_of=_official_key,
    # The frameworks are only found, not imported: importing LiteLLM costs seconds.
    check=(
        "import importlib.util, osmosis_ai.rollout, osmosis_ai.rollout.client, "
        "osmosis_ai.rollout.server.app, fastapi, uvicorn, httpx\n"
        "assert all(importlib.util.find_spec(m) for m in ('agents', 'strands', 'litellm'))"
    ),
)

SIDE_BY_SIDE = Prebuilt(
    name="side-by-side",
    requirements=(
        f"osmosis-ai[openai-agents,strands,rubric]=={OFFICIAL_VERSION}",
        "{source}[openai-agents,strands,litellm]",
    ),
    needs_python312=True,
    key_of=_side_by_side_key,
    check="import osmosis_ai, osmosis_rollout, pytest_osmosis",
)

DISTRIBUTION = Prebuilt(
    name="distribution",
    requirements=(".",),
    needs_python312=False,
    key_of=_distribution_key,
    check="import osmosis_rollout, pytest_osmosis",
    per_key=True,
    wheel=True,
)

ALL = (OFFICIAL_SDK, SIDE_BY_SIDE, DISTRIBUTION)


def installed_output(folder: Path, step: str = "install") -> Finished | None:
    """What pip printed for ``step`` (``install`` or ``wheel``) when the venv at ``folder`` was
    built (None: it did not run)."""
    try:
        recorded = json.loads((folder / f"{step}.json").read_text(encoding="utf-8"))
    except OSError:
        return None
    return Finished(**recorded)


# ---------------------------------------------------------------------------------------------
# Building (scripts/build_test_venvs.py; never from a test)


@functools.cache
def index_problem() -> str | None:
    """Why the package index cannot serve a download, or None when it can."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            done = run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--retries",
                    "1",
                    "--timeout",
                    "20",
                    "--dest",
                    tmp,
                    "setuptools>=77",
                ],
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            return "pip download took over 120s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.output.splitlines() if line.strip()]
    return lines[-1] if lines else f"pip exited with {done.returncode}"


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


@contextlib.contextmanager
def _exclusive(lock_path: Path, deadline: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (another build of the same venv, e.g. by a
    run in another checkout, holds it), waiting until ``deadline`` at most."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise VenvUnavailable(
                        f"timed out waiting for another build of it (lock {lock_path})"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _left(deadline: float, at_most: float) -> float:
    left = min(at_most, deadline - time.monotonic())
    if left <= 0:
        raise VenvUnavailable("the build step ran out of time")
    return left


def _build(venv: Prebuilt, key: str, deadline: float) -> Path:
    folder = venv.folder(key)
    shutil.rmtree(folder, ignore_errors=True)
    problem = index_problem()
    if problem is not None:
        raise VenvUnavailable(f"the package index cannot be reached: {problem}")
    python = find_python312() if venv.needs_python312 else sys.executable
    if python is None:
        raise VenvUnavailable(
            f"osmosis-ai {OFFICIAL_VERSION} needs Python >= 3.12 and none was found "
            f"(set {PYTHON312_ENV} to one)"
        )
    source = folder / "source"
    if venv.per_key or any("{source}" in r for r in venv.requirements):
        _copy_repository(source)
    created = run(
        [python, "-m", "venv", "--without-pip", str(folder)], timeout=_left(deadline, 120)
    )
    if created.returncode != 0:
        raise VenvUnavailable(f"`{python} -m venv` failed: {_tail(created.output)}")
    venv_python = folder / "bin" / "python"
    # This run's pip installs into the venv (`pip --python`): no pip is bootstrapped per venv.
    requirements = [r.replace("{source}", str(source)) for r in venv.requirements]
    try:
        installed = run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(venv_python),
                "install",
                "--disable-pip-version-check",
                *requirements,
            ],
            cwd=source if source.exists() else None,
            timeout=_left(deadline, PIP_TIMEOUT),
        )
    except subprocess.TimeoutExpired:
        raise VenvUnavailable(f"pip install took over {PIP_TIMEOUT}s or the step's time") from None
    (folder / "install.json").write_text(json.dumps(asdict(installed)), encoding="utf-8")
    if installed.returncode != 0:
        raise InstallFailed(f"pip install exited {installed.returncode}: {_tail(installed.output)}")
    if venv.wheel:
        try:
            wheel = run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "--wheel-dir",
                    str(folder / "wheels"),
                    ".",
                ],
                cwd=source,
                timeout=_left(deadline, PIP_TIMEOUT),
            )
        except subprocess.TimeoutExpired:
            raise VenvUnavailable("pip wheel took too long") from None
        (folder / "wheel.json").write_text(json.dumps(asdict(wheel)), encoding="utf-8")
        if wheel.returncode != 0:
            raise InstallFailed(f"pip wheel exited {wheel.returncode}: {_tail(wheel.output)}")
    if venv.check:
        checked = run([str(venv_python), "-c", venv.check], timeout=_left(deadline, 120))
        if checked.returncode != 0:
            raise VenvUnavailable(f"built, but its check failed: {_tail(checked.output)}")
    return venv_python


def build(venv: Prebuilt, deadline: float) -> str:
    """Build ``venv`` unless its current build is there; returns what was done, one line.

    A failure is written next to it (``NAME.failed``), for :meth:`Prebuilt.require` to skip with.
    """
    started = time.monotonic()
    try:
        key = venv.key_of()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{venv.name}: NOT BUILT (its key cannot be computed: {exc}); its tests will skip"
    folder = venv.folder(key)
    failure = _failure_file(folder)
    if _stamp(folder) == key or _adopt(venv, key, folder):
        return f"{venv.name}: cached at {folder}"
    try:
        with _exclusive(cache_dir() / f"{venv.name}.lock", deadline):
            if _stamp(folder) == key:  # another run built it while this one waited
                return f"{venv.name}: built by another run at {folder}"
            _build(venv, key, deadline)
            (folder / ".built").write_text(key, encoding="utf-8")
    except (VenvUnavailable, OSError, subprocess.SubprocessError) as exc:
        if not isinstance(exc, InstallFailed):  # else pip's output stays for the test to show
            shutil.rmtree(folder, ignore_errors=True)
        failure.parent.mkdir(parents=True, exist_ok=True)
        failure.write_text(str(exc), encoding="utf-8")
        return f"{venv.name}: NOT BUILT ({exc}); its tests will skip"
    failure.unlink(missing_ok=True)
    if venv.per_key:
        _prune(venv, keep=folder)
    return f"{venv.name}: built at {folder} in {time.monotonic() - started:.0f}s"


def status(venv: Prebuilt) -> str:
    """Whether ``venv`` is built for the current files, one line (nothing is built)."""
    try:
        return f"{venv.name}: cached at {venv.ready().parent.parent}"
    except VenvUnavailable as exc:
        return f"{venv.name}: NOT BUILT ({exc}); its tests will skip"


def _adopt(venv: Prebuilt, key: str, folder: Path) -> bool:
    """Stamp a venv built before stamps existed (same place, its check passes)."""
    python = folder / "bin" / "python"
    if venv.per_key or not venv.check or _stamp(folder) is not None or not python.exists():
        return False
    try:
        if run([str(python), "-c", venv.check], timeout=120).returncode != 0:
            return False
    except (OSError, subprocess.SubprocessError):
        return False
    (folder / ".built").write_text(key, encoding="utf-8")
    return True


def _prune(venv: Prebuilt, keep: Path) -> None:
    """Remove this venv's builds for other keys that were not used for a day."""
    for other in cache_dir().glob(f"{venv.name}-*"):
        if (
            other != keep
            and other.is_dir()
            and not other.name.endswith(".failed")
            and time.time() - other.stat().st_mtime > 86400
        ):
            shutil.rmtree(other, ignore_errors=True)
