"""The osmosis summary: counts that add up, pytest's colours, the gate verdict last."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import POLICY_PY, multiply_rows

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
        "rows: 4  passed: 2  failed: 2 (1 errored)  skipped: 0  pass rate: 50.0%"
    )
    # 8 attempts: 5 reached the threshold, 3 did not (2 scored 0, 1 errored), 0 skipped.
    assert (
        section[1] == "attempts: 8  passed: 5  failed: 3 (1 errored)  skipped: 0  pass rate: 62.5%"
    )


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
