"""An errored row says where in the user's code it failed: the frame (``main.py:9 in run``)
and a short traceback of user frames, in the failure text and in report.json, for errors
raised by the workflow, the grader and the policy, in-process and through a rollout server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspaces import MAIN_PY, multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"

RAISING_WORKFLOW = """
from osmosis_rollout import AgentWorkflow, Grader


def parse(text):
    return int(text)


class Answer(AgentWorkflow):
    async def run(self, ctx):
        number = parse(ctx.prompt[-1]["content"])
        return [*ctx.prompt, {"role": "assistant", "content": str(number)}]


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""

RAISING_GRADER = """
from osmosis_rollout import AgentWorkflow, Grader


class Answer(AgentWorkflow):
    async def run(self, ctx):
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class G(Grader):
    async def grade(self, ctx):
        scores = {}
        ctx.set_reward(scores[ctx.label])
"""

RAISING_POLICY = """
def lookup(table, key):
    return table[key]


def policy(request):
    return lookup({}, "answer")
"""


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-output=out",
        "--osmosis-agent-timeout=30",
        "--osmosis-grader-timeout=30",
        "--osmosis-overwrite",  # a test's second run replaces its first
        "-p",
        "no:cacheprovider",
        *args,
    )
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    return result, report


def _rows(n: int) -> list[dict[str, str]]:
    return [{"user_prompt": f"row {i}", "ground_truth": "42"} for i in range(n)]


