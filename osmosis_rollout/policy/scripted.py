"""Scripted policies: a Python callable, or a fixed list of replies, answering chat calls.

Deterministic, keyless and offline: what unit tests and the demo use. A plain ``def`` callable
runs in a worker thread so a slow one never blocks other rollouts' calls on the endpoint. The
threads are the policies' own pool, not the event loop's default executor, which holds only
a few threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from osmosis_rollout.errors import PolicyError
from osmosis_rollout.policy.types import (
    ChatReply,
    ChatRequest,
    Policy,
    Text,
    ToolCall,
    coerce_reply,
)

__all__ = ["ScriptedPolicy", "as_policy"]

_REPLY_TYPES = (str, dict, Text, ToolCall, ChatReply)
_POLICY_THREADS = 64


@functools.cache
def _policy_threads() -> ThreadPoolExecutor:
    """The worker threads plain ``def`` policies run on (started lazily, one per busy call)."""
    return ThreadPoolExecutor(_POLICY_THREADS, thread_name_prefix="osmosis-policy")


def _is_async_callable(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - instances with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class ScriptedPolicy:
    """A policy backed by a callable or by a sequence of replies.

    ``ScriptedPolicy(fn)``: ``fn(request)`` (plain or ``async``) returns anything
    :func:`~osmosis_rollout.policy.types.coerce_reply` accepts. ``ScriptedPolicy([r1, r2, ...])``:
    each rollout gets ``r1`` on its first call, ``r2`` on its second, and so on; an item may itself
    be a callable taking the request. Running past the end raises :class:`PolicyError`.
    """

    def __init__(self, script: Callable[[ChatRequest], Any] | Sequence[Any]) -> None:
        self._fn: Callable[[ChatRequest], Any] | None = None
        self._replies: tuple[Any, ...] | None = None
        if callable(script) and not isinstance(script, _REPLY_TYPES):
            self._fn = script
        elif isinstance(script, Sequence) and not isinstance(script, str | bytes):
            self._replies = tuple(script)
            if not self._replies:
                raise ValueError("a scripted policy needs at least one reply")
        else:
            raise TypeError(
                f"ScriptedPolicy takes a callable or a list of replies, not {type(script).__name__}"
            )
        self._positions: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        if self._fn is not None:
            return f"ScriptedPolicy({getattr(self._fn, '__qualname__', self._fn)!r})"
        return f"ScriptedPolicy(<{len(self._replies or ())} replies>)"

    async def complete(self, request: ChatRequest) -> ChatReply:
        """Answer ``request`` from the script."""
        step: Any
        if self._replies is not None:
            with self._lock:
                index = self._positions.get(request.rollout_id, 0)
                self._positions[request.rollout_id] = index + 1
            if index >= len(self._replies):
                raise PolicyError(
                    f"scripted policy ran out of replies: rollout {request.rollout_id!r} made "
                    f"call #{index + 1} but the script holds {len(self._replies)}"
                )
            step = self._replies[index]
            if not callable(step) or isinstance(step, _REPLY_TYPES):
                return coerce_reply(step)
        else:
            assert self._fn is not None
            step = self._fn
        return coerce_reply(await _call(step, request))

    def forget(self, rollout_id: str) -> None:
        """Drop the per-rollout position (called when the endpoint releases a rollout)."""
        with self._lock:
            self._positions.pop(rollout_id, None)


async def _call(fn: Callable[[ChatRequest], Any], request: ChatRequest) -> Any:
    if _is_async_callable(fn):
        result = await fn(request)
    else:
        call = functools.partial(contextvars.copy_context().run, fn, request)
        result = await asyncio.get_running_loop().run_in_executor(_policy_threads(), call)
    if inspect.isawaitable(result):
        result = await result
    return result


class _ConstantPolicy:
    """Always the same reply (``as_policy("hello")``)."""

    def __init__(self, reply: Any) -> None:
        coerce_reply(reply)  # fail at construction, not on the first call
        self._reply = reply

    def __repr__(self) -> str:
        return f"ConstantPolicy({self._reply!r})"

    async def complete(self, request: ChatRequest) -> ChatReply:
        # Coerced per call so tool calls without an id get a fresh one, as a model would mint.
        return coerce_reply(self._reply)


def as_policy(obj: Any) -> Policy:
    """Turn ``obj`` into a :class:`Policy`.

    - an object with ``async def complete(request)`` is returned as is;
    - a single reply (str, assistant message dict, :class:`Text`, :class:`ToolCall`,
      :class:`ChatReply`) answers every call;
    - a list or tuple of replies answers each rollout's calls in order;
    - a callable (plain or ``async``) taking a :class:`ChatRequest` is called for every call.
    """
    complete = getattr(obj, "complete", None)
    if complete is not None and _is_async_callable(complete):
        return obj  # type: ignore[no-any-return]
    if isinstance(obj, _REPLY_TYPES):
        return _ConstantPolicy(obj)
    if callable(obj) or (isinstance(obj, Sequence) and not isinstance(obj, bytes)):
        return ScriptedPolicy(obj)
    raise TypeError(
        f"cannot use {type(obj).__name__} as a policy: pass an object with "
        "'async def complete(request)', a callable taking a ChatRequest, a reply, or a list of replies"
    )
