"""The controller side of the remote-rollout protocol: admit rollouts, long-poll their results.

``RolloutClient`` plays the part the Osmosis training cluster plays in production:
it POSTs ``/rollout`` (``admission.py``: 429 retried after ``Retry-After``, a POST that
never reached the server re-sent), then hands back a
``RolloutHandle`` (``polling.py``) whose task long-polls ``GET /rollout/{id}/result`` under the
polling lease until the rollout ends, retrying dropped reads and gateway errors within the
lease. It works from any asyncio code, and many handles can share one client::

    async with RolloutClient("http://127.0.0.1:8000") as client:
        handle = await client.run_rollout_async(
            initial_messages=[{"role": "user", "content": "hi"}],
            chat_completions_url="http://127.0.0.1:9000/v1/rollouts/r1",
            rollout_id="r1",
        )
        await handle.wait_for_running()
        result = await handle          # RolloutResultResponse, status success|failure|cancelled

Beyond the official client (compatible defaults; each documented on its name): an owned
HTTP client with no connection limit, sharded over pools (``pools.py``) so hundreds of long
polls cost no more CPU per rollout than a few; a configurable read grace; percent-encoded
result paths; every cancel selector; an idle wait whose timeout names what it last saw.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType
from typing import Any, Final, Self

import httpx
from pydantic import ValidationError

from osmosis_rollout.controller._responses import body_excerpt, validated_body
from osmosis_rollout.controller.admission import (
    ADMISSION_RETRY_DELAYS_SEC,
    ADMISSION_TIMEOUT_SEC,
    admit,
    retry_after_delay,
)
from osmosis_rollout.controller.polling import (
    GATEWAY_RETRY_DELAYS_SEC,
    RESULT_READ_GRACE_SEC,
    TRANSPORT_RETRY_DELAYS_SEC,
    RolloutHandle,
    read_result,
)
from osmosis_rollout.controller.pools import PoolSlot, ShardedPools
from osmosis_rollout.errors import RolloutProtocolError
from osmosis_rollout.types import (
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    MessageDict,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
)

__all__ = [
    "ADMISSION_RETRY_DELAYS_SEC",
    "ADMISSION_TIMEOUT_SEC",
    "CANCEL_TIMEOUT_SEC",
    "GATEWAY_RETRY_DELAYS_SEC",
    "KEEPALIVE_EXPIRY_SEC",
    "RESULT_READ_GRACE_SEC",
    "TRANSPORT_RETRY_DELAYS_SEC",
    "RolloutClient",
    "RolloutHandle",
    "retry_after_delay",
]

CANCEL_TIMEOUT_SEC: Final = 5.0
"""Bound on one ``POST /rollout/cancel``, applied by httpx and by asyncio."""

KEEPALIVE_EXPIRY_SEC: Final = 4.0
"""How long the client ``RolloutClient`` creates keeps an idle connection for reuse.

