"""The dataset contract: read a dataset file, check it, and turn rows into rollout inputs.

Two entry points share one streaming reader:

- :func:`load_dataset` selects rows (``rows="3,7,10-20"`` or ``limit``) and normalises each
  into a :class:`DatasetRow` (``initial_messages``, ``label``, ``metadata``), exactly as the
  platform's eval controller does. Any bad input stops the load with one
  :class:`~osmosis_rollout.errors.DatasetError` listing up to five problems.
- :func:`validate_dataset` applies the platform upload rules on top (uniform JSONL keys,
  metadata-mode storage rules, size) and returns a :class:`DatasetReport` instead of raising.
  The platform's four-row minimum is only a warning here: local files may be smaller.

Formats: ``.jsonl``, ``.csv`` and ``.parquet`` (Parquet needs the ``parquet`` extra). Column
names are case-sensitive. In every error, ``row`` is what an editor shows: the 1-based line
for JSONL and CSV (the CSV header is line 1), the 1-based record number for Parquet.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from osmosis_rollout._imports import require_extra
from osmosis_rollout.errors import DatasetError
from osmosis_rollout.types.sample import MessageDict

__all__ = [
    "MAX_PLATFORM_BYTES",
    "MAX_REPORTED_ERRORS",
    "MIN_PLATFORM_ROWS",
    "SUPPORTED_EXTENSIONS",
    "DatasetMode",
    "DatasetReport",
    "DatasetRow",
    "load_dataset",
    "parse_row_spec",
    "row_from_dict",
    "validate_dataset",
]

SUPPORTED_EXTENSIONS: tuple[str, ...] = ("jsonl", "csv", "parquet")
MIN_PLATFORM_ROWS = 4
MAX_PLATFORM_BYTES = 5 * 1024**3
MAX_REPORTED_ERRORS = 5

DatasetMode = Literal["prompt", "metadata"]

METADATA_COLUMN = "metadata"
ID_COLUMN = "id"
_TRUNCATED_NOTE = f"... (showing first {MAX_REPORTED_ERRORS} errors)"
_ROW_TOKEN_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# csv's default 128 KiB cell limit rejects real prompts (long documents); the limit is
# process-global, so it is raised only while a file is being read.
_CSV_FIELD_LIMIT = 256 * 1024 * 1024

_FIX_JSONL_LINE = (
    'write one complete JSON object per line, e.g. {"user_prompt": "...", "ground_truth": "..."}'
)
_FIX_PROMPT_MODE = (
    "add a 'user_prompt' and a 'ground_truth' (or 'label') column, "
    "or a 'metadata' column holding a JSON object per row"
)
_FIX_METADATA = 'make metadata a JSON object, e.g. {"task": "add", "a": 1}'


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
            lines = [f"{self.path}: {_count(len(self.errors), 'error')}"]
            lines += [
                f"  - {_indent_continuations(_without_path(error, self.path))}"
                for error in self.errors
            ]
            if self.truncated:
                lines.append(f"  {_TRUNCATED_NOTE}")
        else:
            summary = (
                f"valid {self.mode} dataset, {_count(self.n_rows, 'row')}"
                if self.mode
                else "no errors found"  # e.g. Parquet content skipped without pyarrow
            )
            lines = [f"{self.path}: {summary}"]
        lines += [f"  warning: {warning}" for warning in self.warnings]
        return "\n".join(lines)

    def raise_for_errors(self) -> None:
        """Raise one :class:`DatasetError` covering every error found, if any."""
        if self.errors:
            raise _combine(self.path, self.errors, self.truncated)


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True, slots=True)
class _Problem:
    message: str
    row: int | None = None
    column: str | None = None
    fix: str | None = None

    def error(self, path: str) -> DatasetError:
        return DatasetError(self.message, path=path, row=self.row, column=self.column, fix=self.fix)


class _Fatal(Exception):
    """Reading cannot go on (the file, header or schema is unusable)."""

    def __init__(self, problem: _Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class _Collector:
    """Keeps the first few problems; reports whether one more was seen."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[_Problem] = []
        self.truncated = False

    @property
    def full(self) -> bool:
        return self.truncated

    def add(self, problem: _Problem) -> None:
        if len(self.problems) < MAX_REPORTED_ERRORS:
            self.problems.append(problem)
        else:
            self.truncated = True

    def extend(self, problems: Iterable[_Problem]) -> None:
        for problem in problems:
            self.add(problem)

    def errors(self) -> list[DatasetError]:
        return [problem.error(self.path) for problem in self.problems]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _indent_continuations(text: str) -> str:
    return text.replace("\n", "\n    ")


