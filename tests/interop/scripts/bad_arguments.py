"""Bad arguments to the public API: when each call fails, and as what.

Run by ``tests/interop/test_public_api_differential.py`` in the official ``osmosis-ai`` 0.3.8
venv and, imports migrated, in ours. Each case is an expression in the official SDK's
imports; the script prints one JSON object mapping the case to its outcome: ``when`` it
failed (``call``: the expression raised; ``await``: the coroutine it returned raised when
awaited; ``ok``: neither) and ``kinds``, the standard exception classes (and pydantic's
``ValidationError``) the error is an instance of. Class names are not compared: ours may be
a subclass with a clearer message, as long as ``except`` clauses written for the official
SDK catch it the same.
"""

# The imports are the names the cases below evaluate (eval), not used directly.
# ruff: noqa: F401

import asyncio
import inspect
import json
import tempfile
from typing import Any

from osmosis_ai.eval.rubric import evaluate_rubric
from osmosis_ai.rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    Grader,
    GraderConfig,
    GraderContext,
    LocalBackend,
    RolloutErrorCategory,
    RolloutInitRequest,
    RolloutSample,
    RolloutStatus,
    get_rollout_context,
)
from osmosis_ai.rollout.client import RolloutClient, RolloutProtocolError
from osmosis_ai.rollout.server.app import create_rollout_server
from osmosis_ai.rollout.trajectory import save_trajectory
from osmosis_ai.rollout.trajectory.converter import convert_sample_to_trajectory
from pydantic import ValidationError

KINDS: tuple[tuple[str, type[BaseException]], ...] = (
    ("ValidationError", ValidationError),
    ("TypeError", TypeError),
    ("ValueError", ValueError),
    ("KeyError", KeyError),
    ("LookupError", LookupError),
    ("AttributeError", AttributeError),
    ("ImportError", ImportError),
    ("RuntimeError", RuntimeError),
    ("TimeoutError", TimeoutError),
    ("NotImplementedError", NotImplementedError),
    ("OSError", OSError),
)


class Echo(AgentWorkflow):
    async def run(self, ctx: Any) -> Any:
        return ctx.prompt


class One(Grader):
    async def grade(self, ctx: Any) -> None:
        ctx.set_reward(1.0)


class Abstract(AgentWorkflow):
    pass


class NoGrade(Grader):
    pass


backend = LocalBackend(workflow=Echo)
request = ExecutionRequest(id="r", prompt=[{"role": "user", "content": "hi"}])
done = ExecutionResult(status=RolloutStatus.SUCCESS, sample=RolloutSample())
root = tempfile.mkdtemp()

