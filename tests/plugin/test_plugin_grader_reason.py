"""Every failing row says why in the grader's own words, on that row and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from workspaces import MAIN_PY, multiply_rows

SECRET = "sk-grader-secret-0123456789"

WORKFLOW = MAIN_PY.split("class ContainsGrader")[0]

LOGGING_GRADER = (
    WORKFLOW
    + """
import logging
import os

log = logging.getLogger("graders.multiply")


class ExplainingGrader(Grader):
    async def grade(self, ctx: GraderContext):
        answer = ctx.sample.messages[-1]["content"] or ""
        right = ctx.label in answer
        ctx.sample.metrics["answer_chars"] = len(answer)
        if not right:
            log.warning("expected %s, got %r", ctx.label, answer)
            log.warning("the judge key was %s", os.environ["JUDGE_SERVICE_API_KEY"])
        ctx.set_reward(1.0 if right else 0.0)
"""
)

JUDGED_GRADER = (
    WORKFLOW
    + """
import json

from osmosis_rollout.rubric import evaluate_rubric


def judge(request):
    asked = request.messages[-1]["content"]
    score = 1.0 if "The answer is" in asked else 0.0
    return json.dumps({"score": score, "explanation": "graded: " + asked.split("Reference")[-1][:60]})


class JudgedGrader(Grader):
    async def grade(self, ctx: GraderContext):
        answer = ctx.sample.messages[-1]["content"] or ""
        verdict = await evaluate_rubric(
            "Is it the right product?", answer, ctx.label, policy=judge
        )
        ctx.set_reward(verdict.score)
"""
)


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-output=out",
        "--junitxml=junit.xml",
        "-p",
        "no:cacheprovider",
        *args,
    )
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    return result, report


def _failure_texts(result: pytest.RunResult) -> dict[str, str]:
    """The failure section of each failing row, by row id."""
    texts: dict[str, str] = {}
    current: str | None = None
    for line in result.outlines:
        if line.startswith("_") and line.rstrip("_ ").strip("_ "):
            name = line.strip("_ ")
            current = name.rsplit("::", 1)[-1] if "row-" in name else None
            if current:
                texts[current] = ""
        elif current is not None:
            texts[current] += line + "\n"
    return texts


def test_what_a_grader_logs_is_on_its_own_rows_failure_report_and_junit_only(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_SERVICE_API_KEY", SECRET)
    workspace(multiply_rows(4, wrong={1, 3}), main=LOGGING_GRADER)
    result, report = _run(pytester, "-v")
    result.assert_outcomes(passed=2 + 2, failed=2)  # two preflight items pass

    texts = _failure_texts(result)
    assert "expected 12, got 'I do not know'" in texts["row-1"]
    assert "expected 30" not in texts["row-1"]
    assert "expected 30, got 'I do not know'" in texts["row-3"]
    assert "expected 12" not in texts["row-3"]
    assert '"answer_chars": 13' in texts["row-1"]  # the sample's metrics, beside the reason
    result.stdout.fnmatch_lines(
        ["*row-1 FAILED reward=0.0 < 1.0 (expected 12, got 'I do not know')*"]
    )

    by_row = {attempt["row_key"]: attempt for attempt in report["rows"]}
    assert "expected 12" in by_row["row-1"]["grader"]["reason"]
    assert by_row["row-1"]["grader"]["metrics"] == {"answer_chars": 13}
    assert by_row["row-0"]["grader"]["reason"] is None  # it passed and said nothing
    junit = (pytester.path / "junit.xml").read_text()
    cases = {case.get("name"): case for case in ElementTree.fromstring(junit).iter("testcase")}
    row_1_failure = cases["row-1"].find("failure")
    assert row_1_failure is not None and "expected 12, got" in (row_1_failure.text or "")
    assert "expected 30" not in ElementTree.tostring(cases["row-1"], encoding="unicode")
    assert "expected" not in ElementTree.tostring(cases["row-0"], encoding="unicode")
    # A row's JUnit time is its rollout's, not the instant its item waited for it.
    # (JUnit writes 3 decimals: 0.294013 s reads 0.294.)
    assert float(cases["row-1"].get("time") or 0) >= by_row["row-1"]["duration_ms"] / 1000 - 0.0005

    everything = result.stdout.str() + junit + (pytester.path / "out" / "report.json").read_text()
    everything += (pytester.path / "out" / "rows.jsonl").read_text()
    assert SECRET not in everything
    assert "[REDACTED:JUDGE_SERVICE_API_KEY]" in texts["row-1"]


def test_a_judges_explanation_is_the_reason_with_no_change_to_the_grader(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3, wrong={2}), main=JUDGED_GRADER)
    result, report = _run(pytester)
    result.assert_outcomes(passed=2 + 2, failed=1)
    texts = _failure_texts(result)
    assert "judge: score 0.0: graded:" in texts["row-2"]
    reasons = {attempt["row_key"]: attempt["grader"]["reason"] for attempt in report["rows"]}
    assert reasons["row-0"].startswith("judge: score 1.0: graded:")
    assert reasons["row-2"].startswith("judge: score 0.0: graded:")