def test_a_raising_workflow_names_the_users_frame_and_shows_their_frames(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(_rows(1), main=RAISING_WORKFLOW)
    result, report = _run(pytester)
    out = result.stdout.str()
    assert "  raised at: rollouts/demo/main.py:6 in parse" in result.outlines, out
    assert "  workflow traceback, your code:" in result.outlines
    shown = out.split("workflow traceback, your code:")[1]
    assert 'File "rollouts/demo/main.py", line 11, in run' in shown
    assert 'number = parse(ctx.prompt[-1]["content"])' in shown
    assert "ValueError: invalid literal for int() with base 10: 'row 0'" in shown
    # Only the user's frames: none of the backend's, asyncio's or pytest's.
    assert "osmosis_rollout" not in shown.split("workflow traceback:")[0]
    (row,) = report["rows"]
    assert row["error_phase"] == "workflow"
    assert row["error_where"] == "rollouts/demo/main.py:6 in parse"
    assert row["error_traceback"].splitlines()[-1] == (
        "ValueError: invalid literal for int() with base 10: 'row 0'"
    )


def test_a_raising_grader_names_the_users_frame(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(_rows(1), main=RAISING_GRADER)
    result, report = _run(pytester)
    assert "  raised at: rollouts/demo/main.py:13 in grade" in result.outlines, result.stdout.str()
    (row,) = report["rows"]
    assert row["error_phase"] == "grader"
    assert row["error_where"] == "rollouts/demo/main.py:13 in grade"
    assert "ctx.set_reward(scores[ctx.label])" in row["error_traceback"]


def test_a_raising_policy_leaves_its_traceback_on_the_row(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(1), main=MAIN_PY, policy=RAISING_POLICY)
    result, report = _run(pytester)
    out = result.stdout.str()
    assert "  raised at: policy.py:3 in lookup" in result.outlines, out
    assert "  policy traceback, your code:" in result.outlines
    assert 'File "policy.py", line 7, in policy' in out
    (row,) = report["rows"]
    assert row["error_type"] == "policy_error"
    assert row["error_phase"] == "policy"
    assert row["error_where"] == "policy.py:3 in lookup"
    assert "KeyError: 'answer'" in row["error_traceback"]
    assert (
        'File "policy.py", line 3, in lookup'
        in (pytester.path / "out" / "rollouts.log").read_text()
    )


def test_a_served_rollout_carries_the_users_frame_and_the_graders_reason(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    main = RAISING_GRADER.replace(
        "class G(Grader):",
        "import logging\n\nlog = logging.getLogger('graders.demo')\n\n\nclass G(Grader):",
    ).replace(
        "        scores = {}\n",
        "        log.warning('no score for %s', ctx.label)\n        scores = {}\n",
    )
    workspace(_rows(1), main=main)
    result, report = _run(pytester, "--osmosis-serve", "--osmosis-concurrency=1")
    (row,) = report["rows"]
    assert row["error_phase"] == "grader", result.stdout.str()[-3000:]
    assert row["error_where"].endswith("main.py:19 in grade")
    assert "ctx.set_reward(scores[ctx.label])" in row["error_traceback"]
    assert "no score for 42" in row["grader"]["reason"]
    assert "grader said:" in result.stdout.str()


NO_GRADER = """
from osmosis_rollout import AgentWorkflow


class Answer(AgentWorkflow):
    async def run(self, ctx):
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]
"""


def _failure_heads(result: pytest.RunResult) -> list[str]:
    """The first line of each failure section in the terminal (after its ``___ row-N ___``)."""
    lines = result.outlines
    return [
        lines[i + 1] for i, line in enumerate(lines) if line.startswith("___") and "row-" in line
    ]


def test_a_policy_failing_every_row_is_printed_in_full_once(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(5), main=MAIN_PY, policy=RAISING_POLICY)
    result, report = _run(pytester, "--junitxml=junit.xml")
    out = result.stdout.str()
    result.assert_outcomes(errors=5, passed=2)  # errored rows are errors
    heads = _failure_heads(result)
    assert (
        heads[0] == "row-0 (test.jsonl line 1): rollout failed [policy_error]: KeyError: 'answer'"
    )
    assert heads[1:] == [
        f"row-{i}: failed the same way as row-0 (shown in full above): the policy failed "
        "[policy_error]: KeyError: 'answer' (at policy.py:3 in lookup)"
        for i in range(1, 5)
    ], out
    assert out.count("policy traceback, your code:") == 1
    assert (
        "5 rows failed the same way: the policy failed [policy_error]: KeyError: 'answer' "
        "(at policy.py:3 in lookup); full text under row-0"
    ) in result.outlines
    # Every row keeps its own full text where it is read one row at a time.
    junit = (pytester.path / "junit.xml").read_text()
    assert junit.count("policy traceback, your code:") == 5
    assert all(row["error_where"] == "policy.py:3 in lookup" for row in report["rows"])


def test_rows_with_no_grader_are_grouped_and_different_failures_are_not(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(_rows(3), main=NO_GRADER)
    result, _ = _run(pytester, "--osmosis-pass-threshold=1")
    assert (
        "3 rows failed the same way: no grader ran (no_grader): no reward; full text under row-0"
    ) in result.outlines, result.stdout.str()
    workspace(_rows(3), main=RAISING_WORKFLOW)  # each row's message names its own prompt
    result, _ = _run(pytester)
    assert "rows failed the same way" not in result.stdout.str()
    assert len([h for h in _failure_heads(result) if "rollout failed [validation_error]" in h]) == 3


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_a_dead_model_server_is_named_and_stops_new_rows_after_a_few(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dead-server-0123456789")
    workspace(multiply_rows(12), main=MAIN_PY)
    # In a subprocess: the model route imports LiteLLM, which pytester's in-process runs
    # must not unload and reload between tests.
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-model=openai/qwen3",
        "--osmosis-output=out",
        "--osmosis-concurrency=1",
        "-p",
        "no:cacheprovider",
        *(("-n", str(workers)) if workers else ()),
    )
    out = result.stdout.str()
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert f"APIConnectionError: Connection error. (calling {url}/chat/completions)" in out, out
    # Three rollouts in a row failed the same way with none passing: no further row started
    # (in each process running rows).
    assert 1 <= len(report["rows"]) <= 3 * max(workers, 1), out
    assert report["summary"]["complete"] is False
    stopped = [line for line in result.outlines if line.startswith("INCOMPLETE: stopped by")]
    assert stopped, out
    assert stopped[0].startswith(
        "INCOMPLETE: stopped by 3 rollouts in a row failing on the same unreachable server, "
        "none succeeding (no new row started): policy_error: APIConnectionError: "
        f"Connection error. (calling {url}/chat/completions): "
    )
    assert f"{12 - len(report['rows'])} of 12 rows not run: row-" in stopped[0]
    assert result.ret != 0


def _attempt(
    status: str, error_type: str | None = None, message: str | None = None, phase: str | None = None
) -> Any:
    from osmosis_rollout.runs.report_model import AttemptRecord

    return AttemptRecord(
        row_key="r",
        row_index=0,
        source_row_index=0,
        run_index=0,
        rollout_id="r.0",
        status=status,
        reward=1.0 if status == "success" else None,
        error_type=error_type,
        err_message=message,
        error_phase=phase,
    )


def test_the_breaker_trips_only_on_consecutive_identical_infrastructure_failures() -> None:
    from pytest_osmosis.run.infra_breaker import InfraBreaker

    refused = _attempt(
        "failed", "policy_error", "APIConnectionError: Connection error. (calling u)", "policy"
    )
    other = _attempt("failed", "ConnectError", "All connection attempts failed (rollout server v)")
    user_code = _attempt("failed", "agent_error", "ConnectError: tool server down", "workflow")
    breaker = InfraBreaker(trip_after=3)
    for attempt in (
        refused,
        refused,
        _attempt("success"),
        refused,
        refused,
        other,
        user_code,
        refused,
        refused,
    ):
        breaker.record(attempt)
    assert breaker.tripped is None  # a success, another cause or the user's own error resets it
    breaker.record(refused)
    assert breaker.tripped is not None and breaker.tripped.endswith(
        "policy_error: APIConnectionError: Connection error. (calling u)"
    )


CHATTY = """
import asyncio
import logging

from osmosis_rollout import AgentWorkflow, Grader

log = logging.getLogger("demo.workflow")


class Answer(AgentWorkflow):
    async def run(self, ctx):
        prompt = ctx.prompt[-1]["content"]
        log.warning("working on %s", prompt)
        await asyncio.sleep(0.2)
        log.warning("done with %s", prompt)
        return [*ctx.prompt, {"role": "assistant", "content": "no"}]


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(0.0)
"""


def test_under_xdist_a_rows_captured_log_holds_no_other_rows_records(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(_rows(8), main=CHATTY)
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-output=out",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=8, passed=2)
    sections: dict[str, list[str]] = {}
    row: str | None = None
    for line in result.outlines:
        if line.startswith("___") and "row-" in line:
            row = line.strip("_ ").rsplit("::", 1)[-1]
        elif row is not None and line.startswith("---") and "Captured log" in line:
            sections.setdefault(row, [])
        elif line.startswith("---"):
            row = None  # another section (captured output, ...)
        elif row is not None and row in sections and ("working on" in line or "done with" in line):
            sections[row].append(line)
    leaked = {
        row: [line for line in lines if not line.endswith(f"row {row.removeprefix('row-')}")]
        for row, lines in sections.items()
    }
    assert not any(leaked.values()), leaked
    # A row's own records are on that row: in its failure text, in its own words.
    texts = result.stdout.str().split("workflow logged:")[1:]
    assert len(texts) == 8
    for text in texts:
        own = text.split("WARNING demo.workflow: working on ")[1].split()[0:2]
        assert f"WARNING demo.workflow: done with {' '.join(own)}" in text, text
