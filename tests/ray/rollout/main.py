"""The rollout the Ray tests ship to the cluster: one model call, graded against the label.

``metadata["mode"]`` picks a behaviour: ``multiply`` (default), ``sleep`` (sleeps
``metadata["seconds"]`` before the model call), ``fail`` (``RuntimeError``), ``swallow``
(ignores cancellation once, then answers), ``where`` (answers with the process id and the
working directory, to show which actor ran it and that it runs from the shipped copy),
``leak`` (prints and logs ``metadata["secret"]`` and the rollout's key, then answers with
the process id).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

import httpx
from helpers import grade_answer

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    Grader,
    GraderContext,
)
from osmosis_rollout.context import get_rollout_context

config = AgentWorkflowConfig(name="ray-test", concurrency=ConcurrencyConfig(max_concurrent=10))
"""Ten rollouts per actor unless the pool says otherwise."""


class RayTestWorkflow(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> object:
        metadata = ctx.metadata or {}
        mode = str(metadata.get("mode", "multiply"))
        if mode == "fail":
            raise RuntimeError("workflow failed on purpose")
        if mode == "sleep":
            await asyncio.sleep(float(metadata.get("seconds", 30)))
        if mode == "swallow":
            try:
                await asyncio.sleep(float(metadata.get("seconds", 30)))
            except asyncio.CancelledError:
                return [*ctx.prompt, {"role": "assistant", "content": "finished anyway"}]
        if mode == "leak":
            key = get_rollout_context().api_key  # type: ignore[union-attr]
            print("leak: printed", metadata["secret"], key)
            sys.stdout.write("leak: in pieces " + key[:5])
            sys.stdout.write(key[5:] + "\n")
            logging.getLogger("leak").warning("leak: logged %s", metadata["secret"])
            sys.stdout.flush()
            sys.stderr.flush()
            answer = json.dumps({"pid": os.getpid()})
            return [*ctx.prompt, {"role": "assistant", "content": answer}]
        if mode == "where":
            answer = json.dumps({"pid": os.getpid(), "cwd": os.getcwd()})
            return [*ctx.prompt, {"role": "assistant", "content": answer}]
        rollout = get_rollout_context()
        assert rollout is not None
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(
                rollout.chat_completions_url + "/chat/completions",
                headers={"Authorization": f"Bearer {rollout.api_key}"},
                json={"model": "osmosis-rollout", "messages": ctx.prompt},
            )
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"]
        return [*ctx.prompt, {"role": "assistant", "content": reply["content"]}]


class RayTestGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        if (ctx.metadata or {}).get("slow_grade"):
            await asyncio.sleep(float(ctx.metadata["slow_grade"]))
        ctx.set_reward(grade_answer(str(ctx.sample.messages[-1].get("content")), ctx.label))
