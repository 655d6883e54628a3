"""Hooks pytest-osmosis calls, for users' ``conftest.py`` files and other plugins.

Added to pytest's hook registry by ``pytest_addhooks`` (as pytest-xdist adds its own), so an
implementation is checked against these signatures like any pytest hook. Every argument is
made of JSON primitives (dicts, lists, strings, numbers), the same on a single process and
under pytest-xdist.

``row`` is the row's identity: ``{"nodeid", "dataset", "row_key"}``.
``result`` is what the plugin recorded for the row: ``{"verdict", "attempts", "stats"}``, where
``verdict`` is ``"passed" | "failed" | "skipped"`` and ``attempts`` holds one ``rows.jsonl``
record per attempt (``reward``, ``status``, ``error_type``, ``tokens``, ``cost``, ...).

Example, a ``conftest.py`` that sends each finished row to a JSONL sink::

    import json

    def pytest_osmosis_row_finished(row, result, report):
        with open("results.jsonl", "a", encoding="utf-8") as sink:
            sink.write(json.dumps({**row, "verdict": result["verdict"]}) + "\\n")
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
