"""Slow and idle clients against a real ``osmosis-rollout serve`` (issue 27, defect 2).

Slowloris: hundreds of half-sent requests without the key, at a low open-file limit, must
not keep ``/health`` with the key from answering; a request whose headers or body trickle
in is closed; a client without the key is answered 401 as soon as its headers are in; a
slow *response* (a long poll) is never cut.
"""

from __future__ import annotations

import asyncio
import resource
import socket
from pathlib import Path

import httpx
from serve_support import served, write_main

KEY = "slow-clients-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FD_LIMIT = 256
SLOW_CONNECTIONS = 250
"""More than the child's open files allow (256, less the ones it has open already)."""
PROBES = 10


def low_fd_limit() -> None:
    """Runs in the server child before exec: at most :data:`FD_LIMIT` open files."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def half_sent_request(port: int) -> socket.socket:
    """A connection that sent the start of a request without the key, and nothing more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def closed_by_server(sock: socket.socket, within_sec: float) -> bytes:
    """What the server sent before closing ``sock`` (raises ``TimeoutError`` if it never does)."""
    sock.settimeout(within_sec)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:  # shed with a reset: the file descriptor is freed at once
        pass
    return received


async def test_health_with_the_key_answers_every_probe_under_a_slowloris(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout")
    options = ("--api-key", KEY, "--drain-timeout", "0")
    with served(
        main_py,
        tmp_path / "artifacts",
        *options,
        preexec_fn=low_fd_limit,
        health_headers=AUTH,
    ) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        attackers = [half_sent_request(port) for _ in range(SLOW_CONNECTIONS)]
        try:
            statuses = []
            for _ in range(PROBES):
                # A fresh connection each time: the cap must make room for it.
                async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=20) as http:
                    response = await http.get("/health")
                statuses.append(response.status_code)
            health = response.json()
        finally:
            for sock in attackers:
                sock.close()

    assert statuses == [200] * PROBES
    connections = health["connections"]
    assert connections["max_connections"] == FD_LIMIT - 64
    assert connections["open"] <= connections["max_connections"]
    assert connections["shed"]["over_connection_cap"] >= SLOW_CONNECTIONS - FD_LIMIT + 64


async def test_headers_that_never_finish_are_closed_and_a_long_poll_is_not(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout")
    options = (
        "--header-timeout",
        "1",
        "--result-wait-timeout-sec",
        "10",
        "--drain-timeout",
        "0",
        "--enable-metrics",
    )
    with served(main_py, tmp_path / "artifacts", *options) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        slow = half_sent_request(port)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            admitted = await http.post(
                "/rollout",
                json={
                    "initial_messages": [],
                    "rollout_id": "long-poll",
                    "chat_completions_url": "http://127.0.0.1:9/v1",
                    "label": "x",
                    "metadata": {"sleep": 3},
                },
            )
            token = admitted.json()["polling_lease_token"]
            # One poll that waits ~3 s for the result: three header timeouts long.
            result = await http.get(
                "/rollout/long-poll/result", headers={"X-Osmosis-Rollout-Lease": token}
            )
            sent = await asyncio.to_thread(closed_by_server, slow, 20)
            health = (await http.get("/health")).json()
            metrics = (await http.get("/metrics")).text
            slow.close()

    assert sent == b""  # closed without an answer
    assert admitted.status_code == 202
    assert result.status_code == 200
    assert result.json()["status"] == "success"
    assert health["connections"]["shed"]["header_timeout"] >= 1
    assert 'osmosis_connections_shed_total{reason="header_timeout"} ' in metrics


async def test_a_client_without_the_key_is_refused_before_its_body_and_a_trickling_body_is_closed(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout")
    with served(
        main_py,
        tmp_path / "artifacts",
        "--api-key",
        KEY,
        "--drain-timeout",
        "0",
        health_headers=AUTH,
    ) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        keyless = socket.create_connection(("127.0.0.1", port), timeout=10)
        keyless.sendall(
            b"POST /rollout HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{"
        )
        keyless.settimeout(20)
        refused = keyless.recv(4096)
        keyless.close()

        trickle = socket.create_connection(("127.0.0.1", port), timeout=10)
        trickle.sendall(
            b"POST /rollout HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + KEY.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        )
        # 1 KiB/s is due once the 10 s grace is over; one byte is far below it.
        sent = await asyncio.to_thread(closed_by_server, trickle, 40)
        trickle.close()
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=20) as http:
            health = (await http.get("/health")).json()

    assert refused.startswith(b"HTTP/1.1 401 ")
    assert b"HTTP/1.1 2" not in sent
    assert health["connections"]["shed"]["slow_body"] == 1
