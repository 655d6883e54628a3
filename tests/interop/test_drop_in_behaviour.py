"""Behaviours a user of the official SDK hits, observed on ``osmosis-ai`` 0.3.8 and on ours.

Each test runs one official-style snippet twice (``run_on_both``): in the official venv, and
in ours with the documented import migration (the three behaviours that import LiteLLM and
the frameworks share one snippet, ``integrations_seen``, each a section of it). The snippet prints what a user's code would
see (exception types, attributes, log lines, return values) as JSON; the two must be equal.
Where ours says more than the official (an install hint naming ``pytest-osmosis``), that is
asserted beside the comparison. docs/interop.md lists what is compared.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from interop_support import run_on_both


def both(official_python: Path, tmp_path: Path, source: str) -> tuple[object, object]:
    return run_on_both(official_python, textwrap.dedent(source), cwd=tmp_path)


MISSING_EXTRA = """
    import json, sys
    sys.modules[{blocked!r}] = None  # what an absent package looks like to import
    try:
        {statement}
    except ImportError as exc:
        print(json.dumps({{
            "module_not_found": isinstance(exc, ModuleNotFoundError),
            "name": exc.name,
            "hint": "pip install" in str(exc),
            "message": str(exc),
        }}))
"""


@pytest.mark.parametrize(
    ("blocked", "statement", "extra"),
    [
        ("fastapi", "from osmosis_ai.rollout.server import create_rollout_server", "server"),
        ("strands", "import osmosis_ai.rollout.integrations.agents.strands", "strands"),
        ("litellm", "import osmosis_ai.rollout.integrations.agents.strands", "strands"),
        ("agents", "import osmosis_ai.rollout.integrations.agents.openai_agents", "openai-agents"),
        (
            "litellm",
            "import osmosis_ai.rollout.integrations.agents.openai_agents",
            "openai-agents",
        ),
    ],
)
def test_a_missing_extra_is_a_module_not_found_error_naming_the_module(
    official_python: Path, tmp_path: Path, blocked: str, statement: str, extra: str
) -> None:
    official, ours = both(
        official_python, tmp_path, MISSING_EXTRA.format(blocked=blocked, statement=statement)
    )
    assert isinstance(official, dict) and isinstance(ours, dict)
    assert f'pip install "osmosis-ai[{extra}]"' in official.pop("message")
    assert f'pip install "pytest-osmosis[{extra}]"' in ours.pop("message")
    assert ours == official == {"module_not_found": True, "name": blocked, "hint": True}


@pytest.mark.parametrize("reward", ["nan", "inf", "-inf"])
def test_a_non_finite_reward_is_a_pydantic_validation_error(
    official_python: Path, tmp_path: Path, reward: str
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        f"""
        import json
        from pydantic import ValidationError
        from osmosis_ai.rollout import GraderContext, RolloutSample
        ctx = GraderContext(sample=RolloutSample())
        try:
            ctx.set_reward(float({reward!r}))
        except ValidationError as exc:
            error = exc.errors()[0]
            print(json.dumps({{
                "value_error": isinstance(exc, ValueError),
                "errors": len(exc.errors()),
                "type": error["type"],
                "loc": list(error["loc"]),
                "reward_after": repr(ctx.sample.reward),
                "text": str(exc),
            }}))
        """,
    )
    assert isinstance(official, dict) and isinstance(ours, dict)
    official.pop("text")
    # Ours keeps the one line saying what the grader did.
    assert ours.pop("text") == f"the grader set reward={reward}; a reward must be a finite number"
    assert (
        ours
        == official
        == {
            "value_error": True,
            "errors": 1,
            "type": "finite_number",
            "loc": ["reward"],
            "reward_after": "None",
        }
    )


def test_an_unknown_lease_raises_unknown_lease_error_a_key_error(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        """
        import asyncio, json
        from osmosis_ai.rollout.server.lease import LeaseManager, UnknownLeaseError

        async def on_expired(rollout_id):
            pass

        async def main():
            manager = LeaseManager(timeout_sec=5.0, on_expired=on_expired)
            seen = {}
            for call in ("authenticate", "renew"):
                try:
                    getattr(manager, call)("r-unknown", "token")
                except KeyError as exc:
                    seen[call] = [type(exc) is UnknownLeaseError, list(exc.args)]
            try:
                manager.expired("r-unknown")
            except UnknownLeaseError as exc:
                seen["expired"] = [True, list(exc.args)]
            await manager.close()
            return seen

        print(json.dumps(asyncio.run(main())))
        """,
    )
    assert (
        ours
        == official
        == {
            "authenticate": [True, ["r-unknown"]],
            "renew": [True, ["r-unknown"]],
            "expired": [True, ["r-unknown"]],
        }
    )


RUBRIC_CALLS = {
    "empty rubric": {"solution_str": "4", "rubric": "  "},
    "empty solution": {"solution_str": " ", "rubric": "Is it 4?"},
    "both empty (the solution is checked first)": {"solution_str": "", "rubric": ""},
    "solution not a string": {"solution_str": 4, "rubric": "Is it 4?"},
    "rubric not a string": {"solution_str": "4", "rubric": None},
    "empty score range": {"solution_str": "4", "rubric": "Is it 4?", "score_min": 1.0},
}


RUBRIC_SECTION = f"""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)
    from osmosis_ai.eval.rubric import evaluate_rubric

    async def rubric_call(arguments):
        try:
            await evaluate_rubric(model="openai/gpt-5-mini", **arguments)
        except Exception as exc:
            return {{"type": type(exc).__name__, "message": str(exc)}}
        return {{"type": None}}

    seen["rubric"] = {{
        case: asyncio.run(rubric_call(arguments)) for case, arguments in {RUBRIC_CALLS!r}.items()
    }}
