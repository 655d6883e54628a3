"""The row model: a normalised dataset row, a validation report, and the contract's limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from osmosis_rollout.dataset.problems import (
    TRUNCATED_NOTE,
    combine,
    counted,
    indent_continuations,
    without_path,
)
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
    a stable identity for test ids and cassettes. ``line`` is the 1-based line where the
    row starts (JSONL/CSV) or ``None`` (Parquet).
    """

    index: int
    source_index: int
    key: str
    raw: dict[str, Any]
    initial_messages: list[MessageDict]
    label: str | None
    metadata: dict[str, Any] | None
    line: int | None = None

    @property
    def row_index(self) -> int:
        """The platform's name for :attr:`index`."""
        return self.index

    @property
    def source_row_index(self) -> int:
        """The platform's name for :attr:`source_index`."""
        return self.source_index


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
            lines += [
                f"  - {indent_continuations(without_path(error, self.path))}"
                for error in self.errors
            ]
            if self.truncated:
                lines.append(f"  {TRUNCATED_NOTE}")
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
