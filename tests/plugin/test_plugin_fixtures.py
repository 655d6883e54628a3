"""The osmosis_run / osmosis_policy fixtures and the osmosis_dataset marker in users' own tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

USER_TESTS = """
import pytest
from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.chat_client import RolloutChatClient


class Ask(AgentWorkflow):
    async def run(self, ctx):
        client = RolloutChatClient(ctx.prompt)
        await client.complete()
        return None  # the chat client is the sample source


class Exact(Grader):
    def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in ctx.sample.messages[-1]["content"] else 0.0)


def test_osmosis_run_returns_the_graded_sample(osmosis_run):
    result = osmosis_run(Ask, Exact, prompt="What is 6 times 7?", label="42", policy=lambda request: "It is 42")
    assert result.ok and result.reward == 1.0
    assert result.sample.messages[-1]["content"] == "It is 42"
    assert len(result.calls) == 1


def test_osmosis_run_reports_a_wrong_answer(osmosis_run):
    result = osmosis_run(Ask, Exact, prompt="What is 6 times 7?", label="42", policy=["It is 41"])
    assert result.reward == 0.0


def test_osmosis_run_reports_a_failing_workflow(osmosis_run):
    class Boom(AgentWorkflow):
        async def run(self, ctx):
            raise ValueError("bad input")

    result = osmosis_run(Boom, Exact, prompt="hi", label="x")
    assert not result.ok and result.err_category == "validation_error" and result.error == "bad input"


def test_osmosis_run_takes_a_dataset_row(osmosis_run):
    result = osmosis_run(Ask, Exact, row={"user_prompt": "2 times 2?", "ground_truth": "4"}, policy=["4"])
    assert result.reward == 1.0


def test_osmosis_policy_serves_a_scripted_policy(osmosis_policy):
    import httpx

    server = osmosis_policy(["hello"])
    response = httpx.post(
        server.rollout_url("r1") + "/chat/completions",
        headers={"Authorization": f"Bearer {server.api_key}"},
        json={"model": "osmosis-rollout", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.json()["choices"][0]["message"]["content"] == "hello"


@pytest.mark.osmosis_dataset("data/test.jsonl", rows="0-2")
def test_each_row(osmosis_row, osmosis_result):
    assert osmosis_result.reward == 1.0, osmosis_row.label
"""


def test_fixtures_and_marker_work_in_a_users_test_file(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("test_user.py", "--osmosis-policy=policy.py:policy", "-v")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*test_each_row?row-0? PASSED*", "*test_each_row?row-2? PASSED*"])


def test_an_unknown_marker_argument_fails_loudly(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    pytester.makepyfile(
        test_user="""
import pytest

@pytest.mark.osmosis_dataset("data/test.jsonl", row="0")
def test_x(osmosis_row):
    pass
"""
    )
    result = pytester.runpytest("test_user.py")
    assert (
        "osmosis_dataset got unknown argument(s) row; valid: path, rows"
        in result.stdout.str() + result.stderr.str()
    )


def test_the_marker_and_fixtures_are_listed_with_their_signatures(
    pytester: pytest.Pytester,
) -> None:
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["*@pytest.mark.osmosis_dataset(path, rows=None)*"])
    fixtures = pytester.runpytest("--fixtures")
    # pytest orders fixtures by their location's text, so each is matched on its own.
    for name in ("osmosis_policy", "osmosis_run", "osmosis_row", "osmosis_result"):
        fixtures.stdout.fnmatch_lines([f"{name} -- *pytest_osmosis*plugin.py:*"])


def test_rows_run_with_pytest_asyncio_in_auto_mode_alongside_async_tests(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(
        test_async="""
import asyncio

async def test_an_async_user_test():
    await asyncio.sleep(0)
"""
    )
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy", "test_async.py"
    )
    result.assert_outcomes(passed=4 + 2 + 1)


def test_the_help_lists_every_option_in_an_osmosis_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    out = result.stdout.str()
    assert "osmosis: selection (which rows run, and how many times):" in out
    for flag in (
        "--osmosis-dataset",
        "--osmosis-policy",
        "--osmosis-min-pass-rate",
        "--osmosis-record-mode",
        "--osmosis-html",
    ):
        assert flag in out
    assert "osmosis_pass_threshold" in out
