"""Hostile rollout ids and request bodies against a real server on loopback (issue 13, 9).

The official 0.3.8 server admits any single path segment: ``" "`` (a directory named by
one space), ``"a\\nb"`` (a log line split in two), a 10,240-character id (``File name too
long`` on every save) and a 50 MB body. Ours refuses ids that are not printable, that start
or end with whitespace, or that are longer than 256 characters or 255 bytes of UTF-8 (a file
name's limit: the id names the rollout's directory) with a 422 naming the rule, and bodies
over the configured limit (413); every id the official server can archive is still admitted.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from reliability_support import ExactGrader, MultiplyWorkflow, uvicorn_thread

from osmosis_rollout import LocalBackend
from osmosis_rollout.server import DEFAULT_MAX_BODY_BYTES, create_rollout_server

SMALL_LIMIT = 64 * 1024

REFUSED_IDS = [
    " ",
    " leading",
    "trailing ",
    "a\nb",
    "tab\tinside",
    "carriage\rreturn",
    "\u2028",
    "del\x7f",
    "x" * 256,  # 256 characters, but one byte more than a file name may hold
    "é" * 128,  # 128 characters, 256 bytes of UTF-8
    "x" * 257,
    "x" * 10_240,
]
ACCEPTED_IDS = [
    "run-1.row-7.attempt-0",
    "été",
    "with inner space",
    "x" * 255,
    "é" * 127,
    "a:b@c+d=e",
]


def body(rollout_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "initial_messages": [{"role": "user", "content": "6*7"}],
        "rollout_id": rollout_id,
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "label": "42",
        **extra,
    }


@pytest.fixture(scope="module")
def artifact_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="module")
def server_url(artifact_root: Path) -> Iterator[str]:
    app = create_rollout_server(
        backend=LocalBackend(workflow=MultiplyWorkflow, grader=ExactGrader),
        configure_logging=False,
        result_wait_timeout_sec=1.0,
        polling_lease_timeout_sec=10.0,
        result_retention_sec=60.0,
        artifact_root=artifact_root,
    )
    with uvicorn_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def small_limit_url(artifact_root: Path) -> Iterator[str]:
    app = create_rollout_server(
        backend=LocalBackend(workflow=MultiplyWorkflow, grader=ExactGrader),
        configure_logging=False,
        artifact_root=artifact_root,
        max_body_bytes=SMALL_LIMIT,
    )
    with uvicorn_thread(app) as url:
        yield url


@pytest.fixture
async def client(server_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        yield http


@pytest.mark.parametrize("rollout_id", REFUSED_IDS, ids=lambda v: repr(v[:12]))
async def test_a_hostile_rollout_id_is_refused_with_a_422_naming_the_rule(
    client: httpx.AsyncClient, artifact_root: Path, rollout_id: str
) -> None:
    response = await client.post("/rollout", json=body(rollout_id))
    assert response.status_code == 422, response.text
    messages = [item["msg"] for item in response.json()["detail"]]
    assert any(
        "rollout_id must be printable" in msg and "at most 256 characters" in msg
        for msg in messages
    ), messages
    assert rollout_id not in os.listdir(artifact_root)


@pytest.mark.parametrize("rollout_id", ACCEPTED_IDS, ids=lambda v: repr(v[:12]))
async def test_ids_the_official_server_archives_are_still_admitted(
    client: httpx.AsyncClient, rollout_id: str
) -> None:
    response = await client.post("/rollout", json=body(rollout_id))
    assert response.status_code == 202, response.text
    assert response.json()["rollout_id"] == rollout_id


async def test_a_body_over_the_default_limit_is_refused_with_413(
    client: httpx.AsyncClient,
) -> None:
    padding = "x" * (DEFAULT_MAX_BODY_BYTES + 1024)
    response = await client.post("/rollout", json=body("too-big", metadata={"p": padding}))
    assert response.status_code == 413, response.text
    assert str(DEFAULT_MAX_BODY_BYTES) in response.json()["detail"]
    assert (await client.get("/health")).status_code == 200


async def test_a_chunked_body_without_length_is_cut_off_at_the_limit(
    small_limit_url: str,
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"initial_messages": [], "rollout_id": "chunked", "metadata": {"p": "'
        for _ in range(SMALL_LIMIT // 1024 + 4):
            yield b"y" * 1024
        yield b'"}, "chat_completions_url": "u"}'

    async with httpx.AsyncClient(base_url=small_limit_url, timeout=30) as http:
        response = await http.post(
            "/rollout", content=chunks(), headers={"content-type": "application/json"}
        )
        assert response.status_code == 413, response.text
        assert "max_body_bytes" in response.json()["detail"]
        under = await http.post("/rollout", json=body("fits", metadata={"p": "z" * 1000}))
        assert under.status_code == 202, under.text


async def test_a_configured_limit_applies_to_every_route(small_limit_url: str) -> None:
    async with httpx.AsyncClient(base_url=small_limit_url, timeout=30) as http:
        response = await http.post("/rollout/cancel", json={"ids": ["y" * SMALL_LIMIT]})
        assert response.status_code == 413, response.text
