"""Issue 29 through the plugin: intervals beside rates, the three-way gate at a stated
confidence, and the paired regression test against a baseline, with a seeded flaky policy."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html import escape as html_escape
from pathlib import Path

import jsonschema
import pytest
from workspaces import SEEDED_FLAKY_POLICY, multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
REPO = Path(__file__).resolve().parents[2]


def _verdict_line(result: pytest.RunResult, start: str) -> str:
    return next(line for line in result.stdout.lines if line.startswith(start))


@pytest.fixture
def flaky(
    workspace: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> Callable[[int, float, int], Path]:
    def make(rows: int, rate: float, seed: int) -> Path:
        monkeypatch.setenv("FLAKY_RATE", str(rate))
        monkeypatch.setenv("FLAKY_SEED", str(seed))
        return workspace(multiply_rows(rows), policy=SEEDED_FLAKY_POLICY)

    return make


def test_rates_are_shown_with_their_intervals_in_the_summary_report_and_html(
    flaky: Callable[[int, float, int], Path], pytester: pytest.Pytester
) -> None:
    root = flaky(40, 0.85, 1)
    result = pytester.runpytest(
        DATASET, POLICY, "--osmosis-n=2", "--osmosis-report=r.json", "--osmosis-html=r.html"
    )
    out = result.stdout.str()
    rows_line = re.search(r"rows: 40 .*pass rate: (\S+)% \[(\S+)%, (\S+)%\] \(95%\)", out)
    assert rows_line is not None, out
    rate, low, high = (float(v) for v in rows_line.groups())
    assert low < rate < high
    assert re.search(r"attempts: 80 .*pass rate: \S+% \[\S+%, \S+%\] \(95%\)", out)
    assert re.search(r"reward: mean \S+ \[\S+, \S+\] \(95%\)", out)
    document = json.loads((root / "r.json").read_text())
    jsonschema.validate(document, json.loads((REPO / "docs" / "report.schema.json").read_text()))
    summary = document["summary"]
    interval = summary["rows"]["pass_rate_interval"]
    assert interval["method"] == "wilson" and interval["confidence"] == 0.95
    assert interval["low"] == pytest.approx(low / 100, abs=0.001)
    assert set(summary["pass_rate_interval"]) == {"low", "high", "confidence", "method"}
    assert summary["pass_rate_interval"]["low"] <= summary["pass_rate"]
    assert summary["reward_stats"]["mean_interval"]["method"] == "wilson, t quantile"
    html = (root / "r.html").read_text()
    assert f"{rate:.1f}% [{low:.1f}%, {high:.1f}%] (95%)" in html


def test_the_interval_confidence_is_chosen_with_its_own_flag(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(10))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-confidence=0.9")
    assert re.search(r"rows: 10 .*pass rate: 100.0% \[\S+%, 100.0%\] \(90%\)", result.stdout.str())
    bad = pytester.runpytest(DATASET, POLICY, "--osmosis-confidence=95")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-confidence: must be between 0 and 1 (exclusive)" in bad.stderr.str()


@pytest.mark.parametrize(
    ("wrong", "extra", "line", "exit_code"),
    [
        (0, [], "gate: pass rate 100.0% [91.2%, 100.0%] vs 80%: passed at 95%", 0),
        (20, [], "gate: pass rate 50.0% [35.2%, 64.8%] vs 80%: failed at 95%", 1),
        (
            7,
            [],
            "gate: pass rate 82.5% [68.1%, 91.3%] vs 80%: undecided at 95%: add rows or attempts",
            1,
        ),
        (
            7,
            ["--osmosis-gate-undecided=pass"],
            "gate: pass rate 82.5% [68.1%, 91.3%] vs 80%: undecided at 95%: add rows or "
            "attempts (passed: --osmosis-gate-undecided pass)",
            0,
        ),
    ],
    ids=["passed", "failed", "undecided-fails", "undecided-passes-when-asked"],
)
def test_the_gate_at_a_confidence_passes_fails_or_stays_undecided(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    wrong: int,
    extra: list[str],
    line: str,
    exit_code: int,
) -> None:
    root = workspace(multiply_rows(40, wrong=set(range(wrong))))
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-min-pass-rate=0.8",
        "--osmosis-gate-confidence=0.95",
        "--osmosis-report=r.json",
        "--osmosis-html=r.html",
        *extra,
    )
    assert _verdict_line(result, "gate: ").startswith(line)
    assert result.ret == exit_code
    gate = json.loads((root / "r.json").read_text())["gate"]
    outcome = line.split(": ")[2].split(" at ")[0]
    assert gate["outcome"] == outcome
    # The HTML's verdict banner holds the gate's line as the terminal prints it.
    assert html_escape(line) in (root / "r.html").read_text()
    assert gate["interval"]["method"] == "wilson"
    assert gate["passed"] is (exit_code == 0)


def test_an_undecided_mode_other_than_pass_or_fail_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-gate-undecided=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "choose one of fail, pass" in result.stderr.str()


def test_the_gate_confidence_has_an_ini_twin(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(40, wrong=set(range(7))))
    pytester.makeini(
        "[pytest]\nosmosis_gate_confidence = 0.95\nosmosis_gate_undecided = pass\n"
        "osmosis_min_pass_rate = 0.8\n"
    )
    result = pytester.runpytest(DATASET, POLICY)
    assert "attempts (passed: --osmosis-gate-undecided pass)" in result.stdout.str()
    assert result.ret == 0


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(DATASET, POLICY, "--osmosis-min-pass-rate=0.3", *args)


def test_an_unchanged_flaky_policy_is_not_a_regression(
    flaky: Callable[[int, float, int], Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = flaky(60, 0.85, 1)
    _run(pytester, "--osmosis-report=base.json")
    monkeypatch.setenv("FLAKY_SEED", "2")  # the same policy, run again
    naive = _run(pytester, "--osmosis-baseline=base.json", "--osmosis-fail-on-regression")
    changed = _verdict_line(naive, "baseline: ")
    assert not changed.startswith("baseline: 0 regressed"), changed
    assert naive.ret == pytest.ExitCode.TESTS_FAILED  # any changed row fails without a test
    judged = _run(
        pytester,
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        "--osmosis-gate-confidence=0.95",
        "--osmosis-report=now.json",
    )
    line = _verdict_line(judged, "regressions: ")
    assert re.fullmatch(
        r"regressions: \d+ rows worse, \d+ better: not significant \(p = .+\)", line
    )
    # The rows that changed are still listed.
    assert any(text.startswith("  REGRESSED ") for text in judged.stdout.lines)
    assert judged.ret == pytest.ExitCode.OK
    test = json.loads((root / "now.json").read_text())["baseline"]["test"]
    assert set(test) == {
        "worse",
        "better",
        "p_value",
        "significant",
        "confidence",
        "method",
        "change",
        "margin",
        "alternative",
    }
    assert test["significant"] is False and test["method"] == "exact McNemar"
    assert f"rows worse, {test['better']} better" in line


def test_a_degraded_policy_is_a_significant_regression(
    flaky: Callable[[int, float, int], Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = flaky(60, 0.85, 1)
    _run(pytester, "--osmosis-report=base.json")
    monkeypatch.setenv("FLAKY_SEED", "2")
    monkeypatch.setenv("FLAKY_RATE", "0.45")
    result = _run(
        pytester,
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        "--osmosis-gate-confidence=0.95",
        "--osmosis-report=now.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    verdict = _verdict_line(result, "baseline gate: ")
    assert "a significant regression" in verdict and verdict.endswith(
        "failed (--osmosis-fail-on-regression)"
    )
    test = json.loads((root / "now.json").read_text())["baseline"]["test"]
    assert test["significant"] is True and test["worse"] > test["better"]


def test_repeats_compare_each_rows_pass_fraction_with_the_baseline(
    flaky: Callable[[int, float, int], Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = flaky(30, 0.85, 1)
    _run(pytester, "--osmosis-n=3", "--osmosis-report=base.json")
    monkeypatch.setenv("FLAKY_SEED", "2")
    _run(pytester, "--osmosis-n=3", "--osmosis-baseline=base.json", "--osmosis-report=now.json")
    test = json.loads((root / "now.json").read_text())["baseline"]["test"]
    assert test["method"] == "exact test stratified by row"
    assert test["confidence"] == 0.95
