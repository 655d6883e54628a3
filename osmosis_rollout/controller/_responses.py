"""Small helpers shared by admission, polling and the client's other calls."""

from __future__ import annotations

import httpx


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
