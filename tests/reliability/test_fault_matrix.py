"""Fault matrix: one named test per fault, each asserting the documented outcome.

Every rollout runs through our server under uvicorn on loopback, admitted and polled by
our ``RolloutClient``; policy faults come from our ``PolicyServer``'s ``Faults``, called by
the workflow through the real ``openai`` client. The documented outcome (the protocol's
polling lease, shutdown, LocalBackend and outcome-table rules):

=====================================  =========  ==============  ==========================
fault                                  status     err_category    notes
=====================================  =========  ==============  ==========================
workflow raises                        failure    agent_error     message = str(exc), no sample
grader raises                          failure    agent_error     sample kept, reward null
agent deadline                         failure    timeout         "workflow exceeded its ...s deadline"
grader deadline                        failure    timeout         "grader exceeded ...", sample kept
policy HTTP 500, then success          success    (none)          the openai client retried
policy HTTP 500 forever                failure    agent_error     message names the 500
policy stream cut                      failure    agent_error     incomplete chunked read
policy hang (client timeout)           failure    agent_error     openai APITimeoutError
controller stops polling               failure    lease_expired   "polling lease expired"; run cancelled
duplicate rollout id                   409        (admission)     first rollout unaffected
server SIGTERM, 50 in flight           drain      then cancel     short ones finish, long ones cancelled
sync code blocking past the deadline   failure    timeout         a late return is still a timeout
=====================================  =========  ==============  ==========================
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.net import wait_until_healthy
from reliability_support import free_port, uvicorn_thread

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    Grader,
    GraderContext,
    LocalBackend,
    get_rollout_context,
)
from osmosis_rollout.controller import PolicyServer, RolloutClient
from osmosis_rollout.errors import RolloutProtocolError
from osmosis_rollout.policy import Faults
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.types import POLLING_LEASE_HEADER, RolloutResultResponse

PROMPT = [{"role": "user", "content": "6*7"}]


class Events:
    """Module-level record of what workflows saw (server runs in a thread of this process)."""

    cancelled: set[str] = set()


class AskPolicy(AgentWorkflow[Any]):
    """Asks the rollout's policy once through the ``openai`` client; metadata tunes the client."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        import openai

        meta = ctx.metadata or {}
        rollout = get_rollout_context()
        assert rollout is not None and rollout.chat_completions_url
        client = openai.AsyncOpenAI(
            base_url=rollout.chat_completions_url,
            api_key=rollout.api_key or "unused",
            max_retries=int(meta.get("max_retries", 0)),
            timeout=float(meta.get("timeout", 10.0)),
        )
        try:
            if meta.get("stream"):
                stream = await client.chat.completions.create(
                    model="osmosis-rollout", messages=ctx.prompt, stream=True
                )
                text = ""
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
            else:
                reply = await client.chat.completions.create(
                    model="osmosis-rollout", messages=ctx.prompt
                )
                text = reply.choices[0].message.content or ""
        finally:
            await client.close()
        return [*ctx.prompt, {"role": "assistant", "content": text}]


