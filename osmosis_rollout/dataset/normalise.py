"""Normalisation: one raw record -> ``initial_messages``, ``label`` and ``metadata``, as the platform does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_rollout.dataset.problems import Problem, json_type, short_columns, suggest
from osmosis_rollout.dataset.readers import json_problem, loads
from osmosis_rollout.dataset.rows import ID_COLUMN, METADATA_COLUMN
from osmosis_rollout.types.sample import MessageDict

__all__ = [
    "FIX_METADATA",
    "decode_metadata",
    "duplicate_id",
    "header_row_problems",
    "normalise",
    "row_key",
]

_FIX_PROMPT_MODE = (
    "add a 'user_prompt' and a 'ground_truth' (or 'label') column, "
    "or a 'metadata' column holding a JSON object per row"
)
FIX_METADATA = 'make metadata a JSON object, e.g. {"task": "add", "a": 1}'


def _text(raw: Mapping[str, Any], column: str) -> str | None:
    """Missing, null and ``""`` are absent (not stripped); other values are stringified."""
    value = raw.get(column)
    return None if value is None or value == "" else str(value)


def decode_metadata(value: Any, row: int) -> tuple[Any, Problem | None]:
    """The metadata cell as a Python value: objects pass, strings are decoded as JSON."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None, None
        try:
            return loads(text), None
        except (ValueError, RecursionError) as exc:
            return None, Problem(
                f"metadata is not valid JSON ({json_problem(exc)})",
                row=row,
                column=METADATA_COLUMN,
                fix=FIX_METADATA,
            )
    return value, None


def _metadata(value: Any, row: int) -> tuple[dict[str, Any] | None, Problem | None]:
    decoded, problem = decode_metadata(value, row)
    if problem is not None or decoded is None:
        return None, problem
    if isinstance(decoded, Mapping):
        return (dict(decoded) or None), None
    return None, Problem(
        f"metadata must be a JSON object, got {json_type(decoded)}",
        row=row,
        column=METADATA_COLUMN,
        fix=FIX_METADATA,
    )


@dataclass(slots=True)
class _Normalised:
    initial_messages: list[MessageDict]
    label: str | None
    metadata: dict[str, Any] | None


def normalise(raw: Mapping[str, Any], row: int) -> tuple[_Normalised | None, list[Problem]]:
    """The platform's row -> rollout rule; every problem on the row is reported."""
    problems: list[Problem] = []
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
            message = "no 'user_prompt' column" + suggest("user_prompt", raw)
            message += f"; this row has {short_columns(raw)}"
        problems.append(Problem(message, row=row, column="user_prompt", fix=_FIX_PROMPT_MODE))

    label = _text(raw, "ground_truth") or _text(raw, "label")
    if label is None and not metadata_mode:
        if "ground_truth" in raw or "label" in raw:
            message = "'ground_truth' (or 'label') is empty"
        else:
            message = "no 'ground_truth' column (or its alias 'label')" + suggest(
                "ground_truth", raw
            )
        problems.append(Problem(message, row=row, column="ground_truth", fix=_FIX_PROMPT_MODE))

    messages: list[MessageDict] = []
    if system_prompt is not None:
        messages.append({"role": "system", "content": system_prompt})
    if user_prompt is not None:
        messages.append({"role": "user", "content": user_prompt})
    if not problems and not messages and metadata is None:
        # An empty metadata cell must not waive the prompt: the row would have no input at all.
        problems.append(
            Problem(
                "the row has no prompt and no metadata",
                row=row,
                column=METADATA_COLUMN,
                fix="give the row a non-empty 'metadata' object or a 'user_prompt'",
            )
        )
    if problems:
        return None, problems
    return _Normalised(messages, label, metadata), []


def row_key(raw: Mapping[str, Any], source_index: int) -> str:
    value = raw.get(ID_COLUMN)
    if value is None or value == "":
        return f"row-{source_index}"
    if isinstance(value, str | int | float | bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def duplicate_id(key: str, first: int, row: int) -> Problem:
    """Row ``row`` claims the ``id`` row ``first`` has."""
    return Problem(
        f"duplicate id {key!r}: row {first} has the same id",
        row=row,
        column=ID_COLUMN,
        fix="give every row a unique 'id' (it names the row's test); or drop the 'id' column",
    )


def header_row_problems(columns: tuple[str, ...]) -> list[Problem]:
    """Column-level prompt-mode check for CSV/Parquet: one message, whatever is missing."""
    if METADATA_COLUMN in columns:
        return []
    missing: list[str] = []
    if "user_prompt" not in columns:
        missing.append("'user_prompt'" + suggest("user_prompt", columns))
    if "ground_truth" not in columns and "label" not in columns:
        missing.append("'ground_truth' (or its alias 'label')" + suggest("ground_truth", columns))
    if not missing:
        return []
    return [
        Problem(
            f"the header has {short_columns(columns)}; it lacks {' and '.join(missing)}",
            column="user_prompt" if "user_prompt" not in columns else "ground_truth",
            fix=_FIX_PROMPT_MODE,
        )
    ]
