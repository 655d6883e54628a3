"""The public API a ported production rollout calls, run on ``osmosis-ai`` 0.3.8 and on ours.

Each test runs one official-style snippet in the official venv and, imports migrated, in ours
(``run_on_both``), and compares what it printed (issue 34, items 2-5):

- the judge: ``evaluate_rubric``'s request bodies, captured by a loopback endpoint, equal
  apart from the prompt text when the official SDK is absent from ours, equal including it
  when it is present (ours run in the official venv), and its results and errors equal;
- ``convert_sample_to_trajectory`` returns the pydantic ``Trajectory``, of the same content;
- ``LocalBackend.run_workflow`` / ``run_grader``: same signatures, and overrides take effect;
- the rest of the public API: error bases, signatures, exports, and 70 bad-argument calls
  failing at the same moment as the same kinds of exception.
"""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from interop_support import SCRIPTS, migrate_imports, run_on_both, run_snippet

VERDICT = json.dumps({"score": 7.5, "explanation": "right, and shown"})


def both(official_python: Path, tmp_path: Path, source: str) -> tuple[Any, Any]:
    return run_on_both(official_python, textwrap.dedent(source), cwd=tmp_path)


class JudgeEndpoint:
    """A chat-completions endpoint on 127.0.0.1 that records each side's request bodies.

    A snippet sets ``OPENAI_BASE_URL`` to ``<url>/<side>/v1`` (``side``: the top package of
    its ``evaluate_rubric``), so the two SDKs' requests are kept apart. Replies are
    ``replies`` in turn (the last repeated); an ``int`` reply is that HTTP status.
    """

    def __init__(self) -> None:
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        self.replies: list[str | int] = [VERDICT]
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size))
                side = self.path.strip("/").split("/")[0]
                with endpoint.lock:
                    seen = endpoint.bodies.setdefault(side, [])
                    seen.append(body)
                    reply = endpoint.replies[min(len(seen), len(endpoint.replies)) - 1]
                if isinstance(reply, int):
                    payload = json.dumps({"error": {"message": f"status {reply}"}}).encode()
                    self.send_response(reply)
                else:
                    payload = json.dumps(
                        {
                            "id": "chatcmpl-interop",
                            "object": "chat.completion",
                            "created": 1,
                            "model": body.get("model"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": reply},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {
                                "prompt_tokens": 1,
                                "completion_tokens": 1,
                                "total_tokens": 2,
                            },
                        }
                    ).encode()
                    self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reset(self, *replies: str | int) -> None:
        with self.lock:
            self.bodies.clear()
            self.replies = list(replies)


@pytest.fixture
def judge_endpoint() -> Iterator[JudgeEndpoint]:
    endpoint = JudgeEndpoint()
    endpoint.thread.start()
    try:
        yield endpoint
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


JUDGE_SNIPPET = """
    import asyncio, json, os
    from osmosis_ai.eval.rubric import evaluate_rubric
    side = evaluate_rubric.__module__.split(".")[0]
    os.environ["OPENAI_BASE_URL"] = f"{url}/{{side}}/v1"
    os.environ.pop("OPENAI_API_BASE", None)
    try:
        result = asyncio.run(evaluate_rubric(
            solution_str="6 x 7 = 42", rubric="10 when the product is right and shown, else 0.",
            model={model!r}, api_key="sk-interop-judge", ground_truth="42",
            original_input="What is 6 times 7?", metadata={{"difficulty": "easy"}},
            score_max=10.0, system_prompt="You grade arithmetic.",
        ))
        seen = {{"score": result.score, "explanation": result.explanation,
                 "prompt_source": getattr(result, "prompt_source", "official")}}
    except Exception as exc:
        seen = {{"error": [c.__name__ for c in type(exc).__mro__
                          if c.__module__ == "builtins"], "message": str(exc)}}
    print(json.dumps(seen))
"""


def _judge(
    official_python: Path,
    tmp_path: Path,
    endpoint: JudgeEndpoint,
    model: str = "openai/gpt-4o-mini",
) -> tuple[Any, Any]:
    return both(official_python, tmp_path, JUDGE_SNIPPET.format(url=endpoint.url, model=model))