class Scripted(AgentWorkflow[Any]):
    """Behaviour picked by ``metadata['case']``: raise, sleep, block the loop, or answer."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        meta = ctx.metadata or {}
        case = meta.get("case")
        if case == "raise":
            raise RuntimeError("workflow exploded on purpose")
        if case == "sleep":
            try:
                await asyncio.sleep(float(meta["seconds"]))
            except asyncio.CancelledError:
                Events.cancelled.add(meta["id"])
                raise
        if case == "block":
            time.sleep(float(meta["seconds"]))  # sync code: the event loop cannot interrupt it
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class ScriptedGrader(Grader):
    """Behaviour picked by ``metadata['grader']``: raise, sleep, or reward an exact answer."""

    async def grade(self, ctx: GraderContext) -> None:
        case = (ctx.metadata or {}).get("grader")
        if case == "raise":
            raise KeyError("missing_field")
        if case == "sleep":
            await asyncio.sleep(30)
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


def answer_42(request: Any) -> str:
    """A scripted policy that always answers 42."""
    return "42"


@asynccontextmanager
async def rollout_server(
    workflow: type[AgentWorkflow[Any]] = Scripted, **server_kwargs: Any
) -> AsyncIterator[RolloutClient]:
    """Our server over a LocalBackend on loopback, and a client driving it."""
    backend = LocalBackend(
        workflow=workflow,
        workflow_config=AgentWorkflowConfig(
            name="faults", concurrency=ConcurrencyConfig(max_concurrent=64)
        ),
        grader=ScriptedGrader,
    )
    kwargs: dict[str, Any] = {
        "configure_logging": False,
        "result_wait_timeout_sec": 0.5,
        "polling_lease_timeout_sec": 20.0,
        **server_kwargs,
    }
    app = create_rollout_server(backend=backend, **kwargs)
    with uvicorn_thread(app) as url:
        async with RolloutClient(url, result_read_grace_sec=5.0) as client:
            yield client


async def run_one(
    client: RolloutClient,
    rollout_id: str,
    *,
    url: str = "http://127.0.0.1:9/v1",
    api_key: str | None = None,
    **fields: Any,
) -> RolloutResultResponse:
    """Admit one rollout (label "42") and wait, bounded, for its terminal result."""
    fields.setdefault("label", "42")
    handle = await client.run_rollout_async(
        initial_messages=PROMPT,
        chat_completions_url=url,
        rollout_id=rollout_id,
        llm_api_key=api_key,
        **fields,
    )
    async with asyncio.timeout(30):
        return await handle


async def test_workflow_raises_is_failure_agent_error() -> None:
    async with rollout_server() as client:
        result = await run_one(client, "wf-raises", metadata={"case": "raise"})
    assert result.status == "failure"
    assert result.err_category == "agent_error"
    assert result.err_message == "workflow exploded on purpose"
    assert result.sample is None


async def test_grader_raises_is_failure_agent_error_with_sample_kept() -> None:
    async with rollout_server() as client:
        result = await run_one(client, "grader-raises", metadata={"grader": "raise"})
    assert result.status == "failure"
    assert result.err_category == "agent_error"
    assert result.err_message == "'missing_field'"
    assert result.sample is not None
    assert result.sample.reward is None
    assert result.sample.messages[-1]["content"] == "42"


async def test_agent_deadline_is_failure_timeout() -> None:
    async with rollout_server() as client:
        result = await run_one(
            client,
            "agent-deadline",
            metadata={"case": "sleep", "seconds": 30, "id": "agent-deadline"},
            agent_timeout_sec=0.3,
        )
    assert result.status == "failure"
    assert result.err_category == "timeout"
    assert result.err_message is not None
    assert result.err_message.startswith("workflow exceeded its 0.3s deadline")
    assert result.sample is None


async def test_grader_deadline_is_failure_timeout_with_sample_kept() -> None:
    async with rollout_server() as client:
        result = await run_one(
            client, "grader-deadline", metadata={"grader": "sleep"}, grader_timeout_sec=0.3
        )
    assert result.status == "failure"
    assert result.err_category == "timeout"
    assert result.err_message == "grader exceeded its 0.3s deadline"
    assert result.sample is not None
    assert result.sample.reward is None


async def _policy_case(
    faults: Faults, metadata: dict[str, Any], rollout_id: str
) -> tuple[RolloutResultResponse, PolicyServer]:
    policy = PolicyServer(answer_42, faults=faults).start()
    try:
        async with rollout_server(AskPolicy) as client:
            result = await run_one(
                client,
                rollout_id,
                url=policy.rollout_url(rollout_id),
                api_key=policy.api_key,
                metadata=metadata,
            )
    finally:
        policy.stop()
    return result, policy


async def test_policy_500_then_success_is_retried_by_the_workflow_client() -> None:
    result, policy = await _policy_case(
        Faults(fail_first=1, fail_status=500), {"max_retries": 2}, "policy-500-once"
    )
    assert result.status == "success", result
    assert result.sample is not None and result.sample.reward == 1.0
    calls = policy.log("policy-500-once").calls
    assert calls[0].status_code == 500
    assert len(calls) == 2 and calls[-1].error is None


async def test_policy_500_forever_is_failure_agent_error() -> None:
    result, policy = await _policy_case(
        Faults(fail_first=10**6, fail_status=500), {"max_retries": 1}, "policy-500-forever"
    )
    assert result.status == "failure"
    assert result.err_category == "agent_error"
    assert "500" in (result.err_message or "")
    assert len(policy.log("policy-500-forever").calls) == 2


async def test_policy_stream_cut_is_failure_agent_error() -> None:
    result, _ = await _policy_case(Faults(cut_stream=True), {"stream": True}, "policy-stream-cut")
    assert result.status == "failure"
    assert result.err_category == "agent_error"
    assert result.err_message
    assert result.sample is None


async def test_policy_hang_ends_in_the_client_timeout() -> None:
    result, _ = await _policy_case(Faults(hang_s=60), {"timeout": 0.5}, "policy-hang")
    assert result.status == "failure"
    assert result.err_category == "agent_error"
    assert "timed out" in (result.err_message or "").lower()


async def test_controller_that_stops_polling_loses_the_rollout_to_lease_expiry() -> None:
    Events.cancelled.discard("lease")
    async with rollout_server(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=1.0) as client:
        handle = await client.run_rollout_async(
            initial_messages=PROMPT,
            chat_completions_url="http://127.0.0.1:9/v1",
            rollout_id="lease",
            label="42",
            metadata={"case": "sleep", "seconds": 60, "id": "lease"},
        )
        await handle.wait_for_running()
        handle.cancel()  # the controller goes away; the server keeps the rollout running
        async with asyncio.timeout(15):
            while "lease" not in Events.cancelled:
                await asyncio.sleep(0.05)
        response = await client.http_client.get(
            f"{client.url}/rollout/lease/result",
            headers={POLLING_LEASE_HEADER: handle.admission.polling_lease_token},
        )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failure"
    assert body["err_category"] == "lease_expired"
    assert body["err_message"] == "polling lease expired"
    assert body["sample"] is None


async def test_duplicate_rollout_id_is_rejected_with_409() -> None:
    async with rollout_server() as client:
        first = await client.run_rollout_async(
            initial_messages=PROMPT,
            chat_completions_url="http://127.0.0.1:9/v1",
            rollout_id="dup",
            label="42",
            metadata={"case": "sleep", "seconds": 0.3, "id": "dup"},
        )
        with pytest.raises(RolloutProtocolError) as caught:
            await client.run_rollout_async(
                initial_messages=PROMPT,
                chat_completions_url="http://127.0.0.1:9/v1",
                rollout_id="dup",
                label="42",
            )
        async with asyncio.timeout(30):
            result = await first
    assert caught.value.status_code == 409
    assert "already registered" in str(caught.value)
    assert result.status == "success"
    assert result.sample is not None and result.sample.reward == 1.0


async def test_sync_code_blocking_past_the_deadline_is_still_a_timeout() -> None:
    async with rollout_server() as client:
        result = await run_one(
            client,
            "blocking",
            metadata={"case": "block", "seconds": 0.8},
            agent_timeout_sec=0.2,
        )
    assert result.status == "failure"
    assert result.err_category == "timeout"
    assert (result.err_message or "").startswith("workflow exceeded its 0.2s deadline")


SIGTERM_SERVER = """
import asyncio, os, sys
from pathlib import Path
import uvicorn
from osmosis_rollout import (AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig, Grader,
                             LocalBackend)
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.server.shutdown import DrainPolicy

