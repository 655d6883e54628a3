"""SIGTERM to a real ``osmosis-rollout serve`` with 20 rollouts in flight (issue 13, 2).

A rolling restart sends SIGTERM. The server must keep serving result polls (and cancels)
until every finished result has been fetched, refuse new admissions with 503 +
``Retry-After`` meanwhile, then exit 0. Driven by our ``RolloutClient`` and by the official
SDK's ``RolloutClient`` (the interop venv): every rollout reaches exactly one terminal
result, none is lost.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import served, write_main

from osmosis_rollout.controller import RolloutClient

IN_FLIGHT = 20
SLEEP_SEC = 3.0
# All 20 admitted at once behind the rollout's 4 slots: the drain is under test here, not
# admission (serve's default short queue would answer most of them 429 and retry them).
OPTIONS = ("--result-wait-timeout-sec", "2", "--drain-timeout", "25", "--max-queue-depth", "32")

sys.path.insert(0, str(Path(__file__).parents[1] / "interop"))


def rollout(i: int) -> dict[str, Any]:
    return {
        "initial_messages": [{"role": "user", "content": "hi"}],
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "rollout_id": f"drain-{i}",
        "label": "x",
        "metadata": {"sleep": SLEEP_SEC},
    }


async def wait_active(url: str, count: int) -> None:
    """Until ``/health`` reports ``count`` active rollouts (bounded)."""
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        async with asyncio.timeout(60):
            while True:
                lifecycle = (await http.get("/health")).json()["lifecycle"]
                if lifecycle["active_rollouts"] >= count:
                    return
                await asyncio.sleep(0.05)


async def refused_while_draining(url: str) -> httpx.Response:
    """POST a new rollout until the server refuses it (the signal is asynchronous)."""
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        async with asyncio.timeout(20):
            for attempt in range(1000):
                response = await http.post("/rollout", json=rollout(1000 + attempt))
                if response.status_code != 202:
                    return response
                await asyncio.sleep(0.02)
    raise AssertionError("admission was never refused")


async def test_sigterm_drains_every_in_flight_rollout_to_our_client(tmp_path: Path) -> None:
    main_py = write_main(tmp_path / "rollout")
    artifacts = tmp_path / "artifacts"
    with served(main_py, artifacts, *OPTIONS) as (url, process):
        async with RolloutClient(url) as client:
            handles = [await client.run_rollout_async(**rollout(i)) for i in range(IN_FLIGHT)]
            await wait_active(url, IN_FLIGHT)
            process.send_signal(signal.SIGTERM)
            refused = await refused_while_draining(url)
            outcomes = await asyncio.gather(*handles, return_exceptions=True)
        returncode = await asyncio.to_thread(process.wait, 60)
    log = (tmp_path / "serve.log").read_text()

    assert refused.status_code == 503, refused.text
    assert refused.json() == {"detail": "rollout server is shutting down"}
    assert refused.headers["retry-after"] == "5"
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors
    results = [o for o in outcomes if not isinstance(o, BaseException)]
    assert sorted(r.rollout_id for r in results) == sorted(f"drain-{i}" for i in range(IN_FLIGHT))
    assert {r.status for r in results} == {"success"}, [r.status for r in results]
    assert returncode == 0, log
    assert "osmosis-rollout serve: stopped" in log
    assert "never fetched" not in log
    # Admitted rollouts ran to completion: each left its trajectory behind.
    for i in range(IN_FLIGHT):
        assert (artifacts / f"drain-{i}" / "trajectory.json").is_file()


async def test_sigterm_drains_every_in_flight_rollout_to_the_official_client(
    tmp_path: Path,
) -> None:
    from interop_support import (
        SCRIPTS,
        OfficialSdkUnavailable,
        ensure_official_venv,
    )

    try:
        python = ensure_official_venv()
    except OfficialSdkUnavailable as exc:
        pytest.skip(f"official osmosis-ai unavailable: {exc}")
    main_py = write_main(tmp_path / "rollout")
    with served(main_py, tmp_path / "artifacts", *OPTIONS) as (url, process):
        plan = {"url": url, "rollouts": [rollout(i) for i in range(IN_FLIGHT)], "timeout_sec": 90}
        driver = subprocess.Popen(
            [str(python), str(SCRIPTS / "official_client_driver.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert driver.stdin is not None
            driver.stdin.write(json.dumps(plan).encode())
            driver.stdin.close()
            await wait_active(url, IN_FLIGHT)
            process.send_signal(signal.SIGTERM)
            assert driver.stdout is not None and driver.stderr is not None
            stdout = await asyncio.to_thread(driver.stdout.read)
            stderr = await asyncio.to_thread(driver.stderr.read)
            await asyncio.to_thread(driver.wait, 120)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait(timeout=10)
        returncode = await asyncio.to_thread(process.wait, 60)
    log = (tmp_path / "serve.log").read_text()

    assert driver.returncode == 0, stderr.decode()[-3000:]
    report = json.loads(stdout)
    assert report["admitted"] == {f"drain-{i}": "queued" for i in range(IN_FLIGHT)}
    results = report["results"]
    assert sorted(results) == sorted(f"drain-{i}" for i in range(IN_FLIGHT))
    for rollout_id, result in results.items():
        assert result.get("status") == "success", (rollout_id, result)
        assert result["rollout_id"] == rollout_id
    assert returncode == 0, log
    assert "never fetched" not in log