def _without_path(error: DatasetError, path: str) -> str:
    """The error's text minus the leading file name, for lists under a heading that has it."""
    text = str(error)
    for prefix in (f"{path}, ", f"{path}: "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def _combine(path: str, errors: list[DatasetError], truncated: bool) -> DatasetError:
    if len(errors) == 1 and not truncated:
        return errors[0]
    lines = [f"{_count(len(errors), 'problem')} in this dataset:"]
    for error in errors:
        lines.append(f"  - {_indent_continuations(_without_path(error, path))}")
    if truncated:
        lines.append(f"  {_TRUNCATED_NOTE}")
    return DatasetError("\n".join(lines), path=path)


def _suggest(name: str, candidates: Iterable[str]) -> str:
    names = [str(candidate) for candidate in candidates]
    matches = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    lowered = {candidate.lower(): candidate for candidate in names}
    match = lowered.get(name.lower()) or (matches[0] if matches else None)
    return f" (found {match!r}: column names are case-sensitive)" if match else ""


def _short_columns(columns: Iterable[str]) -> str:
    names = sorted(columns)
    shown = ", ".join(repr(name) for name in names[:8])
    return shown + (f", ... ({len(names)} in all)" if len(names) > 8 else "") if names else "none"


# --------------------------------------------------------------------------- reading


@dataclass(slots=True)
class _Record:
    """One raw row, or the problem that kept it from parsing."""

    source_index: int
    row: int  # 1-based line (JSONL/CSV) or record number (Parquet), for messages
    line: int | None
    data: dict[str, Any] | None = None
    problem: _Problem | None = None


@dataclass
class _Source:
    columns: tuple[str, ...] | None  # the header / schema; None for JSONL
    records: Iterator[_Record]
    metadata_type: str | None = None  # Parquet only: the Arrow type of the metadata column


def _extension(path: Path) -> str:
    ext = path.suffix.lstrip(".").lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise _Fatal(
            _Problem(
                f"unsupported file type {path.suffix or '(no extension)'!r}",
                fix="use a .jsonl, .csv or .parquet file",
            )
        )
    return ext


def _check_file(path: Path) -> int:
    if not path.exists():
        raise _Fatal(
            _Problem("file not found", fix="check the path (relative to the current directory)")
        )
    if not path.is_file():
        raise _Fatal(_Problem("not a file", fix="pass a .jsonl, .csv or .parquet file"))
    size = path.stat().st_size
    if size == 0:
        raise _Fatal(_Problem("the file is empty", fix="add a header (CSV) and at least one row"))
    return size


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    """Strict JSON: NaN/Infinity are rejected like any other non-JSON token."""
    return json.loads(text, parse_constant=_reject_constant)


def _json_problem(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _jsonl_records(path: Path) -> Iterator[_Record]:
    index = 0
    with path.open("rb") as handle:
        for lineno, raw_line in enumerate(handle, start=1):
            try:
                text = raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield _Record(
                    index,
                    lineno,
                    lineno,
                    problem=_Problem(
                        f"not valid UTF-8 (byte {raw_line[exc.start]:#04x} at offset {exc.start})",
                        row=lineno,
                        fix="save the file as UTF-8",
                    ),
                )
                index += 1
                continue
            if not text.strip():
                continue
            record = _Record(index, lineno, lineno)
            index += 1
            try:
                value = _loads(text.strip())
            except (ValueError, RecursionError) as exc:
                record.problem = _Problem(
                    f"invalid JSON ({_json_problem(exc)})", row=lineno, fix=_FIX_JSONL_LINE
                )
            else:
                if isinstance(value, dict):
                    record.data = value
                else:
                    record.problem = _Problem(
                        f"each line must be a JSON object, got {_json_type(value)}",
                        row=lineno,
                        fix=_FIX_JSONL_LINE,
                    )
            yield record


def _utf8_lines(handle: Iterable[bytes], counter: list[int]) -> Iterator[str]:
    for raw_line in handle:
        counter[0] += 1
        try:
            yield raw_line.decode("utf-8-sig" if counter[0] == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise _Fatal(
                _Problem(
                    f"not valid UTF-8 (byte {raw_line[exc.start]:#04x} at offset {exc.start})",
                    row=counter[0],
                    fix="save the file as UTF-8",
                )
            ) from exc


@contextmanager
def _csv_source(path: Path) -> Iterator[_Source]:
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        with path.open("rb") as handle:
            counter = [0]
            reader = csv.reader(_utf8_lines(handle, counter))

            def next_record() -> tuple[int, list[str]] | None:
                start = counter[0] + 1
                try:
                    cells = next(reader, None)
                except csv.Error as exc:
                    raise _Fatal(
                        _Problem(
                            f"cannot parse CSV ({exc})",
                            row=start,
                            fix='quote cells that hold commas, quotes or line breaks: "a, ""b"""',
                        )
                    ) from exc
                return None if cells is None else (start, cells)

            first = next_record()
            while first is not None and not first[1]:
                first = next_record()
            if first is None:
                raise _Fatal(
                    _Problem("the file has no header row", fix="add a header row of column names")
                )
            header = tuple(first[1])
            duplicates = sorted({name for name in header if header.count(name) > 1})
            if duplicates:
                raise _Fatal(
                    _Problem(
                        f"the header repeats column(s) {', '.join(map(repr, duplicates))}",
                        row=first[0],
                        fix="give every column a distinct name",
                    )
                )

            def records() -> Iterator[_Record]:
                index = 0
                while (item := next_record()) is not None:
                    start, cells = item
                    if not cells:  # a blank line
                        continue
                    record = _Record(index, start, start)
                    index += 1
                    if len(cells) != len(header):
                        record.problem = _Problem(
                            f"expected {len(header)} cells (one per header column), got {len(cells)}",
                            row=start,
                            fix='quote cells that contain commas, e.g. "a, b"; every row needs '
                            f"exactly {len(header)} cells",
                        )
                    else:
                        record.data = dict(zip(header, cells, strict=True))
                    yield record

            yield _Source(header, records())
    finally:
        csv.field_size_limit(previous_limit)


@contextmanager
def _parquet_source(path: Path) -> Iterator[_Source]:
    pq = require_extra("pyarrow.parquet", extra="parquet", package="pyarrow")
    try:
        parquet_file = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise _Fatal(
            _Problem(f"not a readable Parquet file ({exc})", fix="re-export the file as Parquet")
        ) from exc
    try:
        schema = parquet_file.schema_arrow
        columns = tuple(str(name) for name in schema.names)
        duplicates = sorted({name for name in columns if columns.count(name) > 1})
        if duplicates:
            raise _Fatal(
                _Problem(
                    f"the schema repeats column(s) {', '.join(map(repr, duplicates))}",
                    fix="give every column a distinct name",
                )
            )
        metadata_type = (
            str(schema.field(METADATA_COLUMN).type) if METADATA_COLUMN in columns else None
        )

        def records() -> Iterator[_Record]:
            index = 0
            try:
                for batch in parquet_file.iter_batches():
                    for data in batch.to_pylist():
                        yield _Record(index, index + 1, None, data=dict(data))
                        index += 1
            except Exception as exc:  # a corrupt page surfaces while iterating
                raise _Fatal(_Problem(f"cannot read Parquet data ({exc})", row=index + 1)) from exc

        yield _Source(columns, records(), metadata_type=metadata_type)
    finally:
        parquet_file.close()


@contextmanager
def _open_source(path: Path, ext: str) -> Iterator[_Source]:
    with ExitStack() as stack:
        if ext == "jsonl":
            source = _Source(None, _jsonl_records(path))
        elif ext == "csv":
            source = stack.enter_context(_csv_source(path))
        else:
            source = stack.enter_context(_parquet_source(path))
        try:
            yield source
        finally:
            # A caller that stops early (too many errors) must not leave the file open.
            _close(source.records)


def _close(records: Iterator[_Record]) -> None:
    close = getattr(records, "close", None)
    if close is not None:
        close()


# --------------------------------------------------------------------------- normalising


def _text(raw: Mapping[str, Any], column: str) -> str | None:
    """Missing, null and ``""`` are absent (not stripped); other values are stringified."""
    value = raw.get(column)
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    return str(value)


def _decode_metadata(value: Any, row: int) -> tuple[Any, _Problem | None]:
    """The metadata cell as a Python value: objects pass, strings are decoded as JSON."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None, None
        try:
            return _loads(text), None
        except (ValueError, RecursionError) as exc:
            return None, _Problem(
                f"metadata is not valid JSON ({_json_problem(exc)})",
                row=row,
                column=METADATA_COLUMN,
                fix=_FIX_METADATA,
            )
    return value, None


def _metadata(value: Any, row: int) -> tuple[dict[str, Any] | None, _Problem | None]:
    decoded, problem = _decode_metadata(value, row)
    if problem is not None or decoded is None:
        return None, problem
    if isinstance(decoded, Mapping):
        return (dict(decoded) or None), None
    return None, _Problem(
        f"metadata must be a JSON object, got {_json_type(decoded)}",
        row=row,
        column=METADATA_COLUMN,
        fix=_FIX_METADATA,
    )


@dataclass(slots=True)
class _Normalised:
    initial_messages: list[MessageDict]
    label: str | None
    metadata: dict[str, Any] | None


def _normalise(raw: Mapping[str, Any], row: int) -> tuple[_Normalised | None, list[_Problem]]:
    """The platform's row -> rollout rule; every problem on the row is reported."""
    problems: list[_Problem] = []
    metadata_mode = METADATA_COLUMN in raw
    metadata, problem = _metadata(raw.get(METADATA_COLUMN), row)
    if problem is not None:
        problems.append(problem)

    system_prompt = _text(raw, "system_prompt")
    user_prompt = _text(raw, "user_prompt")
    if user_prompt is None and not metadata_mode:
        if "user_prompt" in raw:
            message = "'user_prompt' is empty"
        else:
            message = "no 'user_prompt' column" + _suggest("user_prompt", raw)
            message += f"; this row has {_short_columns(raw)}"
        problems.append(_Problem(message, row=row, column="user_prompt", fix=_FIX_PROMPT_MODE))

    label = _text(raw, "ground_truth")
    if label is None:
        label = _text(raw, "label")
    if label is None and not metadata_mode:
        if "ground_truth" in raw or "label" in raw:
            message = "'ground_truth' (or 'label') is empty"
        else:
            message = "no 'ground_truth' column (or its alias 'label')" + _suggest(
                "ground_truth", raw
            )
        problems.append(_Problem(message, row=row, column="ground_truth", fix=_FIX_PROMPT_MODE))

    messages: list[MessageDict] = []
    if system_prompt is not None:
        messages.append({"role": "system", "content": system_prompt})
    if user_prompt is not None:
        messages.append({"role": "user", "content": user_prompt})
    if not problems and not messages and metadata is None:
        # An empty metadata cell must not waive the prompt: the row would have no input at all.
        problems.append(
            _Problem(
                "the row has no prompt and no metadata",
                row=row,
                column=METADATA_COLUMN,
                fix="give the row a non-empty 'metadata' object or a 'user_prompt'",
            )
        )
    if problems:
        return None, problems
    return _Normalised(messages, label, metadata), []


def _row_key(raw: Mapping[str, Any], source_index: int) -> str:
    value = raw.get(ID_COLUMN)
    if value is None or value == "":
        return f"row-{source_index}"
    if isinstance(value, str | int | float | bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class _KeyRegistry:
    """Detects two rows claiming the same ``id`` (only the keys are kept)."""

    def __init__(self) -> None:
        self._first_row: dict[str, int] = {}

    def check(
        self, raw: Mapping[str, Any], source_index: int, row: int
    ) -> tuple[str, _Problem | None]:
        key = _row_key(raw, source_index)
        first = self._first_row.setdefault(key, row)
        if first == row:
            return key, None
        return key, _Problem(
            f"duplicate id {key!r}: row {first} has the same id",
            row=row,
            column=ID_COLUMN,
            fix="give every row a unique 'id' (it names the row's test); or drop the 'id' column",
        )


def _header_problems(columns: tuple[str, ...]) -> list[_Problem]:
    """Column-level prompt-mode check for CSV/Parquet: one message instead of one per row."""
    if METADATA_COLUMN in columns:
        return []
    problems: list[_Problem] = []
    if "user_prompt" not in columns:
        problems.append(
            _Problem(
                "no 'user_prompt' column"
                + _suggest("user_prompt", columns)
                + f"; the columns are {_short_columns(columns)}",
                column="user_prompt",
                fix=_FIX_PROMPT_MODE,
            )
        )
    if "ground_truth" not in columns and "label" not in columns:
        problems.append(
            _Problem(
                "no 'ground_truth' column (or its alias 'label')"
                + _suggest("ground_truth", columns),
                column="ground_truth",
                fix=_FIX_PROMPT_MODE,
            )
        )
    return problems


# --------------------------------------------------------------------------- selection


def _parse_ranges(spec: str) -> list[tuple[int, int]]:
    tokens = [token.strip() for token in spec.split(",")]
    if not spec.strip() or any(not token for token in tokens):
        raise DatasetError(
            f"invalid row selection {spec!r}",
            fix="use comma-separated 0-based indices or ranges, e.g. '3,7,10-20'",
        )
    ranges: list[tuple[int, int]] = []
    for token in tokens:
        match = _ROW_TOKEN_RE.match(token)
        if match is None:
            raise DatasetError(
                f"invalid row selection {spec!r}: {token!r} is not an index or a range",
                fix="use comma-separated 0-based indices or ranges, e.g. '3,7,10-20'",
            )
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if start > end:
            raise DatasetError(
                f"invalid row selection {spec!r}: the range {token!r} is inverted",
                fix=f"write it as {end}-{start}",
            )
        ranges.append((start, end))
    return ranges


def _check_in_range(ranges: list[tuple[int, int]], n: int, *, path: str | None) -> None:
    beyond = sorted((max(start, n), end) for start, end in ranges if end >= n)
    if beyond:
        shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in beyond[:5])
        valid = f"0-{n - 1}" if n else "none"
        raise DatasetError(
            f"row selection reaches past the end: {shown} (the dataset has "
            f"{_count(n, 'row')}; valid indices: {valid})",
            path=path,
            fix="select 0-based row indices below the row count",
        )


def parse_row_spec(spec: str, n: int) -> list[int]:
    """``"3,7,10-20"`` -> sorted, de-duplicated 0-based indices, all below ``n``.

    Raises :class:`DatasetError` for malformed input, an inverted range (``"5-2"``)
    or an index ``>= n``.
    """
    ranges = _parse_ranges(spec)
    _check_in_range(ranges, n, path=None)
    selected: set[int] = set()
    for start, end in ranges:
        selected.update(range(start, end + 1))
    return sorted(selected)


# --------------------------------------------------------------------------- public API


def _path_text(path: str | Path) -> str:
    return str(path)


def load_dataset(
    path: str | Path, *, rows: str | None = None, limit: int | None = None
) -> list[DatasetRow]:
    """Read, select and normalise a dataset's rows, or raise :class:`DatasetError`.

    ``rows`` (``"3,7,10-20"``, 0-based file offsets) overrides ``limit``; a positive
    ``limit`` keeps the first N rows, anything else keeps all. Every row must parse and
    ``id`` values must be unique; only selected rows are normalised. Problems are
    collected (up to five) and raised together before anything runs.
    """
    name = _path_text(path)
    file = Path(path)
    ranges = _parse_ranges(rows) if rows is not None else None
    if ranges is not None:
        ranges.sort()

    def wanted(source_index: int) -> bool:
        if ranges is not None:
            return any(start <= source_index <= end for start, end in ranges)
        return limit is None or limit <= 0 or source_index < limit

    collector = _Collector(name)
    selected: list[DatasetRow] = []
    total = 0
    keys = _KeyRegistry()
    try:
        _check_file(file)
        ext = _extension(file)
        with _open_source(file, ext) as source:
            header_problems = _header_problems(source.columns) if source.columns else []
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
                normalised, problems = _normalise(record.data, record.row)
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
    except _Fatal as fatal:
        collector.add(fatal.problem)
    if collector.problems:
        raise _combine(name, collector.errors(), collector.truncated)
    if total == 0:
        raise DatasetError("the file has no rows", path=name, fix="add at least one row")
    if ranges is not None:
        _check_in_range(ranges, total, path=name)
    # A non-empty file with an in-range selection always selects at least one row, so
    # an empty selection can only come from a file without rows (reported above).
    return selected


class _TypeTracker:
    """Per JSON path, the value type seen first; int and float are both "number"."""

    def __init__(self) -> None:
        self._types: dict[str, str] = {}

    def observe(self, value: dict[str, Any], row: int) -> list[_Problem]:
        problems: list[_Problem] = []
        for path, child, _ in _walk(value):
            if child is None:
                continue
            kind = _json_type(child)
            first = self._types.setdefault(path, kind)
            if first != kind:
                problems.append(
                    _Problem(
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


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _upload_metadata_problems(value: Any, row: int, tracker: _TypeTracker) -> list[_Problem]:
    """The upload validator's metadata-mode rules for one cell."""
    decoded, problem = _decode_metadata(value, row)
    if problem is not None:
        return [problem]
    if decoded is None or (isinstance(decoded, Mapping) and not decoded):
        return [
            _Problem(
                "metadata is empty; a dataset with a 'metadata' column needs a non-empty "
                "JSON object on every row",
                row=row,
                column=METADATA_COLUMN,
                fix=_FIX_METADATA,
            )
        ]
    if not isinstance(decoded, Mapping):
        return [
            _Problem(
                f"metadata must be a JSON object, got {_json_type(decoded)}",
                row=row,
                column=METADATA_COLUMN,
                fix=_FIX_METADATA,
            )
        ]
    for path, node, is_root in _walk(decoded):
        if isinstance(node, Mapping) and not node and not is_root:
            return [
                _Problem(
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
                _Problem(
                    f"metadata integer at {path} does not fit in 64 bits",
                    row=row,
                    column=METADATA_COLUMN,
                    fix="store it as a string",
                )
            ]
        if isinstance(node, float) and not math.isfinite(node):
            return [
                _Problem(
                    f"metadata number at {path} is not finite",
                    row=row,
                    column=METADATA_COLUMN,
                    fix="use a finite number or null",
                )
            ]
    return tracker.observe(dict(decoded), row)


def _key_set_problem(keys: frozenset[str], expected: frozenset[str], row: int) -> _Problem | None:
    if keys == expected:
        return None
    details = []
    if missing := sorted(expected - keys):
        details.append("missing " + ", ".join(map(repr, missing)))
    if extra := sorted(keys - expected):
        details.append("extra " + ", ".join(map(repr, extra)))
    return _Problem(
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
    name = _path_text(path)
    file = Path(path)
    report = DatasetReport(name)
    collector = _Collector(name)
    try:
        size = _check_file(file)
        ext = _extension(file)
        if size > MAX_PLATFORM_BYTES:
            collector.add(
                _Problem(
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
        with _open_source(file, ext) as source:
            _validate_records(source, collector, report)
    except _Fatal as fatal:
        collector.add(fatal.problem)
    report.errors = collector.errors()
    report.truncated = collector.truncated
    if not report.errors and report.n_rows == 0:
        report.errors.append(
            DatasetError("the file has no rows", path=name, fix="add at least one row")
        )
    if 0 < report.n_rows < min_rows and not report.truncated:
        report.warnings.append(
            f"only {_count(report.n_rows, 'row')}: the platform needs at least {min_rows} "
            "to upload this dataset"
        )
    return report


def _validate_records(source: _Source, collector: _Collector, report: DatasetReport) -> None:
    header_problems: list[_Problem] = []
    if source.columns is not None:
        report.mode = "metadata" if METADATA_COLUMN in source.columns else "prompt"
        header_problems = _header_problems(source.columns)
        collector.extend(header_problems)
        if source.metadata_type is not None and not (
            source.metadata_type.startswith("struct")
            or source.metadata_type in ("string", "large_string")
        ):
            bad_type = _Problem(
                f"the metadata column has type {source.metadata_type}; it must be a struct "
                "or a JSON-object string",
                column=METADATA_COLUMN,
                fix="write metadata as a struct column or as JSON strings",
            )
            collector.add(bad_type)
            header_problems.append(bad_type)
    expected_keys: frozenset[str] | None = None
    tracker = _TypeTracker()
    keys = _KeyRegistry()
    for record in source.records:
        if collector.full:
            break
        report.n_rows += 1
        if record.problem is not None:
            collector.add(record.problem)
            continue
        data = record.data
        assert data is not None
        row_problems: list[_Problem] = []
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
            row_problems.extend(_normalise(data, record.row)[1])
        _, duplicate = keys.check(data, record.source_index, record.row)
        if duplicate is not None:
            row_problems.append(duplicate)
        collector.extend(row_problems)


def row_from_dict(raw: Mapping[str, Any], *, index: int = 0) -> DatasetRow:
    """Normalise one hand-written row (``{"user_prompt": ..., "ground_truth": ...}``) like a file row.

    For tests and fixtures; raises :class:`DatasetError` with the same messages as a file.
    """
    record = dict(raw)
    normalised, problems = _normalise(record, index + 1)
    if normalised is None:
        first = problems[0]
        raise DatasetError(first.message, row=index, column=first.column, fix=first.fix)
    return DatasetRow(
        index=index,
        source_index=index,
        key=_row_key(record, index),
        raw=record,
        initial_messages=normalised.initial_messages,
        label=normalised.label,
        metadata=normalised.metadata,
    )
