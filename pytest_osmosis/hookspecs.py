"""Hooks pytest-osmosis calls, for users' ``conftest.py`` files and other plugins.

Added by ``pytest_addhooks`` (as pytest-xdist adds its own), so an implementation is checked
against these signatures like any pytest hook. Every argument but ``report`` is made of JSON
values, the same on one process and under pytest-xdist: ``row`` is the row's identity,
``{"nodeid", "dataset", "row_key"}``; ``result`` is ``{"verdict", "attempts", "stats"}``, with
``verdict`` ``"passed" | "failed" | "skipped"`` and one ``rows.jsonl`` record per attempt
(``reward``, ``status``, ``error_type``, ``tokens``, ``cost``, ...). Examples: ``docs/hooks.md``.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_osmosis_row_finished(
    row: dict[str, Any], result: dict[str, Any], report: pytest.TestReport
) -> None:
    """A row finished: its verdict and attempts are final.

    Called once per row on the controlling process (under pytest-xdist, on the controller,
    when the worker's report arrives), in the order reports arrive. ``report`` is the row's
    call-phase test report.
    """


def pytest_osmosis_run_finished(summary: dict[str, Any], report_path: str | None) -> None:
    """The run finished and its files are written.

    Called once, on the controlling process, with the summary as ``report.json`` holds it
    (row counts, pass rate, reward statistics, tokens, cost) and the path of that report.
    """


@pytest.hookspec(firstresult=True)
def pytest_osmosis_row_verdict(row: dict[str, Any], result: dict[str, Any]) -> bool | str | None:
    """Decide a row's verdict with a rule of your own; return ``None`` to keep the built-in one.

    Return ``True``/``"passed"``, ``False``/``"failed"`` or ``"skipped"``. The first
    implementation that returns something other than ``None`` decides. ``result["verdict"]``
    is the verdict the threshold and ``--osmosis-row-pass`` gave. Called where the row runs
    (on a pytest-xdist worker, on that worker), before the item passes or fails.
    """
