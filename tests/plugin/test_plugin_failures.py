"""A failure is blamed on what caused it, fails only its own row, and never hangs the run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

POLICY = "--osmosis-policy=policy.py:policy"
PREFLIGHT = 2
DEADLINES = ("--osmosis-agent-timeout=30", "--osmosis-grader-timeout=30")
"""Bounded deadlines, so a regression fails as an item timeout instead of hanging the suite."""

WORKFLOW_HEAD = """
import asyncio
import os
import sys

from osmosis_rollout import AgentWorkflow, Grader


class Answer(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        {trigger}
        return [*ctx.prompt, {{"role": "assistant", "content": "42"}}]


class G(Grader):
    async def grade(self, ctx):
        {grade}
        ctx.set_reward(1.0)
"""


def _main(trigger: str = "pass", grade: str = "pass") -> str:
    return WORKFLOW_HEAD.format(trigger=trigger, grade=grade)


def _out(result: pytest.RunResult) -> str:
    return str(result.stdout.str())


def _rows(n: int) -> list[dict[str, str]]:
    return [{"user_prompt": f"row {i}", "ground_truth": "42"} for i in range(n)]


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        ("sys.exit(3)", "SystemExit: 3 raised by the workflow"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt raised by the workflow"),
    ],
)
def test_a_row_that_exits_fails_alone_and_the_others_pass(
    workspace: Callable[..., Path], pytester: pytest.Pytester, call: str, shown: str
) -> None:
    workspace(_rows(5), main=_main(trigger=f'if text == "row 2": {call}'))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, *DEADLINES)
    result.assert_outcomes(passed=4 + PREFLIGHT, errors=1)
    assert f"row-2 (test.jsonl line 3): rollout failed [agent_error]: {shown}" in _out(result)


def test_a_plain_def_workflow_that_exits_fails_alone(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    main = """
import sys
from osmosis_rollout import AgentWorkflow, Grader


class Answer(AgentWorkflow):
    def run(self, ctx):
        if ctx.prompt[-1]["content"] == "row 1":
            sys.exit(3)
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""
    workspace(_rows(3), main=main)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, *DEADLINES)
    result.assert_outcomes(passed=2 + PREFLIGHT, errors=1)
    assert (
        "row-1 (test.jsonl line 2): rollout failed [agent_error]: SystemExit: 3 raised by the workflow"
        in _out(result)
    )


def test_a_grader_that_exits_is_named_as_the_grader(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    grade = 'if ctx.sample.messages[0]["content"] == "row 0": sys.exit(3)'
    workspace(_rows(2), main=_main(grade=grade))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, *DEADLINES)
    result.assert_outcomes(passed=1 + PREFLIGHT, errors=1)
    assert (
        "row-0 (test.jsonl line 1): the grader failed [agent_error]: "
        "SystemExit: 3 raised by the grader" in _out(result)
    )


def test_when_the_rollout_loop_dies_every_pending_row_fails_at_once_with_the_cause(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    # A callback scheduled on the loop is outside any rollout's task, so nothing can catch
    # its SystemExit: the loop thread itself stops.
    trigger = (
        'if text == "row 0": asyncio.get_running_loop().call_soon(sys.exit, 7)\n'
        "        await asyncio.sleep(20)"
    )
    root = workspace(_rows(4), main=_main(trigger=trigger))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, *DEADLINES, "--osmosis-output=out"
    )
    result.assert_outcomes(passed=PREFLIGHT, errors=4)
    result.stdout.fnmatch_lines(["*the rollout event loop stopped: SystemExit: 7*"])
    rows = [json.loads(line) for line in (root / "out" / "rows.jsonl").read_text().splitlines()]
    assert {a["error_type"] for r in rows for a in r["attempts"]} == {"rollout_loop_stopped"}


def test_a_grader_exception_is_reported_as_the_grader_failing_with_the_log_to_read(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    grade = 'raise RuntimeError("the rubric file is missing")'
    root = workspace(_rows(1), main=_main(grade=grade))
    # In a subprocess: in-process, CPython 3.11's parser can trip over state that earlier
    # tests of the same worker left ("AST constructor recursion depth mismatch").
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out"
    )
    result.assert_outcomes(passed=PREFLIGHT, errors=1)
    log = root / "out" / "rollouts.log"
    out = _out(result)
    assert (
        "row-0 (test.jsonl line 1): the grader failed [agent_error]: the rubric file is missing"
        in out
    )
    assert f"  grader traceback: {log}\n" in out
    assert "rollout failed" not in out
    text = log.read_text()
    assert "Traceback" in text and "the rubric file is missing" in text


@pytest.mark.parametrize(("value", "shown"), [('float("nan")', "nan"), ('float("inf")', "inf")])
def test_a_non_finite_reward_says_what_the_grader_set(
    workspace: Callable[..., Path], pytester: pytest.Pytester, value: str, shown: str
) -> None:
    workspace(_rows(1), main=_main(grade=f"ctx.set_reward({value}); return"))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=PREFLIGHT, errors=1)
    out = _out(result)
    assert f"the grader failed [validation_error]: the grader set reward={shown};" in out
    assert "validation error for" not in out


