"""Loading: read, select and normalise a dataset's rows (:func:`load_dataset`), or one hand-written row."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from osmosis_rollout.dataset.normalise import KeyRegistry, header_row_problems, normalise, row_key
from osmosis_rollout.dataset.problems import Collector, Fatal, combine, path_text
from osmosis_rollout.dataset.readers import check_file, extension, open_source
from osmosis_rollout.dataset.rows import DatasetRow
from osmosis_rollout.dataset.selection import check_in_range, parse_ranges
from osmosis_rollout.errors import DatasetError

__all__ = [
    "load_dataset",
    "row_from_dict",
]


def load_dataset(
    path: str | Path, *, rows: str | None = None, limit: int | None = None
) -> list[DatasetRow]:
    """Read, select and normalise a dataset's rows, or raise :class:`DatasetError`.

    ``rows`` (``"3,7,10-20"``, 0-based file offsets) overrides ``limit``; a positive
    ``limit`` keeps the first N rows, anything else keeps all. Every row must parse and
    ``id`` values must be unique; only selected rows are normalised. Problems are
    collected (up to five) and raised together before anything runs.
    """
    name = path_text(path)
    file = Path(path)
    ranges = parse_ranges(rows) if rows is not None else None
    if ranges is not None:
        ranges.sort()

    def wanted(source_index: int) -> bool:
        if ranges is not None:
            return any(start <= source_index <= end for start, end in ranges)
        return limit is None or limit <= 0 or source_index < limit

    collector = Collector(name)
    selected: list[DatasetRow] = []
    total = 0
    keys = KeyRegistry()
    try:
        check_file(file)
        ext = extension(file)
        with open_source(file, ext) as source:
            header_problems = header_row_problems(source.columns) if source.columns else []
            collector.extend(header_problems)
            for record in source.records:
                if collector.full:
                    break
                total += 1
                if record.problem is not None:
                    collector.add(record.problem)
                    continue
                assert record.data is not None
                key, problem = keys.check(record.data, record.source_index, record.row)
                if problem is not None:
                    collector.add(problem)
                if header_problems or not wanted(record.source_index):
                    continue
                normalised, problems = normalise(record.data, record.row)
                collector.extend(problems)
                if normalised is None or collector.problems:
                    continue  # keep reading for more problems, but stop keeping rows
                selected.append(
                    DatasetRow(
                        index=len(selected),
                        source_index=record.source_index,
                        key=key,
                        raw=record.data,
                        initial_messages=normalised.initial_messages,
                        label=normalised.label,
                        metadata=normalised.metadata,
                        line=record.line,
                    )
                )
    except Fatal as fatal:
        collector.add(fatal.problem)
    if collector.problems:
        raise combine(name, collector.errors(), collector.truncated)
    if total == 0:
        raise DatasetError("the file has no rows", path=name, fix="add at least one row")
    if ranges is not None:
        check_in_range(ranges, total, path=name)
    # A non-empty file with an in-range selection always selects at least one row, so
    # an empty selection can only come from a file without rows (reported above).
    return selected


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
