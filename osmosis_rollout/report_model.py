"""The ``report.json`` document as a reader sees it: pydantic models and its JSON Schema.

:func:`osmosis_rollout.run_report.build_report` writes the document; this module is how it
is read back (``--osmosis-baseline``, tools that consume a run's report) and where its
published JSON Schema comes from (``docs/report.schema.json``, regenerated with
``python -m osmosis_rollout.report_model > docs/report.schema.json``).

The models pin down the keys a reader relies on and leave the rest open
(``extra="allow"``): a report from a newer minor version still reads, and a file that is
not a report fails with the field that is wrong. Reports written before the ``schema`` key
existed read too (it defaults to ``None``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osmosis_rollout.run_report import REPORT_SCHEMA

__all__ = [
    "REPORT_SCHEMA",
    "ReportAttempt",
    "ReportBaseline",
    "ReportDocument",
    "ReportFileError",
    "ReportInterval",
    "ReportRegressionTest",
    "ReportRowVerdict",
    "ReportSummary",
    "read_report",
    "report_json_schema",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReportAttempt(_Open):
    """One attempt of one row (a line of ``rows``): the official ``index.jsonl`` keys plus ours."""

    nodeid: str = Field(description="pytest node id of the row's item")
    reward: float | None = Field(
        default=None, description="the grader's reward; null when ungraded"
    )
    status: str | None = Field(default=None, description="the rollout's terminal status")


class ReportRowVerdict(_Open):
    """A row's verdict over its attempts, with its reward statistics."""

    nodeid: str = Field(description="pytest node id of the row's item")
    verdict: str = Field(description="'passed' or 'failed' under the row-pass rule")


class ReportInterval(_Open):
    """An interval beside a rate or a mean (:mod:`osmosis_rollout.stats`)."""

    low: float = Field(description="lower bound")
    high: float = Field(description="upper bound")
    confidence: float = Field(description="its confidence, e.g. 0.95 (--osmosis-confidence)")
    method: str = Field(description="how it was made, e.g. 'wilson' or 't'")


class ReportRegressionTest(_Open):
    """The paired test of a run against its baseline, over the rows both ran."""

    worse: int = Field(description="rows whose pass fraction fell (passed before, failed now)")
    better: int = Field(description="rows whose pass fraction rose")
    p_value: float = Field(description="two-sided p-value")
    significant: bool = Field(description="p_value < 1 - confidence")
    confidence: float = Field(description="the test's confidence")
    method: str = Field(
        description="'exact McNemar' (one attempt a row), 'sign test on per-row pass fractions' "
        "(equal repeats) or 'paired t-test on per-row pass fractions' (unequal attempts)"
    )
    change: float | None = Field(
        default=None, description="mean change of the rows' pass fractions (negative: worse)"
    )


class ReportBaseline(_Open):
    """The comparison with ``--osmosis-baseline``: changed rows and the paired test."""

    path: str | None = Field(default=None, description="the baseline report given")
    test: ReportRegressionTest | None = Field(
        default=None, description="the paired regression test (absent in older reports)"
    )


class ReportSummary(_Open):
    """Run-level figures: counts, pass rate, reward statistics and completeness."""

    pass_rate_interval: ReportInterval | None = Field(
        default=None,
        description="Wilson interval of the attempts' pass_rate (rows.pass_rate_interval: the rows')",
    )

    complete: bool | None = Field(
        default=None, description="false when rows were not run (interrupted, -x, --maxfail)"
    )
    stopped_by: str | None = Field(default=None, description="what stopped an incomplete run")
    interrupted: bool | None = Field(default=None, description="the run ended on a signal")


class ReportDocument(_Open):
    """A whole ``report.json``."""

    schema_id: str | None = Field(
        default=None,
        alias="schema",
        description=f"document format and version, '{REPORT_SCHEMA}' for this release",
    )
    summary: ReportSummary = Field(default_factory=ReportSummary)
    rows: list[ReportAttempt] = Field(default_factory=list)
    row_verdicts: list[ReportRowVerdict]
    not_run: list[str] = Field(default_factory=list, description="node ids selected but not run")
    baseline: ReportBaseline | None = Field(
        default=None, description="the comparison with --osmosis-baseline, when given"
    )


class ReportFileError(ValueError):
    """A file that should be a ``report.json`` is missing, not JSON, or not a report."""


def read_report(path: Path) -> ReportDocument:
    """Read and validate a report file; :class:`ReportFileError` names the file and the field."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportFileError(f"file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportFileError(f"{path} is not a JSON report: {exc}") from None
    try:
        return ReportDocument.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(document)'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise ReportFileError(
            f"{path} is not a pytest-osmosis report ({problems}); "
            "pass a report.json written by an earlier run"
        ) from None


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``report.json`` (what ``docs/report.schema.json`` holds)."""
    schema = ReportDocument.model_json_schema(by_alias=True)
    schema["$id"] = REPORT_SCHEMA
    schema["title"] = "pytest-osmosis report.json"
    return schema


if __name__ == "__main__":
    print(json.dumps(report_json_schema(), indent=2, sort_keys=True))
