"""Ownership events, ours against the official server's (osmosis-ai 0.3.8), to one collector.

The same entrypoint is served twice (the official one with ``python main.py``, ours migrated
under ``osmosis-rollout serve``), both with ``OSMOSIS_ROLLOUT_OTLP_ENDPOINT`` pointing at a
fake collector on loopback. The same rollouts (a success, a workflow failure, one cancelled)
must produce the same events: the same body, severity, scope and resource, the same attribute
names, owner and run values, and the same statuses in the same order per rollout.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _support.otlp_collector import OtlpCollector
from interop_support import ServerProcess, start_official_server, start_our_server

from osmosis_rollout.controller import RolloutClient

OWNER = {
    "OSMOSIS_ROLLOUT_SERVER_ID": "server-diff-1",
    "_OSMOSIS_ROLLOUT_NAME": "multiply",
    "OSMOSIS_ROLLOUT_NAMESPACE": "interop",
}
RUN = {"osmosis_observability": {"run_id": "run-9", "run_name": "differential"}}


async def _drive(server: ServerProcess, policy_server: Any, prefix: str) -> None:
    async with RolloutClient(server.url, admission_timeout_sec=10) as client:
        requests = {
            "ok": ({"mode": "multiply"}, "What is 3 times 7?", "21"),
            "fail": ({"mode": "fail"}, "What is 1 times 1?", "1"),
            "cancel": ({"mode": "sleep", "seconds": 30}, "What is 2 times 2?", "4"),
        }
        handles = {}
        for name, (metadata, prompt, label) in requests.items():
            rollout_id = f"{prefix}-{name}"
            handles[name] = await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": prompt}],
                chat_completions_url=policy_server.rollout_url(rollout_id),
                rollout_id=rollout_id,
                llm_api_key=policy_server.api_key,
                label=label,
                metadata={**metadata, **RUN},
                grade=True,
            )
        async with asyncio.timeout(60):
            await handles["ok"]
            await handles["fail"]
            await handles["cancel"].wait_for_running()
            await client.cancel_rollout(f"{prefix}-cancel")
            await handles["cancel"]


def _events(collector: OtlpCollector, prefix: str) -> tuple[set[tuple[Any, ...]], dict[str, Any]]:
    """(the records' shared envelope, per rollout: statuses and attribute names/values)."""
    records = [
        r for r in collector.log_records() if str(r["attributes"]["rollout_id"]).startswith(prefix)
    ]
    envelope = {
        (r["body"], r["severity_text"], r["scope"], r["resource"].get("service.name"))
        for r in records
    }
    per_rollout: dict[str, Any] = {}
    for record in sorted(records, key=lambda r: r["attributes"]["event_sequence"]):
        attributes = dict(record["attributes"])
        name = str(attributes.pop("rollout_id")).removeprefix(prefix + "-")
        status = attributes.pop("status")
        attributes.pop("event_sequence")
        entry = per_rollout.setdefault(name, {"statuses": [], "attributes": attributes})
        entry["statuses"].append(status)
        assert entry["attributes"] == attributes
    return envelope, per_rollout


async def test_our_ownership_events_match_the_official_servers(
    official_python: Path,
    policy_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in OWNER.items():
        monkeypatch.setenv(name, value)
    with OtlpCollector() as collector:
        monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", collector.url)
        for prefix, start in (
            ("official", lambda: start_official_server(official_python, tmp_path / "official")),
            ("ours", lambda: start_our_server(tmp_path / "ours")),
        ):
            server = start()
            try:
                await _drive(server, policy_server, prefix)
            finally:
                server.stop()  # SIGTERM: each flushes its queued events before exiting

        official_envelope, official = _events(collector, "official")
        our_envelope, ours = _events(collector, "ours")

    assert official, "the official server sent no ownership event"
    assert our_envelope == official_envelope
    assert ours == official
    assert ours["ok"]["statuses"][0] == "queued" and ours["ok"]["statuses"][-1] == "success"
    assert ours["cancel"]["statuses"][-1] == "cancelled"
