"""The public API a ported production rollout calls, run on ``osmosis-ai`` 0.3.8 and on ours.

Each test runs one official-style snippet in the official venv and, imports migrated, in ours
(``run_on_both``), and compares what it printed (issue 34, items 2-5); the judge's cases run
in one process per SDK (the ``judged`` fixture), each case against its own endpoint path:

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
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from interop_support import SCRIPTS, migrate_imports, run_on_both, run_snippet

VERDICT = json.dumps({"score": 7.5, "explanation": "right, and shown"})


def both(official_python: Path, tmp_path: Path, source: str) -> tuple[Any, Any]:
    return run_on_both(official_python, textwrap.dedent(source), cwd=tmp_path)


class JudgeEndpoint:
    """A chat-completions endpoint on 127.0.0.1 that records each run's request bodies.

    A snippet's call for one case sets ``OPENAI_BASE_URL`` to ``<url>/<case>/<run>/v1``, so
    the requests of every case and every run (the official SDK, ours, ours in the official
    venv) are kept apart. A case's replies are ``replies[case]`` in turn (the last repeated);
    an ``int`` reply is that HTTP status.
    """

    def __init__(self, replies: dict[str, tuple[str | int, ...]]) -> None:
        self.bodies: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.replies = replies
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size))
                case, run = self.path.strip("/").split("/")[:2]
                with endpoint.lock:
                    seen = endpoint.bodies.setdefault((case, run), [])
                    seen.append(body)
                    replies = endpoint.replies[case]
                    reply = replies[min(len(seen), len(replies)) - 1]
                if isinstance(reply, int):
                    payload = json.dumps({"error": {"message": f"status {reply}"}}).encode()
                    self.send_response(reply)
                    # Both SDKs retry through the OpenAI client, which waits this long instead
                    # of its backoff of seconds: how often they try is what is compared.
                    self.send_header("retry-after-ms", "10")
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

    def requests(self, case: str, run: str) -> list[dict[str, Any]]:
        """The request bodies ``run`` sent for ``case``."""
        with self.lock:
            return list(self.bodies.get((case, run), []))


UNUSABLE_VERDICTS = {
    "string-score": json.dumps({"score": "7.5", "explanation": "a string score"}),
    "prose": "Score: " + VERDICT,
    "no-explanation": json.dumps({"score": 7.5}),
    "empty": "",
}

#: Every judge case: (model, the endpoint's replies in turn). All cases run in one process
#: per SDK, one after the other: each process imports LiteLLM, seconds of CPU every time.
JUDGE_CASES: dict[str, tuple[str, tuple[str | int, ...]]] = {
    "gpt-4o-mini": ("openai/gpt-4o-mini", (VERDICT,)),
    "unknown-model": ("openai/a-model-litellm-does-not-know", (VERDICT,)),
    **{
        f"unusable-{name}": ("openai/gpt-4o-mini", (reply, VERDICT))
        for name, reply in UNUSABLE_VERDICTS.items()
    },
    "status-500": ("openai/gpt-4o-mini", (500,)),
    "status-429": ("openai/gpt-4o-mini", (429,)),
}

JUDGE_SNIPPET = """
    import asyncio, json, os
    from osmosis_ai.eval.rubric import evaluate_rubric
    os.environ.pop("OPENAI_API_BASE", None)

    async def judge(case, model):
        os.environ["OPENAI_BASE_URL"] = f"{url}/{{case}}/{run}/v1"
        try:
            result = await evaluate_rubric(
                solution_str="6 x 7 = 42", rubric="10 when the product is right and shown, else 0.",
                model=model, api_key="sk-interop-judge", ground_truth="42",
                original_input="What is 6 times 7?", metadata={{"difficulty": "easy"}},
                score_max=10.0, system_prompt="You grade arithmetic.",
            )
            return {{"score": result.score, "explanation": result.explanation,
                     "prompt_source": getattr(result, "prompt_source", "official")}}
        except Exception as exc:
            return {{"error": [c.__name__ for c in type(exc).__mro__
                              if c.__module__ == "builtins"], "message": str(exc)}}

    async def main():
        return {{case: await judge(case, model) for case, model in {cases!r}.items()}}

    print(json.dumps(asyncio.run(main())))