"""


def test_evaluate_rubric_refuses_bad_arguments_like_the_official_before_any_request(
    integrations_seen: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    # No key and an unreachable provider: a check that came after the request would show as a
    # MissingAPIKeyError or a provider error instead.
    official, ours = (seen["rubric"] for seen in integrations_seen)
    assert isinstance(official, dict) and isinstance(ours, dict)
    assert sorted(ours) == sorted(official) == sorted(RUBRIC_CALLS)
    for case, seen in official.items():
        assert ours[case]["type"] == seen["type"] in ("TypeError", "ValueError"), case
        # Ours opens with the official message and then says what it got.
        assert ours[case]["message"].startswith(seen["message"]), case


LOG_CAPTURE = """
    import asyncio, json, logging, tempfile
    from pathlib import Path

    class Keep(logging.Handler):
        lines = []

        def emit(self, record):
            if record.levelno >= logging.WARNING:
                self.lines.append([record.levelname, record.getMessage()])

    logging.getLogger().addHandler(Keep())
    logging.getLogger().setLevel(logging.INFO)
"""


CONVERSION_SECTION = """
    from osmosis_ai.rollout.integrations.agents.openai_agents import SessionSampleSource
    from osmosis_ai.rollout.integrations.agents.strands import StrandsAgentSampleSource

    class Session:  # any OpenAI Agents session: the items the runner persisted
        async def get_items(self, limit=None):
            return [{"role": "user", "content": "hi"}, {"type": "mystery"}]

    class Agent:  # a Strands agent's messages
        messages = [{"role": "user", "content": [{"mystery": 1}]}]

    async def convert():
        first = await SessionSampleSource(Session()).get_sample()
        second = await StrandsAgentSampleSource(Agent()).get_sample()
        return [first.trajectory_messages, second.trajectory_messages]

    # First in the snippet, right after the capture starts: an import's warning would show.
    seen["conversion"] = {"trajectories": asyncio.run(convert()), "logged": list(Keep.lines)}
