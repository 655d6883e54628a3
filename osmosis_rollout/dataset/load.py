"""Loading: read, select and normalise a dataset's rows (:func:`load_dataset`), or one hand-written row."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from osmosis_rollout.dataset.normalise import normalise, row_key
from osmosis_rollout.dataset.problems import combine
from osmosis_rollout.dataset.rows import DatasetRow
from osmosis_rollout.dataset.scan import file_hash, remember, scan
from osmosis_rollout.dataset.selection import check_in_range, parse_ranges
from osmosis_rollout.errors import DatasetError

__all__ = ["load_dataset", "row_from_dict"]


def load_dataset(
    path: str | Path, *, rows: str | None = None, limit: int | None = None
) -> list[DatasetRow]:
    """Read, select and normalise a dataset's rows, or raise :class:`DatasetError`.

    ``rows`` (``"3,7,10-20"``, 0-based file offsets) overrides ``limit``; a positive
    ``limit`` keeps the first N rows, anything else keeps all. Every row must parse and
    ``id`` values must be unique; only selected rows are normalised. Problems are
    collected (up to five) and raised together before anything runs.
    """
    ranges = parse_ranges(rows) if rows is not None else None

    def wanted(source_index: int) -> bool:
        if ranges is not None:
            return any(start <= source_index <= end for start, end in ranges)
        return limit is None or limit <= 0 or source_index < limit

    digest = file_hash(path)
    result = scan(path, wanted)
    if result.load.problems:
        raise combine(result.path, result.load.errors(), result.load.truncated)
    if result.total == 0:
        raise DatasetError("the file has no rows", path=result.path, fix="add at least one row")
    if ranges is not None:
        check_in_range(ranges, result.total, path=result.path)
    # Every row was read: the upload report is whole, for a preflight check of this file.
    remember(path, digest, result.upload_report())
    # A non-empty file with an in-range selection always selects at least one row, so
    # an empty selection can only come from a file without rows (reported above).
    return result.rows


def row_from_dict(raw: Mapping[str, Any], *, index: int = 0) -> DatasetRow:
    """Normalise one hand-written row (``{"user_prompt": ..., "ground_truth": ...}``) like a file row.

    For tests and fixtures; raises :class:`DatasetError` with the same messages as a file.
    """
    record = dict(raw)
    normalised, problems = normalise(record, index + 1)
    if normalised is None:
        first = problems[0]
        raise DatasetError(first.message, row=index, column=first.column, fix=first.fix)
    return DatasetRow(
        index=index,
        source_index=index,
        key=row_key(record, index),
        raw=record,
        initial_messages=normalised.initial_messages,
        label=normalised.label,
        metadata=normalised.metadata,
    )
