"""validate_dataset: the upload contract, reported instead of raised."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.dataset import DatasetReport, load_dataset, validate_dataset
from osmosis_rollout.errors import DatasetError


def _rows(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"user_prompt": f"q{i}", "ground_truth": f"a{i}", **extra} for i in range(n)]


def _messages(report: DatasetReport) -> list[str]:
    return [str(error) for error in report.errors]


def test_a_valid_file_reports_its_mode_and_size(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(_rows(6)))
    assert report.ok
    assert (report.mode, report.n_rows, report.warnings) == ("prompt", 6, [])
    assert report.format().endswith("valid prompt dataset, 6 rows")


def test_fewer_than_four_rows_is_a_warning_not_an_error(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(_rows(3)))
    assert report.ok
    assert report.warnings == ["only 3 rows: the platform needs at least 4 to upload this dataset"]


def test_metadata_column_selects_metadata_mode(write_csv: Any) -> None:
    path = write_csv(["metadata"], [['{"a": 1}']] * 4)
    report = validate_dataset(path)
    assert report.ok and report.mode == "metadata"


def test_label_alias_satisfies_the_required_columns(write_csv: Any) -> None:
    assert validate_dataset(write_csv(["user_prompt", "label"], [["q", "a"]] * 4)).ok


def test_missing_required_columns_are_one_error_naming_each(write_csv: Any) -> None:
    report = validate_dataset(write_csv(["prompt", "answer"], [["q", "a"]] * 10))
    assert [error.column for error in report.errors] == ["user_prompt"]
    message = str(report.errors[0])
    assert "lacks 'user_prompt' (did you mean 'prompt'?) and 'ground_truth'" in message


def test_jsonl_lines_must_share_the_first_lines_keys(write_jsonl: Any) -> None:
    rows = _rows(4)
    rows[2] = {"user_prompt": "q", "ground_truth": "a", "extra": 1}
    del rows[3]["ground_truth"]
    rows[3]["label"] = "a"
    report = validate_dataset(write_jsonl(rows))
    assert _messages(report)[0].endswith(
        "row 3: keys differ from the first row (extra 'extra')\n"
        "  fix: give every line the same keys (use null for a missing value)"
    )
    assert "missing 'ground_truth'; extra 'label'" in _messages(report)[1]
    # The same file loads: key uniformity is an upload rule, not a normalisation rule.
    assert len(load_dataset(write_jsonl(rows))) == 4


def test_metadata_mode_requires_a_non_empty_object_on_every_row(write_jsonl: Any) -> None:
    rows: list[dict[str, Any]] = [{"metadata": {"a": 1}, "user_prompt": "q"} for _ in range(4)]
    rows[1]["metadata"] = {}
    report = validate_dataset(write_jsonl(rows))
    assert len(report.errors) == 1
    assert report.errors[0].row == 2 and "metadata is empty" in str(report.errors[0])


def test_metadata_may_not_hold_an_empty_nested_object(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl([{"metadata": {"a": {"b": {}}}}] * 4))
    assert "empty object at $.a.b" in _messages(report)[0]


def test_metadata_integers_must_fit_in_64_bits(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl([{"metadata": {"big": [2**63]}}] * 4))
    assert "integer at $.big[] does not fit in 64 bits" in _messages(report)[0]


def test_metadata_types_must_agree_across_rows(write_jsonl: Any) -> None:
    rows = [
        {"metadata": {"n": 1}},
        {"metadata": {"n": 2.5}},
        {"metadata": {"n": None}},
        {"metadata": {"n": "three"}},
    ]
    report = validate_dataset(write_jsonl(rows))
    assert len(report.errors) == 1  # int/float are both numbers; null is ignored
    assert report.errors[0].row == 4
    assert "at $.n is string here but number in earlier rows" in str(report.errors[0])


def test_a_duplicate_id_is_an_error(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(_rows(4, id="same")))
    assert {error.column for error in report.errors} == {"id"}


def test_validation_stops_after_five_errors(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(["{bad"] * 9))
    assert len(report.errors) == 5
    assert report.truncated
    assert report.format().splitlines()[-1] == "  ... (showing first 5 errors)"


def test_exactly_five_errors_are_not_marked_truncated(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(["{bad"] * 5))
    assert len(report.errors) == 5 and not report.truncated


def test_validation_never_raises_for_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "data.txt"
    bad.write_text("hello", encoding="utf-8")
    for path in (bad, tmp_path / "missing.csv", tmp_path):
        report = validate_dataset(path)
        assert not report.ok


def test_raise_for_errors_raises_one_dataset_error(write_jsonl: Any) -> None:
    report = validate_dataset(write_jsonl(["{bad", "[]"]))
    with pytest.raises(DatasetError, match="2 problems in this dataset"):
        report.raise_for_errors()
    validate_dataset(write_jsonl(_rows(4))).raise_for_errors()


def test_a_parquet_metadata_column_must_be_struct_or_string(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist([{"metadata": i} for i in range(4)]), path)
    report = validate_dataset(path)
    assert "the metadata column has type int64" in _messages(report)[0]


def test_a_valid_parquet_file_passes(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist([{"metadata": {"a": i}} for i in range(4)]), path)
    report = validate_dataset(path)
    assert report.ok and (report.mode, report.n_rows) == ("metadata", 4)


def test_parquet_is_skipped_with_a_warning_without_pyarrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    report = validate_dataset(path)
    assert report.ok
    assert "pyarrow is not installed" in report.warnings[0]
    assert report.format().splitlines()[0] == f"{path}: no errors found"


def _counting_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the JSON documents decoded from here on (json.loads goes through decode)."""
    count = [0]
    decode = json.JSONDecoder.decode

    def counted(self: json.JSONDecoder, text: str, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return decode(self, text, *args, **kwargs)

    monkeypatch.setattr(json.JSONDecoder, "decode", counted)
    return count


def test_validating_the_file_just_loaded_decodes_no_row_again(
    write_jsonl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plugin loads a dataset to collect its rows, then its preflight check validates it.
    path = write_jsonl(_rows(20))
    load_dataset(path)
    decodes = _counting_decodes(monkeypatch)
    report = validate_dataset(path)
    assert decodes[0] == 0
    assert (report.ok, report.mode, report.n_rows, report.warnings) == (True, "prompt", 20, [])


def test_the_report_of_a_loaded_file_is_the_report_of_a_fresh_read(
    write_jsonl: Any, tmp_path: Path
) -> None:
    rows = _rows(8, extra="x")
    rows[3] = {"user_prompt": "q", "ground_truth": "a"}  # keys differ: an upload error only
    path = write_jsonl(rows)
    assert len(load_dataset(path, limit=2)) == 2
    fresh = tmp_path / "copy.jsonl"
    fresh.write_bytes(path.read_bytes())
    remembered, read = validate_dataset(path, min_rows=10), validate_dataset(fresh, min_rows=10)
    assert remembered.format() == read.format().replace(str(fresh), str(path))
    assert (remembered.n_rows, remembered.truncated) == (read.n_rows, read.truncated) == (8, False)
    assert "keys differ from the first row" in remembered.format()


def test_a_file_changed_after_loading_is_read_again(write_jsonl: Any) -> None:
    path = write_jsonl(_rows(4))
    load_dataset(path)
    # The same size, changed bytes: a column renamed in the third row.
    path.write_bytes(path.read_bytes().replace(b'{"user_prompt": "q2"', b'{"user_prompx": "q2"'))
    report = validate_dataset(path)
    assert not report.ok
    assert "row 3" in str(report.errors[0])
