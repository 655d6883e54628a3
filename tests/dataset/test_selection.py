"""Row selection: ``rows="3,7,10-20"``, ``limit``, and how selected rows are numbered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.dataset import load_dataset, parse_row_spec
from osmosis_rollout.errors import DatasetError


def _sources(path: Path, **kwargs: Any) -> list[int]:
    return [row.source_index for row in load_dataset(path, **kwargs)]


def test_row_selector_dedupes_and_sorts() -> None:
    assert parse_row_spec("7,3,3,2-4,10-12", 20) == [2, 3, 4, 7, 10, 11, 12]


def test_row_selector_tolerates_spaces_around_items() -> None:
    assert parse_row_spec(" 3, 7 , 1-2 ", 10) == [1, 2, 3, 7]


@pytest.mark.parametrize("spec", ["", "  ", "a", "1,,2", "1-", "-1", "1-2-3", "1.5", "3;4", "1,"])
def test_row_selector_rejects_malformed_input(spec: str) -> None:
    with pytest.raises(DatasetError, match="invalid row selection") as caught:
        parse_row_spec(spec, 10)
    assert caught.value.fix is not None and "3,7,10-20" in caught.value.fix


def test_row_selector_rejects_an_inverted_range() -> None:
    with pytest.raises(DatasetError, match="'5-2' is inverted") as caught:
        parse_row_spec("1,5-2", 10)
    assert caught.value.fix == "write it as 2-5"


def test_row_selector_rejects_indices_past_the_end() -> None:
    with pytest.raises(
        DatasetError, match=r"10-12 \(the dataset has 10 rows; valid indices: 0-9\)"
    ):
        parse_row_spec("1,8-12", 10)


def test_a_huge_out_of_range_selection_is_rejected_without_expanding_it() -> None:
    with pytest.raises(DatasetError, match="reaches past the end"):
        parse_row_spec("0-999999999999", 10)


def test_no_limit_selects_every_row_in_order(ten_rows: Path) -> None:
    rows = load_dataset(ten_rows)
    assert [row.source_index for row in rows] == list(range(10))
    assert [row.index for row in rows] == list(range(10))
    assert rows[3].initial_messages == [{"role": "user", "content": "q3"}]


def test_positive_limit_takes_the_first_n_rows(ten_rows: Path) -> None:
    assert _sources(ten_rows, limit=3) == [0, 1, 2]


@pytest.mark.parametrize("limit", [0, -1])
def test_non_positive_limit_selects_every_row(ten_rows: Path, limit: int) -> None:
    assert _sources(ten_rows, limit=limit) == list(range(10))


def test_limit_larger_than_the_dataset_is_harmless(ten_rows: Path) -> None:
    assert _sources(ten_rows, limit=1000) == list(range(10))


def test_row_selector_renumbers_row_index_within_the_selected_set(ten_rows: Path) -> None:
    rows = load_dataset(ten_rows, rows="8,2,5")
    assert [(row.index, row.source_index) for row in rows] == [(0, 2), (1, 5), (2, 8)]
    assert [(row.row_index, row.source_row_index) for row in rows] == [(0, 2), (1, 5), (2, 8)]
    assert rows[0].label == "a2"


def test_row_selector_overrides_limit(ten_rows: Path) -> None:
    assert _sources(ten_rows, rows="4-6", limit=1) == [4, 5, 6]


def test_out_of_range_row_selection_names_the_file(ten_rows: Path) -> None:
    with pytest.raises(DatasetError, match="reaches past the end: 10") as caught:
        load_dataset(ten_rows, rows="9,10")
    assert caught.value.path == str(ten_rows)


def test_a_malformed_selection_fails_before_the_file_is_read(tmp_path: Path) -> None:
    # The file does not even exist: the selection is checked first.
    with pytest.raises(DatasetError, match="invalid row selection"):
        load_dataset(tmp_path / "missing.jsonl", rows="x")


def test_an_empty_selection_is_an_error(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="no rows"):
        load_dataset(write_jsonl(["", ""]), limit=5)


def test_rows_outside_the_selection_are_not_normalised(write_jsonl: Any) -> None:
    good = {"user_prompt": "q", "ground_truth": "a"}
    path = write_jsonl([good, {"user_prompt": "no label"}, good])
    assert _sources(path, rows="0,2") == [0, 2]
    with pytest.raises(DatasetError, match="ground_truth"):
        load_dataset(path)


def test_a_parse_error_outside_the_selection_still_fails(write_jsonl: Any) -> None:
    good = {"user_prompt": "q", "ground_truth": "a"}
    path = write_jsonl([good, good, "{broken"])
    with pytest.raises(DatasetError, match="row 3: invalid JSON"):
        load_dataset(path, limit=1)


def test_selection_counts_file_rows_not_lines(write_jsonl: Any) -> None:
    good = {"user_prompt": "q", "ground_truth": "a"}
    path = write_jsonl([good, "", good, "", good])
    rows = load_dataset(path, rows="2")
    assert [(row.source_index, row.line) for row in rows] == [(2, 5)]