BLOCKING_MAIN = """
import asyncio
import time

from osmosis_rollout import AgentWorkflow, Grader

STARTED = []


class Answer(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        if text == "row 1":
            # Once the other rows sleep on the shared loop, block it.
            while len(STARTED) < 3:
                await asyncio.sleep(0.01)
            time.sleep(3)
        else:
            STARTED.append(text)
            await asyncio.sleep(0.5)
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


def test_a_blocked_loop_is_named_with_the_rollout_and_line_in_every_row_it_failed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(_rows(4), main=BLOCKING_MAIN)
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-agent-timeout=1",
        "--osmosis-grader-timeout=30",
    )
    result.assert_outcomes(passed=PREFLIGHT, errors=4)
    out = _out(result)
    main = root / "rollouts" / "demo" / "main.py"
    blocked = (
        "  blocked loop: the rollout event loop was blocked for {}s by "
        f"data/test.jsonl::row-1#0 at {main}:17 in run: time.sleep(3)"
    )
    lines = [line for line in out.splitlines() if line.startswith("  blocked loop: ")]
    # The four rows failed the same way: the terminal shows the first in full, once.
    assert len(lines) == 1, out
    assert "4 rows failed the same way: the workflow failed [timeout]" in out
    for line in lines:
        prefix, _, rest = blocked.partition("{}")
        assert line.startswith(prefix) and line.endswith(rest), line
    assert "fix: blocking code in an async function" in out
    # The report's rows name the block too (the row records are built after it was found).
    (report,) = (root / ".osmosis" / "runs").glob("*/report.json")
    noted = [row["blocked_loop"] for row in json.loads(report.read_text())["rows"]]
    said = prefix.removeprefix("  blocked loop: ")
    assert len(noted) == 4 and all(str(n).startswith(said) for n in noted), noted


def test_a_failed_row_points_at_its_diagnostics_and_a_passing_row_has_none(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    trigger = 'if text == "row 1": raise RuntimeError("the tool server is down")'
    root = workspace(_rows(2), main=_main(trigger=trigger))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out")
    result.assert_outcomes(passed=1 + PREFLIGHT, errors=1)
    lines = (root / "out" / "rows.jsonl").read_text().splitlines()
    attempts = {row["row_key"]: row["attempts"][0] for row in map(json.loads, lines)}
    assert attempts["row-0"]["diagnostics_path"] is None
    diagnostics = Path(attempts["row-1"]["diagnostics_path"])
    assert diagnostics == root / "out" / "rollouts" / attempts["row-1"]["rollout_id"] / (
        "diagnostics.json"
    )
    assert json.loads(diagnostics.read_text())["exception_type"] == "RuntimeError"
    assert f"  diagnostics: {diagnostics}\n" in _out(result)


TOOL_WORKFLOW = """
from osmosis_rollout import AgentWorkflow, Grader


class Tools(AgentWorkflow):
    async def run(self, ctx):
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "multiply", "arguments": '{"a": 6, "b": ' + "9" * 400 + "}"},
        }
        return [
            *ctx.prompt,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "54"},
            {"role": "assistant", "content": "It is 54."},
        ]


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in ctx.sample.messages[-1]["content"] else 0.0)
"""


def test_a_failed_row_shows_how_to_rerun_it_its_prompt_tool_calls_answer_and_label(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    prompt = "\n".join(f"line {i} of the task" for i in range(8))
    workspace(
        [
            {"user_prompt": "row 0", "ground_truth": "54"},
            {"user_prompt": prompt, "ground_truth": "42"},
        ],
        main=TOOL_WORKFLOW,
    )
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=1 + PREFLIGHT, failed=1)
    out = _out(result)
    block = out[out.index("row-1 (test.jsonl line 2): reward 0 < threshold 1") :].splitlines()
    rerun = "pytest --osmosis-dataset=data/test.jsonl --osmosis-policy=policy.py:policy 'data/test.jsonl::row-1'"
    assert block[1:9] == [
        f"  rerun: {rerun}",
        "  prompt: line 0 of the task",
        "          line 1 of the task",
        "          line 2 of the task",
        "          line 3 of the task",
        "          line 4 of the task",
        "          ... (3 more lines)",
        "  tool calls:",
    ], out
    call = block[9]
    assert call.startswith('    multiply({"a": 6, "b": 999') and call.endswith(" more chars])"), out
    assert len(call) < 230, call
    assert block[10] == "  last assistant message: It is 54.", out
    assert block[11] == "  label: 42", out
    assert any(line.startswith("  trajectory: ") for line in block), out
    assert "rerun just this row with the rerun command above" in out
    # The line runs as copied: just that row.
    again = pytester.runpytest(*shlex.split(rerun)[1:])
    again.assert_outcomes(failed=1)
    assert "row-1 (test.jsonl line 2)" in _out(again)


def test_the_rerun_command_names_the_row_from_where_pytest_ran(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace([{"user_prompt": "row 0", "ground_truth": "41"}], main=TOOL_WORKFLOW)
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    result = pytester.runpytest(
        "--rootdir",
        str(root),
        "--osmosis-dataset",
        "../data/test.jsonl",
        "--osmosis-policy",
        "../policy.py:policy",
    )
    result.assert_outcomes(passed=PREFLIGHT, failed=1)
    assert (
        "  rerun: pytest --osmosis-dataset ../data/test.jsonl --osmosis-policy "
        "../policy.py:policy '../data/test.jsonl::row-0'"
    ) in _out(result)
