"""One read of a dataset file, under the load rules and the platform's upload rules at once.

:func:`load_dataset <osmosis_rollout.dataset.load.load_dataset>` keeps the selected rows and
raises the load rules' problems; :func:`validate_dataset
<osmosis_rollout.dataset.upload.validate_dataset>` reports the upload rules' problems. A load
that succeeds remembers its file's upload report under a hash of the file's bytes, so the
preflight check of the dataset a run just loaded does not decode every row a second time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.dataset.normalise import (
    FIX_METADATA,
    decode_metadata,
    duplicate_id,
    header_row_problems,
    normalise,
    row_key,
)
from osmosis_rollout.dataset.problems import Collector, Fatal, Problem, json_type
from osmosis_rollout.dataset.readers import Source, check_file, extension, open_source
from osmosis_rollout.dataset.rows import (
    MAX_PLATFORM_BYTES,
    METADATA_COLUMN,
    DatasetReport,
    DatasetRow,
)
from osmosis_rollout.errors import DatasetError

__all__ = ["Scan", "file_hash", "recall", "remember", "scan"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class Scan:
    """What one read found: the rows kept, the load rules' problems, the upload report."""

    path: str
    load: Collector
    upload: Collector
    report: DatasetReport
    rows: list[DatasetRow] = field(default_factory=list)
    total: int = 0
    """Rows read (the load rules stop reading after too many problems)."""
    content_checked: bool = True
    """False when Parquet content was skipped (no pyarrow): an empty report then proves nothing."""

    def upload_report(self) -> DatasetReport:
        """The upload rules' report (warnings about the row minimum left to the caller)."""
        report = self.report
        report.errors = self.upload.errors()
        report.truncated = self.upload.truncated
        if not report.errors and report.n_rows == 0 and self.content_checked:
            report.errors.append(
                DatasetError("the file has no rows", path=self.path, fix="add at least one row")
            )
        return report


def scan(path: str | Path, wanted: Callable[[int], bool] | None) -> Scan:
    """Read ``path`` once under both rule sets, keeping the rows ``wanted`` selects (by 0-based
    file offset; ``None`` keeps none). Reading stops once the problems of the caller's rule set
    (the load rules' with ``wanted``, else the upload rules') are more than are reported."""
    name = str(path)
    result = Scan(name, Collector(name), Collector(name), DatasetReport(name))
    file = Path(path)
    try:
        size = check_file(file)
        ext = extension(file)
        if size > MAX_PLATFORM_BYTES:
            result.upload.add(
                Problem(
                    f"the file is {size / 1024**3:.1f} GB; the platform accepts at most 5 GB",
                    fix="split the dataset into smaller files",
                )
            )
        if ext == "parquet" and wanted is None:
            try:
                require_extra("pyarrow.parquet", extra="parquet", package="pyarrow")
            except ImportError:
                result.report.warnings.append(
                    "pyarrow is not installed, so the Parquet content was not checked: "
                    'pip install "pytest-osmosis[parquet]"'
                )
                result.content_checked = False
                return result
        with open_source(file, ext) as source:
            _read(source, wanted, result)
    except Fatal as fatal:
        result.load.add(fatal.problem)
        result.upload.add(fatal.problem)
    return result


