"""Each gate of the run as a test case of its own: ``osmosis-gate::min-pass-rate``,
``osmosis-gate::regression``, ``osmosis-gate::require-grader``.

A gate is decided over every row, so it is not a collected item (under pytest-xdist a worker
sees only its share of the rows; ``-k`` or ``--lf`` could deselect it), nor a report made up
by hand (which would skip other plugins' hooks: logs, ``--lf``'s cache, JUnit). At the end of
``pytest_runtestloop``, on the controller, each gate is a :class:`GateCase` run through
pytest's own ``pytest_runtest_protocol``: pytest counts, colours and reports it as any test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.runs.report_model import RunVerdict
from pytest_osmosis.options import OsmosisSettings

__all__ = ["GateCase", "GateFailed", "planned_gates", "run_gate_cases"]


class GateFailed(Exception):
    """A gate that fails the run: shown as the gate's line, without a traceback."""


class GateCase(pytest.Item):
    """One gate's outcome, reported as a test: it passes or fails as the gate decided."""

    def __init__(self, *, line: str, passed: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.line = line
        self.passed = passed

    def runtest(self) -> None:
        if not self.passed:
            raise GateFailed(self.line)

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> Any:
        if isinstance(excinfo.value, GateFailed):
            return self.line
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.nodeid


def planned_gates(settings: OsmosisSettings) -> int:
    """How many gate cases the run will have (pytest's progress counts them from the start)."""
    gates = (
        settings.min_pass_rate is not None,
        settings.fail_on_regression and settings.baseline is not None,
        settings.require_grader,
    )
    return 0 if settings.preflight_only else sum(gates)


def run_gate_cases(session: pytest.Session, verdict: RunVerdict, *, kept_failed: int = 0) -> int:
    """Run one :class:`GateCase` per gate of ``verdict`` through pytest's protocol; return
    how many failed. ``kept_failed`` rows a resume kept failed (pytest counted none of them):
    ``osmosis-run::kept-rows`` fails for them, in pytest's counts and JUnit too."""
    cases = [
        (f"osmosis-gate::{reason.name}", reason.name, reason.line, reason.outcome == "passed")
        for reason in sorted(verdict.reasons, key=lambda r: r.name)
        if reason.kind == "gate"
    ]
    if kept_failed > 0:
        why = "not run again; the report has them"
        line = f"rows kept by --osmosis-resume: {kept_failed} failed ({why})"
        cases.append(("osmosis-run::kept-rows", "kept-rows", line, False))
    for nodeid, name, line, passed in cases:
        case = GateCase.from_parent(session, name=name, nodeid=nodeid, line=line, passed=passed)
        session.config.hook.pytest_runtest_protocol(item=case, nextitem=None)
    return sum(not passed for *_, passed in cases)
