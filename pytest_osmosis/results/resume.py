"""An honest resume: which journaled rows still stand, and which run again, and why.

Every journaled row carries a fingerprint of what its result depends on: the row's content
and label, the rollout entrypoint's file, the policy, the pass threshold, the row rule and
the number of attempts (:func:`run_fingerprint`, :func:`row_fingerprint`). A resumed run
(``--osmosis-resume RUN_DIR``) keeps a journaled row only when its fingerprint is today's
and it has a result; a row whose rollouts errored (a server that died, say) runs again
unless ``--osmosis-resume-keep-errors``. :class:`ResumePlan` says how many rows ran again and
why, for the terminal summary, ``report.json`` and ``run.json``; :class:`Resume` is the
plugin object (registered as ``osmosis-resume``) that makes the plan when pytest has
collected the rows, and leaves the rows that stand out of the run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    JournalRow,
    RunJournalError,
    read_journal,
    read_run_file,
)
from osmosis_rollout.runs.report import row_errored
from pytest_osmosis.keys import row_ref

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.options import OsmosisSettings

__all__ = [
    "ERRORED",
    "RESUME_PLUGIN",
    "Resume",
    "ResumePlan",
    "file_digest",
    "row_digest",
    "row_fingerprint",
    "run_fingerprint",
]

RESUME_PLUGIN = "osmosis-resume"
ERRORED = "errored"
"""The reason a row whose rollouts errored runs again."""

CHANGED = {
    "entrypoint": "rollout file changed",
    "policy": "policy changed",
    "pass_threshold": "pass threshold changed",
    "row_pass": "row rule changed",
    "n": "attempts changed",
    "row": "row content or label changed",
}
"""Each fingerprint key and the reason a row runs again when it differs, run-wide first."""
UNFINGERPRINTED = "journaled without a fingerprint"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def file_digest(reference: str | None, *, base: Path) -> str | None:
    """A short hash of the file behind ``FILE_OR_MODULE[:ATTR]`` (``base`` for a relative
    path), the reference itself when no file is found, None without a reference."""
    if not reference:
        return None
    target = reference
    head, sep, tail = reference.rpartition(":")
    if sep and tail.isidentifier() and head:
        target = head
    path = Path(target).expanduser()
    if not path.is_absolute():
        path = base / path
    if not path.is_file():
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        path = Path(origin) if origin and origin not in ("built-in", "frozen") else path
    try:
        return f"{target}#{_digest(path.read_bytes())}"
    except OSError:
        return target


def run_fingerprint(
    *,
    entrypoint: str | None,
    policy: str | None,
    pass_threshold: float,
    row_pass: str,
    n: int,
    base: Path,
) -> dict[str, Any]:
    """The run-wide part of every row's fingerprint (``policy``: the scripted policy's
    reference, or ``litellm:MODEL``)."""
    return {
        "entrypoint": file_digest(entrypoint, base=base),
        "policy": file_digest(policy, base=base)
        if policy and not policy.startswith("litellm:")
        else policy,
        "pass_threshold": pass_threshold,
        "row_pass": row_pass,
        "n": n,
    }


def row_digest(raw: Mapping[str, Any], label: str | None) -> str:
    """A short hash of a dataset row's content and label."""
    text = json.dumps({"raw": raw, "label": label}, sort_keys=True, default=str)
    return _digest(text.encode("utf-8", errors="backslashreplace"))


def row_fingerprint(
    run: Mapping[str, Any], raw: Mapping[str, Any], label: str | None
) -> dict[str, Any]:
    """A row's fingerprint: the run-wide part and the row's own digest."""
    return {**run, "row": row_digest(raw, label)}


def why_again(
    journaled: JournalRow, fingerprint: Mapping[str, Any] | None, *, keep_errors: bool
) -> str | None:
    """Why a journaled row must run again (None: it stands)."""
    if not keep_errors and row_errored(journaled.verdict, journaled.attempts):
        return ERRORED
    if fingerprint is None:
        return None
    if journaled.fingerprint is None:
        return UNFINGERPRINTED
    for key, reason in CHANGED.items():
        if journaled.fingerprint.get(key) != fingerprint.get(key):
            return reason
    return None


