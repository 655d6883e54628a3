"""Property tests: any dataset file either loads or fails with a DatasetError, never otherwise."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from osmosis_rollout.dataset import DatasetRow, load_dataset, parse_row_spec, validate_dataset
from osmosis_rollout.errors import DatasetError

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text that can be written as UTF-8 (no lone surrogates), unicode and control characters included.
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
cell_texts = st.one_of(
    texts,
    st.sampled_from(
        ["", " ", ",", '"', '""', "a,b", 'say "hi"', "\n", "\r\n", "x\ny", "\x00", "é✓🙂"]
    ),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
contract_keys = st.sampled_from(
    ["user_prompt", "ground_truth", "label", "system_prompt", "metadata", "id", "User_prompt", "x"]
)
raw_rows = st.dictionaries(contract_keys, json_values | cell_texts, max_size=6)
# Metadata written as an encoded string, as CSV exports do.
encoded_metadata = st.dictionaries(texts, json_scalars, max_size=3).map(json.dumps)


@contextmanager
def _written(data: bytes, suffix: str) -> Iterator[Path]:
    # Hypothesis reruns the body many times per test, so each example gets its own dir.
    with tempfile.TemporaryDirectory(prefix="osmosis-ds-") as directory:
        path = Path(directory) / f"data{suffix}"
        path.write_bytes(data)
        yield path


def _load_or_dataset_error(path: Path) -> list[DatasetRow] | DatasetError:
    try:
        rows = load_dataset(path)
    except DatasetError as exc:
        assert str(exc).startswith(str(path))  # every error names the file
        return exc
    assert rows, "a successful load has rows"
    assert [row.index for row in rows] == list(range(len(rows)))
    for row in rows:
        assert row.initial_messages or row.metadata, "a row needs some input"
    assert len({row.key for row in rows}) == len(rows), "keys are unique"
    return rows


def _check_agreement(data: bytes, suffix: str) -> None:
    with _written(data, suffix) as path, _written(data, suffix) as fresh:
        outcome = _load_or_dataset_error(path)
        report = validate_dataset(path)  # never raises for the file's content
        alone = validate_dataset(fresh)  # a file never loaded: read by the upload rules alone
    # The report a load remembers is the report of a read of its own.
    assert (report.mode, report.n_rows, report.truncated, report.warnings) == (
        alone.mode,
        alone.n_rows,
        alone.truncated,
        alone.warnings,
    )
    assert report.format() == alone.format().replace(str(fresh), str(path))
    if report.ok:
        # Anything the upload rules accept, the loader accepts.
        assert not isinstance(outcome, DatasetError), str(outcome)


@SETTINGS
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".jsonl", ".csv"]))
def test_arbitrary_bytes_load_or_raise_a_dataset_error(data: bytes, suffix: str) -> None:
    _check_agreement(data, suffix)


@SETTINGS
@given(lines=st.lists(raw_rows | json_values.map(json.dumps) | cell_texts, max_size=8))
def test_jsonl_lines_load_or_raise_a_dataset_error(lines: list[Any]) -> None:
    body = "".join(
        (json.dumps(line) if isinstance(line, dict) else str(line).replace("\n", " ")) + "\n"
        for line in lines
    )
    _check_agreement(body.encode("utf-8"), ".jsonl")


@SETTINGS
@given(
    header=st.lists(contract_keys | texts, min_size=1, max_size=5),
    rows=st.lists(st.lists(cell_texts | encoded_metadata, max_size=6), max_size=6),
)
def test_csv_tables_load_or_raise_a_dataset_error(header: list[str], rows: list[list[str]]) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    _check_agreement(buffer.getvalue().encode("utf-8"), ".csv")


@SETTINGS
@given(
    cells=st.lists(
        st.tuples(cell_texts.filter(bool), cell_texts.filter(bool)), min_size=1, max_size=6
    )
)
def test_csv_quoting_round_trips_cell_text(cells: list[tuple[str, str]]) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["user_prompt", "ground_truth"])
    writer.writerows(cells)
    with _written(buffer.getvalue().encode("utf-8"), ".csv") as path:
        rows = load_dataset(path)
    assert [(row.initial_messages[0]["content"], row.label) for row in rows] == cells


@SETTINGS
@given(indices=st.sets(st.integers(min_value=0, max_value=60), min_size=1))
def test_row_spec_of_any_index_set_parses_back_to_it(indices: set[int]) -> None:
    ordered = sorted(indices)
    # Write runs as ranges, the rest as single indices, in a shuffled-looking order.
    parts: list[str] = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    assert parse_row_spec(",".join(reversed(parts)), 61) == ordered


@SETTINGS
@given(spec=st.text(st.sampled_from("0123456789-, x"), max_size=12), n=st.integers(0, 30))
def test_any_row_spec_parses_or_raises_a_dataset_error(spec: str, n: int) -> None:
    try:
        selected = parse_row_spec(spec, n)
    except DatasetError:
        return
    assert selected == sorted(set(selected))
    assert all(0 <= index < n for index in selected)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_huge_cell_among_bad_rows_is_still_a_dataset_error(suffix: str) -> None:
    huge = "z" * 5_000_000
    if suffix == ".jsonl":
        body = json.dumps({"user_prompt": huge}) + "\n"
    else:
        body = f'user_prompt,ground_truth\n"{huge}"\n'
    with _written(body.encode(), suffix) as path, pytest.raises(DatasetError):
        load_dataset(path)


@pytest.mark.parametrize(
    "line",
    [
        "[" * 100_000,
        '{"metadata": "' + "[" * 100_000 + '"}',
        '{"user_prompt": "q", "ground_truth": ' + "9" * 5000 + "}",
        '{"metadata": "{\\"n\\": ' + "9" * 5000 + '}"}',
    ],
    ids=["deep-nesting", "deep-metadata", "huge-int", "huge-int-metadata"],
)
def test_json_beyond_parser_limits_is_a_dataset_error(line: str) -> None:
    with _written((line + "\n").encode(), ".jsonl") as path:
        with pytest.raises(DatasetError, match="JSON"):
            load_dataset(path)
        assert not validate_dataset(path).ok
