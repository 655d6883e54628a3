"""At the open-file limit, refused connections cost one log line per interval, no tracebacks.

Before: 25,813 tracebacks (20 MB) for the same 3 s of connections.
"""

from __future__ import annotations

import resource
import signal
import socket
import time
from pathlib import Path

import pytest
from serve_process import served, write_main

from osmosis_rollout.server.connections import REFUSED_ACCEPT_LOG_INTERVAL_SEC

OPEN_FILES = 256
"""The server's open-file limit: enough to start, little enough to exhaust from a test."""
CHURN_SEC = 3.0
"""How long connections keep arriving once the limit is reached (below the log interval)."""


def _low_open_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def test_refused_accepts_at_the_open_file_limit_log_one_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    assert CHURN_SEC < REFUSED_ACCEPT_LOG_INTERVAL_SEC
    main_py = write_main(tmp_path / "rollout")
    log = tmp_path / "serve.log"
    held: list[socket.socket] = []
    # A cap above the limit: the guard never sheds, so accept() itself runs out of files.
    options = ("--max-connections", str(4 * OPEN_FILES), "--drain-timeout", "1")
    with served(main_py, log, *options, preexec_fn=_low_open_file_limit) as (url, process):
        port = int(url.rsplit(":", 1)[1])
        try:
            # Idle connections (no request) fill the server's file table; the kernel still
            # queues the later ones in the listen backlog, which accept() then refuses.
            for _ in range(OPEN_FILES + 50):
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            deadline = time.monotonic() + CHURN_SEC
            while time.monotonic() < deadline:
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    pass
                time.sleep(0.01)
        finally:
            for connection in held:
                connection.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    output = log.read_text()
    refused = [line for line in output.splitlines() if "new connections refused" in line]
    # One line at the first refusal, one with the rest counted when the server stops.
    assert len(refused) == 2, output[-3000:]
    for line in refused:
        assert "Too many open files (open-file limit 256)" in line and "ulimit -n" in line
    assert "accept() failed 1 time(s)" in refused[0]
    assert "Traceback" not in output, f"{output.count('Traceback')} tracebacks:\n{output[-3000:]}"
    assert "socket.accept() out of system resource" not in output


pytestmark = pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 2 * OPEN_FILES,
    reason="the test process itself needs the connections it holds",
)
