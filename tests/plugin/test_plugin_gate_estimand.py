"""Issue 36 through the plugin: a gate whose 95% means 95%, one finding a test.

The gate judges the pass rate of the task the rows are drawn from, for every n; the
regression test is one-sided and stratified by row; a row rule's rate is the rate judged;
the mean reward's interval stays inside the rewards' range; thresholds 0 and 1 and runs
where every row errored have a defined outcome. The error rates themselves are measured by
``bench/bench_gate_sim.py`` and pinned in ``tests/core/test_gating.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import POLICY_PY, SEEDED_FLAKY_POLICY, multiply_rows, write_rows

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
GATE = (
    "--osmosis-gate-confidence=0.95",
    "--osmosis-report=r.json",
    "--osmosis-html=r.html",
    "--osmosis-overwrite",  # a test's later runs replace its first run's report
)


def _line(result: pytest.RunResult, start: str) -> str:
    return next(line for line in result.stdout.lines if line.startswith(start))


def _report(root: Path, name: str = "r.json") -> dict[str, object]:
    document: dict[str, object] = json.loads((root / name).read_text())
    return document


@pytest.mark.parametrize(
    ("n", "measure"),
    [("1", "pass rate"), ("8", "attempt pass rate"), ("auto", "attempt pass rate")],
)
def test_repeating_rows_that_always_pass_or_fail_does_not_narrow_the_gate(
    workspace: Callable[..., Path], pytester: pytest.Pytester, n: str, measure: str
) -> None:
    """Finding 1: with repeats the interval was these rows' own, so eight attempts of 40
    rows that always pass or always fail "proved" the task's rate; they are 40 draws."""
    root = workspace(multiply_rows(40, wrong=set(range(7))))
    result = pytester.runpytest(
        DATASET, POLICY, f"--osmosis-n={n}", "--osmosis-min-pass-rate=0.75", *GATE
    )
    verdict = _line(result, "gate: ")
    assert re.fullmatch(
        rf"gate: {measure} 82\.5% \[\d+\.\d%, \d+\.\d%\] vs 75%: undecided at 95%: "
        r"add rows or attempts",
        verdict,
    ), verdict
    low = float(re.findall(r"\[(\S+)%", verdict)[0])
    assert low <= 68.1  # never surer than Wilson over the 40 rows
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    gate = _report(root)["gate"]
    assert isinstance(gate, dict)
    assert gate["estimand"].startswith(f"the pass rate{' of one attempt' * (n != '1')} on the")
    assert "task the 40 rows are drawn from" in gate["estimand"]
    assert f"gate judges {gate['estimand']}" in result.stdout.lines
    # The page says what the terminal says, in its verdict banner.
    assert f"gate judges {gate['estimand']}" in (root / "r.html").read_text()


