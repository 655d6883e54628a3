"""Fixtures for the integration tests: scripted policies on a real PolicyServer."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Before any framework imports LiteLLM (the integrations set it too; tests may import first).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The OpenAI Agents SDK would otherwise try to export traces to api.openai.com.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from integrations.support import multiply_policy

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.integrations.streaming import STREAMING_ENV


@pytest.fixture
def serve_policy() -> Iterator[Callable[..., PolicyServer]]:
    """Start PolicyServers on loopback (stopped at teardown)."""
    servers: list[PolicyServer] = []

    def start(policy: Any, **kwargs: Any) -> PolicyServer:
        server = PolicyServer(policy, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def multiply_server(serve_policy: Callable[..., PolicyServer]) -> PolicyServer:
    """A PolicyServer answering like a model that uses the multiply tool correctly."""
    return serve_policy(multiply_policy())


@pytest.fixture(autouse=True)
def no_streaming_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's OSMOSIS_ROLLOUT_STREAMING must not change what these tests pin."""
    monkeypatch.delenv(STREAMING_ENV, raising=False)