Below uvicorn's default keep-alive timeout (5 s) and far below a served rollout app's
(2160 s), so the client drops an idle connection before the server does and rarely sends
on one the server is closing (a request that races such a close is re-sent: see
``admission``)."""

_IDLE_TOLERATED_STATUSES: Final = frozenset({408, 429})


def _new_http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=ADMISSION_TIMEOUT_SEC,
        limits=httpx.Limits(
            max_connections=None,
            max_keepalive_connections=256,
            keepalive_expiry=KEEPALIVE_EXPIRY_SEC,
        ),
        follow_redirects=False,
    )


class RolloutClient:
    """Admits rollouts on a rollout server and long-polls their results.

    Args:
        url: The rollout server's base URL; a trailing ``/`` is stripped.
        http_client: An ``httpx.AsyncClient`` to share, never closed here. Omitted, the client
            creates one (httpx timeout 5 s, no connection limit) that ``aclose()`` closes.
        admission_timeout_sec: Bound on the whole admission loop including 429 retries
            (finite); ``None`` waits without bound.
        api_key: The server's inbound key (not blank), sent as ``Authorization: Bearer``.
        result_read_grace_sec: Added to the server's ``result_wait_timeout_sec`` for each
            result read's timeout (the official client fixes it at 10 s).

    Redirects are never followed. Use as an async context manager, or call ``aclose()``.
    """

    def __init__(
        self,
        url: str,
        http_client: httpx.AsyncClient | None = None,
        admission_timeout_sec: float | None = None,
        api_key: str | None = None,
        *,
        result_read_grace_sec: float = RESULT_READ_GRACE_SEC,
    ) -> None:
        if admission_timeout_sec is not None and not math.isfinite(admission_timeout_sec):
            raise ValueError(
                f"admission_timeout_sec must be finite (got {admission_timeout_sec!r}); "
                "pass None to wait without bound"
            )
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key must be a non-empty string when given")
        if not math.isfinite(result_read_grace_sec) or result_read_grace_sec < 0:
            raise ValueError(
                f"result_read_grace_sec must be finite and >= 0 (got {result_read_grace_sec!r})"
            )
        self.url: str = url.rstrip("/")
        self.admission_timeout_sec: float | None = admission_timeout_sec
        self.result_read_grace_sec: float = result_read_grace_sec
        self.owns_http_client: bool = http_client is None
        self.http_client: httpx.AsyncClient = http_client or _new_http_client()
        # Only a client we own is sharded: a given one is the caller's to size.
        self._pools: ShardedPools | None = (
            ShardedPools(self.http_client, _new_http_client) if http_client is None else None
        )
        self._auth: dict[str, str] = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def __repr__(self) -> str:
        return f"RolloutClient(url={self.url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the httpx client if this object created it."""
        if self._pools is not None:
            await self._pools.aclose()
        elif self.owns_http_client:
            await self.http_client.aclose()

    # -- admission -------------------------------------------------------------------------

    async def run_rollout(
        self,
        initial_messages: list[MessageDict],
        chat_completions_url: str,
        rollout_id: str,
        llm_api_key: str | None = None,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
        grade: bool = True,
        agent_timeout_sec: float | None = None,
        grader_timeout_sec: float | None = None,
        extra_fields: dict[str, Any] | None = None,
    ) -> RolloutResultResponse:
        """Admit a rollout and wait for its terminal result (``run_rollout_async`` + await)."""
        handle = await self.run_rollout_async(
            initial_messages=initial_messages,
            chat_completions_url=chat_completions_url,
            rollout_id=rollout_id,
            llm_api_key=llm_api_key,
            label=label,
            metadata=metadata,
            grade=grade,
            agent_timeout_sec=agent_timeout_sec,
            grader_timeout_sec=grader_timeout_sec,
            extra_fields=extra_fields,
        )
        return await handle

    async def run_rollout_async(
        self,
        initial_messages: list[MessageDict],
        chat_completions_url: str,
        rollout_id: str,
        llm_api_key: str | None = None,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
        grade: bool = True,
        agent_timeout_sec: float | None = None,
        grader_timeout_sec: float | None = None,
        extra_fields: dict[str, Any] | None = None,
    ) -> RolloutHandle:
        """Admit a rollout and return its handle, already polling.

        The request is validated locally first (``pydantic.ValidationError``). A 429 is
        retried after its ``Retry-After`` (see ``retry_after_delay``); any other non-202
        raises ``RolloutProtocolError`` at once, as does a 202 with an invalid body or another
        rollout's id. A POST that provably never reached the server (connect error, a
        pooled connection closed under it) is re-sent; one that may have reached it is
        re-sent once to find out, and a 409 then raises ``RolloutAdmissionUnknownError``
        (see ``osmosis_rollout.controller.admission``). Other transport errors propagate.
        Past ``admission_timeout_sec`` this raises ``RolloutAdmissionTimeoutError``; no
        cancel is sent, since a POST lost in flight may have admitted the rollout and its
        lease will end it.
        """
        request = RolloutInitRequest(
            initial_messages=initial_messages,
            label=label,
            metadata=metadata,
            rollout_id=rollout_id,
            chat_completions_url=chat_completions_url,
            llm_api_key=llm_api_key,
            grade=grade,
            agent_timeout_sec=agent_timeout_sec,
            grader_timeout_sec=grader_timeout_sec,
            extra_fields=extra_fields,
        )
        slot = self._pools.acquire() if self._pools is not None else PoolSlot(self.http_client)
        try:
            admitted = await admit(
                slot.client,
                self.url,
                request,
                headers=self._auth,
                timeout_sec=self.admission_timeout_sec,
            )
            handle = RolloutHandle(
                self,
                admitted.admission,
                lease_deadline=admitted.sent_at + admitted.admission.polling_lease_timeout_sec,
                http_client=slot.client,
            )
        except BaseException:
            slot.release()
            raise
        handle.task.add_done_callback(lambda _: slot.release())
        return handle

    # -- results ---------------------------------------------------------------------------

    async def _read_result(
        self,
        admission: RolloutInitResponse,
        *,
        lease_deadline: float,
        http_client: httpx.AsyncClient | None = None,
    ) -> tuple[RolloutResultResponse, float]:
        """One long poll for a handle (see :func:`~osmosis_rollout.controller.polling.read_result`)."""
        return await read_result(
            http_client or self.http_client,
            self.url,
            admission,
            headers=self._auth,
            lease_deadline=lease_deadline,
            read_grace_sec=self.result_read_grace_sec,
        )

    # -- cancel, health, idle --------------------------------------------------------------

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        """Ask the server to cancel one rollout; returns its disposition.

        The outcome reaches the rollout's poller later as a ``cancelled`` result.
        """
        return await self.cancel_rollouts(ids=[rollout_id])

    async def cancel_rollouts(
        self,
        *,
        ids: list[str] | None = None,
        prefix: str | None = None,
        all: bool = False,  # named as the wire field
    ) -> CancelRolloutsResponse:
        """POST ``/rollout/cancel`` with exactly one selector (beyond the official client).

        Bounded by 5 s (httpx and asyncio). A non-200 or an invalid body raises
        ``RolloutProtocolError``.
        """
        body = CancelRolloutsRequest(ids=ids, prefix=prefix, all=all).model_dump(mode="json")
        # httpx's timeout does not cover waiting for a pooled connection: bound it all.
        async with asyncio.timeout(CANCEL_TIMEOUT_SEC):
            response = await self.http_client.post(
                f"{self.url}/rollout/cancel",
                json=body,
                headers=self._auth,
                timeout=CANCEL_TIMEOUT_SEC,
                follow_redirects=False,
            )
        return validated_body(response, CancelRolloutsResponse, 200, "POST /rollout/cancel")

    async def health(self) -> dict[str, Any]:
        """``GET /health``; anything but a 200 JSON object raises ``RolloutProtocolError``."""
        response = await self.http_client.get(
            f"{self.url}/health", headers=self._auth, follow_redirects=False
        )
        if response.status_code != 200:
            raise RolloutProtocolError(
                f"GET /health answered {response.status_code}{body_excerpt(response)}",
                status_code=response.status_code,
            )
        try:
            value = response.json()
        except ValueError as exc:
            raise RolloutProtocolError(
                f"GET /health answered 200 with a body that is not JSON: {exc}",
                status_code=response.status_code,
            ) from exc
        if not isinstance(value, dict):
            raise RolloutProtocolError(
                f"GET /health answered 200 with {type(value).__name__}, not a JSON object",
                status_code=response.status_code,
            )
        return value

    async def wait_idle(
        self, timeout_sec: float = 120, poll_interval_sec: float = 1, process_id: str | None = None
    ) -> dict[str, Any]:
        """Poll ``/health`` until ``lifecycle.active_rollouts == 0``; returns that health.

        408, 429, 5xx and transport errors are tolerated (polled again). The server must
        report a ``process_id`` and it must not change while waiting (nor differ from
        ``process_id`` when given): a restarted server's idleness says nothing about the
        rollouts sent to the old one. This does not stop new admissions. Past ``timeout_sec``
        raises ``TimeoutError``.
        """
        for name, value in (("timeout_sec", timeout_sec), ("poll_interval_sec", poll_interval_sec)):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be finite and > 0 (got {value!r})")
        last_seen = "no health answer yet"
        scope = asyncio.timeout(timeout_sec)
        try:
            async with scope:
                while True:
                    try:
                        health = await self.health()
                    except RolloutProtocolError as exc:
                        code = exc.status_code
                        if code is None or not (
                            code in _IDLE_TOLERATED_STATUSES or 500 <= code <= 599
                        ):
                            raise
                        last_seen = f"HTTP {code}"
                        await asyncio.sleep(poll_interval_sec)
                        continue
                    except httpx.TransportError as exc:
                        last_seen = type(exc).__name__
                        await asyncio.sleep(poll_interval_sec)
                        continue
                    seen_process = health.get("process_id")
                    if not isinstance(seen_process, str) or not seen_process:
                        raise RolloutProtocolError(
                            "GET /health has no process_id: cannot tell whether the server "
                            "restarted while waiting for idle",
                            status_code=200,
                        )
                    if process_id is not None and seen_process != process_id:
                        raise RolloutProtocolError(
                            f"rollout server restarted while waiting for idle "
                            f"(process_id {process_id!r} became {seen_process!r})",
                            status_code=200,
                        )
                    process_id = seen_process
                    try:
                        lifecycle = RolloutLifecycle.model_validate(health.get("lifecycle"))
                    except ValidationError as exc:
                        raise RolloutProtocolError(
                            f"GET /health has no valid lifecycle: {exc}", status_code=200
                        ) from exc
                    if lifecycle.active_rollouts == 0:
                        return health
                    last_seen = f"{lifecycle.active_rollouts} active rollout(s)"
                    await asyncio.sleep(poll_interval_sec)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise TimeoutError(
                f"rollout server {self.url} not idle after {timeout_sec} s (last seen: {last_seen})"
            ) from exc
