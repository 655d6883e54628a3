"""Streaming readers: JSONL, CSV and Parquet files as records with editor-visible row numbers."""

from __future__ import annotations

import csv
import json
from collections.abc import Generator, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.dataset.problems import Fatal, Problem, json_type
from osmosis_rollout.dataset.rows import METADATA_COLUMN, SUPPORTED_EXTENSIONS, bytes_digest

__all__ = ["Source", "check_file", "extension", "json_problem", "loads", "open_source"]

# csv's default 128 KiB cell limit rejects real prompts (long documents); the limit is
# process-global, so it is raised only while a file is being read.
_CSV_FIELD_LIMIT = 256 * 1024 * 1024

_FIX_JSONL_LINE = (
    'write one complete JSON object per line, e.g. {"user_prompt": "...", "ground_truth": "..."}'
)


@dataclass(slots=True)
class _Record:
    """One raw row, or the problem that kept it from parsing."""

    source_index: int
    row: int  # 1-based line (JSONL/CSV) or record number (Parquet), for messages
    line: int | None
    data: dict[str, Any] | None = None
    problem: Problem | None = None
    digest: str | None = None  # JSONL only: the line's own hash


@dataclass
class Source:
    columns: tuple[str, ...] | None  # the header / schema; None for JSONL
    records: Generator[_Record]
    metadata_type: str | None = None  # Parquet only: the Arrow type of the metadata column


def extension(path: Path) -> str:
    ext = path.suffix.lstrip(".").lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise Fatal(
            f"unsupported file type {path.suffix or '(no extension)'!r}",
            fix="use a .jsonl, .csv or .parquet file",
        )
    return ext


def check_file(path: Path) -> int:
    if not path.exists():
        raise Fatal("file not found", fix="check the path (relative to the current directory)")
    if not path.is_file():
        raise Fatal("not a file", fix="pass a .jsonl, .csv or .parquet file")
    size = path.stat().st_size
    if size == 0:
        raise Fatal("the file is empty", fix="add a header (CSV) and at least one row")
    return size


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """Strict JSON: NaN/Infinity are rejected like any other non-JSON token."""
    return json.loads(text, parse_constant=_reject_constant)


def json_problem(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _utf8_problem(raw_line: bytes, exc: UnicodeDecodeError, row: int) -> Problem:
    return Problem(
        f"not valid UTF-8 (byte {raw_line[exc.start]:#04x} at offset {exc.start})",
        row=row,
        fix="save the file as UTF-8",
    )


def _jsonl_records(path: Path) -> Generator[_Record]:
    index = 0
    with path.open("rb") as handle:
        for lineno, raw_line in enumerate(handle, start=1):
            try:
                text = raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield _Record(index, lineno, lineno, problem=_utf8_problem(raw_line, exc, lineno))
                index += 1
                continue
            if not text.strip():
                continue
            record = _Record(index, lineno, lineno, digest=bytes_digest(raw_line.strip()))
            index += 1
            try:
                value = loads(text.strip())
            except (ValueError, RecursionError) as exc:
                record.problem = Problem(
                    f"invalid JSON ({json_problem(exc)})", row=lineno, fix=_FIX_JSONL_LINE
                )
            else:
                if isinstance(value, dict):
                    record.data = value
                else:
                    record.problem = Problem(
                        f"each line must be a JSON object, got {json_type(value)}",
                        row=lineno,
                        fix=_FIX_JSONL_LINE,
                    )
            yield record


def _utf8_lines(handle: Iterable[bytes]) -> Iterator[str]:
    for lineno, raw_line in enumerate(handle, start=1):
        try:
            yield raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise Fatal(_utf8_problem(raw_line, exc, lineno)) from exc


def _check_distinct(columns: tuple[str, ...], where: str, row: int | None = None) -> None:
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise Fatal(
            f"the {where} repeats column(s) {', '.join(map(repr, duplicates))}",
            row=row,
            fix="give every column a distinct name",
        )


@contextmanager
def _csv_source(path: Path) -> Iterator[Source]:
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        with path.open("rb") as handle:
            reader = csv.reader(_utf8_lines(handle))

            def next_record() -> tuple[int, list[str]] | None:
                start = reader.line_num + 1
                try:
                    cells = next(reader, None)
                except csv.Error as exc:
                    raise Fatal(
                        f"cannot parse CSV ({exc})",
                        row=start,
                        fix='quote cells that hold commas, quotes or line breaks: "a, ""b"""',
                    ) from exc
                return None if cells is None else (start, cells)

            first = next_record()
            while first is not None and not first[1]:
                first = next_record()
            if first is None:
                raise Fatal("the file has no header row", fix="add a header row of column names")
            header = tuple(first[1])
            _check_distinct(header, "header", row=first[0])

            def records() -> Generator[_Record]:
                index = 0
                while (item := next_record()) is not None:
                    start, cells = item
                    if not cells:  # a blank line
                        continue
                    record = _Record(index, start, start)
                    index += 1
                    if len(cells) != len(header):
                        record.problem = Problem(
                            f"expected {len(header)} cells (one per header column), got {len(cells)}",
                            row=start,
                            fix='quote cells that contain commas, e.g. "a, b"; every row needs '
                            f"exactly {len(header)} cells",
                        )
                    else:
                        record.data = dict(zip(header, cells, strict=True))
                    yield record

            yield Source(header, records())
    finally:
        csv.field_size_limit(previous_limit)


@contextmanager
def _parquet_source(path: Path) -> Iterator[Source]:
    pq = require_extra("pyarrow.parquet", extra="parquet", package="pyarrow")
    try:
        parquet_file = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise Fatal(
            f"not a readable Parquet file ({exc})", fix="re-export the file as Parquet"
        ) from exc
    try:
        schema = parquet_file.schema_arrow
        columns = tuple(str(name) for name in schema.names)
        _check_distinct(columns, "schema")
        metadata_type = (
            str(schema.field(METADATA_COLUMN).type) if METADATA_COLUMN in columns else None
        )

        def records() -> Generator[_Record]:
            index = 0
            try:
                for batch in parquet_file.iter_batches():
                    for data in batch.to_pylist():
                        yield _Record(index, index + 1, None, data=dict(data))
                        index += 1
            except Exception as exc:  # a corrupt page surfaces while iterating
                raise Fatal(f"cannot read Parquet data ({exc})", row=index + 1) from exc

        yield Source(columns, records(), metadata_type=metadata_type)
    finally:
        parquet_file.close()


@contextmanager
def open_source(path: Path, ext: str) -> Iterator[Source]:
    with ExitStack() as stack:
        if ext == "jsonl":
            source = Source(None, _jsonl_records(path))
        elif ext == "csv":
            source = stack.enter_context(_csv_source(path))
        else:
            source = stack.enter_context(_parquet_source(path))
        try:
            yield source
        finally:
            # A caller that stops early (too many errors) must not leave the file open.
            source.records.close()
