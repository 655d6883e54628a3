"""What a rollout prints lands in ``rollouts.log``, redacted, and never on the terminal.

Rows run on the scheduler's thread while pytest reports other items, and pytest's capturing
is suspended between phases and while the progress line is drawn: a print in such a window
went straight to the terminal, secrets and all. With ``-s`` (no capturing) every print did.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

from osmosis_rollout.redaction import SECRET_NAME

SECRET = "sk-test-PRINTED-3c9e51d07a"
PREFLIGHT = 2

PRINTING_MAIN = """
import asyncio
import os
import sys

from osmosis_rollout import AgentWorkflow, Grader


class Printing(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        print(f"printed by {text!r} key={os.environ['OPENAI_API_KEY']}")
        print(f"to stderr from {text!r}", file=sys.stderr)
        await asyncio.to_thread(print, f"from a worker thread for {text!r}")
        print("no newline at the end", end="")
        return [*ctx.prompt, {"role": "assistant", "content": "done"}]


class Passes(Grader):
    async def grade(self, ctx):
        print(f"grading {ctx.label!r}")
        ctx.set_reward(1.0)
"""

ARGS = (
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
    "--osmosis-output=out",
    "-p",
    "no:cacheprovider",
)


@pytest.mark.parametrize("capture", ["--capture=fd", "--capture=sys"])
def test_printed_lines_go_to_the_rollouts_log_redacted_and_never_to_the_terminal(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capture: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    root = workspace(multiply_rows(3), main=PRINTING_MAIN)
    result = pytester.runpytest_subprocess(*ARGS, capture)
    assert result.ret == 0, result.stdout.str()
    console = result.stdout.str() + result.stderr.str()
    for text in ("printed by", "to stderr from", "from a worker thread", "no newline", "grading"):
        assert text not in console, console
    assert SECRET not in console

    log = (root / "out" / "rollouts.log").read_text(encoding="utf-8")
    assert SECRET not in log
    if capture == "--capture=sys":
        return  # prints made while pytest captures land in an item's (redacted) report there
    for row in range(3):
        prompt = f"What is {row + 2} times {row + 3}?"
        assert f"stdout: printed by {prompt!r} key=[REDACTED:OPENAI_API_KEY]" in log, log
        assert f"stderr: to stderr from {prompt!r}" in log
        assert f"stdout: from a worker thread for {prompt!r}" in log
    # A line left open by the workflow is finished by the grader's print, as on a terminal.
    for label in (6, 12, 20):
        assert f"stdout: no newline at the endgrading '{label}'" in log


def test_with_capture_off_printed_lines_reach_the_terminal_redacted_and_the_log_too(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    root = workspace(multiply_rows(3), main=PRINTING_MAIN)
    result = pytester.runpytest_subprocess(*ARGS, "-s")
    assert result.ret == 0, result.stdout.str()
    console = result.stdout.str() + result.stderr.str()
    assert SECRET not in console
    for row in range(3):
        prompt = f"What is {row + 2} times {row + 3}?"
        shown = f"stdout: printed by {prompt!r} key=[REDACTED:OPENAI_API_KEY]"
        assert re.search(rf"row-{row}\.0\.[0-9a-f]{{8}} {re.escape(shown)}$", console, re.M), (
            console
        )
        assert f"stderr: to stderr from {prompt!r}" in console
    log = (root / "out" / "rollouts.log").read_text(encoding="utf-8")
    assert "stdout: printed by" in log and SECRET not in log


FAILING_PRINTER = """
from osmosis_rollout import AgentWorkflow, Grader


class Printing(AgentWorkflow):
    async def run(self, ctx):
        print(f"working on {ctx.prompt[-1]['content']!r}")
        return [*ctx.prompt, {"role": "assistant", "content": "done"}]


class Strict(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label == "6" else 0.0)
"""


def test_a_failing_row_shows_what_its_own_rollout_printed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3), main=FAILING_PRINTER)
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=1 + PREFLIGHT, failed=2)
    out = result.stdout.str()
    sections = re.findall(r"-+ Captured rollout output call -+\n(.*?)\n", out)
    assert sections == ["working on 'What is 3 times 4?'", "working on 'What is 4 times 5?'"], out
    assert "working on 'What is 2 times 3?'" not in out


def test_a_run_without_rows_leaves_sys_stdout_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_stdout_is_the_capture_stream():
            assert type(sys.stdout).__name__ != "_Router"

        def test_prints_are_captured(capsys):
            print("hello")
            assert capsys.readouterr().out == "hello\\n"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


KEY_LEAKING_MAIN = """
from pathlib import Path

from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.context import get_rollout_context


class Leaks(AgentWorkflow):
    async def run(self, ctx):
        key = get_rollout_context().api_key
        Path("policy_key.txt").write_text(key)
        if ctx.prompt[-1]["content"].startswith("What is 2 "):
            raise RuntimeError(f"the policy refused key {key}")
        return [*ctx.prompt, {"role": "assistant", "content": f"key {key}"}]


class Passes(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


def test_the_policy_key_never_reaches_the_journal_or_the_report_files(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No secret in the environment: the policy endpoint's key is the redactor's only one.
    for name in list(os.environ):
        if SECRET_NAME.search(name):
            monkeypatch.delenv(name)
    root = workspace(multiply_rows(3), main=KEY_LEAKING_MAIN)
    result = pytester.runpytest_subprocess(*ARGS, "--osmosis-html=report.html")
    result.assert_outcomes(passed=2 + PREFLIGHT, errors=1)
    key = (root / "policy_key.txt").read_text()
    assert len(key) >= 16
    report = (root / "out" / "report.json").read_text(encoding="utf-8")
    assert "the policy refused key [REDACTED:POLICY_API_KEY]" in report
    for path in (root / "out" / "report.json", root / "out" / "rows.jsonl", root / "report.html"):
        text = path.read_text(encoding="utf-8")
        assert "[REDACTED:POLICY_API_KEY]" in text, path
        assert key not in text, path
