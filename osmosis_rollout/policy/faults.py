"""Faults the policy endpoint can inject, so tests can watch clients and rollouts cope."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Faults"]


@dataclass
class Faults:
    """What the endpoint does wrong, on purpose.

    Counted over all calls the server receives (server-wide, in arrival order, starting at 1).

    - ``latency_s``: sleep this long before answering every call;
    - ``fail_first`` / ``fail_status``: answer the first ``fail_first`` calls with HTTP
      ``fail_status`` (429 or 500, say) and an OpenAI-style error body; 429s carry
      ``retry-after-ms: retry_after_ms`` so retrying clients come back quickly, or, with
      ``retry_after_s`` set, the standard ``Retry-After: retry_after_s`` alone;
    - ``cut_stream``: streaming calls send half their chunks, then the connection is dropped
      without ``[DONE]`` or the end of the chunked body;
    - ``malformed_chunk``: streaming calls carry one ``data:`` line that is not JSON;
    - ``hang_s``: wait this long before answering (longer than the client's timeout); a
      stopping server releases hung calls;
    - ``only_calls``: when set, the stream and hang faults apply to these call numbers only.
    """

    latency_s: float = 0.0
    fail_first: int = 0
    fail_status: int = 429
    retry_after_ms: int = 10
    retry_after_s: int | None = None
    cut_stream: bool = False
    malformed_chunk: bool = False
    hang_s: float = 0.0
    only_calls: frozenset[int] | None = None

    def failure(self, call_number: int) -> tuple[int, str, str, dict[str, str]]:
        """The injected HTTP failure of call ``call_number``: status, message, OpenAI error
        type and headers."""
        message = f"injected fault: HTTP {self.fail_status} on call {call_number}"
        error_type = "rate_limit_error" if self.fail_status == 429 else "server_error"
        if self.retry_after_s is None:
            return (
                self.fail_status,
                message,
                error_type,
                {"retry-after-ms": str(self.retry_after_ms)},
            )
        return self.fail_status, message, error_type, {"retry-after": str(self.retry_after_s)}

    def applies_to(self, call_number: int) -> bool:
        """True when the stream and hang faults apply to call ``call_number`` (1-based)."""
        return self.only_calls is None or call_number in self.only_calls