def test_an_unchanged_policy_with_other_attempts_than_its_baseline_is_compared_by_row(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 2: unequal attempts went to a paired t-test that raised false alarms; each
    row is now its own stratum in an exact test."""
    monkeypatch.setenv("FLAKY_RATE", "0.85")
    monkeypatch.setenv("FLAKY_SEED", "1")
    root = workspace(multiply_rows(30), policy=SEEDED_FLAKY_POLICY)
    pytester.runpytest(DATASET, POLICY, "--osmosis-report=base.json")
    monkeypatch.setenv("FLAKY_SEED", "2")
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-n=4",
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        "--osmosis-min-pass-rate=0.5",
        *GATE,
    )
    test = _report(root)["baseline"]
    assert isinstance(test, dict)
    assert test["test"]["method"] == "exact test stratified by row"
    assert test["test"]["significant"] is False
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("rows", "p", "verdict"),
    [(2, "0.11", "not significant"), (3, "0.04", "a significant regression")],
)
def test_rows_that_all_changed_alike_get_an_exact_p_value_not_zero(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    rows: int,
    p: str,
    verdict: str,
) -> None:
    """Finding 3: every row 1/1 before and 0/2 now gave "p = 0.0e+00". Exactly: a row's one
    pass fell before, of three attempts, with chance 1/3: p = 1/9 for 2 rows, 1/27 for 3."""
    root = workspace(multiply_rows(rows))
    pytester.runpytest(DATASET, POLICY, "--osmosis-report=base.json")
    write_rows(root / "data" / "test.jsonl", multiply_rows(rows, wrong=set(range(rows))))
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-n=2",
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        *GATE,
    )
    line = _line(result, "regressions: ")
    assert line == f"regressions: {rows} rows worse, 0 better: {verdict} (p = {p}, one-sided)"


def _swap_rows(root: Path, pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    """100 rows: 12 fail in the baseline, 23 others fail now (23 worse, 12 better)."""
    write_rows(root / "data" / "test.jsonl", multiply_rows(100, wrong=set(range(12))))
    pytester.runpytest(DATASET, POLICY, "--osmosis-report=base.json")
    write_rows(root / "data" / "test.jsonl", multiply_rows(100, wrong=set(range(12, 35))))
    return pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        "--osmosis-min-pass-rate=0.5",
        *GATE,
        *extra,
    )


def test_the_regression_test_is_one_sided_at_one_minus_the_confidence(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """Finding 4: the test failed the run only on a two-sided result (2.5% a side at 95%):
    23 rows worse against 12 better (one-sided p = 0.045) was let through."""
    root = workspace(multiply_rows(1))
    result = _swap_rows(root, pytester)
    assert _line(result, "baseline gate: ") == (
        "baseline gate: regressions: 23 rows worse, 12 better: a significant regression "
        "(p = 0.04, one-sided): failed (--osmosis-fail-on-regression)"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    test = _report(root)["baseline"]
    assert isinstance(test, dict)
    assert test["test"]["alternative"] == "worse" and test["test"]["method"] == "exact McNemar"


def test_a_regression_margin_tolerates_a_drop_smaller_than_it(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(1))
    pytester.makeini("[pytest]\nosmosis_regression_margin = 0.15\n")
    result = _swap_rows(root, pytester)
    assert _line(result, "baseline gate: ").endswith(
        "not significant (p = 0.75, one-sided, margin 15%): passed"
    )
    assert result.ret == pytest.ExitCode.OK
    test = _report(root)["baseline"]
    assert isinstance(test, dict)
    assert test["test"]["margin"] == 0.15
    assert test["test"]["alternative"] == "worse by more than 0.15"
    assert "not significant (p = 0.75, one-sided, margin 15%)" in (root / "r.html").read_text()
    bad = pytester.runpytest(DATASET, POLICY, "--osmosis-regression-margin=5")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-regression-margin: a drop in pass rate, between 0 and 1" in bad.stderr.str()


def test_a_pass_at_k_row_rule_is_the_rate_the_gate_judges(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 6: with --osmosis-row-pass any the point gate judged pass@3 and the confidence
    gate the attempts' rate, and gate.pass_rate disagreed with gate.estimate."""
    monkeypatch.setenv("FLAKY_RATE", "0.55")
    monkeypatch.setenv("FLAKY_SEED", "3")
    root = workspace(multiply_rows(40), policy=SEEDED_FLAKY_POLICY)
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-n=3",
        "--osmosis-row-pass=any",
        "--osmosis-min-pass-rate=0.7",
        *GATE,
    )
    document = _report(root)
    gate, summary = document["gate"], document["summary"]
    assert isinstance(gate, dict) and isinstance(summary, dict)
    assert gate["measure"] == "row pass rate (any of 3)"
    assert gate["pass_rate"] == gate["estimate"] == summary["rows"]["pass_rate"]
    assert gate["interval"]["method"] == "wilson"
    assert _line(result, "gate: ").startswith(
        f"gate: row pass rate (any of 3) {gate['estimate']:.1%} ["
    )
    point = pytester.runpytest(
        DATASET, POLICY, "--osmosis-n=3", "--osmosis-row-pass=any", "--osmosis-min-pass-rate=0.7"
    )
    assert _line(point, "gate: ").startswith(
        f"gate: row pass rate (any of 3) {gate['estimate']:.1%} >= 70.0%: passed"
    )
    auto = pytester.runpytest(
        DATASET, POLICY, "--osmosis-n=auto", "--osmosis-row-pass=any", "--osmosis-min-pass-rate=0.7"
    )
    assert auto.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-n auto with --osmosis-row-pass any" in auto.stderr.str()


