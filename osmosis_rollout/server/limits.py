"""A request-body limit for the rollout server: anything larger is answered 413.

A declared ``Content-Length`` over the limit is refused before a byte of the body is read;
a body without one (chunked) is counted as it arrives and cut off as soon as it passes the
limit, so a hostile client can never make the server buffer more than the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from osmosis_rollout.server.auth import send_json

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: far above any real admission (prompts, metadata), far below a memory problem."""

DRAIN_CAP_BYTES = 64 * 1024 * 1024
"""How much of a refused body is read and discarded so the client sees the 413.

A server that answers and closes while the client is still sending resets the connection,
and the client reports a transport error instead of the 413. Past this cap the connection
is closed anyway.
"""


def check_max_body_bytes(value: int | None) -> int | None:
    """Validate ``max_body_bytes`` (``None`` = no limit); ``ValueError`` naming it."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"max_body_bytes must be a positive integer or None, got {value!r}")
    return value


class BodyTooLargeError(HTTPException):
    """Raised from ``receive`` once a body passes the limit; FastAPI answers it 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=too_large_detail(limit))


def too_large_detail(limit: int) -> str:
    """The 413 ``detail``: what the limit is and how to raise it."""
    return (
        f"request body exceeds the server's max_body_bytes limit of {limit} bytes "
        "(raise it with create_rollout_server(max_body_bytes=...) or serve --max-body-bytes)"
    )


class BodySizeLimitMiddleware:
    """ASGI middleware answering 413 for HTTP request bodies over the limit.

    ``max_body_bytes`` is read per request (``None``: no limit), so ``serve`` can change the
    limit of an app an entrypoint already built.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: Callable[[], int | None]) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes()
        if scope["type"] != "http" or limit is None:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _discard_body(receive)
            await _send_413(send, limit)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    if message.get("more_body", False):
                        await _discard_body(receive)
                    raise BodyTooLargeError(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLargeError:
            # Read outside a route (which turns it into a 413 itself): answer here if we can.
            if started:
                raise
            await _send_413(send, limit)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _discard_body(receive: Receive) -> None:
    """Read and drop the rest of the request body, up to :data:`DRAIN_CAP_BYTES`."""
    discarded = 0
    while discarded <= DRAIN_CAP_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        discarded += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps({"detail": too_large_detail(limit)}).encode()
    await send_json(send, 413, body, close=True)


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodySizeLimitMiddleware",
    "BodyTooLargeError",
    "check_max_body_bytes",
]
