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


def _make_artifacts_dir(rollout_dir: Path) -> Path:
    artifacts = rollout_dir / "artifacts"
    # Parent first (one mkdir when the root exists, as it does for a run): mkdir -p of the
    # leaf would fail on the missing parent, make it, and try the leaf again.
    try:
        rollout_dir.mkdir(parents=True)
        fresh = True
    except FileExistsError:
        fresh = False  # a re-admitted id reuses its directory (and its marker)
    artifacts.mkdir(exist_ok=True)
    marker = rollout_dir / HEALTH_MARKER
    if fresh or not marker.exists():
        _write_marker(marker)
    if not os.access(artifacts, os.W_OK):
        raise PermissionError(f"{artifacts} is not writable")
    return artifacts


_MARKER_TEXT = ("ok" + os.linesep).encode("utf-8")  # what a text-mode write of "ok\n" leaves
# O_BINARY: on Windows a descriptor opened without it translates "\n" on write.
_WRITE_NEW = (
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def _write_marker(marker: Path) -> None:
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
            return _make_artifacts_dir(root / rollout_id)
        except OSError as exc:
            last_error = exc
            if attempt < attempts - 1:
                await asyncio.sleep(CREATE_BACKOFF_SEC * (2**attempt))
    logger.warning("artifacts disabled for rollout %s: %s", rollout_id, last_error)
    return None