"""


@dataclass(frozen=True)
class Judged:
    """What each run's ``evaluate_rubric`` returned or raised per case, and the endpoint."""

    official: dict[str, Any]
    ours: dict[str, Any]
    ours_in_official_venv: dict[str, Any]
    endpoint: JudgeEndpoint


def _judge_source(url: str, run: str, cases: dict[str, str]) -> str:
    return textwrap.dedent(JUDGE_SNIPPET.format(url=url, run=run, cases=cases))


@pytest.fixture(scope="module")
def judged(official_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    """Every judge case on the official SDK and on ours, and ``gpt-4o-mini`` once more with
    ours in the official venv (where osmosis-ai, and its prompt builder, is installed)."""
    endpoint = JudgeEndpoint({case: replies for case, (_, replies) in JUDGE_CASES.items()})
    endpoint.thread.start()
    cwd = tmp_path_factory.mktemp("judge")
    models = {case: model for case, (model, _) in JUDGE_CASES.items()}
    try:
        official = run_snippet(
            official_python, _judge_source(endpoint.url, "official", models), cwd=cwd
        )
        ours = run_snippet(
            sys.executable, _ours(_judge_source(endpoint.url, "ours", models)), cwd=cwd
        )
        in_official_venv = run_snippet(
            official_python,
            _ours(
                _judge_source(
                    endpoint.url, "ours-in-official-venv", {"gpt-4o-mini": models["gpt-4o-mini"]}
                )
            ),
            cwd=cwd,
        )
        yield Judged(official, ours, in_official_venv, endpoint)
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


def _ours(source: str) -> str:
    """The migration ``run_on_both`` applies, with ours keeping the rubric in ``rubric``."""
    return migrate_imports(source.replace("osmosis_ai.eval.rubric", "osmosis_rollout.rubric"))


def _without_prompt_text(body: dict[str, Any]) -> dict[str, Any]:
    return {
        **body,
        "messages": [{**message, "content": "<prompt>"} for message in body["messages"]],
    }


@pytest.mark.parametrize("case", ["gpt-4o-mini", "unknown-model"])
def test_the_judges_request_is_the_officials_apart_from_the_prompt_text(
    judged: Judged, case: str
) -> None:
    official, ours = dict(judged.official[case]), dict(judged.ours[case])
    assert ours.pop("prompt_source") == "ours"  # osmosis-ai is not in our venv
    official.pop("prompt_source")
    assert ours == official == {"score": 7.5, "explanation": "right, and shown"}
    [official_body] = judged.endpoint.requests(case, "official")
    [our_body] = judged.endpoint.requests(case, "ours")
    assert _without_prompt_text(our_body) == _without_prompt_text(official_body)
    assert official_body["temperature"] == 0
    expected_format = (
        "json_schema" if JUDGE_CASES[case][0].endswith("gpt-4o-mini") else "json_object"
    )
    assert official_body["response_format"]["type"] == expected_format


def test_with_osmosis_ai_installed_the_judges_request_is_the_officials_byte_for_byte(
    judged: Judged,
) -> None:
    official = dict(judged.official["gpt-4o-mini"])
    ours = dict(judged.ours_in_official_venv["gpt-4o-mini"])
    assert ours.pop("prompt_source") == "official"
    official.pop("prompt_source")
    assert ours == official
    assert judged.endpoint.requests("gpt-4o-mini", "ours-in-official-venv") == (
        judged.endpoint.requests("gpt-4o-mini", "official")
    )


@pytest.mark.parametrize("reply", sorted(UNUSABLE_VERDICTS))
def test_an_unusable_verdict_is_one_request_and_the_same_error(judged: Judged, reply: str) -> None:
    case = f"unusable-{reply}"
    official, ours = judged.official[case], judged.ours[case]
    assert ours == official
    assert "RuntimeError" in official["error"]
    assert official["message"].startswith("Provider 'openai' request for model 'gpt-4o-mini'")
    assert (
        len(judged.endpoint.requests(case, "ours"))
        == len(judged.endpoint.requests(case, "official"))
        == 1
    )


@pytest.mark.parametrize("status", [500, 429])
def test_a_failing_provider_is_tried_as_often_and_raises_the_same_error(
    judged: Judged, status: int
) -> None:
    case = f"status-{status}"
    official, ours = judged.official[case], judged.ours[case]
    assert set(ours["error"]) == set(official["error"])
    assert len(judged.endpoint.requests(case, "ours")) == len(
        judged.endpoint.requests(case, "official")
    )


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