def _without_prompt_text(body: dict[str, Any]) -> dict[str, Any]:
    return {
        **body,
        "messages": [{**message, "content": "<prompt>"} for message in body["messages"]],
    }


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/a-model-litellm-does-not-know"])
def test_the_judges_request_is_the_officials_apart_from_the_prompt_text(
    official_python: Path, tmp_path: Path, judge_endpoint: JudgeEndpoint, model: str
) -> None:
    official, ours = _judge(official_python, tmp_path, judge_endpoint, model)
    assert ours.pop("prompt_source") == "ours"  # osmosis-ai is not in our venv
    official.pop("prompt_source")
    assert ours == official == {"score": 7.5, "explanation": "right, and shown"}
    [official_body] = judge_endpoint.bodies["osmosis_ai"]
    [our_body] = judge_endpoint.bodies["osmosis_rollout"]
    assert _without_prompt_text(our_body) == _without_prompt_text(official_body)
    assert official_body["temperature"] == 0
    expected_format = "json_schema" if model.endswith("gpt-4o-mini") else "json_object"
    assert official_body["response_format"]["type"] == expected_format


def test_with_osmosis_ai_installed_the_judges_request_is_the_officials_byte_for_byte(
    official_python: Path, tmp_path: Path, judge_endpoint: JudgeEndpoint
) -> None:
    # Ours run in the official venv, where osmosis-ai (and its prompt builder) is installed.
    source = textwrap.dedent(
        JUDGE_SNIPPET.format(url=judge_endpoint.url, model="openai/gpt-4o-mini")
    )
    official = run_snippet(official_python, source, cwd=tmp_path)
    ours_source = migrate_imports(
        source.replace("osmosis_ai.eval.rubric", "osmosis_rollout.rubric")
    )
    ours = run_snippet(official_python, ours_source, cwd=tmp_path)
    assert ours.pop("prompt_source") == "official"
    official.pop("prompt_source")
    assert ours == official
    assert judge_endpoint.bodies["osmosis_rollout"] == judge_endpoint.bodies["osmosis_ai"]


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps({"score": "7.5", "explanation": "a string score"}),
        "Score: " + VERDICT,
        json.dumps({"score": 7.5}),
        "",
    ],
    ids=["string-score", "prose", "no-explanation", "empty"],
)
def test_an_unusable_verdict_is_one_request_and_the_same_error(
    official_python: Path, tmp_path: Path, judge_endpoint: JudgeEndpoint, reply: str
) -> None:
    judge_endpoint.reset(reply, VERDICT)
    official, ours = _judge(official_python, tmp_path, judge_endpoint)
    assert ours == official
    assert "RuntimeError" in official["error"]
    assert official["message"].startswith("Provider 'openai' request for model 'gpt-4o-mini'")
    assert (
        len(judge_endpoint.bodies["osmosis_rollout"])
        == len(judge_endpoint.bodies["osmosis_ai"])
        == 1
    )


@pytest.mark.parametrize("status", [500, 429])
def test_a_failing_provider_is_tried_as_often_and_raises_the_same_error(
    official_python: Path, tmp_path: Path, judge_endpoint: JudgeEndpoint, status: int
) -> None:
    judge_endpoint.reset(status)
    official, ours = _judge(official_python, tmp_path, judge_endpoint)
    assert set(ours["error"]) == set(official["error"])
    assert len(judge_endpoint.bodies["osmosis_rollout"]) == len(judge_endpoint.bodies["osmosis_ai"])


# -- item 3: convert_sample_to_trajectory ---------------------------------------------------


def test_convert_sample_to_trajectory_returns_the_pydantic_trajectory_of_the_same_content(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        """
        import json
        from pydantic import BaseModel, ValidationError
        from osmosis_ai.rollout import RolloutSample
        from osmosis_ai.rollout.trajectory.converter import convert_sample_to_trajectory
        from osmosis_ai.rollout.trajectory.report import SampleReport
        messages = [
            {"role": "system", "content": "You multiply."},
            {"role": "user", "content": "What is 6 times 7?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "multiply", "arguments": "{\\"a\\": 6, \\"b\\": 7}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "42", "reasoning_content": "6*7"},
        ]
        sample = RolloutSample(messages=messages, trajectory_messages=messages, reward=1.0,
                               label="42", metrics={"turns": 2})
        report = SampleReport.model_validate({"model_name": "policy-v1", "llm_call_metrics": [
            {"prompt_tokens": 10, "completion_tokens": 5}, {"prompt_tokens": 20,
             "completion_tokens": 2}]})
        trajectory = convert_sample_to_trajectory(
            sample, rollout_id="r-1", request_label="42", request_metadata={"d": 1},
            request_extra_fields={"source": "x"}, report=report)
        document = trajectory.to_json_dict()
        document["agent"].pop("version")  # each package's own version
        try:
            convert_sample_to_trajectory(RolloutSample(), rollout_id="r-2")
            empty = None
        except ValidationError as exc:
            empty = [error["loc"] for error in exc.errors()]
        print(json.dumps({
            "type": type(trajectory).__name__,
            "pydantic": isinstance(trajectory, BaseModel),
            "steps": [step.source for step in trajectory.steps],
            "tool": trajectory.steps[2].tool_calls[0].function_name,
            "document": document,
            "empty": empty,
        }))
        """,
    )
    assert ours == official
    assert official["type"] == "Trajectory" and official["pydantic"] is True


