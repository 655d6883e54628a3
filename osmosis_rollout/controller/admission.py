"""Admission: ``POST /rollout`` until the server admits the rollout.

429 is retried after its ``Retry-After``. Transport failures are sorted by what they prove:

- the request **never reached the server** (a connect error, a pool timeout, or a pooled
  keep-alive connection the server had already closed, reset before any response byte):
  re-POSTed after a short backoff (:data:`ADMISSION_RETRY_DELAYS_SEC`);
- the request **may have reached it** (a fresh connection reset after sending, a read
  timeout, a response cut short): one re-POST settles it, since ids are never admitted
  twice: ``202`` means the first POST did not admit it, ``409`` means it did and its answer
  (with the polling lease) was lost, which raises :class:`RolloutAdmissionUnknownError`
  naming the rollout. Nothing is lost silently.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from time import monotonic
from typing import Any, Final

import httpx

from osmosis_rollout.controller._responses import validated_body
from osmosis_rollout.errors import (
    RolloutAdmissionTimeoutError,
    RolloutAdmissionUnknownError,
    RolloutProtocolError,
)
from osmosis_rollout.types import RolloutInitRequest, RolloutInitResponse

__all__ = [
    "ADMISSION_RETRY_DELAYS_SEC",
    "ADMISSION_TIMEOUT_SEC",
    "Admitted",
    "admit",
    "retry_after_delay",
]

logger = logging.getLogger(__name__)

ADMISSION_TIMEOUT_SEC: Final = 5.0
"""httpx timeout of the client ``RolloutClient`` creates (so, of each admission POST)."""

ADMISSION_RETRY_DELAYS_SEC: Final = (0.1, 0.25, 0.5, 1.0, 2.0)
"""Delays before re-POSTing an admission that provably never reached the server."""

_RETRY_AFTER_DEFAULT_SEC: Final = 1.0
_RETRY_AFTER_MIN_SEC: Final = 0.05
_RETRY_AFTER_MAX_SEC: Final = 60.0
_NEVER_SENT_ERRORS: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_CONNECTION_RESET_ERRORS: Final = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def retry_after_delay(value: str | None) -> float:
    """Seconds to wait before re-POSTing after a 429 whose ``Retry-After`` header is ``value``.

    A number of seconds is clamped to [0.05, 60]; a missing, non-numeric (HTTP-date) or
    non-finite value means 1.0 s, as the official client does.
    """
    try:
        seconds = float((value or "").strip())
    except ValueError:
        return _RETRY_AFTER_DEFAULT_SEC
    if not math.isfinite(seconds):
        return _RETRY_AFTER_DEFAULT_SEC
    return min(max(seconds, _RETRY_AFTER_MIN_SEC), _RETRY_AFTER_MAX_SEC)


def parse_admission(response: httpx.Response, rollout_id: str) -> RolloutInitResponse:
    """The 202 body, validated; ``RolloutProtocolError`` for anything else."""
    route = f"POST /rollout for rollout {rollout_id!r}"
    refused = " (only 202 admits and 429 is retried)"
    admission = validated_body(response, RolloutInitResponse, 202, route, refused)
    if admission.rollout_id != rollout_id:
        raise RolloutProtocolError(
            f"{route} answered 202 for rollout {admission.rollout_id!r}",
            status_code=response.status_code,
        )
    return admission


class _ExchangeTrace:
    """httpcore trace events of one request: was its connection reused, did a response start?"""

    def __init__(self) -> None:
        self.connected = False
        self.sent_on_connection = False
        self.response_started = False

    async def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        if name.startswith("connection.connect_"):
            self.connected = True
        elif name.endswith(".send_request_headers.started"):
            self.sent_on_connection = True
        elif name.endswith(".receive_response_headers.complete"):
            self.response_started = True

    def never_reached_server(self, exc: httpx.TransportError) -> bool:
        """True when ``exc`` proves the server never saw the request."""
        if isinstance(exc, _NEVER_SENT_ERRORS):
            return True
        # A pooled connection the server had closed (its keep-alive timeout) fails on the
        # first read or write; a server never drops a request it has read without answering.
        return (
            isinstance(exc, _CONNECTION_RESET_ERRORS)
            and self.sent_on_connection
            and not self.connected
            and not self.response_started
        )


@dataclass(frozen=True)
class Admitted:
    """A 202: the validated body and when the successful POST was sent (monotonic)."""

    admission: RolloutInitResponse
    sent_at: float


async def admit(
    http_client: httpx.AsyncClient,
    base_url: str,
    request: RolloutInitRequest,
    *,
    headers: Mapping[str, str],
    timeout_sec: float | None,
) -> Admitted:
    """POST ``request`` until admitted; see the module docstring for what is retried.

    Raises ``RolloutProtocolError`` for any answer but 202/429 (a 409 after an ambiguous
    failure becomes :class:`RolloutAdmissionUnknownError`), the last transport error once
    the never-sent retries are spent, and ``RolloutAdmissionTimeoutError`` past
    ``timeout_sec`` (``None``: no bound).
    """
    rollout_id = request.rollout_id
    body = request.model_dump(mode="json")
    url = f"{base_url}/rollout"
    retry_delays: Iterator[float] = iter(ADMISSION_RETRY_DELAYS_SEC)
    uncertain: httpx.TransportError | None = None
    in_flight = False
    attempts = 0
    scope = asyncio.timeout(timeout_sec)
    try:
        async with scope:
            while True:
                attempts += 1
                trace = _ExchangeTrace()
                in_flight = True
                sent_at = monotonic()
                try:
                    response = await http_client.post(
                        url,
                        json=body,
                        headers=dict(headers),
                        follow_redirects=False,
                        extensions={"trace": trace},
                    )
                except httpx.TransportError as exc:
                    in_flight = False
                    if trace.never_reached_server(exc):
                        delay = next(retry_delays, None)
                        if delay is None:
                            raise
                        logger.warning(
                            "rollout %s: admission POST never reached the server (%s); "
                            "retrying in %.2fs",
                            rollout_id,
                            type(exc).__name__,
                            delay,
                        )
                        await asyncio.sleep(delay)
                        continue
                    if uncertain is not None:
                        raise _unknown(rollout_id, base_url, uncertain, exc) from exc
                    logger.warning(
                        "rollout %s: admission POST failed after it may have reached the "
                        "server (%s); re-POSTing to find out",
                        rollout_id,
                        type(exc).__name__,
                    )
                    uncertain = exc
                    continue
                in_flight = False
                if response.status_code == 429:
                    delay = retry_after_delay(response.headers.get("Retry-After"))
                    logger.debug(
                        "rollout %s: server at capacity (429), retrying in %.2fs", rollout_id, delay
                    )
                    await asyncio.sleep(delay)
                    continue
                if uncertain is not None and response.status_code == 409:
                    raise _unknown(rollout_id, base_url, uncertain, None) from uncertain
                return Admitted(parse_admission(response, rollout_id), sent_at)
    except TimeoutError as exc:
        if not scope.expired():
            raise
        message = (
            f"admission of rollout {rollout_id!r} to {base_url} did not finish within "
            f"{timeout_sec} s ({attempts} POST(s))"
        )
        if in_flight or uncertain is not None:
            message += (
                "; a POST was in flight, so admission may have succeeded: the server "
                "ends such a rollout when its polling lease expires"
            )
        raise RolloutAdmissionTimeoutError(message) from exc


def _unknown(
    rollout_id: str, base_url: str, first: httpx.TransportError, second: httpx.TransportError | None
) -> RolloutAdmissionUnknownError:
    if second is None:
        how = "a re-POST answered 409, so the first POST did admit it and its answer was lost"
    else:
        how = f"a re-POST failed too ({type(second).__name__}: {second})"
    return RolloutAdmissionUnknownError(
        f"admission of rollout {rollout_id!r} to {base_url}: the POST failed after it may "
        f"have reached the server ({type(first).__name__}: {first}) and {how}. The rollout "
        "may be running there without a lease this client holds: the server ends it when "
        "the lease lapses; cancel it with cancel_rollout() to end it sooner",
        rollout_id=rollout_id,
    )
