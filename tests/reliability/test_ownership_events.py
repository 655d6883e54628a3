"""Ownership events and traces from a real ``osmosis-rollout serve`` to a fake OTLP collector.

With ``OSMOSIS_ROLLOUT_OTLP_ENDPOINT`` set, each status a rollout takes is one log record with
the official server's fields (osmosis-ai 0.3.8's ``observability.py``): ``event``,
``rollout_id``, ``server_id``, ``server_name``, ``namespace``, ``run_id``/``run_name`` from the
request's ``metadata["osmosis_observability"]``, ``status`` and ``event_sequence``; nothing of
the inputs, no secret. With ``OSMOSIS_ROLLOUT_OTLP_TRACES=1`` each rollout is also one trace.
"""

from __future__ import annotations

import asyncio
import signal
import textwrap
from pathlib import Path

import pytest
from _support.otlp_collector import OtlpCollector
from serve_support import served

from osmosis_rollout.controller import PolicyServer, RolloutClient

OWNER_ENV = {
    "OSMOSIS_ROLLOUT_SERVER_ID": "server-7f3a",
    "_OSMOSIS_ROLLOUT_NAME": "multiply-prod",
    "OSMOSIS_ROLLOUT_NAMESPACE": "team-rl",
}
LLM_KEY = "llm-key-SECRET-5c1d9e2b7a40"

MAIN = """
from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.chat_client import RolloutChatClient


class Ask(AgentWorkflow):
    async def run(self, ctx):
        chat = RolloutChatClient(ctx.prompt, streaming=False)
        await chat.complete()
        await chat.complete()


class Judge(Grader):
    async def grade(self, ctx):
        if ctx.label == "raise":
            raise ValueError("the grader refuses")
        ctx.set_reward(1.0)
"""

OFFICIAL_FIELDS = {
    "event",
    "rollout_id",
    "server_id",
    "server_name",
    "namespace",
    "run_id",
    "run_name",
    "status",
    "event_sequence",
}


async def _run(url: str, policy: PolicyServer) -> dict[str, tuple[str, str | None]]:
    async with RolloutClient(url) as client:
        handles = {}
        for rollout_id, label, metadata in (
            (
                "owned-ok",
                "6",
                {"osmosis_observability": {"run_id": "run-42", "run_name": "nightly"}},
            ),
            ("owned-bad", "raise", {"osmosis_observability": {"run_id": "x" * 600}}),
        ):
            handles[rollout_id] = await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": "What is 2 times 3?"}],
                chat_completions_url=policy.rollout_url(rollout_id),
                rollout_id=rollout_id,
                llm_api_key=LLM_KEY,
                label=label,
                metadata=metadata,
                grade=True,
            )
        results = {rid: await handle for rid, handle in handles.items()}
        return {rid: (str(r.status), r.err_category) for rid, r in results.items()}


async def test_a_served_rollout_sends_the_official_ownership_events_and_one_trace_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rollout").mkdir()
    main_py = tmp_path / "rollout" / "main.py"
    main_py.write_text(textwrap.dedent(MAIN))
    for name, value in OWNER_ENV.items():
        monkeypatch.setenv(name, value)
    with OtlpCollector() as collector, PolicyServer("The answer is 6", api_key=LLM_KEY) as policy:
        monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", collector.url + "/")
        monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_TRACES", "1")
        with served(main_py, tmp_path / "artifacts", "--drain-timeout", "2") as (url, process):
            statuses = await _run(url, policy)
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 60)
        assert process.returncode == 0
        records = collector.log_records()
        spans = collector.spans()

    assert statuses["owned-ok"] == ("success", None)
    assert statuses["owned-bad"][0] == "failure"
    assert records, "no ownership event arrived"
    for record in records:
        assert record["body"] == "Rollout ownership"
        assert record["severity_text"] == "INFO"
        assert record["scope"] == "osmosis_ai.rollout.server.observability"
        assert record["resource"]["service.name"] == "osmosis-rollout-server"
    sequence = [r["attributes"]["event_sequence"] for r in records]
    assert sorted(sequence) == list(range(1, len(records) + 1))

    by_rollout: dict[str, list[dict[str, object]]] = {}
    for record in sorted(records, key=lambda r: r["attributes"]["event_sequence"]):
        by_rollout.setdefault(record["attributes"]["rollout_id"], []).append(record["attributes"])
    ok, bad = by_rollout["owned-ok"], by_rollout["owned-bad"]
    assert [a["status"] for a in ok] == ["queued", "running", "grading", "success"]
    assert [a["status"] for a in bad] == ["queued", "running", "grading", "failure"]
    for attributes in ok:
        assert set(attributes) == OFFICIAL_FIELDS
        assert {k: attributes[k] for k in ("server_id", "server_name", "namespace")} == {
            "server_id": "server-7f3a",
            "server_name": "multiply-prod",
            "namespace": "team-rl",
        }
        assert (attributes["run_id"], attributes["run_name"]) == ("run-42", "nightly")
    # A run id over 512 characters is left out, not cut.
    assert all("run_id" not in a and "run_name" not in a for a in bad)
    everything = repr(records) + repr(spans)
    assert LLM_KEY not in everything and "What is 2 times 3?" not in everything

    roots = {s["attributes"]["osmosis.rollout.id"]: s for s in spans if s["name"] == "rollout"}
    assert set(roots) == {"owned-ok", "owned-bad"}
    assert roots["owned-ok"]["attributes"]["osmosis.rollout.status"] == "success"
    assert roots["owned-ok"]["attributes"]["osmosis.run_id"] == "run-42"
    assert roots["owned-bad"]["attributes"]["osmosis.rollout.status"] == "failure"
    bad_root = roots["owned-bad"]["attributes"]
    assert bad_root["osmosis.rollout.error_category"] == statuses["owned-bad"][1]
    assert roots["owned-bad"]["status_code"] == 2  # ERROR
    for root in roots.values():
        children = [s for s in spans if s["parent_span_id"] == root["span_id"]]
        assert all(s["trace_id"] == root["trace_id"] for s in children)
        names = sorted(s["name"] for s in children)
        assert names == ["admission", "grader", "model call", "model call", "queue", "workflow"]


async def test_an_unreachable_collector_costs_no_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _support.net import free_port

    (tmp_path / "rollout").mkdir()
    main_py = tmp_path / "rollout" / "main.py"
    main_py.write_text(textwrap.dedent(MAIN))
    monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_TRACES", "1")
    with (
        PolicyServer("The answer is 6", api_key=LLM_KEY) as policy,
        served(main_py, tmp_path / "artifacts", "--drain-timeout", "2") as (url, process),
    ):
        statuses = await _run(url, policy)
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)
    assert statuses["owned-ok"] == ("success", None)
    assert statuses["owned-bad"][0] == "failure"
    assert process.returncode == 0