CASES = {
    # LocalBackend
    "LocalBackend()": "LocalBackend()",
    "LocalBackend(Echo)": "LocalBackend(Echo)",
    "LocalBackend(workflow=None)": "LocalBackend(workflow=None)",
    "LocalBackend(workflow='no_such_module:X')": "LocalBackend(workflow='no_such_module:X')",
    "LocalBackend(workflow='json:NoSuchName')": "LocalBackend(workflow='json:NoSuchName')",
    "LocalBackend(workflow='not a reference')": "LocalBackend(workflow='not a reference')",
    "LocalBackend(workflow=Echo, workflow_config=123)": (
        "LocalBackend(workflow=Echo, workflow_config=123)"
    ),
    "LocalBackend(workflow=Echo, grader='no_such_module:G')": (
        "LocalBackend(workflow=Echo, grader='no_such_module:G')"
    ),
    "LocalBackend(workflow=Echo, unknown=1)": "LocalBackend(workflow=Echo, unknown=1)",
    "backend.execute(None)": "backend.execute(None)",
    "backend.run_workflow(None)": "backend.run_workflow(None)",
    "backend.run_grader(request, None)": "backend.run_grader(request, None)",
    "backend.cancel_rollouts(ids=None, prefix=None, all=False)": (
        "backend.cancel_rollouts(ids=None, prefix=None, all=False)"
    ),
    "backend.cancel_rollouts(['r'])": "backend.cancel_rollouts(['r'])",
    "Abstract()": "Abstract()",
    "NoGrade()": "NoGrade()",
    # create_rollout_server
    "create_rollout_server()": "create_rollout_server()",
    "create_rollout_server(backend)": "create_rollout_server(backend)",
    "create_rollout_server(backend=None)": (
        "create_rollout_server(backend=None, configure_logging=False)"
    ),
    "create_rollout_server(backend=object())": (
        "create_rollout_server(backend=object(), configure_logging=False)"
    ),
    "create_rollout_server(api_key='')": (
        "create_rollout_server(backend=backend, api_key='', configure_logging=False)"
    ),
    "create_rollout_server(api_key='  ')": (
        "create_rollout_server(backend=backend, api_key='  ', configure_logging=False)"
    ),
    "create_rollout_server(result_wait_timeout_sec=-1)": (
        "create_rollout_server(backend=backend, result_wait_timeout_sec=-1, "
        "configure_logging=False)"
    ),
    "create_rollout_server(polling_lease_timeout_sec=0)": (
        "create_rollout_server(backend=backend, polling_lease_timeout_sec=0, "
        "configure_logging=False)"
    ),
    "create_rollout_server(result_retention_sec=-5)": (
        "create_rollout_server(backend=backend, result_retention_sec=-5, configure_logging=False)"
    ),
    "create_rollout_server(result_wait_timeout_sec=nan)": (
        "create_rollout_server(backend=backend, result_wait_timeout_sec=float('nan'), "
        "configure_logging=False)"
    ),
    "create_rollout_server(lifespan=5)": (
        "create_rollout_server(backend=backend, lifespan=5, configure_logging=False)"
    ),
    "create_rollout_server(unknown=1)": "create_rollout_server(backend=backend, unknown=1)",
    # RolloutClient
    "RolloutClient()": "RolloutClient()",
    "RolloutClient('http://x')": "RolloutClient('http://x')",
    "RolloutClient(url=None)": "RolloutClient(url=None)",
    "RolloutClient(api_key='')": "RolloutClient(url='http://x', api_key='')",
    "RolloutClient(admission_timeout_sec=inf)": (
        "RolloutClient(url='http://x', admission_timeout_sec=float('inf'))"
    ),
    "RolloutClient.wait_idle(timeout_sec=0)": (
        "RolloutClient(url='http://127.0.0.1:9').wait_idle(timeout_sec=0)"
    ),
    "RolloutClient.wait_idle(poll_interval_sec=-1)": (
        "RolloutClient(url='http://127.0.0.1:9').wait_idle(poll_interval_sec=-1)"
    ),
    "RolloutClient.run_rollout_async()": "RolloutClient(url='http://x').run_rollout_async()",
    "RolloutProtocolError('x')": "RolloutProtocolError('x')",
    # Requests and results
    "ExecutionRequest()": "ExecutionRequest()",
    "ExecutionRequest(prompt='x')": "ExecutionRequest(id='r', prompt='x')",
    "ExecutionRequest(agent_timeout_sec=-1)": (
        "ExecutionRequest(id='r', prompt=[], agent_timeout_sec=-1)"
    ),
    "ExecutionRequest(grader_timeout_sec='abc')": (
        "ExecutionRequest(id='r', prompt=[], grader_timeout_sec='abc')"
    ),
    "ExecutionResult(status='bogus')": "ExecutionResult(status='bogus')",
    "ExecutionOutcome()": "ExecutionOutcome()",
    "RolloutInitRequest()": "RolloutInitRequest()",
    "RolloutStatus('bogus')": "RolloutStatus('bogus')",
    "RolloutErrorCategory('bogus')": "RolloutErrorCategory('bogus')",
    "RolloutSample(reward='x')": "RolloutSample(reward='x')",
    "RolloutSample(reward=nan)": "RolloutSample(reward=float('nan'))",
    "RolloutSample(messages='x')": "RolloutSample(messages='x')",
    "AgentWorkflowOutput(messages='x')": "AgentWorkflowOutput(messages='x')",
    "AgentWorkflowOutput(metrics={'a': 'b'})": "AgentWorkflowOutput(metrics={'a': 'b'})",
    "AgentWorkflowConfig()": "AgentWorkflowConfig()",
    "ConcurrencyConfig(max_concurrent=0)": "ConcurrencyConfig(max_concurrent=0)",
    "ConcurrencyConfig(max_concurrent=-1)": "ConcurrencyConfig(max_concurrent=-1)",
    "ConcurrencyConfig(max_concurrent='x')": "ConcurrencyConfig(max_concurrent='x')",
    "GraderConfig(name=5)": "GraderConfig(name=5)",
    # Contexts
    "GraderContext().set_reward(1.0)": "GraderContext().set_reward(1.0)",
    "GraderContext(sample).set_reward('x')": (
        "GraderContext(sample=RolloutSample()).set_reward('x')"
    ),
    "GraderContext(sample).set_reward(None)": (
        "GraderContext(sample=RolloutSample()).set_reward(None)"
    ),
    "get_rollout_context(1)": "get_rollout_context(1)",
    # Trajectories
    "convert_sample_to_trajectory(None, rollout_id='r')": (
        "convert_sample_to_trajectory(None, rollout_id='r')"
    ),
    "convert_sample_to_trajectory(RolloutSample(), rollout_id='r')": (
        "convert_sample_to_trajectory(RolloutSample(), rollout_id='r')"
    ),
    "convert_sample_to_trajectory(sample)": (
        "convert_sample_to_trajectory(RolloutSample(messages=[]))"
    ),
    "save_trajectory(root, 'r', done)": "save_trajectory(root, 'r', done)",
    "save_trajectory(rollout_id='r', result=None)": (
        "save_trajectory(rollout_id='r', result=None, artifact_root=root)"
    ),
    # The judge: refused before any request
    "evaluate_rubric(solution_str='')": (
        "evaluate_rubric(solution_str='', rubric='r', model='openai/gpt-4o-mini', api_key='k')"
    ),
    "evaluate_rubric(rubric='')": (
        "evaluate_rubric(solution_str='x', rubric='', model='openai/gpt-4o-mini', api_key='k')"
    ),
    "evaluate_rubric(solution_str=5)": (
        "evaluate_rubric(solution_str=5, rubric='r', model='openai/gpt-4o-mini', api_key='k')"
    ),
    "evaluate_rubric(model='mystery-model')": (
        "evaluate_rubric(solution_str='x', rubric='r', model='mystery-model')"
    ),
    "evaluate_rubric(score_min=1, score_max=0)": (
        "evaluate_rubric(solution_str='x', rubric='r', model='openai/gpt-4o-mini', "
        "api_key='k', score_min=1, score_max=0)"
    ),
}


async def observe(expression: str) -> dict[str, Any]:
    try:
        value = eval(expression)
    except Exception as exc:
        return {"when": "call", "kinds": kinds(exc)}
    if inspect.isawaitable(value):
        try:
            await asyncio.wait_for(value, 10)
        except Exception as exc:
            return {"when": "await", "kinds": kinds(exc)}
    return {"when": "ok", "kinds": []}


def kinds(exc: BaseException) -> list[str]:
    return [name for name, cls in KINDS if isinstance(exc, cls)]


async def main() -> None:
    outcomes = {name: await observe(expression) for name, expression in CASES.items()}
    print(json.dumps(outcomes, sort_keys=True))


asyncio.run(main())
