"""Small helpers shared by admission, polling and the client's other calls."""

from __future__ import annotations

from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from osmosis_rollout.errors import RolloutProtocolError

_Model = TypeVar("_Model", bound=BaseModel)


def body_excerpt(response: httpx.Response, limit: int = 200) -> str:
    """``": <first limit characters of the body>"``, or ``""`` for an empty/undecodable one."""
    try:
        text = response.text
    except Exception:  # an undecodable body must not hide the real error
        return ""
    text = text.strip()
    if not text:
        return ""
    return ": " + (text[:limit] + "..." if len(text) > limit else text)


def validated_body(
    response: httpx.Response, model: type[_Model], expected: int, route: str, refused: str = ""
) -> _Model:
    """``response``'s body as ``model``; ``RolloutProtocolError`` naming ``route`` for any
    status but ``expected`` (followed by ``refused``, then the body) or an invalid body."""
    status = response.status_code
    if status != expected:
        raise RolloutProtocolError(
            f"{route} answered {status}{refused}{body_excerpt(response)}", status_code=status
        )
    try:
        return model.model_validate(response.json())
    except (ValueError, ValidationError) as exc:
        raise RolloutProtocolError(
            f"{route} answered {expected} with an invalid body: {exc}", status_code=status
        ) from exc
