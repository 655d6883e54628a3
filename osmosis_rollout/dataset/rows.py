"""The row model: a normalised dataset row, a validation report, and the contract's limits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from osmosis_rollout.dataset.problems import combine, counted, problem_lines
from osmosis_rollout.errors import DatasetError
from osmosis_rollout.types.sample import MessageDict

__all__ = [
    "ID_COLUMN",
    "MAX_PLATFORM_BYTES",
    "METADATA_COLUMN",
    "MIN_PLATFORM_ROWS",
    "SUPPORTED_EXTENSIONS",
    "DatasetMode",
    "DatasetReport",
    "DatasetRow",
    "bytes_digest",
    "row_digest",
]

SUPPORTED_EXTENSIONS: tuple[str, ...] = ("jsonl", "csv", "parquet")
MIN_PLATFORM_ROWS = 4
MAX_PLATFORM_BYTES = 5 * 1024**3

DatasetMode = Literal["prompt", "metadata"]

METADATA_COLUMN = "metadata"
ID_COLUMN = "id"


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One dataset row, normalised into what a rollout receives.

    ``index`` is the position in the selected set (the platform's ``row_index``);
    ``source_index`` the 0-based offset in the file (what ``rows="..."`` selects).
    ``key`` is the row's ``id`` value when it has one, else ``f"row-{source_index}"``:
    a stable identity for test ids and cassettes. ``line`` is the 1-based line where the row
    starts (JSONL/CSV) or ``None`` (Parquet). ``digest`` is a short hash of the row as its file
    holds it (the JSONL line; else :func:`row_digest`): what a resumed run compares to tell a
    changed row.
    """

    index: int
    source_index: int
    key: str
    raw: dict[str, Any]
    initial_messages: list[MessageDict]
    label: str | None
    metadata: dict[str, Any] | None
    line: int | None = None
    digest: str = ""

    def __post_init__(self) -> None:
        if not self.digest:  # a row read from cells, or built by hand
            object.__setattr__(self, "digest", row_digest(self.raw))

    @property
    def row_index(self) -> int:
        """The platform's name for :attr:`index`."""
        return self.index

    @property
    def source_row_index(self) -> int:
        """The platform's name for :attr:`source_index`."""
        return self.source_index


def bytes_digest(data: bytes) -> str:
    """A short hash of a row's bytes (a JSONL line, stripped)."""
    return hashlib.sha256(data).hexdigest()[:16]


def row_digest(raw: Mapping[str, Any]) -> str:
    """A short hash of a row read from cells (CSV, Parquet) or written by hand: its JSON form
    with sorted keys."""
    text = json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)
    return bytes_digest(text.encode("utf-8", errors="backslashreplace"))


@dataclass
class DatasetReport:
    """What :func:`validate_dataset` found: errors block a run or an upload, warnings do not.

    ``n_rows`` counts the rows read; when ``truncated`` is true, reading stopped after the
    first :data:`MAX_REPORTED_ERRORS` errors, so it may undercount.
    """

    path: str
    errors: list[DatasetError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    mode: DatasetMode | None = None
    n_rows: int = 0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the file has no errors (warnings allowed)."""
        return not self.errors

    def format(self) -> str:
        """A human report: one line per error (with its fix), then the warnings."""
        if self.errors:
            lines = [f"{self.path}: {counted(len(self.errors), 'error')}"]
            lines += problem_lines(self.path, self.errors, self.truncated)
        else:
            summary = (
                f"valid {self.mode} dataset, {counted(self.n_rows, 'row')}"
                if self.mode
                else "no errors found"  # e.g. Parquet content skipped without pyarrow
            )
            lines = [f"{self.path}: {summary}"]
        lines += [f"  warning: {warning}" for warning in self.warnings]
        return "\n".join(lines)

    def raise_for_errors(self) -> None:
        """Raise one :class:`DatasetError` covering every error found, if any."""
        if self.errors:
            raise combine(self.path, self.errors, self.truncated)
