"""The controller side of the remote-rollout protocol: admit rollouts, long-poll their results.

``RolloutClient`` plays the part the Osmosis training cluster plays in production (spec I.3):
it POSTs ``/rollout`` (retrying 429 after ``Retry-After``), then hands back a
``RolloutHandle`` whose background task long-polls ``GET /rollout/{id}/result`` under the
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

Beyond the official client (compatible defaults, all documented on the names):

- the client it creates allows unlimited connections, so hundreds of concurrent long polls
  never queue behind httpx's default pool of 100;
- ``result_read_grace_sec`` makes the 10 s read grace configurable;
- the rollout id is percent-encoded in result paths;
- ``cancel_rollouts`` exposes every cancel selector, not only one id;
- ``wait_idle`` raises a ``TimeoutError`` that names the last observed active count.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Generator, Iterator
from time import monotonic
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from osmosis_rollout.errors import RolloutAdmissionTimeoutError, RolloutProtocolError
from osmosis_rollout.types import (
    POLLING_LEASE_HEADER,
    TERMINAL_STATUSES,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    MessageDict,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
    RolloutStatus,
)

__all__ = [
    "ADMISSION_TIMEOUT_SEC",
    "CANCEL_TIMEOUT_SEC",
    "GATEWAY_RETRY_DELAYS_SEC",
    "RESULT_READ_GRACE_SEC",
    "TRANSPORT_RETRY_DELAYS_SEC",
    "RolloutClient",
    "RolloutHandle",
    "retry_after_delay",
]

logger = logging.getLogger(__name__)

ADMISSION_TIMEOUT_SEC: Final = 5.0
"""httpx timeout of the client ``RolloutClient`` creates (so, of each admission POST)."""

RESULT_READ_GRACE_SEC: Final = 10.0
"""Added to the server's ``result_wait_timeout_sec`` to get each result read's timeout."""

CANCEL_TIMEOUT_SEC: Final = 5.0
"""Bound on one ``POST /rollout/cancel``, applied by httpx and by asyncio."""

TRANSPORT_RETRY_DELAYS_SEC: Final = (0.1, 0.5)
"""Delays before re-reading a result after a dropped connection or a read timeout."""

GATEWAY_RETRY_DELAYS_SEC: Final = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""Delays before re-reading a result after a 502, 503 or 504 (a gateway's own answer)."""

_RETRY_AFTER_DEFAULT_SEC: Final = 1.0
_RETRY_AFTER_MIN_SEC: Final = 0.05
_RETRY_AFTER_MAX_SEC: Final = 60.0
_GATEWAY_STATUSES: Final = frozenset({502, 503, 504})
_RETRIED_TRANSPORT_ERRORS: Final = (
    httpx.RemoteProtocolError,
    httpx.NetworkError,
    httpx.ReadTimeout,
)
_IDLE_TOLERATED_STATUSES: Final = frozenset({408, 429})
_PROGRESS_RANK: Final = {
    RolloutStatus.QUEUED: 0,
    RolloutStatus.RUNNING: 1,
    RolloutStatus.GRADING: 2,
    RolloutStatus.SUCCESS: 3,
}


def retry_after_delay(value: str | None) -> float:
    """Seconds to wait before re-POSTing after a 429 whose ``Retry-After`` header is ``value``.

    A number of seconds is clamped to [0.05, 60]; a missing, non-numeric (HTTP-date) or
    non-finite value means 1.0 s, as the official client does.
    """
    if value is None:
        return _RETRY_AFTER_DEFAULT_SEC
    try:
        seconds = float(value.strip())
    except ValueError:
        return _RETRY_AFTER_DEFAULT_SEC
    if not math.isfinite(seconds):
        return _RETRY_AFTER_DEFAULT_SEC
    return min(max(seconds, _RETRY_AFTER_MIN_SEC), _RETRY_AFTER_MAX_SEC)


def _body_excerpt(response: httpx.Response, limit: int = 200) -> str:
    try:
        text = response.text
    except Exception:  # an undecodable body must not hide the real error
        return ""
    text = text.strip()
    if not text:
        return ""
    return ": " + (text[:limit] + "..." if len(text) > limit else text)


def _parse_admission(response: httpx.Response, rollout_id: str) -> RolloutInitResponse:
    route = "POST /rollout"
    if response.status_code != 202:
        raise RolloutProtocolError(
            f"{route} for rollout {rollout_id!r} answered {response.status_code} "
            f"(only 202 admits and 429 is retried){_body_excerpt(response)}",
            status_code=response.status_code,
        )
    try:
        admission = RolloutInitResponse.model_validate(response.json())
    except (ValueError, ValidationError) as exc:
        raise RolloutProtocolError(
            f"{route} for rollout {rollout_id!r} answered 202 with an invalid body: {exc}",
            status_code=response.status_code,
        ) from exc
    if admission.rollout_id != rollout_id:
        raise RolloutProtocolError(
            f"{route} for rollout {rollout_id!r} answered 202 for rollout {admission.rollout_id!r}",
            status_code=response.status_code,
        )
    return admission


