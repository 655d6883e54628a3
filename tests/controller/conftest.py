"""Fixtures for the controller tests: a respx router on a fake rollout server, and wire bodies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from _support.servers import uvicorn_thread

from osmosis_rollout.controller import RolloutClient

BASE_URL = "http://rollout.test"


class Wire:
    """Builds the server's answers for respx routes."""

    base_url = BASE_URL

    @staticmethod
    def admitted(
        rollout_id: str = "r1", *, wait: float = 0.2, lease: float = 30.0, token: str = "tok"
    ) -> httpx.Response:
        """A 202 admission with its lease."""
        return httpx.Response(
            202,
            json={
                "rollout_id": rollout_id,
                "status": "queued",
                "polling_lease_token": token,
                "result_wait_timeout_sec": wait,
                "polling_lease_timeout_sec": lease,
            },
        )

    @staticmethod
    def result(rollout_id: str = "r1", status: str = "success", **fields: Any) -> httpx.Response:
        """A 200 result poll; terminal success carries a graded sample unless given."""
        body: dict[str, Any] = {
            "rollout_id": rollout_id,
            "status": status,
            "sample": None,
            "err_message": None,
            "err_category": None,
        }
        if status == "success":
            body["sample"] = {
                "messages": [{"role": "assistant", "content": "done"}],
                "label": None,
                "reward": 1.0,
                "remove_sample": False,
                "metrics": {},
                "extra_fields": {},
            }
        body.update(fields)
        return httpx.Response(200, json=body)

    @staticmethod
    def health(process_id: str | None = "p1", active: int = 0) -> httpx.Response:
        """A 200 health answer with lifecycle."""
        body: dict[str, Any] = {
            "status": "ok",
            "lifecycle": {"accepting_rollouts": True, "active_rollouts": active},
        }
        if process_id is not None:
            body["process_id"] = process_id
        return httpx.Response(200, json=body)


@pytest.fixture
def wire() -> type[Wire]:
    """The wire-body builders."""
    return Wire


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    """Intercepts every request the client sends to the fake rollout server."""
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as mock:
        yield mock


@pytest.fixture
async def client() -> AsyncIterator[RolloutClient]:
    """A client that owns its httpx client, pointed at the fake server."""
    async with RolloutClient(BASE_URL + "/") as rollout_client:
        yield rollout_client


@pytest.fixture
def gated() -> Callable[[], tuple[asyncio.Queue[Any], Callable[..., Any]]]:
    """A respx side effect that answers each request with the next item put on a queue.

    Items are ``httpx.Response`` objects or exceptions (raised), so a test decides
    exactly when each long poll returns.
    """

    def make() -> tuple[asyncio.Queue[Any], Callable[..., Any]]:
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def side_effect(request: httpx.Request) -> httpx.Response:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, httpx.Response)
            return item

        return queue, side_effect

    return make


@pytest.fixture
def serve() -> Callable[[Any], contextlib.AbstractContextManager[str]]:
    """Serve an ASGI app with uvicorn on a free loopback port in a thread; yields its URL.

    The server is stopped (and its lifespan drained) when the ``with`` block exits.
    """
    return uvicorn_thread
