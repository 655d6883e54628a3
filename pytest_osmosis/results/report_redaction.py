"""Secrets stay out of what pytest itself writes: failure text, captured output, logs.

:class:`ReportRedaction` (the plugin ``osmosis-redaction``) redacts each report's failure text,
captured sections and properties with the run's one :class:`~osmosis_rollout.redaction.Redactor`,
and makes pytest's log handlers redact too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator

import pytest

from osmosis_rollout.redaction import Redactor, redact_handler
from osmosis_rollout.rollout_notes import noted_here

__all__ = ["REDACTION_PLUGIN", "ReportRedaction"]

REDACTION_PLUGIN = "osmosis-redaction"

_PYTEST_LOG_HANDLERS = ("log_file_handler", "log_cli_handler", "caplog_handler", "report_handler")
"""pytest's logging plugin handlers: the log file, live logs, caplog and report sections."""
_ITEM_HANDLERS = ("caplog_handler", "report_handler")
"""Those whose records belong to the item running now (its captured-log section, ``caplog``),
unlike the run-wide log file and live log."""


class ReportRedaction:
    """Redacts pytest's reports and log handlers with the run's redactor."""

    def __init__(self, config: pytest.Config, redactor: Redactor) -> None:
        self.config = config
        self.redactor = redactor

    def redact_pytest_logs(self) -> None:
        """Make pytest's log handlers redact secrets and leave the rollouts' own records to
        ``rollouts.log``: pytest hangs its handlers on every logger that does not propagate
        (the engine's route included), so without the filter a record a rollout logs on
        another thread would land in whichever item pytest runs at that moment."""
        logging_plugin = self.config.pluginmanager.get_plugin("logging-plugin")
        leave_out = _RolloutRecords(threading.get_ident())
        for name in _PYTEST_LOG_HANDLERS:
            handler = getattr(logging_plugin, name, None)
            if isinstance(handler, logging.Handler):
                redact_handler(handler, self.redactor)
                handler.addFilter(leave_out)
                if name in _ITEM_HANDLERS:
                    # A record made inside a rollout is shown on that row (its notes), not
                    # under the item pytest happens to run now (filters run where it is made).
                    handler.addFilter(lambda record: not noted_here())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Keep secrets out of a report's failure text, captured output and properties."""
        report = yield
        if not self.redactor:
            return report
        redact = self.redactor.redact
        if report.longrepr is not None:
            text = str(report.longrepr)
            if (redacted := redact(text)) != text:
                report.longrepr = redacted
        # In place, replacing only what changed: pytest keeps every report for the session,
        # and an unchanged entry stays shared with the item's own list.
        for i, (title, content) in enumerate(report.sections):
            clean = redact(content)
            if clean is not content:
                report.sections[i] = (title, clean)
        for i, (name, value) in enumerate(report.user_properties):
            if value is None or isinstance(value, bool | int | float):
                continue
            clean_value = (
                redact(value) if isinstance(value, str) else self.redactor.redact_value(value)
            )
            if clean_value is not value:
                report.user_properties[i] = (name, clean_value)
        return report


class _RolloutRecords(logging.Filter):
    """Drops ``osmosis_rollout``'s records logged by the rollouts (off the thread that runs
    pytest's items: the rollouts run on the scheduler's own thread) while that logger keeps
    its records to itself (the engine's route to ``rollouts.log``)."""

    def __init__(self, items_thread: int) -> None:
        super().__init__()
        self.items_thread = items_thread
        self.logger = logging.getLogger("osmosis_rollout")

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "osmosis_rollout" or record.name.startswith("osmosis_rollout.")
        return self.logger.propagate or not ours or record.thread in (None, self.items_thread)
