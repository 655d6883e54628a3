"""The optional inbound bearer key of a rollout server, and the ASGI middleware enforcing it.

The official SDK 0.3.8 checks ``Authorization: Bearer <api_key>`` inline in its app; earlier
releases exported a ``ControllerAuth`` value object from ``server/auth.py``. Ours keeps the
name for migrating code and gives it one job: hold the key without leaking it in ``repr``,
build the header a caller sends, and check a received header in constant time.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

SERVER_API_KEY_ENV = "OSMOSIS_ROLLOUT_API_KEY"
"""Environment variable ``osmosis-rollout serve`` reads the inbound key from."""

REFUSED_SCOPE_KEY = "osmosis_rollout.refused"
"""Set (True) in the ASGI scope of a request refused for want of the key: the connection it
came on stays untrusted (see ``connections.py``)."""

UNAUTHORIZED_BODY = json.dumps({"detail": "unauthorized"}, separators=(",", ":")).encode()


@dataclass(frozen=True)
class ControllerAuth:
    """The bearer key a controller must present to a rollout server (``None`` = open).

    A blank key is refused: an empty secret would silently open the server.
    """

    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("api_key must be a non-empty string when provided (or None)")

    @classmethod
    def from_env(cls, env_var: str = SERVER_API_KEY_ENV) -> ControllerAuth:
        """The key from ``env_var`` (unset or empty = no key)."""
        return cls(os.environ.get(env_var) or None)

    @property
    def enabled(self) -> bool:
        """True when requests must carry the key."""
        return self.api_key is not None

    def bearer_headers(self) -> dict[str, str]:
        """``{"Authorization": "Bearer <key>"}``, or ``{}`` without a key."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.enabled else {}

    def accepts(self, authorization: str | None) -> bool:
        """True when ``authorization`` is exactly ``Bearer <key>`` (or no key is set).

        The scheme is case-sensitive, as the official server's check is.
        """
        if self.api_key is None:
            return True
        expected = f"Bearer {self.api_key}".encode()
        return secrets.compare_digest((authorization or "").encode(), expected)

    def __repr__(self) -> str:
        return f"ControllerAuth(api_key={'***' if self.api_key else None})"


async def send_json(send: Any, status: int, body: bytes, *, close: bool = False) -> None:
    """Answer with ``status`` and the JSON ``body`` from plain ASGI middleware (this one and
    the body-size limit's)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BearerAuthMiddleware:
    """ASGI middleware answering 401 ``{"detail":"unauthorized"}`` to any unauthenticated request.

    It wraps the whole app, so unknown paths (404) and bad bodies (422) are guarded too.
    Written as plain ASGI (not ``BaseHTTPMiddleware``) so long polls are not re-buffered.
    """

    def __init__(self, app: Any, auth: ControllerAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.auth.enabled:
            await self.app(scope, receive, send)
            return
        header: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        if self.auth.accepts(header):
            await self.app(scope, receive, send)
            return
        scope[REFUSED_SCOPE_KEY] = True
        # Kept alive as the official server does (the wire differential pins it): the
        # connection cap sheds an unauthenticated connection first.
        await send_json(send, 401, UNAUTHORIZED_BODY)


__all__ = ["REFUSED_SCOPE_KEY", "SERVER_API_KEY_ENV", "BearerAuthMiddleware", "ControllerAuth"]