def test_without_a_row_rule_repeats_are_judged_by_the_attempt_pass_rate_at_any_gate(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLAKY_RATE", "0.55")
    monkeypatch.setenv("FLAKY_SEED", "3")
    root = workspace(multiply_rows(20), policy=SEEDED_FLAKY_POLICY)
    result = pytester.runpytest(
        DATASET, POLICY, "--osmosis-n=3", "--osmosis-min-pass-rate=0.3", "--osmosis-report=r.json"
    )
    gate = _report(root)["gate"]
    assert isinstance(gate, dict)
    assert gate["measure"] == "attempt pass rate"
    assert _line(result, "gate: ").startswith(
        f"gate: attempt pass rate {gate['pass_rate']:.1%} >= 30.0%: passed"
    )


def test_the_mean_reward_interval_stays_inside_the_rewards_range(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """Finding 7: a t interval gave [1, 1] for 30 equal rewards and left [0, 1] elsewhere."""
    root = workspace(multiply_rows(30))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-report=r.json", "--osmosis-html=r.html")
    assert _line(result, "reward: ").startswith("reward: mean 1.0 [0.878, 1] (95%)")
    summary = _report(root)["summary"]
    assert isinstance(summary, dict)
    interval = summary["reward_stats"]["mean_interval"]
    assert interval["method"] == "wilson, t quantile"
    assert 0.87 < interval["low"] < 1.0 == interval["high"]
    assert "1 [0.878, 1] (95%)" in (root / "r.html").read_text()


ERRORING_POLICY = (
    POLICY_PY
    + """

_plain = policy


def policy(request):
    if "boom" in request.messages[-1]["content"]:
        raise RuntimeError("the model exploded")
    return _plain(request)
"""
)


def test_the_mean_reward_says_how_many_errored_attempts_it_leaves_out(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    rows = multiply_rows(6)
    for row in rows[:2]:
        row["user_prompt"] += " boom"
    root = workspace(rows, policy=ERRORING_POLICY)
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-html=r.html", "--osmosis-report=r.json")
    line = _line(result, "reward: ")
    assert "(2 errored attempts left out)" in line, line
    assert "2 errored attempts left out" in (root / "r.html").read_text()


def test_a_threshold_of_one_means_every_row_must_pass(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """Finding 8: no interval reaches 1, so 200 of 200 passing rows stayed undecided."""
    root = workspace(multiply_rows(60))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-min-pass-rate=1", *GATE)
    assert _line(result, "gate: ").startswith("gate: pass rate 100.0% [")
    assert _line(result, "gate: ").endswith("vs 100%: passed at 95%")
    assert "every row must pass" in str(_report(root)["gate"])
    assert result.ret == pytest.ExitCode.OK
    write_rows(root / "data" / "test.jsonl", multiply_rows(60, wrong={5}))
    missed = pytester.runpytest(DATASET, POLICY, "--osmosis-min-pass-rate=1", *GATE)
    assert _line(missed, "gate: ").endswith("vs 100%: failed at 95%")
    assert missed.ret == pytest.ExitCode.TESTS_FAILED


def test_a_threshold_of_zero_is_refused_and_a_run_whose_rows_all_errored_never_passes(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """Finding 8: at 0, twenty errored rows passed the gate with exit 0."""
    rows = multiply_rows(20)
    for row in rows:
        row["user_prompt"] += " boom"
    workspace(rows, policy=ERRORING_POLICY)
    zero = pytester.runpytest_subprocess(DATASET, POLICY, "--osmosis-min-pass-rate=0", *GATE)
    assert zero.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-min-pass-rate 0: a gate at 0 never fails a run" in zero.stderr.str()
    for extra in ((), ("--osmosis-gate-undecided=pass", *GATE)):
        errored = pytester.runpytest_subprocess(
            DATASET, POLICY, "--osmosis-min-pass-rate=0.01", "--osmosis-overwrite", *extra
        )
        assert _line(errored, "gate: ") == (
            "gate: every row errored (20 of 20): failed (a gate needs rows that ran to their grade)"
        )
        assert errored.ret == pytest.ExitCode.TESTS_FAILED
