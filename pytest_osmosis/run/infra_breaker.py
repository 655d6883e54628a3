"""Stop starting rows once the infrastructure is plainly down.

A model server that refuses connections, or a rollout server that is gone, fails every row
the same way. Once :data:`TRIP_AFTER` consecutive attempts failed with the same
infrastructure error (not a workflow's or grader's own exception), the row runner starts no
new rollout and pytest stops after the item it is on: the rows not started are "not run".
"""

from __future__ import annotations

import re
import threading

from osmosis_rollout.runs.report_model import AttemptRecord
from pytest_osmosis.results.verdict import STATUS_FAILED

__all__ = ["TRIP_AFTER", "InfraBreaker", "NotStarted", "infrastructure_cause"]

TRIP_AFTER = 3
"""Consecutive identical infrastructure failures, with no success between, that stop the run."""

_UNREACHABLE = re.compile(
    r"APIConnectionError|ConnectError|ConnectTimeout|ConnectionRefused|Connection refused|"
    r"Connection error|RemoteProtocolError|ServerDisconnected|Name or service not known|"
    r"nodename nor servname"
)


class NotStarted(Exception):
    """An attempt the tripped breaker kept from starting: its row has no result (not run)."""


def infrastructure_cause(attempt: AttemptRecord) -> str | None:
    """What made ``attempt`` fail when it was the infrastructure (its message), else None."""
    if attempt.status != STATUS_FAILED:
        return None
    message = attempt.err_message or ""
    if attempt.error_type == "server_exited":
        return message or str(attempt.error_type)
    # The model (a policy call) or the rollout server (admission, polling) was unreachable.
    if attempt.error_phase in ("workflow", "grader"):
        return None  # user code's own exception, even one about a connection
    if _UNREACHABLE.search(message) or _UNREACHABLE.search(attempt.error_type or ""):
        return f"{attempt.error_type}: {message}" if attempt.error_type else message
    return None


class InfraBreaker:
    """Counts consecutive identical infrastructure failures; trips at :data:`TRIP_AFTER`
    (attempts finish on the rollouts' thread, items read :attr:`tripped` on pytest's)."""

    def __init__(self, trip_after: int = TRIP_AFTER) -> None:
        self.trip_after = trip_after
        self.tripped: str | None = None
        """Why new rows are no longer started; None while they are."""
        self._lock = threading.Lock()
        self._cause: str | None = None
        self._count = 0

    def record(self, attempt: AttemptRecord) -> None:
        """Note a finished attempt: a success resets the count, another failure too."""
        cause = infrastructure_cause(attempt)
        with self._lock:
            if self.tripped is not None:
                return
            self._count = self._count + 1 if cause == self._cause else 1
            self._cause = cause
            if cause is not None and self._count >= self.trip_after:
                first_line = cause.strip().splitlines()[0] if cause.strip() else cause
                self.tripped = (
                    f"{self._count} rollouts in a row failing on the same unreachable "
                    f"server, none succeeding (no new row started): {first_line}"
                )