MARKS = Path(sys.argv[2])


class Sleepy(AgentWorkflow):
    async def run(self, ctx):
        rid = ctx.metadata["id"]
        try:
            while not (MARKS / "sigterm-sent").exists():  # in flight when the signal lands
                await asyncio.sleep(0.05)
            await asyncio.sleep(float(ctx.metadata["seconds"]))
        except asyncio.CancelledError:
            (MARKS / f"cancelled-{rid}").touch()
            raise
        (MARKS / f"done-{rid}").touch()
        return [{"role": "assistant", "content": "ok"}]


class Ok(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)


app = create_rollout_server(
    backend=LocalBackend(workflow=Sleepy, grader=Ok,
                         workflow_config=AgentWorkflowConfig(
                             name="s", concurrency=ConcurrencyConfig(max_concurrent=64))),
    configure_logging=False, result_wait_timeout_sec=0.3, polling_lease_timeout_sec=30,
    drain=DrainPolicy(drain_sec=4.0, cancel_wait_sec=5.0, hard_cancel_wait_sec=2.0),
)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            timeout_graceful_shutdown=5)
"""


async def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    await asyncio.to_thread(wait_until_healthy, url, process=proc, timeout=30)


async def _until(predicate: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def _answers(url: str) -> bool:
    """Whether anything still answers on ``url``."""
    async with httpx.AsyncClient(timeout=1.0) as http:
        try:
            await http.get(url + "/health")
        except httpx.TransportError:
            return False
    return True


async def test_sigterm_with_50_in_flight_drains_then_cancels(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(SIGTERM_SERVER))
    marks = tmp_path / "marks"
    marks.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), str(marks)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        await _wait_healthy(url, proc)
        async with RolloutClient(url) as client:
            handles = []
            for i in range(50):
                seconds = 0.5 if i % 2 == 0 else 120
                handles.append(
                    await client.run_rollout_async(
                        initial_messages=PROMPT,
                        chat_completions_url="http://127.0.0.1:9/v1",
                        rollout_id=f"inflight-{i}",
                        label="ok",
                        metadata={"id": f"inflight-{i}", "seconds": seconds},
                    )
                )
            health = await client.health()
            assert health["lifecycle"]["active_rollouts"] == 50
            proc.send_signal(signal.SIGTERM)
            (marks / "sigterm-sent").touch()
            # Polls may be cut by the shutdown: the markers are the ground truth.
            for handle in handles:
                handle.cancel()
            await asyncio.gather(*(h.task for h in handles), return_exceptions=True)
        await asyncio.to_thread(proc.wait, 30)
        output = proc.stdout.read().decode() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert not await _answers(url)
    done = {p.name.removeprefix("done-") for p in marks.glob("done-*")}
    cancelled = {p.name.removeprefix("cancelled-") for p in marks.glob("cancelled-*")}
    # uvicorn re-raises the captured SIGTERM once its graceful shutdown is over.
    assert proc.returncode in (0, -signal.SIGTERM), output
    assert done == {f"inflight-{i}" for i in range(0, 50, 2)}, output
    assert cancelled == {f"inflight-{i}" for i in range(1, 50, 2)}, output
