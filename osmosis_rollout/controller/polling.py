"""Polling: long-poll ``GET /rollout/{id}/result`` under the polling lease.

:class:`RolloutHandle` is one admitted rollout whose background task polls until a
terminal result; :func:`read_result` is one long poll with its retries. Dropped reads and
gateway errors are retried within the lease, and the lease deadline is tracked from when
each renewing poll was sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Iterator, Mapping
from time import monotonic
from typing import Any, Final, Protocol
from urllib.parse import quote

import httpx

from osmosis_rollout.controller._responses import validated_body
from osmosis_rollout.errors import RolloutProtocolError
from osmosis_rollout.types import (
    NOTES_HEADER,
    POLLING_LEASE_HEADER,
    TERMINAL_STATUSES,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutStatus,
)

__all__ = [
    "GATEWAY_RETRY_DELAYS_SEC",
    "RESULT_READ_GRACE_SEC",
    "TRANSPORT_RETRY_DELAYS_SEC",
    "ResultReader",
    "RolloutHandle",
    "parse_result",
    "read_result",
]

logger = logging.getLogger(__name__)

RESULT_READ_GRACE_SEC: Final = 10.0
"""Added to the server's ``result_wait_timeout_sec`` to get each result read's timeout."""

TRANSPORT_RETRY_DELAYS_SEC: Final = (0.1, 0.5)
"""Delays before re-reading a result after a dropped connection or a read timeout."""

GATEWAY_RETRY_DELAYS_SEC: Final = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""Delays before re-reading a result after a 502, 503 or 504 (a gateway's own answer)."""

_GATEWAY_STATUSES: Final = frozenset({502, 503, 504})
_RETRIED_TRANSPORT_ERRORS: Final = (
    httpx.RemoteProtocolError,
    httpx.NetworkError,
    httpx.ReadTimeout,
)
_PROGRESS_RANK: Final = {
    RolloutStatus.QUEUED: 0,
    RolloutStatus.RUNNING: 1,
    RolloutStatus.GRADING: 2,
    RolloutStatus.SUCCESS: 3,
}


class ResultReader(Protocol):
    """What a :class:`RolloutHandle` polls through (``RolloutClient``)."""

    async def _read_result(
        self,
        admission: RolloutInitResponse,
        *,
        lease_deadline: float,
        http_client: httpx.AsyncClient | None = None,
    ) -> tuple[RolloutResultResponse, float]: ...


def parse_result(response: httpx.Response, rollout_id: str) -> RolloutResultResponse:
    """The 200 body, validated; ``RolloutProtocolError`` for anything else."""
    route = f"GET /rollout/{rollout_id}/result"
    result = validated_body(response, RolloutResultResponse, 200, route)
    if result.rollout_id != rollout_id:
        raise RolloutProtocolError(
            f"{route} answered with the result of rollout {result.rollout_id!r}",
            status_code=response.status_code,
        )
    return result


async def read_result(
    http_client: httpx.AsyncClient,
    base_url: str,
    admission: RolloutInitResponse,
    *,
    headers: Mapping[str, str],
    lease_deadline: float,
    read_grace_sec: float = RESULT_READ_GRACE_SEC,
) -> tuple[RolloutResultResponse, float]:
    """One long poll, with read retries; returns the result and the renewed lease deadline.

    Dropped reads and read timeouts are retried after :data:`TRANSPORT_RETRY_DELAYS_SEC`,
    gateway answers (502/503/504) after :data:`GATEWAY_RETRY_DELAYS_SEC`, always within the
    lease: once a read failed, nothing proves the lease was renewed.
    """
    rollout_id = admission.rollout_id
    url = f"{base_url}/rollout/{quote(rollout_id, safe='')}/result"
    request_headers = {
        **headers,
        POLLING_LEASE_HEADER: admission.polling_lease_token,
        NOTES_HEADER: "1",
    }
    read_timeout = admission.result_wait_timeout_sec + read_grace_sec
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
                response = await http_client.get(
                    url, headers=request_headers, timeout=read_timeout, follow_redirects=False
                )
        except TimeoutError as exc:
            if previous is not None and scope.expired():
                raise previous from exc
            raise
        except _RETRIED_TRANSPORT_ERRORS as exc:
            error, delay = exc, next(transport_delays, None)
        else:
            try:
                result = parse_result(response, rollout_id)
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
        client: ResultReader,
        admission: RolloutInitResponse,
        *,
        lease_deadline: float,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.rollout_id: str = admission.rollout_id
        self.admission: RolloutInitResponse = admission
        self.status: RolloutStatus = admission.status
        self.latest_result: RolloutResultResponse | None = None
        self.lease_deadline: float = lease_deadline
        """Monotonic time by which the server's lease lapses unless a poll renews it."""
        self._client = client
        self._http_client = http_client
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
        return self.status if self._reached(target) else (await self._task).status

    def _publish(self) -> None:
        # A fresh event per change: every waiter wakes, re-checks, and waits on the next one.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _poll(self) -> RolloutResultResponse:
        try:
            while True:
                result, self.lease_deadline = await self._client._read_result(
                    self.admission,
                    lease_deadline=self.lease_deadline,
                    http_client=self._http_client,
                )
                self.status = result.status
                self.latest_result = result
                self._publish()
                if result.status in TERMINAL_STATUSES:
                    return result
        finally:
            self._polling_over = True
            self._publish()
