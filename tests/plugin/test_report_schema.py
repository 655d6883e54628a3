"""report.json has a published JSON Schema, and what a run writes conforms to it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from workspaces import multiply_rows

from osmosis_rollout.runs.journal import RunJournalError, read_journal
from osmosis_rollout.runs.report_model import (
    CI_KEYS,
    REPORT_SCHEMA,
    AttemptRecord,
    ReportAttempt,
    ReportFileError,
    ReportRowVerdict,
    RowRecord,
    read_report,
    report_json_schema,
)

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = REPO / "docs" / "report.schema.json"
POLICY = "--osmosis-policy=policy.py:policy"


def test_the_published_schema_is_the_one_the_models_generate() -> None:
    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    assert published == report_json_schema(), (
        "docs/report.schema.json is stale: regenerate it with "
        "`python -m osmosis_rollout.runs.report_model > docs/report.schema.json`"
    )


def test_a_runs_report_conforms_to_the_published_schema_and_names_its_version(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(3))
    report_path = root / "report.json"
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, f"--osmosis-report={report_path}"
    )
    assert result.ret == 0, result.stdout.str()
    document = json.loads(report_path.read_text(encoding="utf-8"))
    jsonschema.validate(document, json.loads(PUBLISHED.read_text(encoding="utf-8")))
    assert document["schema"] == REPORT_SCHEMA
    report = read_report(report_path)
    assert [v.verdict for v in report.row_verdicts] == ["passed"] * 3
    assert report.summary.complete is True


def test_a_file_that_is_not_a_report_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"summary": {}, "row_verdicts": [{"verdict": "passed"}]}))
    with pytest.raises(ReportFileError, match=r"other\.json.*row_verdicts\.0\.nodeid"):
        read_report(path)


def test_every_key_a_run_writes_is_named_with_its_meaning(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(3, wrong={1}))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out", "--osmosis-n=2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    document = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    journal = [json.loads(line) for line in (root / "out" / "rows.jsonl").read_text().splitlines()]
    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    defs = published["$defs"]

    def undescribed(model: str, keys: set[str]) -> list[str]:
        properties = defs[model]["properties"]
        return sorted(
            k for k in keys if k not in properties or not properties[k].get("description")
        )

    assert undescribed("ReportSummary", set(document["summary"])) == []
    assert undescribed("RowCounts", set(document["summary"]["rows"])) == []
    assert undescribed("ReportAttempt", {k for row in document["rows"] for k in row}) == []
    assert undescribed("ReportRowVerdict", {k for v in document["row_verdicts"] for k in v}) == []
    assert undescribed("RowRecord", {k for line in journal for k in line}) == []
    attempts = {k for line in journal for a in line["attempts"] for k in a}
    assert undescribed("AttemptRecord", attempts) == []
    assert undescribed("RowStats", {k for line in journal for k in line["stats"]}) == []
    assert undescribed("Fingerprint", set(journal[0]["fingerprint"])) == []
    top = published["properties"]
    assert all(top[k].get("description") for k in document if k != "summary")


def test_a_journal_line_that_breaks_the_model_names_the_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    line = {"nodeid": "d::row-0", "verdict": "passed", "attempts": [{"status": "success"}]}
    bad = {**line, "nodeid": "d::row-1", "attempts": [{"status": "success", "reward": "high"}]}
    path.write_text(json.dumps(line) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RunJournalError, match=r"rows\.jsonl: line 2 .*attempts\.0\.reward"):
        read_journal(path)


def test_the_report_rows_are_views_of_the_records_with_the_models_keys() -> None:
    attempt = AttemptRecord(row_key="row-0", rollout_id="row-0.0.ab", status="success", reward=1.0)
    record = RowRecord(nodeid="d::row-0", dataset="d", verdict="passed", attempts=[attempt])
    assert set(record.report_rows()[0]) == set(ReportAttempt.model_fields)
    assert set(record.verdict_entry()) <= set(ReportRowVerdict.model_fields)


def test_a_gated_run_against_a_baseline_types_every_key_ci_reads(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(6))
    pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-report=base.json"
    ).assert_outcomes(passed=6 + 2)
    workspace(multiply_rows(6, wrong={2}))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-output=out",
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        "--osmosis-min-pass-rate=0.5",
        "--osmosis-gate-confidence=0.9",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    document = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    jsonschema.validate(document, published)
    assert set(CI_KEYS) <= set(published["required"])
    defs = published["$defs"]
    for key, model in (
        ("gate", "ReportGate"),
        ("baseline", "ReportBaseline"),
        ("config", "ReportConfig"),
        ("verdict", "RunVerdict"),
    ):
        untyped = sorted(set(document[key]) - set(defs[model]["properties"]))
        assert untyped == [], f"{key}: {untyped} are not in {model}"
    reasons = {r["name"]: r["outcome"] for r in document["verdict"]["reasons"]}
    # Six rows decide nothing at 90% (the gate is undecided, which fails), and one row
    # worse is not a significant regression.
    assert reasons == {"rows": "tolerated", "min-pass-rate": "failed", "regression": "passed"}
    assert document["baseline"]["regressed"] == ["data/test.jsonl::row-2"]
    assert document["baseline"]["reward_deltas"] == {"data/test.jsonl::row-2": -1.0}
