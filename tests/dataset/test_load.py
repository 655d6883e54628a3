"""load_dataset: reading the three formats and normalising rows into rollout inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.dataset import DatasetRow, load_dataset, row_from_dict
from osmosis_rollout.errors import DatasetError, UsageError


def _only(rows: list[DatasetRow]) -> DatasetRow:
    assert len(rows) == 1
    return rows[0]


# ---------------------------------------------------------------- normalisation


def test_prompt_mode_builds_system_then_user_messages(write_jsonl: Any) -> None:
    path = write_jsonl([{"system_prompt": "be terse", "user_prompt": "2+2?", "ground_truth": "4"}])
    row = _only(load_dataset(path))
    assert row.initial_messages == [
        {"role": "system", "content": "be terse"},
        {"role": "user", "content": "2+2?"},
    ]
    assert row.label == "4"
    assert row.metadata is None


def test_system_prompt_is_optional(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"user_prompt": "hi", "ground_truth": "x"}])))
    assert row.initial_messages == [{"role": "user", "content": "hi"}]


def test_label_is_an_accepted_alias_for_ground_truth(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"user_prompt": "hi", "label": "x"}])))
    assert row.label == "x"


def test_ground_truth_wins_over_label_when_both_are_present(write_jsonl: Any) -> None:
    path = write_jsonl([{"user_prompt": "hi", "ground_truth": "gt", "label": "lb"}])
    assert _only(load_dataset(path)).label == "gt"


def test_prompt_mode_requires_user_prompt(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError) as caught:
        load_dataset(write_jsonl([{"question": "hi", "ground_truth": "x"}]))
    assert caught.value.column == "user_prompt"
    assert caught.value.row == 1
    assert "no 'user_prompt' column" in str(caught.value)
    assert "'question'" in str(caught.value)  # the row's actual columns are shown
    assert "fix:" in str(caught.value)


def test_prompt_mode_requires_a_label(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError) as caught:
        load_dataset(write_jsonl([{"user_prompt": "hi"}]))
    assert caught.value.column == "ground_truth"
    assert "'label'" in str(caught.value)


def test_an_empty_label_is_reported_as_empty_not_missing(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="'ground_truth' \\(or 'label'\\) is empty"):
        load_dataset(write_jsonl([{"user_prompt": "hi", "ground_truth": ""}]))


def test_a_wrongly_cased_column_is_pointed_out(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="found 'User_Prompt': column names are case-sensitive"):
        load_dataset(write_jsonl([{"User_Prompt": "hi", "ground_truth": "x"}]))


def test_metadata_mode_makes_prompt_columns_optional(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"metadata": {"task": "add", "a": 1}}])))
    assert row.initial_messages == []
    assert row.label is None
    assert row.metadata == {"task": "add", "a": 1}


def test_metadata_mode_accepts_an_encoded_json_object(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"metadata": ' {"task": "add"} '}])))
    assert row.metadata == {"task": "add"}


@pytest.mark.parametrize("value", [[1, 2], "[1, 2]", "42", 42, True])
def test_metadata_must_decode_to_an_object(write_jsonl: Any, value: Any) -> None:
    with pytest.raises(DatasetError, match="metadata must be a JSON object") as caught:
        load_dataset(write_jsonl([{"metadata": value, "user_prompt": "hi"}]))
    assert caught.value.column == "metadata"


def test_metadata_with_broken_json_is_reported_with_the_row(write_jsonl: Any) -> None:
    path = write_jsonl([{"metadata": '{"a": 1}'}, {"metadata": '{"a": '}])
    with pytest.raises(DatasetError, match="metadata is not valid JSON") as caught:
        load_dataset(path)
    assert (caught.value.row, caught.value.column) == (2, "metadata")


def test_empty_metadata_does_not_waive_the_prompt_requirement(write_csv: Any) -> None:
    path = write_csv(["user_prompt", "metadata"], [["", ""]])
    with pytest.raises(DatasetError, match="no prompt and no metadata"):
        load_dataset(path)


def test_empty_metadata_with_a_prompt_still_normalizes(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"metadata": {}, "user_prompt": "hi"}])))
    assert row.metadata is None
    assert row.initial_messages == [{"role": "user", "content": "hi"}]


def test_columns_outside_the_contract_are_ignored(write_jsonl: Any) -> None:
    row = _only(
        load_dataset(write_jsonl([{"user_prompt": "hi", "ground_truth": "x", "difficulty": 3}]))
    )
    assert row.initial_messages == [{"role": "user", "content": "hi"}]
    assert row.raw["difficulty"] == 3  # still reachable through the raw row


def test_empty_text_is_absent_but_whitespace_is_kept(write_jsonl: Any) -> None:
    path = write_jsonl([{"system_prompt": "", "user_prompt": "  ", "ground_truth": "x"}])
    assert _only(load_dataset(path)).initial_messages == [{"role": "user", "content": "  "}]


def test_non_string_text_values_are_stringified(write_jsonl: Any) -> None:
    row = _only(load_dataset(write_jsonl([{"user_prompt": 12, "ground_truth": 4.5}])))
    assert row.initial_messages == [{"role": "user", "content": "12"}]
    assert row.label == "4.5"


# ---------------------------------------------------------------- identity and position


def test_row_key_is_the_id_column_when_present(write_jsonl: Any) -> None:
    path = write_jsonl(
        [
            {"id": "alpha", "user_prompt": "a", "ground_truth": "a"},
            {"id": 7, "user_prompt": "b", "ground_truth": "b"},
            {"id": None, "user_prompt": "c", "ground_truth": "c"},
        ]
    )
    assert [row.key for row in load_dataset(path)] == ["alpha", "7", "row-2"]


def test_row_key_falls_back_to_the_file_offset(ten_rows: Path) -> None:
    rows = load_dataset(ten_rows, rows="4,8")
    assert [row.key for row in rows] == ["row-4", "row-8"]


def test_duplicate_ids_name_both_rows(write_jsonl: Any) -> None:
    path = write_jsonl(
        [
            {"id": "a", "user_prompt": "x", "ground_truth": "x"},
            {"id": "b", "user_prompt": "x", "ground_truth": "x"},
            {"id": "a", "user_prompt": "x", "ground_truth": "x"},
        ]
    )
    with pytest.raises(DatasetError, match="duplicate id 'a': row 1 has the same id") as caught:
        load_dataset(path)
    assert (caught.value.row, caught.value.column) == (3, "id")


def test_rows_remember_their_file_line(write_jsonl: Any) -> None:
    row = {"user_prompt": "x", "ground_truth": "y"}
    path = write_jsonl([row, "", "   ", row])
    rows = load_dataset(path)
    assert [(r.source_index, r.line) for r in rows] == [(0, 1), (1, 4)]


def test_a_csv_row_spanning_lines_reports_its_first_line(write_csv: Any) -> None:
    path = write_csv(["user_prompt", "ground_truth"], [["one\ntwo\nthree", "a"], ["q", "b"]])
    rows = load_dataset(path)
    assert [r.line for r in rows] == [2, 5]
    assert rows[0].initial_messages[0]["content"] == "one\ntwo\nthree"


# ---------------------------------------------------------------- formats


def _mixed_rows() -> list[dict[str, Any]]:
    return [
        {"id": "r1", "system_prompt": "sys", "user_prompt": "q1", "ground_truth": "a1"},
        {"id": "r2", "system_prompt": "", "user_prompt": "q, with comma", "ground_truth": "a2"},
        {"id": "r3", "system_prompt": "s", "user_prompt": 'say "hi"\nplease', "ground_truth": "3"},
    ]


def _normalised(rows: list[DatasetRow]) -> list[tuple[Any, ...]]:
    return [(r.index, r.source_index, r.key, r.initial_messages, r.label, r.metadata) for r in rows]


def test_jsonl_and_csv_normalize_identically(write_jsonl: Any, write_csv: Any) -> None:
    data = _mixed_rows()
    header = list(data[0])
    from_jsonl = load_dataset(write_jsonl(data))
    from_csv = load_dataset(write_csv(header, [[row[k] for k in header] for row in data]))
    assert _normalised(from_jsonl) == _normalised(from_csv)


def test_parquet_normalizes_identically(write_jsonl: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    data = _mixed_rows()
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist(data), path)
    rows = load_dataset(path)
    assert _normalised(rows) == _normalised(load_dataset(write_jsonl(data)))
    assert rows[0].line is None


def test_parquet_struct_metadata_becomes_a_dict(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "meta.parquet"
    pq.write_table(pa.Table.from_pylist([{"metadata": {"a": 1, "b": "x"}}]), path)
    assert _only(load_dataset(path)).metadata == {"a": 1, "b": "x"}


def test_a_corrupt_parquet_file_is_a_dataset_error(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        load_dataset(path)


def test_parquet_without_pyarrow_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)
    with pytest.raises(UsageError, match=r'pip install "pytest-osmosis\[parquet\]"'):
        load_dataset(path)


def test_unknown_extension_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"unsupported file type '\.json'") as caught:
        load_dataset(path)
    assert caught.value.fix is not None and ".jsonl" in caught.value.fix


def test_extensions_match_case_insensitively(tmp_path: Path) -> None:
    path = tmp_path / "DATA.JSONL"
    path.write_text(json.dumps({"user_prompt": "q", "ground_truth": "a"}) + "\n", encoding="utf-8")
    assert len(load_dataset(path)) == 1


def test_a_missing_file_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="file not found") as caught:
        load_dataset(tmp_path / "nope.jsonl")
    assert caught.value.path == str(tmp_path / "nope.jsonl")


def test_an_empty_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(DatasetError, match="the file is empty"):
        load_dataset(path)


def test_a_file_of_blank_lines_has_no_rows(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="no rows"):
        load_dataset(write_jsonl(["", "  "]))


def test_a_csv_with_only_a_header_has_no_rows(write_csv: Any) -> None:
    with pytest.raises(DatasetError, match="no rows"):
        load_dataset(write_csv(["user_prompt", "ground_truth"], []))


# ---------------------------------------------------------------- bad input is located


def test_malformed_jsonl_names_the_line(write_jsonl: Any) -> None:
    ok = json.dumps({"user_prompt": "q", "ground_truth": "a"})
    path = write_jsonl([ok] * 6 + ['{"user_prompt": "q" "ground_truth": "a"}'])
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, row 7: invalid JSON (Expecting ',' delimiter")
    assert "\n  fix: " in message
    assert caught.value.row == 7


def test_a_jsonl_line_that_is_not_an_object_is_rejected(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="must be a JSON object, got array"):
        load_dataset(write_jsonl(["[1, 2]"]))


def test_nan_is_not_accepted_as_json(write_jsonl: Any) -> None:
    with pytest.raises(DatasetError, match="invalid JSON \\(NaN is not valid JSON\\)"):
        load_dataset(write_jsonl(['{"user_prompt": "q", "ground_truth": NaN}']))


def test_a_csv_row_with_the_wrong_cell_count_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("user_prompt,ground_truth\nq,a\nq, unquoted, comma,a\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"expected 2 cells .* got 4") as caught:
        load_dataset(path)
    assert caught.value.row == 3
    assert caught.value.fix is not None and "quote" in caught.value.fix


def test_a_csv_missing_a_required_column_is_one_column_error(write_csv: Any) -> None:
    path = write_csv(["prompt", "ground_truth"], [["q", "a"]] * 50)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.column == "user_prompt"
    assert caught.value.row is None
    assert "'prompt'" in str(caught.value)


def test_a_csv_header_with_repeated_columns_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("user_prompt,ground_truth,user_prompt\nq,a,b\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="repeats column"):
        load_dataset(path)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    good = json.dumps({"user_prompt": "q", "ground_truth": "a"}).encode()
    path.write_bytes(good + b"\n" + b'{"user_prompt": "\xff"}\n')
    with pytest.raises(DatasetError, match="not valid UTF-8") as caught:
        load_dataset(path)
    assert caught.value.row == 2


def test_a_utf8_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    for name, body in (
        ("bom.csv", "user_prompt,ground_truth\nq,a\n"),
        ("bom.jsonl", '{"user_prompt": "q", "ground_truth": "a"}\n'),
    ):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + body.encode())
        assert _only(load_dataset(path)).initial_messages == [{"role": "user", "content": "q"}]


def test_huge_cells_load(write_jsonl: Any, write_csv: Any) -> None:
    big = "x" * 2_000_000
    assert _only(load_dataset(write_jsonl([{"user_prompt": big, "ground_truth": "a"}]))).label
    row = _only(load_dataset(write_csv(["user_prompt", "ground_truth"], [[big, "a"]])))
    assert row.initial_messages[0]["content"] == big


def test_up_to_five_problems_are_reported_together(write_jsonl: Any) -> None:
    path = write_jsonl(["{bad"] * 8)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 5 problems in this dataset:")
    assert message.count("invalid JSON") == 5
    assert message.rstrip().endswith("... (showing first 5 errors)")


def test_a_few_problems_are_listed_without_the_truncation_note(write_jsonl: Any) -> None:
    ok = {"user_prompt": "q", "ground_truth": "a"}
    path = write_jsonl([ok, "{bad", ok, {"user_prompt": "q"}])
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert "2 problems" in message
    assert "  - row 2: invalid JSON" in message
    assert "  - row 4, column 'ground_truth':" in message
    assert "showing first" not in message


def test_a_rows_digest_is_its_content_whatever_the_rows_around_it(
    write_jsonl: Any, write_csv: Any
) -> None:
    first = {"id": "a", "user_prompt": "q", "ground_truth": "1"}
    second = {"id": "b", "user_prompt": "r", "ground_truth": "2"}
    digests = {row.key: row.digest for row in load_dataset(write_jsonl([first, second]))}
    reordered = load_dataset(write_jsonl([second, first], name="reordered.jsonl"))
    assert {row.key: row.digest for row in reordered} == digests
    changed = load_dataset(write_jsonl([first, {**second, "ground_truth": "3"}], name="c.jsonl"))
    assert [row.digest == digests[row.key] for row in changed] == [True, False]
    assert digests["a"] != digests["b"]
    # A row read from cells, or written by hand, has one too.
    csv_rows = load_dataset(write_csv(list(first), [list(first.values())]))
    assert csv_rows[0].digest == row_from_dict(first).digest