def _parse_result(response: httpx.Response, rollout_id: str) -> RolloutResultResponse:
    route = f"GET /rollout/{rollout_id}/result"
    if response.status_code != 200:
        raise RolloutProtocolError(
            f"{route} answered {response.status_code}{_body_excerpt(response)}",
            status_code=response.status_code,
        )
    try:
        result = RolloutResultResponse.model_validate(response.json())
    except (ValueError, ValidationError) as exc:
        raise RolloutProtocolError(
            f"{route} answered 200 with an invalid body: {exc}",
            status_code=response.status_code,
        ) from exc
    if result.rollout_id != rollout_id:
        raise RolloutProtocolError(
            f"{route} answered with the result of rollout {result.rollout_id!r}",
            status_code=response.status_code,
        )
    return result


class RolloutHandle:
    """One admitted rollout, its result long-polled by a task that starts at construction.

    ``await handle`` returns the terminal ``RolloutResultResponse`` (or raises the polling
    error: ``RolloutProtocolError``, an httpx transport error once retries are spent, or
    ``CancelledError`` after ``cancel()``). ``status`` and ``latest_result`` follow every
    successful poll. Built by ``RolloutClient.run_rollout_async``; not meant to be
    constructed directly.
    """

    def __init__(
        self,
        client: RolloutClient,
        admission: RolloutInitResponse,
        *,
        lease_deadline: float,
    ) -> None:
        self.rollout_id: str = admission.rollout_id
        self.admission: RolloutInitResponse = admission
        self.status: RolloutStatus = admission.status
        self.latest_result: RolloutResultResponse | None = None
        self.lease_deadline: float = lease_deadline
        """Monotonic time by which the server's lease lapses unless a poll renews it."""
        self._client = client
        self._changed = asyncio.Event()
        self._polling_over = False
        self._task: asyncio.Task[RolloutResultResponse] = asyncio.create_task(
            self._poll(), name=f"osmosis-rollout-poll:{self.rollout_id}"
        )

    def __await__(self) -> Generator[Any, None, RolloutResultResponse]:
        return self._task.__await__()

    def __repr__(self) -> str:
        return f"RolloutHandle(rollout_id={self.rollout_id!r}, status={self.status.value!r})"

    @property
    def task(self) -> asyncio.Task[RolloutResultResponse]:
        """The polling task (for ``asyncio.wait`` and friends)."""
        return self._task

    def done(self) -> bool:
        """True once polling has ended (terminal result, error or local cancel)."""
        return self._task.done()

    def cancel(self) -> bool:
        """Stop polling locally. The server keeps running the rollout until its lease lapses.

        Use ``RolloutClient.cancel_rollout`` to cancel the rollout itself.
        """
        return self._task.cancel()

    async def wait_for_completion(self) -> RolloutResultResponse:
        """Same as ``await handle``."""
        return await self._task

    async def wait_for_running(self) -> RolloutStatus:
        """Wait until the rollout is running or further along; returns the status seen.

        ``failure``/``cancelled`` count as reached. If polling ends first, returns the final
        status or raises the polling error.
        """
        return await self._wait_for(RolloutStatus.RUNNING)

    async def wait_for_grading(self) -> RolloutStatus:
        """Wait until the rollout is grading or finished; returns the status seen.

        A rollout admitted with ``grade=False`` never grades: this returns its terminal status.
        """
        return await self._wait_for(RolloutStatus.GRADING)

    def _reached(self, target: RolloutStatus) -> bool:
        if self.status in TERMINAL_STATUSES:
            return True
        rank = _PROGRESS_RANK.get(self.status)
        return rank is not None and rank >= _PROGRESS_RANK[target]

    async def _wait_for(self, target: RolloutStatus) -> RolloutStatus:
        while not (self._reached(target) or self._polling_over):
            await self._changed.wait()
        if self._reached(target):
            return self.status
        return (await self._task).status

    def _publish(self) -> None:
        # A fresh event per change: every waiter wakes, re-checks, and waits on the next one.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _poll(self) -> RolloutResultResponse:
        try:
            while True:
                result, self.lease_deadline = await self._client._read_result(
                    self.admission, lease_deadline=self.lease_deadline
                )
                self.status = result.status
                self.latest_result = result
                self._publish()
                if result.status in TERMINAL_STATUSES:
                    return result
        finally:
            self._polling_over = True
            self._publish()


