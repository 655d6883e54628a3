"""The osmosis summary: counts that add up, pytest's colours, the gate verdict last."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspaces import MAIN_PY, POLICY_PY, multiply_rows

ARGS = ("--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy")

EXPLODING_POLICY = (
    POLICY_PY
    + """

_plain = policy


def policy(request):
    if "boom" in request.messages[-1]["content"] and request.attempt == 1:
        raise RuntimeError("the model exploded")
    return _plain(request)
"""
)


def _osmosis_section(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if "osmosis summary" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    return lines[start + 1 : end]


def test_the_gate_verdict_is_the_last_line_before_pytests_own(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4, wrong={3}))
    result = pytester.runpytest(*ARGS, "--osmosis-min-pass-rate=0.7")
    section = _osmosis_section(result.stdout.lines)
    assert section[-1] == "gate: pass rate 75.0% >= 70.0%: passed (1 row(s) missed, see above)"
    assert result.ret == pytest.ExitCode.OK


def test_the_attempts_line_adds_up_and_says_errored(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    rows = multiply_rows(4, wrong={3})
    rows[1]["user_prompt"] += " boom"
    workspace(rows, policy=EXPLODING_POLICY)
    result = pytester.runpytest(*ARGS, "--osmosis-n=2")
    section = _osmosis_section(result.stdout.lines)
    assert section[0].startswith(
        "rows: 4  passed: 2  failed: 2 (1 errored, 1 below threshold)  skipped: 0  pass rate: 50.0%"
    )
    # 8 attempts: 5 reached the threshold, 3 did not (2 scored 0, 1 errored), 0 skipped.
    assert section[1] == (
        "attempts: 8  passed: 5  failed: 3 (1 errored, 2 below threshold)  skipped: 0  "
        "pass rate: 62.5% [30.6%, 86.3%] (95%)"
    )


def test_failed_means_the_same_rows_in_the_terminal_the_html_and_report_json(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    rows = multiply_rows(5, wrong={3, 4})
    rows[1]["user_prompt"] += " boom"
    workspace(rows, policy=EXPLODING_POLICY)
    result = pytester.runpytest(
        *ARGS, "--osmosis-n=2", "--osmosis-output=out", "--osmosis-html=r.html"
    )
    section = _osmosis_section(result.stdout.lines)
    assert section[0].startswith(
        "rows: 5  passed: 2  failed: 3 (1 errored, 2 below threshold)  skipped: 0"
    ), section
    document = json.loads((pytester.path / "out" / "report.json").read_text())
    summary = document["summary"]
    assert (summary["rows"]["failed"], summary["rows"]["errored"]) == (3, 1)
    assert summary["rows"]["below_threshold"] == 2
    # The official attempt-level key counts the attempts that errored; the rest missed.
    assert (summary["failed"], summary["below_threshold"]) == (1, 4)
    assert section[1].startswith(
        "attempts: 10  passed: 5  failed: 5 (1 errored, 4 below threshold)"
    )
    page = (pytester.path / "r.html").read_text()
    assert '<small>failed</small><b class="failed">3 (1 errored, 2 below threshold)</b>' in page
    assert "<small>errored</small>" not in page


def test_the_summary_uses_pytests_colours(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4, wrong={3}))
    result = pytester.runpytest(*ARGS, "--color=yes", "--osmosis-min-pass-rate=0.9")
    out = result.stdout.str()
    green, red = "\x1b[32m", "\x1b[31m"
    assert f"{green}passed: 3" in out
    assert f"{red}failed: 1" in out
    assert f"{red}\x1b[1mgate: pass rate 75.0% < 90.0%: failed" in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_prices_give_a_cost_per_attempt_row_and_run_in_every_output(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    import json

    root = workspace(multiply_rows(3))
    result = pytester.runpytest(
        *ARGS,
        "--osmosis-n=2",
        "--osmosis-price-in=1000",
        "--osmosis-price-out=2000",
        "--osmosis-output=out",
        "--osmosis-html=report.html",
    )
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    attempts = report["rows"]
    # The scripted policy reports no usage: tokens are estimated, and so is their cost.
    for attempt in attempts:
        assert attempt["tokens_estimated"] and attempt["cost_estimated"]
    total = sum(a["cost_usd"] for a in attempts)
    assert total > 0
    assert report["summary"]["cost_usd"] == pytest.approx(total)
    assert report["summary"]["cost_estimated"] is True
    per_row = {v["row_key"]: v["cost_usd"] for v in report["row_verdicts"]}
    assert sum(per_row.values()) == pytest.approx(total)
    streamed = [
        {"nodeid": row["nodeid"], **attempt}
        for line in (root / "out" / "rows.jsonl").read_text(encoding="utf-8").splitlines()
        for row in [json.loads(line)]
        for attempt in row["attempts"]
    ]

    # The journal is in finish order, the report in item order: compare attempt by attempt.
    def by_attempt(lines: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
        return {(a["nodeid"], a.get("run_index", 0)): a["cost_usd"] for a in lines}

    assert by_attempt(streamed) == by_attempt(attempts)
    result.stdout.fnmatch_lines(["cost: $* per row $* per attempt $* (estimated)"])
    assert ">cost</th>" in (root / "report.html").read_text(encoding="utf-8")


def test_without_prices_or_a_provider_cost_no_cost_is_claimed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    import json

    root = workspace(multiply_rows(2))
    result = pytester.runpytest(*ARGS, "--osmosis-output=out")
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["cost_usd"] is None
    assert all(a["cost_usd"] is None for a in report["rows"])
    assert "cost:" not in result.stdout.str()


def test_prices_come_from_the_eval_toml_and_must_come_in_pairs(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    import json

    root = workspace(multiply_rows(2))
    (root / "configs" / "eval").mkdir(parents=True)
    (root / "configs" / "eval" / "demo.toml").write_text(
        '[experiment]\nrollout = "demo"\nentrypoint = "main.py"\nmodel_path = "openai/gpt-5-mini"\n'
        'dataset = "demo"\n[advanced]\nprice_in = 3.0\nprice_out = 15.0\n',
        encoding="utf-8",
    )
    pytester.runpytest(*ARGS, "--osmosis-output=out").assert_outcomes(passed=5)
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["cost_usd"] > 0
    # The command line overrides one price and keeps the TOML's other.
    pytester.runpytest(*ARGS, "--osmosis-price-in=0", "--osmosis-output=out2")
    cheaper = json.loads((root / "out2" / "report.json").read_text(encoding="utf-8"))
    assert 0 < cheaper["summary"]["cost_usd"] < report["summary"]["cost_usd"]
    (root / "configs" / "eval" / "demo.toml").unlink()
    alone = pytester.runpytest(*ARGS, "--osmosis-price-out=1")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    assert "--osmosis-price-in and --osmosis-price-out go together" in alone.stderr.str()


UNGRADED_MAIN = MAIN_PY.split("class ContainsGrader")[0]


def test_a_rollout_with_no_grader_says_its_rows_ran_ungraded(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3), main=UNGRADED_MAIN)
    result = pytester.runpytest(*ARGS, "--osmosis-output=out", "--osmosis-html=r.html")
    assert result.ret == pytest.ExitCode.OK
    line = "ungraded: 3 rows (rollouts/demo/main.py defines no Grader)"
    assert line in _osmosis_section(result.stdout.lines)
    document = json.loads((pytester.path / "out" / "report.json").read_text())
    assert document["summary"]["rows"]["ungraded"] == 3
    assert document["summary"]["ungraded_why"] == ["no_grader"]
    assert f'<div class="banner bad">{line}</div>' in (pytester.path / "r.html").read_text()
    # Said before the rows run too, by the entrypoint's preflight check.
    result.stdout.fnmatch_lines(["*main.py defines no Grader: its rows run ungraded (no reward)*"])


@pytest.mark.parametrize("how", ["flag", "ini"])
def test_require_grader_fails_a_run_whose_rows_ran_ungraded(
    workspace: Callable[..., Path], pytester: pytest.Pytester, how: str
) -> None:
    workspace(multiply_rows(2), main=UNGRADED_MAIN)
    if how == "ini":
        pytester.makeini("[pytest]\nosmosis_require_grader = true\n")
        result = pytester.runpytest(*ARGS)
    else:
        result = pytester.runpytest(*ARGS, "--osmosis-require-grader")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _osmosis_section(result.stdout.lines)[-1] == (
        "require-grader: 2 rows (rollouts/demo/main.py defines no Grader): failed"
    )


def test_require_grader_passes_a_graded_run(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    result = pytester.runpytest(*ARGS, "--osmosis-require-grader")
    assert result.ret == pytest.ExitCode.OK
    assert not any("ungraded" in line for line in _osmosis_section(result.stdout.lines))
