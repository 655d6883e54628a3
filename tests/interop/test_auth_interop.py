"""The optional inbound API key across implementations.

A keyed OUR server and a keyed OFFICIAL server answer the same unauthenticated and
badly-authenticated requests identically (401 everywhere, including unknown paths and
would-be 422s), and each side's ``RolloutClient`` with ``api_key`` drives the other's server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from interop_support import (
    OUR_HEALTH_EXTRAS,
    ServerProcess,
    run_official_client,
    start_official_server,
    start_our_server,
)

from osmosis_rollout.controller import RolloutClient

pytestmark = pytest.mark.timeout(900)  # the first run builds the official venv

KEY = "interop-server-key-0123456789"


@pytest.fixture(scope="module")
def keyed_official(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = start_official_server(
        official_python, tmp_path_factory.mktemp("keyed-official"), api_key=KEY
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def keyed_ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_our_server(tmp_path_factory.mktemp("keyed-ours"), api_key=KEY)
    try:
        yield server
    finally:
        server.stop()


_EXCHANGES: list[tuple[str, str, str, dict[str, str], Any]] = [
    ("health, no header", "GET", "/health", {}, None),
    ("health, right key", "GET", "/health", {"Authorization": f"Bearer {KEY}"}, None),
    ("health, wrong key", "GET", "/health", {"Authorization": "Bearer nope"}, None),
    ("health, lower-case scheme", "GET", "/health", {"Authorization": f"bearer {KEY}"}, None),
    ("health, bare key", "GET", "/health", {"Authorization": KEY}, None),
    ("unknown path, no header", "GET", "/nope", {}, None),
    ("unknown path, right key", "GET", "/nope", {"Authorization": f"Bearer {KEY}"}, None),
    ("bad admission, no header", "POST", "/rollout", {}, {}),
    ("bad admission, right key", "POST", "/rollout", {"Authorization": f"Bearer {KEY}"}, {}),
    ("result, no header", "GET", "/rollout/x/result", {"X-Osmosis-Rollout-Lease": "t"}, None),
    ("cancel, no header", "POST", "/rollout/cancel", {}, {"all": True}),
    (
        "cancel, right key",
        "POST",
        "/rollout/cancel",
        {"Authorization": f"Bearer {KEY}"},
        {"prefix": "zz"},
    ),
]


def _exchange(url: str) -> list[tuple[str, int, Any]]:
    steps = []
    with httpx.Client(base_url=url, timeout=10) as http:
        for name, method, path, headers, body in _EXCHANGES:
            response = http.request(method, path, headers=headers, json=body)
            payload = response.json()
            if name.startswith("health") and response.status_code == 200:
                # Identities differ by design: compare the keys the official body has.
                payload = sorted(key for key in payload if key not in OUR_HEALTH_EXTRAS)
            if isinstance(payload, dict) and isinstance(payload.get("detail"), list):
                payload = [(d["loc"], d["type"]) for d in payload["detail"]]
            steps.append((name, response.status_code, payload))
    return steps


def test_keyed_servers_answer_authentication_identically(
    keyed_official: ServerProcess, keyed_ours: ServerProcess
) -> None:
    ours, official = _exchange(keyed_ours.url), _exchange(keyed_official.url)
    assert ours == official
    assert dict((name, code) for name, code, _ in official)["health, lower-case scheme"] == 401
    assert ("health, no header", 401, {"detail": "unauthorized"}) in ours


def _rollout(policy_server: Any, rollout_id: str) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "initial_messages": [{"role": "user", "content": "What is 8 times 9?"}],
        "chat_completions_url": policy_server.rollout_url(rollout_id),
        "llm_api_key": policy_server.api_key,
        "label": "72",
    }


def test_official_client_with_an_api_key_drives_our_keyed_server(
    official_python: Path, keyed_ours: ServerProcess, policy_server: Any
) -> None:
    report = run_official_client(
        official_python,
        {"url": keyed_ours.url, "api_key": KEY, "rollouts": [_rollout(policy_server, "k-oc")]},
    )
    assert report["results"]["k-oc"]["status"] == "success"
    assert report["results"]["k-oc"]["sample"]["reward"] == 1.0
    assert report["idle"]["lifecycle"]["active_rollouts"] == 0

    unkeyed = run_official_client(
        official_python, {"url": keyed_ours.url, "rollouts": [_rollout(policy_server, "k-oc-2")]}
    )
    assert unkeyed["admitted"]["k-oc-2"]["error"] == "RolloutProtocolError"
    assert unkeyed["admitted"]["k-oc-2"]["status_code"] == 401
    assert unkeyed["health"]["status_code"] == 401


async def test_our_client_with_an_api_key_drives_the_official_keyed_server(
    keyed_official: ServerProcess, policy_server: Any
) -> None:
    async with RolloutClient(keyed_official.url, api_key=KEY) as client:
        async with asyncio.timeout(30):
            result = await (await client.run_rollout_async(**_rollout(policy_server, "k-ours")))
            idle = await client.wait_idle(timeout_sec=10, poll_interval_sec=0.1)
    assert result.status.value == "success"
    assert result.sample is not None and result.sample.reward == 1.0
    assert idle["lifecycle"]["active_rollouts"] == 0