@dataclass
class ResumePlan:
    """What a resumed run found in the journal: the rows kept and the rows run again."""

    journal: Path
    kept: list[str] = field(default_factory=list)
    """Journaled rows that stand: not run again, counted in the run's verdict."""
    ran_again: dict[str, list[str]] = field(default_factory=dict)
    """Reason -> the journaled rows run again for it."""
    previous: list[str] = field(default_factory=list)
    """The rows the resumed run had selected, then those it journaled, in order."""

    @classmethod
    def decide(
        cls,
        journal: Path,
        rows: Iterable[JournalRow],
        fingerprints: Mapping[str, Mapping[str, Any] | None],
        *,
        keep_errors: bool,
        previous: Iterable[str] = (),
    ) -> ResumePlan:
        """Sort the journaled ``rows``: ``fingerprints`` holds today's fingerprint of each
        collected row (None when the row has none to compare, e.g. not a dataset row)."""
        plan = cls(journal)
        journaled = []
        for row in rows:
            journaled.append(row.nodeid)
            reason = why_again(row, fingerprints.get(row.nodeid), keep_errors=keep_errors)
            if reason is not None and row.nodeid in fingerprints:
                plan.ran_again.setdefault(reason, []).append(row.nodeid)
            else:
                # It stands; so does a row not collected now (-k, --osmosis-rows), as it was.
                plan.kept.append(row.nodeid)
        plan.previous = list(dict.fromkeys([*previous, *journaled]))
        return plan

    @property
    def again(self) -> int:
        """How many journaled rows run again."""
        return sum(len(ids) for ids in self.ran_again.values())

    def lines(self) -> list[str]:
        """What the terminal summary says about the resume."""
        lines = [f"resumed: {len(self.kept)} rows already in {self.journal} were not run again"]
        if self.ran_again:
            reasons = ", ".join(f"{reason} ({len(ids)})" for reason, ids in self.ran_again.items())
            lines.append(f"resumed: {_rows(self.again)} ran again: {reasons}")
        return lines

    def describe(self) -> dict[str, Any]:
        """What ``report.json`` and ``run.json`` say under ``resume``."""
        return {
            "journal": str(self.journal),
            "kept": len(self.kept),
            "ran_again": {reason: list(ids) for reason, ids in self.ran_again.items()},
        }


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


class ResumeHost(Protocol):
    """What a resume needs from the session (:class:`~pytest_osmosis.run.session.OsmosisSession`)."""

    settings: OsmosisSettings
    output: Path
    is_worker: bool

    def fingerprint(self, row: DatasetRow) -> dict[str, Any]:
        """What ``row``'s result depends on."""


class Resume:
    """On ``--osmosis-resume``, leaves out the journaled rows that still stand."""

    def __init__(self, session: ResumeHost) -> None:
        self.session = session
        self.plan: ResumePlan | None = None
        """What the resumed run kept from the journal and runs again (controller only)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Decide the plan over the collected rows; deselect the rows that stand."""
        osmosis = self.session
        if not osmosis.settings.resume or osmosis.is_worker:
            return
        try:
            run = read_run_file(osmosis.output)
            journaled, _ = read_journal(osmosis.output / JOURNAL_FILENAME)
        except RunJournalError as exc:
            raise pytest.UsageError(f"--osmosis-resume: {exc}") from exc
        fingerprints: dict[str, Mapping[str, Any] | None] = {}
        for item in items:
            ref = row_ref(item)
            if ref is not None:
                fingerprints[item.nodeid] = (
                    osmosis.fingerprint(ref.row) if ref.dataset is not None else None
                )
        self.plan = plan = ResumePlan.decide(
            osmosis.output / JOURNAL_FILENAME,
            journaled,
            fingerprints,
            keep_errors=osmosis.settings.resume_keep_errors,
            previous=[n for n in run.get("selected") or [] if isinstance(n, str)],
        )
        kept = set(plan.kept)
        skipped = [item for item in items if item.nodeid in kept and item.nodeid in fingerprints]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            left_out = {item.nodeid for item in skipped}
            items[:] = [item for item in items if item.nodeid not in left_out]