# -- item 4: LocalBackend.run_workflow / run_grader -----------------------------------------


def test_local_backend_runs_overridden_run_workflow_and_run_grader(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        """
        import asyncio, inspect, json
        from osmosis_ai.rollout import (AgentWorkflow, ExecutionRequest, Grader, LocalBackend)
        calls = []
        class Echo(AgentWorkflow):
            async def run(self, ctx):
                return [*ctx.prompt, {"role": "assistant", "content": "42"}]
        class One(Grader):
            async def grade(self, ctx):
                ctx.set_reward(1.0)
        class Custom(LocalBackend):
            async def run_workflow(self, request, *, queued_sec=0.0):
                calls.append("workflow")
                return await super().run_workflow(request, queued_sec=queued_sec)
            async def run_grader(self, request, result):
                calls.append("grader")
                graded = await super().run_grader(request, result)
                graded.sample.reward = 0.25
                return graded
        request = ExecutionRequest(id="r-1", prompt=[{"role": "user", "content": "6*7?"}],
                                   label="42")
        outcome = asyncio.run(Custom(workflow=Echo, grader=One).execute(request))
        def shape(fn):
            return [(p.name, p.kind.name, repr(p.default)) for p in
                    inspect.signature(fn).parameters.values()]
        plain = LocalBackend(workflow=Echo)
        direct = asyncio.run(plain.run_workflow(request))
        print(json.dumps({
            "calls": calls,
            "reward": outcome.grader.sample.reward,
            "status": outcome.grader.status.value,
            "run_workflow": shape(LocalBackend.run_workflow),
            "run_grader": shape(LocalBackend.run_grader),
            "direct": [direct.status.value, direct.sample.messages[-1]["content"]],
            "no_grader": asyncio.run(plain.run_grader(request, direct)) is direct,
        }))
        """,
    )
    assert ours == official
    assert official["calls"] == ["workflow", "grader"] and official["reward"] == 0.25


# -- item 5: the rest of the public API ------------------------------------------------------


def test_errors_signatures_and_exports_are_the_officials(
    official_python: Path, tmp_path: Path
) -> None:
    official, ours = both(
        official_python,
        tmp_path,
        """
        import inspect, json
        from osmosis_ai.rollout import ExecutionBackend, LocalBackend
        from osmosis_ai.rollout.agent_workflow import AgentWorkflow, AgentWorkflowConfig
        from osmosis_ai.rollout.client import RolloutProtocolError
        from osmosis_ai.rollout.server.app import create_rollout_server
        from osmosis_ai.rollout.trajectory import save_trajectory
        def shape(fn):
            return [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]
        error = RolloutProtocolError("GET /health answered 502", status_code=502)
        app = create_rollout_server(backend=None, configure_logging=False)
        print(json.dumps({
            "protocol_error": [isinstance(error, RuntimeError), error.status_code, str(error)],
            "cancel_is_coroutine": inspect.iscoroutinefunction(ExecutionBackend.cancel_rollouts),
            "cancel": shape(ExecutionBackend.cancel_rollouts),
            "cancel_returns": LocalBackend(workflow=AgentWorkflow).cancel_rollouts(["r"]),
            "config": AgentWorkflowConfig(name="w").name,
            "save_is_coroutine": inspect.iscoroutinefunction(save_trajectory),
            "save": shape(save_trajectory),
            "server_without_backend": "/rollout" in app.openapi()["paths"],
        }))
        """,
    )
    assert ours == official


KNOWN_DIFFERENCES = {
    # Our client also takes its url positionally (controller code of ours does); a call the
    # official refuses is accepted, so no official code breaks.
    "RolloutClient('http://x')": "ours accepts a positional url",
}


def test_bad_arguments_fail_when_and_as_the_officials_do(
    official_python: Path, tmp_path: Path
) -> None:
    source = (SCRIPTS / "bad_arguments.py").read_text(encoding="utf-8")
    official, ours = run_on_both(official_python, source, cwd=tmp_path)
    assert set(ours) == set(official) and len(official) == 70
    differing = {name for name in official if ours[name] != official[name]}
    assert differing == set(KNOWN_DIFFERENCES), {
        name: {"official": official[name], "ours": ours[name]} for name in differing
    }
