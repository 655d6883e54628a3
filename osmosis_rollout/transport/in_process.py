"""In-process routes: this process's pooled HTTP clients reach a local ASGI app without a socket.

A :class:`~osmosis_rollout.policy.endpoint.PolicyServer` started with ``in_process=True``
registers its app here under its base URL (``http://127.0.0.1:PORT``). The pooled client
that :class:`~osmosis_rollout.chat_client.RolloutChatClient` and the integrations' lean
endpoint share (``chat_client._shared_client``) sends through :class:`RoutingTransport`:
a request whose origin has a route is answered by calling the app on the caller's own
event loop (no socket, no server thread, no hop between threads); every other request
goes to the network transport unchanged.

The URL a rollout is handed stays a real ``http://`` URL and the loopback server keeps
serving it, because not every caller can take the in-process route:

- code that opens its own client on the base URL (an OpenAI SDK client, a raw
  ``httpx.AsyncClient``, LiteLLM calls the lean endpoint does not cover),
- other processes: a rollout server started by ``--osmosis-serve``, Ray actors, the
  official SDK's server,
- tests that inject faults with respx: while any respx mock is active, routed requests
  take the network path, so respx's routes see them exactly as before.

What the caller receives is what the loopback server sends: the app's status, headers and
body bytes (the server's own ``date``/``server`` headers and chunked framing aside). The body
is collected before the response is returned, so a stream's events arrive together (the
policy endpoint computes a reply before it streams it, so none arrives later). An app
that fails after starting its response body (a cut stream) surfaces as
:class:`httpx.RemoteProtocolError` after the parts it sent, as a dropped connection does;
the request's read timeout bounds the app call as it bounds a socket read.

A speed shortcut (see :mod:`osmosis_rollout._internal.shortcuts`): ``OSMOSIS_NO_SHORTCUTS=1`` sends
every request over the network, so routed origins are reached over loopback.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

import httpx

from osmosis_rollout._internal.shortcuts import shortcuts_enabled

__all__ = ["ASGIApp", "RoutingTransport", "add_route", "route_for"]

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]
"""An ASGI 3 application (a FastAPI or Starlette app, for one)."""

_Origin = tuple[str, str, int | None]

# Replaced (never mutated) under the lock, so the request path reads it without locking.
_routes: dict[_Origin, ASGIApp] = {}
_routes_lock = threading.Lock()


def _origin(url: httpx.URL) -> _Origin:
    return (url.scheme, url.host, url.port)


def add_route(base_url: str, app: ASGIApp) -> Callable[[], None]:
    """Answer requests to ``base_url``'s origin from :class:`RoutingTransport` clients in-process.

    Returns the function that removes the route (a later route for the same origin wins
    until it is removed).
    """
    global _routes
    origin = _origin(httpx.URL(base_url))
    with _routes_lock:
        _routes = {**_routes, origin: app}

    def remove() -> None:
        global _routes
        with _routes_lock:
            if _routes.get(origin) is app:
                _routes = {key: value for key, value in _routes.items() if key != origin}

    return remove


def route_for(url: str | httpx.URL) -> ASGIApp | None:
    """The app answering ``url`` in-process, or ``None`` when it goes over the network."""
    return _routes.get(_origin(httpx.URL(url))) if _routes else None


def _respx_active() -> bool:
    """True while a respx mock patches the HTTP transports (its routes must see the request)."""
    mocks = sys.modules.get("respx.mocks")
    if mocks is None:
        return False
    return any(mocker.routers for mocker in mocks.Mocker.registry.values())


class RoutingTransport(httpx.AsyncBaseTransport):
    """Send to an in-process route when the request's origin has one, else to ``network``."""

    def __init__(self, network: httpx.AsyncBaseTransport) -> None:
        self.network = network

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` in-process or over the network (see the module doc)."""
        routes = _routes
        if routes and shortcuts_enabled():
            app = routes.get(_origin(request.url))
            if app is not None and not _respx_active():
                return await call_app(app, request)
        return await self.network.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the network transport."""
        await self.network.aclose()


class _Parts(httpx.AsyncByteStream):
    """A response body already produced by the app; ``cut`` ends it like a dropped connection."""

    def __init__(self, parts: list[bytes], cut: BaseException | None) -> None:
        self._parts = parts
        self._cut = cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part
        if self._cut is not None:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)"
            ) from self._cut


async def call_app(app: ASGIApp, request: httpx.Request) -> httpx.Response:
    """Run ``app`` for ``request`` on the running loop and return its response, body read."""
    body = await request.aread()
    url = request.url
    raw_path, _, _ = url.raw_path.partition(b"?")
    scope: Scope = {
        "type": "http",
        # 2.4: send() is not awaited for disconnects, so Starlette streams without a task group.
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": url.scheme,
        "path": unquote(raw_path.decode("ascii")),
        "raw_path": raw_path,
        "query_string": url.query,
        "root_path": "",
        "headers": [(key.lower(), value) for key, value in request.headers.raw],
        "server": (url.host, url.port),
        "client": ("127.0.0.1", 0),
    }
    status: int | None = None
    headers: list[tuple[bytes, bytes]] = []
    parts: list[bytes] = []
    complete = False
    request_sent = False
    response_done = asyncio.Event()

    async def receive() -> Message:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await response_done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status, headers, complete
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body" and not complete:
            chunk = message.get("body", b"")
            if chunk:
                parts.append(bytes(chunk))
            if not message.get("more_body", False):
                complete = True
                response_done.set()

    timeouts = request.extensions.get("timeout") or {}
    read_timeout = timeouts.get("read")
    cut: BaseException | None = None
    try:
        async with asyncio.timeout(read_timeout) as deadline:
            await app(scope, receive, send)
    except TimeoutError as exc:
        if deadline.expired() and not complete:
            raise httpx.ReadTimeout(f"no reply within {read_timeout} s", request=request) from exc
        cut = exc
    except Exception as exc:
        cut = exc
    finally:
        response_done.set()
    if status is None:
        raise httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        ) from cut
    if cut is not None:
        # A server logs what its app raised after answering; the client only sees the bytes.
        logger.error("in-process app raised while answering %s", url, exc_info=cut)
    return httpx.Response(
        status,
        headers=headers,
        stream=_Parts(parts, None if complete else cut or RuntimeError("response not finished")),
        request=request,
    )
