"""An official-style rollout entrypoint, laid out like ``osmosis rollout init``'s template.

Written against the official SDK (``osmosis_ai.rollout``). The interop tests serve it twice:
as is, with ``python main.py`` inside the Python 3.12 virtualenv that has ``osmosis-ai``
0.3.8; and with ``osmosis_ai.rollout`` replaced by ``osmosis_rollout`` in the imports (the
migration the project promises is the only change needed) under ``osmosis-rollout serve``.

The workflow asks the model once through raw httpx at ``chat_completions_url +
"/chat/completions"`` (no framework extras). ``metadata["mode"]`` picks a behaviour so one
entrypoint covers every outcome the tests compare:

- ``multiply`` (default): one chat call, the conversation is returned;
- ``fail``: ``RuntimeError`` (``agent_error``); ``invalid``: ``ValueError`` (``validation_error``);
- ``sleep``: sleeps ``metadata["seconds"]`` first (timeouts, cancel, lease tests);
- ``grader_error``: the grader raises ``KeyError``; ``remove``: the grader removes the sample;
- ``output``: returns an ``AgentWorkflowOutput`` with metrics; ``source``: registers a
  ``SampleSource`` (non-finite metrics) and returns None;
- ``nan_message``: a NaN inside a message; ``unencodable``: an object inside a message.

``metadata["message"]`` overrides the ``fail`` message (e.g. with a lone surrogate).
"""

from __future__ import annotations

import asyncio
import os

import httpx
import uvicorn
from osmosis_ai.rollout import AgentWorkflowOutput, RolloutSample, SampleSource
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server


def _mode(metadata: dict | None) -> str:
    return str((metadata or {}).get("mode", "multiply"))


class StaticSource(SampleSource):
    def __init__(self, sample: RolloutSample) -> None:
        self.sample = sample

    async def get_sample(self) -> RolloutSample:
        return self.sample


class InteropWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> object:
        mode = _mode(ctx.metadata)
        if mode == "fail":
            raise RuntimeError((ctx.metadata or {}).get("message", "workflow failed on purpose"))
        if mode == "invalid":
            raise ValueError("workflow rejected its input on purpose")
        if mode == "sleep":
            await asyncio.sleep(float((ctx.metadata or {}).get("seconds", 30)))
        rollout = get_rollout_context()
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                rollout.chat_completions_url + "/chat/completions",
                headers={"Authorization": f"Bearer {rollout.api_key}"},
                json={"model": "osmosis-rollout", "messages": ctx.prompt},
            )
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"]
        conversation = [*ctx.prompt, {"role": "assistant", "content": reply["content"]}]
        if mode == "output":
            return AgentWorkflowOutput(messages=conversation, metrics={"turns": 1.0})
        if mode == "source":
            sample = RolloutSample(
                messages=conversation,
                metrics={"turns": 1, "nan": float("nan"), "nested": {"inf": float("inf")}},
                extra_fields={"note": "from a sample source", "tuple": (1, 2)},
            )
            rollout.set_sample_source(StaticSource(sample))
            return None
        if mode == "nan_message":
            return [{"role": "system", "content": "x", "score": float("nan")}, *conversation]
        if mode == "unencodable":
            return [{"role": "system", "content": "x", "blob": object()}, *conversation]
        return conversation


class InteropGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        mode = _mode(ctx.metadata)
        if mode == "grader_error":
            raise KeyError("k")
        if mode == "remove":
            ctx.sample.remove_sample = True
            return
        answer = str(ctx.sample.messages[-1].get("content") or "")
        label = (ctx.label or "").strip()
        ctx.set_reward(1.0 if label and label in answer else 0.0)


def main() -> None:
    backend = LocalBackend(workflow=InteropWorkflow, grader=InteropGrader)
    app = create_rollout_server(
        backend=backend,
        result_wait_timeout_sec=float(os.environ.get("INTEROP_RESULT_WAIT_SEC", "30")),
        polling_lease_timeout_sec=float(os.environ.get("INTEROP_LEASE_SEC", "120")),
        api_key=os.environ.get("INTEROP_SERVER_API_KEY") or None,
    )
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")),
        log_level="warning",
        timeout_keep_alive=2160,
    )


if __name__ == "__main__":
    main()
