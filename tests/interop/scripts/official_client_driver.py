"""Drive a rollout server with the OFFICIAL ``osmosis_ai.rollout.client.RolloutClient``.

Runs inside the Python 3.12 virtualenv that has ``osmosis-ai`` 0.3.8. Reads one JSON plan
from stdin and prints one JSON report on stdout:

plan = {
  "url": "http://127.0.0.1:PORT",
  "api_key": "the server's inbound key" | null,
  "rollouts": [{RolloutClient.run_rollout_async keyword arguments}, ...],
  "cancel": ["rollout id", ...],      # cancelled through client.cancel_rollout once running
  "timeout_sec": 30                   # bound on the whole plan
}
report = {
  "admitted": {id: admission status | error},
  "reached_running": {id: status returned by handle.wait_for_running()},
  "cancel": {id: CancelRolloutsResponse | error},
  "results": {id: RolloutResultResponse (JSON mode) | error},
  "health": GET /health through client.health(),
  "idle": client.wait_idle(...) return value | error
}
An error is {"error": <exception class>, "message": str, "status_code": int | null}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from osmosis_ai.rollout.client import RolloutClient


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "error": type(exc).__name__,
        "message": str(exc),
        "status_code": getattr(exc, "status_code", None),
    }


async def _drive(plan: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {
        "admitted": {},
        "reached_running": {},
        "cancel": {},
        "results": {},
    }
    client = RolloutClient(url=plan["url"], admission_timeout_sec=10.0, api_key=plan.get("api_key"))
    try:
        handles = {}
        for spec in plan["rollouts"]:
            rollout_id = spec["rollout_id"]
            try:
                handle = await client.run_rollout_async(**spec)
            except Exception as exc:  # reported, not raised: the test asserts on it
                report["admitted"][rollout_id] = _error(exc)
                continue
            report["admitted"][rollout_id] = str(handle.status.value)
            handles[rollout_id] = handle
        for rollout_id in plan.get("cancel", []):
            handle = handles[rollout_id]
            report["reached_running"][rollout_id] = (await handle.wait_for_running()).value
            try:
                response = await client.cancel_rollout(rollout_id)
                report["cancel"][rollout_id] = response.model_dump(mode="json")
            except Exception as exc:
                report["cancel"][rollout_id] = _error(exc)
        for rollout_id, handle in handles.items():
            try:
                result = await handle
                report["results"][rollout_id] = result.model_dump(mode="json")
            except Exception as exc:
                report["results"][rollout_id] = _error(exc)
        try:
            report["health"] = await client.health()
            report["idle"] = await client.wait_idle(
                timeout_sec=15,
                poll_interval_sec=0.1,
                process_id=report["health"].get("process_id"),
            )
        except Exception as exc:
            report.setdefault("health", _error(exc))
            report["idle"] = _error(exc)
    finally:
        await client.aclose()
    return report


async def _main() -> None:
    plan = json.loads(sys.stdin.read())
    async with asyncio.timeout(float(plan.get("timeout_sec", 30))):
        report = await _drive(plan)
    sys.stdout.write(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(_main())
