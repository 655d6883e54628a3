"""The output router on its own: a rollout's lines go to the log, everything else through."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from pytest_osmosis.run.rollout_log import RolloutsLogHandler, install_router, rollout_output


def test_lines_inside_a_rollout_are_logged_and_a_stderr_handler_does_not_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal_out, terminal_err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal_out)
    monkeypatch.setattr(sys, "stderr", terminal_err)
    undo = install_router()
    # A handler writing to whatever sys.stderr is when it runs: the router itself.
    handler = logging.StreamHandler()
    handler.stream = sys.stderr
    logger = logging.getLogger("osmosis_rollout.output")
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.INFO)
    try:
        print("outside")
        with rollout_output("r-1"):
            print("inside", end="")
            print(" and on")
            print("to err", file=sys.stderr)
            print("left open", end="")
    finally:
        logger.removeHandler(handler)
        undo()
    assert sys.stdout is terminal_out and sys.stderr is terminal_err
    assert terminal_out.getvalue() == "outside\n"
    assert terminal_err.getvalue().splitlines() == [
        "r-1 stdout: inside and on",
        "r-1 stderr: to err",
        "r-1 stdout: left open",
    ]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a full disk)")
def test_a_rollouts_log_on_a_full_disk_stops_once_without_logging_its_own_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal_err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal_err)
    undo = install_router()
    handler = RolloutsLogHandler(Path("/dev/full"))
    logger = logging.getLogger("osmosis_rollout.output")
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.INFO)
    try:
        with rollout_output("r-1"):
            for i in range(50):
                print("line", i, file=sys.stderr)
                logger.info("record %d", i)
    finally:
        logger.removeHandler(handler)
        undo()
    assert handler.failure == "No space left on device"
    assert terminal_err.getvalue() == ""  # no traceback, fed back or not
