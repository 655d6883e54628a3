"""The plugin's pure functions: row-pass rules, verdicts, failure text, baselines and gates."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
from osmosis_rollout.runs.run_verdict import decide
from pytest_osmosis.options import OsmosisSettings, RowPassRule, parse_row_pass
from pytest_osmosis.results.gates import apply_gates, compare, load_baseline
from pytest_osmosis.results.report import RunReport
from pytest_osmosis.results.report_redaction import _RolloutRecords
from pytest_osmosis.results.verdict import (
    attempt_passes,
    classify,
    decide_row,
    failure_message,
)

ALL = RowPassRule("all")


def row_verdict(attempts: list[AttemptRecord], threshold: float, rule: RowPassRule) -> RowRecord:
    return decide_row(("test.jsonl::row-0", "test.jsonl", "row-0"), attempts, threshold, rule)


def attempt(run: int = 0, **fields: Any) -> AttemptRecord:
    values: dict[str, Any] = {
        "row_key": "row-0",
        "row_index": 0,
        "source_row_index": 0,
        "run_index": run,
        "rollout_id": f"row-0.{run}.abcd1234",
        "status": "success",
        "reward": 1.0,
    }
    values.update(fields)
    return AttemptRecord(**values)


def failed(error_type: str, message: str, phase: str | None = None, run: int = 0) -> AttemptRecord:
    return attempt(
        run,
        status="failed",
        reward=None,
        error_type=error_type,
        err_message=message,
        error_phase=phase,
    )


# -- row-pass rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "passed", "total", "expected"),
    [
        ("all", 3, 3, True),
        ("all", 2, 3, False),
        ("any", 1, 3, True),
        ("any", 0, 3, False),
        ("majority", 2, 3, True),
        ("majority", 2, 4, False),
        ("at_least:2", 2, 5, True),
        ("at_least:2", 1, 5, False),
        ("rate:0.5", 2, 4, True),
        ("rate:0.5", 1, 4, False),
        ("any", 0, 0, False),
    ],
)
def test_row_pass_rules_count_passed_attempts(
    rule: str, passed: int, total: int, expected: bool
) -> None:
    assert parse_row_pass(rule).passes(passed, total) is expected


@pytest.mark.parametrize("text", ["at_least:0", "at_least:1.5", "rate:2", "rate:x", "most"])
def test_an_invalid_row_pass_rule_names_the_rule_and_the_choices(text: str) -> None:
    with pytest.raises(pytest.UsageError, match=r"invalid rule .*all\|any\|majority"):
        parse_row_pass(text)


def test_a_rule_describes_itself_as_written() -> None:
    assert [parse_row_pass(t).describe() for t in ("all", "at_least:3", "rate:0.25")] == [
        "all",
        "at_least:3",
        "rate:0.25",
    ]


# -- classification and verdicts -----------------------------------------------------------


def test_classify_maps_wire_results_like_the_official_eval() -> None:
    assert classify("success", 0.5, False, None, None) == ("success", 0.5, None)
    assert classify("success", 0.5, True, None, None) == ("skipped", None, None)
    assert classify("failure", None, False, "timeout", "slow") == ("failed", None, "timeout")
    assert classify("failure", None, False, None, "boom") == ("failed", None, "boom")
    # No category and no message: the grader did not run (no Grader, or no label).
    assert classify("failure", None, False, None, None) == ("success", None, None)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"reward": 1.0}, True),
        ({"reward": 0.99}, False),
        ({"reward": None}, False),
        ({"reward": math.nan}, False),
        ({"reward": math.inf}, False),
        ({"status": "skipped", "reward": 1.0}, False),
    ],
)
def test_an_attempt_passes_on_a_finite_reward_at_the_threshold(
    fields: dict[str, Any], expected: bool
) -> None:
    assert attempt_passes(attempt(**fields), 1.0) is expected


def test_skipped_attempts_leave_the_row_verdict() -> None:
    verdict = row_verdict(
        [attempt(0, reward=1.0), attempt(1, status="skipped", reward=None)], 1.0, ALL
    )
    assert (verdict.verdict, verdict.passed_attempts, verdict.scored_attempts) == ("passed", 1, 1)


def test_a_row_of_only_skipped_attempts_is_skipped() -> None:
    verdict = row_verdict([attempt(status="skipped", reward=None)], 1.0, ALL)
    assert verdict.verdict == "skipped"


def test_the_rule_decides_a_row_with_mixed_attempts() -> None:
    attempts = [attempt(0, reward=1.0), attempt(1, reward=0.0), attempt(2, reward=1.0)]
    assert row_verdict(attempts, 1.0, ALL).verdict == "failed"
    assert row_verdict(attempts, 1.0, RowPassRule("majority")).verdict == "passed"
    assert [a.passed for a in attempts] == [True, False, True]


# -- failure text --------------------------------------------------------------------------


def _message(attempts: list[AttemptRecord], rule: RowPassRule = ALL, **kwargs: Any) -> str:
    verdict = row_verdict(attempts, 1.0, rule)
    return failure_message(
        row_desc="row-0 (test.jsonl line 1)",
        verdict=verdict,
        threshold=1.0,
        rule=rule,
        label="42",
        **kwargs,
    )


def test_a_reward_miss_shows_reward_threshold_label_answer_and_trajectory() -> None:
    text = _message(
        [
            attempt(
                reward=0.0, last_assistant="I do not know", trajectory_filename="/t/trajectory.json"
            )
        ]
    )
    assert text.splitlines() == [
        "row-0 (test.jsonl line 1): reward 0 < threshold 1",
        "  last assistant message: I do not know",
        "  label: 42",
        "  rollout id: row-0.0.abcd1234",
        "  trajectory: /t/trajectory.json",
        "  fix: compare the last assistant message with the label; rerun just this row with -k",
    ]


def test_a_workflow_failure_names_its_category_and_the_log() -> None:
    text = _message(
        [failed("agent_error", "the tool exploded", "workflow")],
        log_path="/run/rollouts.log",
    )
    assert text.splitlines()[0] == (
        "row-0 (test.jsonl line 1): rollout failed [agent_error]: the tool exploded"
    )
    assert "  workflow traceback: /run/rollouts.log" in text.splitlines()


def test_a_grader_failure_is_blamed_on_the_grader() -> None:
    text = _message(
        [
            failed(
                "validation_error",
                "the grader set reward=nan; a reward must be a finite number",
                "grader",
            )
        ],
        log_path="/run/rollouts.log",
    )
    assert text.splitlines()[0] == (
        "row-0 (test.jsonl line 1): the grader failed [validation_error]: "
        "the grader set reward=nan; a reward must be a finite number"
    )
    assert "  grader traceback: /run/rollouts.log" in text.splitlines()
    assert "rollout failed" not in text


def test_a_timeout_points_at_the_deadline_flags_not_at_a_traceback() -> None:
    text = _message(
        [failed("timeout", "workflow exceeded its 0.2s deadline", "workflow")],
        log_path="/run/rollouts.log",
    )
    assert "traceback" not in text
    assert text.splitlines()[-1].startswith("  fix: raise --osmosis-agent-timeout")


def test_repeated_attempts_list_each_and_show_the_first_that_missed() -> None:
    text = _message(
        [
            attempt(0, reward=1.0, last_assistant="42"),
            failed("agent_error", "boom", "grader", run=1),
            attempt(2, reward=0.0, last_assistant="41"),
        ]
    )
    lines = text.splitlines()
    assert lines[:4] == [
        "row-0 (test.jsonl line 1): 1/3 attempts reached reward >= 1; rule all not met",
        "  attempt 0: reward 1",
        "  attempt 1: grader failed [agent_error]: boom",
        "  attempt 2: reward 0",
    ]
    assert "  rollout id: row-0.1.abcd1234" in lines


def test_a_cassette_miss_says_how_to_re_record() -> None:
    text = _message([failed("cassette_miss", "miss")])
    assert "--osmosis-record-mode new_episodes" in text.splitlines()[-1]


# -- baseline and gates --------------------------------------------------------------------


def _document(verdicts: dict[str, str], rewards: dict[str, float]) -> dict[str, Any]:
    return {
        "row_verdicts": [{"nodeid": k, "verdict": v} for k, v in verdicts.items()],
        "rows": [{"nodeid": k, "reward": r} for k, r in rewards.items()],
    }


def test_compare_finds_regressed_improved_new_and_gone_rows_and_reward_deltas() -> None:
    before = _document(
        {"a": "passed", "b": "failed", "c": "passed", "gone": "passed"},
        {"a": 1.0, "b": 0.0, "c": 1.0},
    )
    after = _document({"a": "failed", "b": "passed", "c": "passed", "new": "passed"}, {"a": 0.25})
    assert compare(before, after) == {
        "regressed": ["a"],
        "improved": ["b"],
        "new": ["new"],
        "gone": ["gone"],
        "reward_deltas": {"a": -0.75},
    }


def test_a_baseline_that_is_not_a_report_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"summary": {}}))
    with pytest.raises(pytest.UsageError, match=r"not a pytest-osmosis report.*report\.json"):
        load_baseline(path)
    with pytest.raises(pytest.UsageError, match="file not found"):
        load_baseline(tmp_path / "missing.json")


def _report(tmp_path: Path, verdicts: list[str]) -> RunReport:
    report = RunReport(tmp_path / "out", pass_threshold=1.0, settings={})
    for i, verdict in enumerate(verdicts):
        reward = 1.0 if verdict == "passed" else 0.0
        report.journal.write_row(
            RowRecord(
                nodeid=f"data.jsonl::row-{i}",
                dataset="data.jsonl",
                row_key=f"row-{i}",
                verdict=verdict,
                attempts=[AttemptRecord(row_index=i, status="success", reward=reward)],
            )
        )
    report.close()
    report.finish(
        selected=[f"data.jsonl::row-{i}" for i in range(len(verdicts))],
        finished={"stopped_by": None, "interrupted": False},
    )
    return report


def _exit_status(
    document: dict[str, Any], gates: list[tuple[str, bool]], other_failures: int = 0
) -> int:
    """The exit status of a gated run whose gates decided ``gates`` (as the run's end decides it)."""
    summary = document["summary"]
    return decide(summary, gates=gates, gated=True, other_failures=other_failures).exit_status


def test_the_pass_rate_gate_forgives_row_misses_above_it(tmp_path: Path) -> None:
    report = _report(tmp_path, ["passed", "passed", "passed", "failed"])
    document = report.document()
    gates = apply_gates(OsmosisSettings(min_pass_rate=0.75), document, baseline=None)
    assert _exit_status(document, gates.verdicts) == pytest.ExitCode.OK
    assert gates.extra["gate"] == {
        "min_pass_rate": 0.75,
        "pass_rate": 0.75,
        "passed": True,
        "measure": "pass rate",
        "estimand": "the pass rate on the task the 4 rows are drawn from (wilson at 95%)",
    }
    assert gates.verdicts == [
        ("gate: pass rate 75.0% >= 75.0%: passed (1 row(s) missed, see above)", True)
    ]


def test_the_gate_never_forgives_a_failure_that_is_not_a_row(tmp_path: Path) -> None:
    report = _report(tmp_path, ["passed", "passed", "passed", "failed"])
    document = report.document()
    gates = apply_gates(OsmosisSettings(min_pass_rate=0.5), document, baseline=None)
    assert _exit_status(document, gates.verdicts) == pytest.ExitCode.OK
    assert _exit_status(document, gates.verdicts, other_failures=1) == pytest.ExitCode.TESTS_FAILED


def test_below_the_gate_the_run_fails(tmp_path: Path) -> None:
    report = _report(tmp_path, ["passed", "failed"])
    document = report.document()
    gates = apply_gates(OsmosisSettings(min_pass_rate=0.9), document, baseline=None)
    assert _exit_status(document, gates.verdicts) == pytest.ExitCode.TESTS_FAILED
    assert gates.verdicts == [("gate: pass rate 50.0% < 90.0%: failed", False)]


def test_a_regression_fails_the_run_only_with_fail_on_regression(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(
        json.dumps(
            _document(
                {"data.jsonl::row-0": "passed", "data.jsonl::row-1": "passed"},
                {"data.jsonl::row-0": 1.0, "data.jsonl::row-1": 1.0},
            )
        )
    )
    report = _report(tmp_path, ["passed", "failed"])
    for strict in (False, True):
        settings = OsmosisSettings(baseline=str(baseline), fail_on_regression=strict)
        gates = apply_gates(settings, report.document(), baseline=baseline)
        assert gates.verdicts == (
            [
                (
                    "baseline gate: 1 row regressed: failed (--osmosis-fail-on-regression fails "
                    "on any regressed row; with --osmosis-gate-confidence only a significant "
                    "regression fails)",
                    False,
                )
            ]
            if strict
            else []
        )
        assert gates.extra["baseline"]["regressed"] == ["data.jsonl::row-1"]
        assert "  REGRESSED data.jsonl::row-1  passed -> failed, reward change -1" in gates.lines


def test_a_blocked_loop_is_shown_and_the_fix_says_what_to_change() -> None:
    blocked = failed("timeout", "workflow exceeded its 1s deadline", "workflow")
    blocked.blocked_loop = "the rollout event loop was blocked for 3.0s by d::row-1#0 at m.py:9"
    lines = _message([blocked], log_path="/run/rollouts.log").splitlines()
    assert (
        "  blocked loop: the rollout event loop was blocked for 3.0s by d::row-1#0 at m.py:9"
        in (lines)
    )
    assert lines[-1].startswith("  fix: blocking code in an async function stalls every rollout")


def test_rollout_ids_are_readable_unique_single_path_segments() -> None:
    import re

    from osmosis_rollout._internal.ids import is_valid_rollout_id
    from pytest_osmosis.run.attempts import make_rollout_id

    # 32 random bits each: 200 ids collide with a chance of about 5 in a million.
    ids = {make_rollout_id("data/test.jsonl::row 7", 2) for _ in range(200)}
    assert len(ids) == 200
    for rollout_id in ids:
        assert re.fullmatch(r"data_test\.jsonl_row_7\.2\.[0-9a-f]{8}", rollout_id)
        assert is_valid_rollout_id(rollout_id)
    assert make_rollout_id("../..", 0).startswith("row.0.")


def _journaled_report(tmp_path: Path, durations: list[float]) -> RunReport:
    """A report whose rows were journaled by this process."""
    report = RunReport(tmp_path / "out", pass_threshold=1.0, settings={"n": 1})
    for i, ms in enumerate(durations):
        attempt = AttemptRecord(
            row_key=f"row-{i}", status="success", reward=1.0, duration_ms=ms, started_at=100.0 + i
        )
        record = RowRecord(
            nodeid=f"data.jsonl::row-{i}",
            dataset="data.jsonl",
            row_key=f"row-{i}",
            verdict="passed",
            attempts=[attempt],
            stats={"attempts": 1, "passed_attempts": 1, "flaky": False},
        )
        report.journal.write_row(record)
    report.close()
    return report


def test_every_report_file_and_the_terminal_summary_come_from_one_reading_of_the_journal(
    tmp_path: Path,
) -> None:
    from osmosis_rollout.runs.report import build_report
    from pytest_osmosis.results.report import summary_segments

    report = _journaled_report(tmp_path, [5000.0, 9000.0, 5000.0, 9000.0, 1000.0, 9000.0])
    selected = [f"data.jsonl::row-{i}" for i in range(7)]  # row-6 never ran
    finished = {"stopped_by": None, "interrupted": False}
    report.finish(selected=selected, finished=finished)
    (tmp_path / "out" / "rows.jsonl").unlink()  # read once: nothing reads it again
    document = report.document()
    report.write_json(tmp_path / "report.json")
    report.write_json(tmp_path / "again.json")
    text = (tmp_path / "report.json").read_text()
    assert (tmp_path / "again.json").read_text() == text
    assert json.loads(text) == document
    assert text == json.dumps(document, indent=2) + "\n"
    expected = build_report(
        report.rows, pass_threshold=1.0, selected=selected, finished=finished, config={"n": 1}
    )
    assert document == expected
    assert document["not_run"] == ["data.jsonl::row-6"]
    # Keys in the record's order, with no bookkeeping.
    assert list(document["rows"][0])[:3] == ["row_key", "row_index", "source_row_index"]
    assert list(document["row_verdicts"][0])[4:] == ["attempts", "passed_attempts", "flaky"]
    # The slowest rollouts, longest first, equal ones in row order: as many as asked.
    for asked, named in [
        (5, "row-1 9.00s, row-3 9.00s, row-5 9.00s, row-0 5.00s, row-2 5.00s"),
        (2, "row-1 9.00s, row-3 9.00s"),
        (7, "row-1 9.00s, row-3 9.00s, row-5 9.00s, row-0 5.00s, row-2 5.00s, row-4 1.00s"),
    ]:
        segments = summary_segments(report, document["summary"], slowest=asked)
        lines = ["".join(text for text, _ in line) for line in segments]
        assert f"slowest: {named}" in lines
        assert "rollout time: sum 38.00s  median 7.000s  wall 14.00s" in lines


def test_pytests_log_capture_leaves_out_rollout_records_only_while_they_are_routed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leave_out = _RolloutRecords(threading.get_ident())

    def record(name: str, thread: int | None) -> logging.LogRecord:
        made = logging.LogRecord(name, logging.INFO, __file__, 1, "rollout finished", None, None)
        made.thread = thread
        return made

    elsewhere = threading.get_ident() + 1
    logger = logging.getLogger("osmosis_rollout")
    monkeypatch.setattr(logger, "propagate", False)  # the engine's route to rollouts.log
    assert not leave_out.filter(record("osmosis_rollout.execution", elsewhere))
    assert leave_out.filter(record("osmosis_rollout.execution", threading.get_ident()))
    assert leave_out.filter(record("user.code", elsewhere))

    # Made on a loop of the test's own (pytest-asyncio's, say) on pytest's thread: kept.
    async def made_on_the_loop(name: str) -> bool:
        return leave_out.filter(record(name, threading.get_ident()))

    assert asyncio.run(made_on_the_loop("osmosis_rollout.execution"))
    monkeypatch.setattr(logger, "propagate", True)  # no route: pytest's capture is all there is
    assert leave_out.filter(record("osmosis_rollout.execution", elsewhere))


def test_a_blank_grader_reason_adds_nothing_to_the_verbose_reward_word() -> None:
    from pytest_osmosis.results.report import reward_word

    missed = {"status": "success", "reward": 0.0, "passed": False, "grader": {"reason": " \n "}}
    assert reward_word({"attempts": [missed]}, 1.0) == "reward=0.0 < 1.0"
    said = {**missed, "grader": {"reason": "\nWARNING graders.x: expected 4, got 3\nmore"}}
    assert reward_word({"attempts": [said]}, 1.0) == "reward=0.0 < 1.0 (expected 4, got 3)"