def _read(source: Source, wanted: Callable[[int], bool] | None, result: Scan) -> None:
    load, upload, report = result.load, result.upload, result.report
    header_problems: list[Problem] = []
    upload_header_problems: list[Problem] = []
    if source.columns is not None:
        report.mode = "metadata" if METADATA_COLUMN in source.columns else "prompt"
        header_problems = header_row_problems(source.columns)
        load.extend(header_problems)
        upload.extend(header_problems)
        if source.metadata_type is not None and not (
            source.metadata_type.startswith("struct")
            or source.metadata_type in ("string", "large_string")
        ):
            bad_type = Problem(
                f"the metadata column has type {source.metadata_type}; it must be a struct "
                "or a JSON-object string",
                column=METADATA_COLUMN,
                fix="write metadata as a struct column or as JSON strings",
            )
            upload.add(bad_type)
            upload_header_problems.append(bad_type)
    stop = load if wanted is not None else upload
    expected_keys: frozenset[str] | None = None
    types: dict[str, str] = {}
    first_rows: dict[str, int] = {}  # row key -> the row that had it first
    for record in source.records:
        if stop.truncated:
            break
        result.total += 1
        if not upload.truncated:
            report.n_rows += 1
        if record.problem is not None:
            load.add(record.problem)
            upload.add(record.problem)
            continue
        data = record.data
        assert data is not None
        key = row_key(data, record.source_index)
        first = first_rows.setdefault(key, record.row)
        duplicate = None if first == record.row else duplicate_id(key, first, record.row)
        normalised, problems = normalise(data, record.row) if not header_problems else (None, [])

        # The load rules: only the selected rows are normalised.
        if duplicate is not None:
            load.add(duplicate)
        if wanted is not None and not header_problems and wanted(record.source_index):
            load.extend(problems)
            if normalised is not None and not load.problems:
                result.rows.append(
                    DatasetRow(
                        index=len(result.rows),
                        source_index=record.source_index,
                        key=key,
                        raw=data,
                        initial_messages=normalised.initial_messages,
                        label=normalised.label,
                        metadata=normalised.metadata,
                        line=record.line,
                        digest=record.digest or "",
                    )
                )

        # The upload rules: every row, one problem of its own first.
        row_problems: list[Problem] = []
        if source.columns is None:
            if expected_keys is None:
                expected_keys = frozenset(data)
                report.mode = "metadata" if METADATA_COLUMN in data else "prompt"
            elif problem := _key_set_problem(frozenset(data), expected_keys, record.row):
                row_problems.append(problem)
        if not row_problems and report.mode == "metadata":
            row_problems.extend(
                _upload_metadata_problems(data.get(METADATA_COLUMN), record.row, types)
            )
        if not row_problems and not header_problems and not upload_header_problems:
            row_problems.extend(problems)
        if duplicate is not None:
            row_problems.append(duplicate)
        upload.extend(row_problems)


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """(JSON path, value) for every node, iteratively (no recursion limit)."""
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, Mapping):
            stack.extend((f"{path}.{key}", child) for key, child in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[]", child) for child in node)


def _upload_metadata_problems(value: Any, row: int, types: dict[str, str]) -> list[Problem]:
    """The upload validator's metadata-mode rules for one cell; ``types`` holds the JSON type
    each path had first (int and float are both "number"), across rows."""
    decoded, problem = decode_metadata(value, row)
    if problem is not None:
        return [problem]

    def bad(message: str, fix: str = FIX_METADATA) -> Problem:
        return Problem(message, row=row, column=METADATA_COLUMN, fix=fix)

    if decoded is None or (isinstance(decoded, Mapping) and not decoded):
        return [
            bad(
                "metadata is empty; a dataset with a 'metadata' column needs a non-empty "
                "JSON object on every row"
            )
        ]
    if not isinstance(decoded, Mapping):
        return [bad(f"metadata must be a JSON object, got {json_type(decoded)}")]
    for path, node in _walk(decoded):
        if isinstance(node, Mapping) and not node:  # the root is not empty (above)
            message = f"metadata holds an empty object at {path}, which the platform cannot store"
            return [bad(message, "remove that key or give it at least one nested key")]
        integer = isinstance(node, int) and not isinstance(node, bool)
        if integer and not _INT64_MIN <= node <= _INT64_MAX:
            message = f"metadata integer at {path} does not fit in 64 bits"
            return [bad(message, "store it as a string")]
        if isinstance(node, float) and not math.isfinite(node):
            message = f"metadata number at {path} is not finite"
            return [bad(message, "use a finite number or null")]
    problems = []
    for path, node in _walk(decoded):
        if node is not None:
            kind = json_type(node)
            first = types.setdefault(path, kind)
            if first != kind:
                message = f"metadata value at {path} is {kind} here but {first} in earlier rows"
                problems.append(bad(message, "use one type per metadata key across all rows"))
    return problems


def _key_set_problem(keys: frozenset[str], expected: frozenset[str], row: int) -> Problem | None:
    if keys == expected:
        return None
    details = []
    if missing := sorted(expected - keys):
        details.append("missing " + ", ".join(map(repr, missing)))
    if extra := sorted(keys - expected):
        details.append("extra " + ", ".join(map(repr, extra)))
    return Problem(
        f"keys differ from the first row ({'; '.join(details)})",
        row=row,
        fix="give every line the same keys (use null for a missing value)",
    )


# A few files' upload reports, each under the hash of the bytes it was made from.
_REPORTS: dict[Path, tuple[str, DatasetReport]] = {}
_MAX_REPORTS = 8


def file_hash(path: str | Path) -> str | None:
    """The SHA-256 of the file's bytes (``None`` when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def remember(path: str | Path, digest: str | None, report: DatasetReport) -> None:
    """Keep ``report`` for :func:`recall` while ``path`` holds the bytes hashed to ``digest``
    (hashed before the read: a file that changed during it is not recalled)."""
    if digest is not None:
        if len(_REPORTS) >= _MAX_REPORTS:
            _REPORTS.clear()
        _REPORTS[Path(path).resolve()] = (digest, report)


def recall(path: str | Path) -> DatasetReport | None:
    """A copy of the report remembered for ``path``, if the file still holds the same bytes."""
    kept = _REPORTS.get(Path(path).resolve())
    if kept is None or kept[0] != file_hash(path):
        return None
    report = kept[1]
    return replace(report, errors=list(report.errors), warnings=list(report.warnings))
