"""The platform's upload rules on top of normalisation: :func:`validate_dataset`."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.dataset.normalise import (
    FIX_METADATA,
    KeyRegistry,
    decode_metadata,
    header_row_problems,
    normalise,
)
from osmosis_rollout.dataset.problems import (
    Collector,
    Fatal,
    Problem,
    counted,
    json_type,
    path_text,
)
from osmosis_rollout.dataset.readers import Source, check_file, extension, open_source
from osmosis_rollout.dataset.rows import (
    MAX_PLATFORM_BYTES,
    METADATA_COLUMN,
    MIN_PLATFORM_ROWS,
    DatasetReport,
)
from osmosis_rollout.errors import DatasetError

__all__ = [
    "validate_dataset",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _TypeTracker:
    """Per JSON path, the value type seen first; int and float are both "number"."""

    def __init__(self) -> None:
        self._types: dict[str, str] = {}

    def observe(self, value: dict[str, Any], row: int) -> list[Problem]:
        problems: list[Problem] = []
        for path, child, _ in _walk(value):
            if child is None:
                continue
            kind = json_type(child)
            first = self._types.setdefault(path, kind)
            if first != kind:
                problems.append(
                    Problem(
                        f"metadata value at {path} is {kind} here but {first} in earlier rows",
                        row=row,
                        column=METADATA_COLUMN,
                        fix="use one type per metadata key across all rows",
                    )
                )
        return problems


def _walk(value: Any) -> Iterator[tuple[str, Any, bool]]:
    """(JSON path, value, is_root) for every node, iteratively (no recursion limit)."""
    stack: list[tuple[str, Any, bool]] = [("$", value, True)]
    while stack:
        path, node, is_root = stack.pop()
        yield path, node, is_root
        if isinstance(node, Mapping):
            stack.extend((f"{path}.{key}", child, False) for key, child in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[]", child, False) for child in node)


def _upload_metadata_problems(value: Any, row: int, tracker: _TypeTracker) -> list[Problem]:
    """The upload validator's metadata-mode rules for one cell."""
    decoded, problem = decode_metadata(value, row)
    if problem is not None:
        return [problem]
    if decoded is None or (isinstance(decoded, Mapping) and not decoded):
        return [
            Problem(
                "metadata is empty; a dataset with a 'metadata' column needs a non-empty "
                "JSON object on every row",
                row=row,
                column=METADATA_COLUMN,
                fix=FIX_METADATA,
            )
        ]
    if not isinstance(decoded, Mapping):
        return [
            Problem(
                f"metadata must be a JSON object, got {json_type(decoded)}",
                row=row,
                column=METADATA_COLUMN,
                fix=FIX_METADATA,
            )
        ]
    for path, node, is_root in _walk(decoded):
        if isinstance(node, Mapping) and not node and not is_root:
            return [
                Problem(
                    f"metadata holds an empty object at {path}, which the platform cannot store",
                    row=row,
                    column=METADATA_COLUMN,
                    fix="remove that key or give it at least one nested key",
                )
            ]
        if (
            isinstance(node, int)
            and not isinstance(node, bool)
            and not (_INT64_MIN <= node <= _INT64_MAX)
        ):
            return [
                Problem(
                    f"metadata integer at {path} does not fit in 64 bits",
                    row=row,
                    column=METADATA_COLUMN,
                    fix="store it as a string",
                )
            ]
        if isinstance(node, float) and not math.isfinite(node):
            return [
                Problem(
                    f"metadata number at {path} is not finite",
                    row=row,
                    column=METADATA_COLUMN,
                    fix="use a finite number or null",
                )
            ]
    return tracker.observe(dict(decoded), row)


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


def validate_dataset(path: str | Path, *, min_rows: int = MIN_PLATFORM_ROWS) -> DatasetReport:
    """Check a dataset file against the upload and normalisation rules; never raises for it.

    Errors: anything :func:`load_dataset` rejects, plus the upload rules (every JSONL line
    has the first line's keys; in metadata mode every row holds a non-empty JSON object
    with no nested ``{}``, 64-bit integers and one type per key across rows; the Parquet
    metadata column is a struct or string; at most 5 GB). Warnings: fewer than
    ``min_rows`` rows (the platform's upload minimum), Parquet content not checked
    because pyarrow is missing. Stops reading after :data:`MAX_REPORTED_ERRORS` errors.
    """
    name = path_text(path)
    file = Path(path)
    report = DatasetReport(name)
    collector = Collector(name)
    try:
        size = check_file(file)
        ext = extension(file)
        if size > MAX_PLATFORM_BYTES:
            collector.add(
                Problem(
                    f"the file is {size / 1024**3:.1f} GB; the platform accepts at most 5 GB",
                    fix="split the dataset into smaller files",
                )
            )
        if ext == "parquet":
            try:
                require_extra("pyarrow.parquet", extra="parquet", package="pyarrow")
            except ImportError:
                report.warnings.append(
                    "pyarrow is not installed, so the Parquet content was not checked: "
                    'pip install "pytest-osmosis[parquet]"'
                )
                report.errors = collector.errors()
                return report
        with open_source(file, ext) as source:
            _validate_records(source, collector, report)
    except Fatal as fatal:
        collector.add(fatal.problem)
    report.errors = collector.errors()
    report.truncated = collector.truncated
    if not report.errors and report.n_rows == 0:
        report.errors.append(
            DatasetError("the file has no rows", path=name, fix="add at least one row")
        )
    if 0 < report.n_rows < min_rows and not report.truncated:
        report.warnings.append(
            f"only {counted(report.n_rows, 'row')}: the platform needs at least {min_rows} "
            "to upload this dataset"
        )
    return report


def _validate_records(source: Source, collector: Collector, report: DatasetReport) -> None:
    header_problems: list[Problem] = []
    if source.columns is not None:
        report.mode = "metadata" if METADATA_COLUMN in source.columns else "prompt"
        header_problems = header_row_problems(source.columns)
        collector.extend(header_problems)
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
            collector.add(bad_type)
            header_problems.append(bad_type)
    expected_keys: frozenset[str] | None = None
    tracker = _TypeTracker()
    keys = KeyRegistry()
    for record in source.records:
        if collector.full:
            break
        report.n_rows += 1
        if record.problem is not None:
            collector.add(record.problem)
            continue
        data = record.data
        assert data is not None
        row_problems: list[Problem] = []
        if source.columns is None:
            if expected_keys is None:
                expected_keys = frozenset(data)
                report.mode = "metadata" if METADATA_COLUMN in data else "prompt"
            elif (
                problem := _key_set_problem(frozenset(data), expected_keys, record.row)
            ) is not None:
                row_problems.append(problem)
        if not row_problems and report.mode == "metadata":
            row_problems.extend(
                _upload_metadata_problems(data.get(METADATA_COLUMN), record.row, tracker)
            )
        if not row_problems and not header_problems:
            row_problems.extend(normalise(data, record.row)[1])
        _, duplicate = keys.check(data, record.source_index, record.row)
        if duplicate is not None:
            row_problems.append(duplicate)
        collector.extend(row_problems)
