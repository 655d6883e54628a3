"""``--osmosis-n auto``: further attempts only while the confidence gate is undecided."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import SEEDED_FLAKY_POLICY, multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
AUTO = ("--osmosis-n=auto", "--osmosis-gate-confidence=0.95", "--osmosis-report=r.json")


def _attempts_per_row(root: Path) -> Counter[str]:
    report = json.loads((root / "r.json").read_text())
    return Counter(attempt["nodeid"] for attempt in report["rows"])


def test_auto_stops_after_the_first_round_once_the_gate_is_decided(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(40))
    result = pytester.runpytest(DATASET, POLICY, *AUTO, "--osmosis-min-pass-rate=0.5")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "osmosis: *, n auto (max 8)*",
            "attempts: auto spent 40 attempts over 40 rows (a fixed --osmosis-n 8 would spend 320)",
            "gate: attempt pass rate 100.0% * vs 50%: passed at 95%",
        ]
    )
    assert set(_attempts_per_row(root).values()) == {1}
    report = json.loads((root / "r.json").read_text())
    assert report["auto"] == {"attempts": 40, "rows": 40, "max_n": 8, "fixed_n_attempts": 320}


def test_auto_adds_attempts_to_the_least_measured_rows_until_the_gate_is_decided(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLAKY_RATE", "0.9")
    monkeypatch.setenv("FLAKY_SEED", "2")
    root = workspace(multiply_rows(40), policy=SEEDED_FLAKY_POLICY)
    result = pytester.runpytest(DATASET, POLICY, *AUTO, "--osmosis-min-pass-rate=0.75")
    spent = re.search(r"attempts: auto spent (\d+) attempts over 40 rows", result.stdout.str())
    assert spent is not None, result.stdout.str()
    assert int(spent.group(1)) == 140  # 40 once, then ten rounds of 10 rows
    assert "vs 75%: passed at 95%" in result.stdout.str()
    per_row = _attempts_per_row(root)
    assert sum(per_row.values()) == int(spent.group(1))
    # Rows took turns: no row got a second extra attempt before every row had its first.
    assert max(per_row.values()) - min(per_row.values()) <= 1
    # Every row's item reported each of its attempts, in order.
    report = json.loads((root / "r.json").read_text())
    for verdict in report["row_verdicts"]:
        assert verdict["attempts"] == per_row[verdict["nodeid"]]


def test_auto_without_a_confidence_gate_runs_each_row_once(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(6))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-n=auto", "--osmosis-report=r.json")
    result.assert_outcomes(passed=6 + 2)
    assert set(_attempts_per_row(root).values()) == {1}
    assert "attempts: auto spent 6 attempts over 6 rows" in result.stdout.str()


def test_auto_refuses_what_it_cannot_decide_on(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    resumed = pytester.runpytest(DATASET, POLICY, "--osmosis-n=auto", "--osmosis-resume=somewhere")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR
    assert "does not combine with --osmosis-resume" in resumed.stderr.str()
    fixed = pytester.runpytest(DATASET, POLICY, "--osmosis-n=3", "--osmosis-max-n=5")
    assert fixed.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-max-n 5: applies only with --osmosis-n auto" in fixed.stderr.str()


def test_under_x_a_row_the_gate_counts_does_not_stop_the_run(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(10, wrong={0}))
    result = pytester.runpytest(
        DATASET, POLICY, *AUTO, "--osmosis-min-pass-rate=0.5", "-x", "-p", "no:randomly"
    )
    # A row the gate counts is an expected failure (xfailed), which -x does not stop at: the
    # two preflight items and nine rows pass, and the gate's case is the gate's decision.
    outcomes = result.parseoutcomes()
    assert outcomes["xfailed"] == 1
    assert outcomes["passed"] + outcomes.get("failed", 0) == 2 + 9 + 1
    report = json.loads((root / "r.json").read_text())
    assert report["not_run"] == []
    assert report["summary"]["rows"]["total"] == 10
    assert len(_attempts_per_row(root)) == 10
    assert sum(_attempts_per_row(root).values()) == report["auto"]["attempts"]
