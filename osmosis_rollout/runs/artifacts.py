"""Per-rollout artifact directories: ``<root>/<rollout_id>/artifacts/``.

The root is ``$_OSMOSIS_ROLLOUT_ARTIFACT_ROOT`` or ``~/.osmosis``. A directory that cannot be
created or written degrades to ``None``: artifacts are best-effort and never fail a rollout.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

ARTIFACT_ROOT_ENV = "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"
HEALTH_MARKER = ".osmosis-health-check"
CREATE_ATTEMPTS = 3
CREATE_BACKOFF_SEC = 0.5


def default_artifact_root() -> Path:
    """``$_OSMOSIS_ROLLOUT_ARTIFACT_ROOT`` if set, else ``~/.osmosis``."""
    override = os.environ.get(ARTIFACT_ROOT_ENV)
    return Path(override) if override else Path.home() / ".osmosis"


def _make_artifacts_dir(rollout_dir: str) -> str:
    # Plain strings and os calls: pathlib's joins and conversions cost more than the
    # mkdir itself on a fast disk, and this runs once per rollout.
    artifacts = os.path.join(rollout_dir, "artifacts")
    fresh = _new_dir(rollout_dir)  # False: a re-admitted id reuses its directory (and marker)
    try:
        os.mkdir(artifacts)
    except OSError:
        if not os.path.isdir(artifacts):
            raise
    marker = os.path.join(rollout_dir, HEALTH_MARKER)
    if fresh or not os.path.exists(marker):
        _write_marker(marker)
    if not os.access(artifacts, os.W_OK):
        raise PermissionError(f"{artifacts} is not writable")
    return artifacts


def _new_dir(path: str) -> bool:
    """Make ``path`` (and its missing parents); ``False`` when it already existed."""
    # Parent first (one mkdir when the root exists, as it does for a run): os.makedirs
    # would look the parent up before every mkdir.
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            return False
    return True


_MARKER_TEXT = ("ok" + os.linesep).encode("utf-8")  # what a text-mode write of "ok\n" leaves
# O_BINARY: on Windows a descriptor opened without it translates "\n" on write.
_WRITE_NEW = (
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def _write_marker(marker: str) -> None:
    # Through the descriptor: a text file object adds a fstat, an isatty and a lseek, per rollout.
    fd = os.open(marker, _WRITE_NEW, 0o666)
    try:
        os.write(fd, _MARKER_TEXT)
    finally:
        os.close(fd)


async def create_rollout_artifacts_dir(
    root: Path, rollout_id: str, *, attempts: int = CREATE_ATTEMPTS
) -> Path | None:
    """Create and prove writable ``<root>/<rollout_id>/artifacts``; ``None`` if that fails."""
    last_error: OSError | None = None
    for attempt in range(attempts):
        try:
            # A mkdir and a tiny write: cheaper inline than a thread hop per rollout.
            return Path(_make_artifacts_dir(os.path.join(root, rollout_id)))
        except OSError as exc:
            last_error = exc
            if attempt < attempts - 1:
                await asyncio.sleep(CREATE_BACKOFF_SEC * (2**attempt))
    logger.warning("artifacts disabled for rollout %s: %s", rollout_id, last_error)
    return None