class RolloutClient:
    """Admits rollouts on a rollout server and long-polls their results (spec I.3).

    Args:
        url: The rollout server's base URL; a trailing ``/`` is stripped.
        http_client: An ``httpx.AsyncClient`` to share. When omitted the client creates one
            (httpx timeout 5 s, no connection limit) and ``aclose()`` closes it; a given
            client is never closed here.
        admission_timeout_sec: Bound on the whole admission loop including 429 retries;
            ``None`` waits without bound. Must be finite.
        api_key: The server's inbound key, sent as ``Authorization: Bearer`` on every
            request. Blank is an error.
        result_read_grace_sec: Added to the server's ``result_wait_timeout_sec`` to get the
            timeout of each result read (beyond the official client, which fixes it at 10 s).

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
        self.http_client: httpx.AsyncClient = http_client or httpx.AsyncClient(
            timeout=ADMISSION_TIMEOUT_SEC,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
            follow_redirects=False,
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
        if self.owns_http_client:
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
        rollout's id. Transport errors propagate. Past ``admission_timeout_sec`` this raises
        ``RolloutAdmissionTimeoutError``; no cancel is sent, since a POST lost in flight may
        have admitted the rollout and its lease will end it.
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
        body = request.model_dump(mode="json")
        in_flight = False
        attempts = 0
        scope = asyncio.timeout(self.admission_timeout_sec)
        try:
            async with scope:
                while True:
                    attempts += 1
                    in_flight = True
                    sent_at = monotonic()
                    response = await self.http_client.post(
                        f"{self.url}/rollout",
                        json=body,
                        headers=self._auth,
                        follow_redirects=False,
                    )
                    in_flight = False
                    if response.status_code != 429:
                        admission = _parse_admission(response, rollout_id)
                        return RolloutHandle(
                            self,
                            admission,
                            lease_deadline=sent_at + admission.polling_lease_timeout_sec,
                        )
                    delay = retry_after_delay(response.headers.get("Retry-After"))
                    logger.debug(
                        "rollout %s: server at capacity (429), retrying in %.2fs",
                        rollout_id,
                        delay,
                    )
                    await asyncio.sleep(delay)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            message = (
                f"admission of rollout {rollout_id!r} to {self.url} did not finish within "
                f"{self.admission_timeout_sec} s ({attempts} POST(s))"
            )
            if in_flight:
                message += (
                    "; a POST was in flight, so admission may have succeeded: the server "
                    "ends such a rollout when its polling lease expires"
                )
            raise RolloutAdmissionTimeoutError(message) from exc

    # -- results ---------------------------------------------------------------------------

    async def _read_result(
        self, admission: RolloutInitResponse, *, lease_deadline: float
    ) -> tuple[RolloutResultResponse, float]:
        """One long poll, with read retries; returns the result and the renewed deadline."""
        rollout_id = admission.rollout_id
        url = f"{self.url}/rollout/{quote(rollout_id, safe='')}/result"
        headers = {**self._auth, POLLING_LEASE_HEADER: admission.polling_lease_token}
        read_timeout = admission.result_wait_timeout_sec + self.result_read_grace_sec
        transport_delays: Iterator[float] = iter(TRANSPORT_RETRY_DELAYS_SEC)
        gateway_delays: Iterator[float] = iter(GATEWAY_RETRY_DELAYS_SEC)
        previous: Exception | None = None
        attempt = 0
        while True:
            attempt += 1
            # Once a read failed, nothing proves the lease was renewed: the remaining lease
            # bounds every further attempt, and expiry surfaces the failure that caused it.
            budget = None if previous is None else max(0.0, lease_deadline - monotonic())
            scope = asyncio.timeout(budget)
            error: Exception
            try:
                async with scope:
                    sent_at = monotonic()
                    response = await self.http_client.get(
                        url, headers=headers, timeout=read_timeout, follow_redirects=False
                    )
            except TimeoutError as exc:
                if previous is not None and scope.expired():
                    raise previous from exc
                raise
            except _RETRIED_TRANSPORT_ERRORS as exc:
                error, delay = exc, next(transport_delays, None)
            else:
                try:
                    result = _parse_result(response, rollout_id)
                except RolloutProtocolError as exc:
                    if exc.status_code not in _GATEWAY_STATUSES:
                        raise
                    error, delay = exc, next(gateway_delays, None)
                else:
                    # Renewal happens when the request arrives, so the new deadline counts
                    # from when it was sent, not from when the long poll answered.
                    return result, sent_at + admission.polling_lease_timeout_sec
            if delay is None or monotonic() + delay + read_timeout >= lease_deadline:
                raise error
            logger.warning(
                "rollout %s: result read %d failed (%s); retrying in %.2fs",
                rollout_id,
                attempt,
                error.__class__.__name__
                if not isinstance(error, RolloutProtocolError)
                else f"HTTP {error.status_code}",
                delay,
            )
            await asyncio.sleep(delay)
            if monotonic() + read_timeout >= lease_deadline:
                raise error
            previous = error

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
        if response.status_code != 200:
            raise RolloutProtocolError(
                f"POST /rollout/cancel answered {response.status_code}{_body_excerpt(response)}",
                status_code=response.status_code,
            )
        try:
            return CancelRolloutsResponse.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise RolloutProtocolError(
                f"POST /rollout/cancel answered 200 with an invalid body: {exc}",
                status_code=response.status_code,
            ) from exc

    async def health(self) -> dict[str, Any]:
        """``GET /health``; anything but a 200 JSON object raises ``RolloutProtocolError``."""
        response = await self.http_client.get(
            f"{self.url}/health", headers=self._auth, follow_redirects=False
        )
        if response.status_code != 200:
            raise RolloutProtocolError(
                f"GET /health answered {response.status_code}{_body_excerpt(response)}",
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
        self,
        timeout_sec: float = 120,
        poll_interval_sec: float = 1,
        process_id: str | None = None,
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