"""


def test_the_integrations_conversion_failure_warnings_read_as_the_official(
    integrations_seen: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    official, ours = (seen["conversion"] for seen in integrations_seen)
    assert (
        ours
        == official
        == {
            "trajectories": [None, None],
            "logged": [
                ["WARNING", "Failed to convert OpenAI Agents messages for trajectory persistence"],
                ["WARNING", "Failed to convert Strands messages for trajectory persistence"],
            ],
        }
    )


def test_save_trajectory_warnings_read_as_the_official(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        LOG_CAPTURE
        + """
    from osmosis_ai.rollout import ExecutionResult, RolloutSample, RolloutStatus
    from osmosis_ai.rollout.trajectory import save_trajectory
    from osmosis_ai.rollout.trajectory.report import SampleReport, TrajectoryReport

    root = Path(tempfile.mkdtemp())
    blocker = root / "a-file"
    blocker.write_text("where the artifact root should be")
    sample = RolloutSample(messages=[{"role": "user", "content": "hi"}], reward=1.0)
    done = ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample)
    two = TrajectoryReport(samples={"a": SampleReport(), "b": SampleReport()})

    async def main():
        await save_trajectory(rollout_id="r-1", result=done, artifact_root=blocker)
        await save_trajectory(rollout_id="r-2", result=done, artifact_root=root, report=two)
        return (root / "r-2" / "trajectory.json").is_file()

    print(json.dumps({"saved": asyncio.run(main()), "logged": Keep.lines}))
    """,
    )
    assert (
        ours
        == official
        == {
            "saved": True,
            "logged": [
                ["WARNING", "Failed to save the trajectory for rollout r-1 (best-effort)"],
                [
                    "WARNING",
                    "Trajectory report for rollout r-2 has 2 entries but the rollout produced one "
                    "sample; preserving them under extra.osmosis.unmatched_sample_reports",
                ],
            ],
        }
    )


LITELLM_MODEL_SECTION = """
    from types import SimpleNamespace
    from agents import ModelSettings, ModelTracing
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText
    from osmosis_ai.rollout import RolloutContext
    from osmosis_ai.rollout.integrations.agents.openai_agents import OsmosisLitellmModel

    async def canned(*args, **kwargs):
        yield SimpleNamespace(type="response.created")
        text = ResponseOutputText(type="output_text", text="canned answer", annotations=[])
        message = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[text]
        )
        done = SimpleNamespace(output=[message], usage=None)
        yield SimpleNamespace(type="response.completed", response=done)

    class Canned(OsmosisLitellmModel):
        def stream_response(self, *args, **kwargs):
            return canned(*args, **kwargs)

    def reply(response):
        texts = [part.text for item in response.output for part in item.content]
        return {"output": texts, "requests": response.usage.requests}

    async def get_responses():
        seen = {}
        # No OsmosisMemorySession is registered, and nothing listens at the URL: only the
        # replaced stream_response can answer.
        with RolloutContext(chat_completions_url="http://127.0.0.1:9/v1", api_key="k"):
            seen["subclass"] = reply(await Canned().get_response("sys", "hi"))
            patched = OsmosisLitellmModel()
            patched.stream_response = canned
            seen["patched instance"] = reply(await patched.get_response("sys", "hi"))
            try:
                await OsmosisLitellmModel().get_response(
                    system_instructions=None, input="hi", model_settings=ModelSettings(),
                    tools=[], output_schema=None, handoffs=[], tracing=ModelTracing.DISABLED,
                )
            except Exception as exc:
                seen["real request without a session"] = type(exc).__name__
        return seen

    seen["get_response"] = asyncio.run(get_responses())
"""

INTEGRATIONS = (
    """
    import asyncio, json, os
    seen = {}
"""
    + LOG_CAPTURE.replace("import asyncio, json, logging, tempfile", "import logging")
    + CONVERSION_SECTION
    + LITELLM_MODEL_SECTION
    + RUBRIC_SECTION
    + """
    print(json.dumps(seen))
"""
)


@pytest.fixture(scope="module")
def integrations_seen(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the official SDK and ours did in the three behaviours that need LiteLLM and the
    frameworks imported: one process per SDK runs all three (each import costs seconds)."""
    official, ours = run_on_both(
        official_python, textwrap.dedent(INTEGRATIONS), cwd=tmp_path_factory.mktemp("integrations")
    )
    assert isinstance(official, dict) and isinstance(ours, dict)
    return official, ours


def test_get_response_aggregates_a_replaced_stream_response_and_checks_the_session_at_request(
    integrations_seen: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    official, ours = (seen["get_response"] for seen in integrations_seen)
    assert (
        ours
        == official
        == {
            "subclass": {"output": ["canned answer"], "requests": 0},
            "patched instance": {"output": ["canned answer"], "requests": 0},
            "real request without a session": "RuntimeError",
        }
    )


def test_already_matching_lease_timeouts_and_concurrency_config_stay_so(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        """
        import json
        from pydantic import ValidationError
        from osmosis_ai.rollout import ConcurrencyConfig
        from osmosis_ai.rollout.server.lease import LeaseManager

        async def on_expired(rollout_id):
            pass

        seen = {"default max_concurrent": ConcurrencyConfig().max_concurrent}
        for timeout in (0.0, -1.0, float("nan"), float("inf"), 0.5):
            try:
                LeaseManager(timeout_sec=timeout, on_expired=on_expired)
                seen[repr(timeout)] = "accepted"
            except ValueError as exc:
                seen[repr(timeout)] = type(exc).__name__
        try:
            ConcurrencyConfig(max_concurrent=0)
        except ValidationError as exc:
            seen["max_concurrent=0"] = exc.errors()[0]["type"]
        print(json.dumps(seen))
        """,
    )
    assert ours == official
    assert official["0.5"] == "accepted" and official["nan"] == "ValueError"
