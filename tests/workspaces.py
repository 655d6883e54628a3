"""Test helpers: a tiny workspace (rollout, dataset, scripted policy) for plugin tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAIN_PY = '''
import httpx
from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, Grader, GraderContext, get_rollout_context

# Built once: each new client would load the CA bundle again (~25 ms of CPU), a rollout's
# largest cost here, though the policy is plain HTTP on loopback.
TLS = httpx.create_ssl_context()


class EchoWorkflow(AgentWorkflow):
    """Asks the policy once (non-streaming chat completions) and returns the conversation."""

    async def run(self, ctx: AgentWorkflowContext):
        rollout = get_rollout_context()
        async with httpx.AsyncClient(timeout=30, verify=TLS) as client:
            response = await client.post(
                rollout.chat_completions_url + "/chat/completions",
                headers={"Authorization": f"Bearer {rollout.api_key}"},
                json={"model": "osmosis-rollout", "messages": ctx.prompt},
            )
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"]
        return [*ctx.prompt, {"role": "assistant", "content": reply["content"]}]


class ContainsGrader(Grader):
    async def grade(self, ctx: GraderContext):
        answer = ctx.sample.messages[-1]["content"] or ""
        if ctx.label == "REMOVE":
            ctx.sample.remove_sample = True
            return
        ctx.set_reward(1.0 if ctx.label.strip() in answer else 0.0)
'''

POLICY_PY = '''
import re
import time


def policy(request):
    """Multiplies the two numbers in the last user message; says 'wrong' when asked to."""
    text = request.messages[-1]["content"]
    if "wrong" in text:
        return "I do not know"
    if "slow" in text:
        time.sleep(0.3)
    numbers = [int(n) for n in re.findall(r"-?\\d+", text)]
    if len(numbers) >= 2:
        return f"The answer is {numbers[0] * numbers[1]}"
    return "ok"
'''


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def multiply_rows(
    n: int, *, wrong: set[int] = frozenset(), ids: bool = False
) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        a, b = i + 2, i + 3
        prompt = f"What is {a} times {b}?" + (" wrong" if i in wrong else "")
        row: dict[str, Any] = {"user_prompt": prompt, "ground_truth": str(a * b)}
        if ids:
            row = {"id": f"case-{i}", **row}
        rows.append(row)
    return rows


# A seeded flaky policy: row i passes each attempt with probability FLAKY_RATE, drawn from
# a hash of (FLAKY_SEED, prompt, attempt), so two runs with different seeds are two draws.
SEEDED_FLAKY_POLICY = '''
import hashlib
import os
import re


def policy(request):
    """Right with probability FLAKY_RATE, drawn from a hash of (FLAKY_SEED, prompt, attempt)."""
    text = request.messages[-1]["content"]
    numbers = [int(n) for n in re.findall(r"-?\\d+", text)]
    seed = os.environ.get("FLAKY_SEED", "0")
    digest = hashlib.sha256(f"{seed}:{text}:{request.attempt}".encode()).digest()
    if int.from_bytes(digest[:8], "big") / 2**64 >= float(os.environ.get("FLAKY_RATE", "0.85")):
        return "no idea"
    return f"The answer is {numbers[0] * numbers[1]}"
'''
