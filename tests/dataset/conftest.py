"""Fixtures that write dataset and config files into the test's tmp dir."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

WriteJsonl = Callable[..., Path]
WriteCsv = Callable[..., Path]


@pytest.fixture
def write_jsonl(tmp_path: Path) -> WriteJsonl:
    """``write_jsonl(rows, name="data.jsonl")``: rows are dicts (dumped) or raw line strings."""

    def write(rows: Sequence[dict[str, Any] | str], name: str = "data.jsonl") -> Path:
        path = tmp_path / name
        lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return path

    return write


@pytest.fixture
def write_csv(tmp_path: Path) -> WriteCsv:
    """``write_csv(header, rows, name="data.csv")`` through the csv module (proper quoting)."""

    def write(header: Sequence[str], rows: Sequence[Sequence[Any]], name: str = "data.csv") -> Path:
        path = tmp_path / name
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
        return path

    return write


@pytest.fixture
def write_toml(tmp_path: Path) -> Callable[[str], Path]:
    """``write_toml(text)`` -> path of ``configs/eval/test.toml`` holding ``text``."""

    def write(text: str) -> Path:
        path = tmp_path / "configs" / "eval" / "test.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def ten_rows(write_jsonl: WriteJsonl) -> Path:
    """A valid 10-row prompt-mode JSONL file: q0/a0 ... q9/a9."""
    return write_jsonl([{"user_prompt": f"q{i}", "ground_truth": f"a{i}"} for i in range(10)])
