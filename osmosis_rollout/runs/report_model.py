"""The records of a run, one model each: a row's attempt, its verdict, the run's summary.

A row is one record from where it is decided to every file: :class:`AttemptRecord` for an
attempt and :class:`RowRecord` for a row's verdict over its attempts. A ``rows.jsonl``
journal line is a :class:`RowRecord` (written and read back by this model,
:mod:`osmosis_rollout.runs.journal`); ``report.json``'s rows are views of the same records
(:class:`ReportAttempt`, :class:`ReportRowVerdict`), and a report is read through
:class:`ReportDocument`
(``--osmosis-baseline``, tools that consume a run's report). The published JSON Schema
comes from them (``docs/report.schema.json``, regenerated with
``python -m osmosis_rollout.runs.report_model > docs/report.schema.json``) and names every key
with its meaning.

The models leave the rest open (``extra="allow"``): a report from a newer minor version
still reads, and a file that is not a report fails with the field that is wrong. Reports
written before the ``schema`` key existed read too (it defaults to ``None``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "REPORT_SCHEMA",
    "AttemptRecord",
    "Fingerprint",
    "GraderSaid",
    "ReportAttempt",
    "ReportBaseline",
    "ReportConfig",
    "ReportDocument",
    "ReportFileError",
    "ReportGate",
    "ReportInterval",
    "ReportRegressionTest",
    "ReportRowVerdict",
    "ReportSummary",
    "RewardStats",
    "RowCounts",
    "RowRecord",
    "RowStats",
    "RunVerdict",
    "VerdictReason",
    "read_report",
    "report_json_schema",
]

REPORT_SCHEMA = "pytest-osmosis/report/v1"
"""The ``schema`` of ``report.json`` written by this release."""


CI_KEYS = ("schema", "summary", "row_verdicts", "verdict", "config", "run_id", "tool_version")
"""The keys of ``report.json`` a CI script reads: required by the published schema."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


def _optional(description: str, default: Any = None) -> Any:
    """A key a document may lack (``default`` when absent), described for the published schema."""
    return Field(default=default, description=description)


def _empty(factory: Callable[[], Any], description: str) -> Any:
    """A key a document may lack (an empty ``factory()`` when absent), described likewise."""
    return Field(default_factory=factory, description=description)


class ReportInterval(_Open):
    """An interval beside a rate or a mean (:mod:`osmosis_rollout.runs.stats`)."""

    low: float = Field(description="lower bound")
    high: float = Field(description="upper bound")
    confidence: float = Field(description="its confidence, e.g. 0.95 (--osmosis-confidence)")
    method: str = Field(description="how it was made, e.g. 'wilson' or 't'")


class RewardStats(_Open):
    """Statistics over numeric rewards."""

    mean: float = Field(description="mean reward")
    median: float = Field(description="median reward")
    std: float = Field(description="population standard deviation (0 for one reward)")
    min: float = Field(description="lowest reward")
    max: float = Field(description="highest reward")
    mean_interval: ReportInterval | None = _optional(
        "interval of the mean reward, inside the rewards' range (Wilson's with "
        "the t quantile), at the run's confidence"
    )
    graded: int | None = _optional("attempts the mean is over")
    errored_left_out: int | None = _optional(
        "attempts whose rollout errored: no reward, left out of the mean"
    )


class GraderSaid(_Open):
    """The grader's own words on one attempt (captured with no change to the grader)."""

    reason: str | None = _optional(
        "each evaluate_rubric explanation ('judge: score S: ...'), then the lines "
        "the grader logged while it graded this rollout"
    )
    metrics: dict[str, Any] = _empty(dict, "the sample's metrics as the grader left them")


class AttemptRecord(_Open):
    """One attempt of one row, classified as the official ``osmosis eval run`` classifies it:
    the official ``index.jsonl`` keys plus ours.

    Built where the attempt ends, journaled inside its :class:`RowRecord`, and read back by
    every reader of the run. ``status`` is ``success`` | ``failed`` | ``skipped`` (the grader
    removed the sample); ``error_type`` is the error category, else the message, else
    ``rollout_failed``.
    """

    row_key: str = _optional("the row's id column, else row-<index in the file>", "")
    row_index: int = _optional("position of the row among the selected rows", 0)
    source_row_index: int = _optional("0-based offset of the row in its dataset file", 0)
    run_index: int = _optional("which attempt of the row this is (0 to --osmosis-n - 1)", 0)
    rollout_id: str = _optional("the rollout's id", "")
    status: str = Field(description="success | failed (the rollout errored) | skipped")
    reward: float | None = _optional("the grader's reward; null when ungraded or errored")
    error_type: str | None = _optional("the error category of a failed rollout")
    err_message: str | None = _optional("the failed rollout's message")
    tokens: int | None = _optional("tokens the policy used")
    tokens_estimated: bool = _optional(
        "tokens were estimated (the policy reported no usage)", False
    )
    cost_usd: float | None = _optional("the attempt's cost in US dollars; null when not priced")
    cost_estimated: bool = _optional("the cost was computed from estimated tokens", False)
    duration_ms: float = _optional("the rollout's wall time (ms)", 0.0)
    started_at: float = _optional("when the rollout started (Unix time, seconds)", 0.0)
    diagnostics_path: str | None = _optional("the attempt's diagnostics file, when one was written")
    last_assistant: str | None = _optional("the last assistant message of the trajectory (clipped)")
    tool_calls: list[str] | None = _optional(
        "the sample's tool calls, one 'name({arguments})' line each, arguments "
        "clipped to 200 characters, at most 20 lines; null when it made none"
    )
    policy_calls: int = _optional("model calls the rollout made", 0)
    error_phase: str | None = _optional("workflow, grader or policy: where the attempt failed")
    error_where: str | None = _optional(
        "the user's frame the error was raised in ('rollouts/demo/main.py:42 in run')"
    )
    error_traceback: str | None = _optional(
        "the error's short traceback: user frames only, at most 6, then the exception"
    )
    blocked_loop: str | None = _optional(
        "what blocked the rollouts' event loop during a failed attempt"
    )
    passed: bool = _optional("the reward reached the pass threshold", False)
    grader: GraderSaid | None = _optional(
        "what the grader said of this attempt, when it said anything"
    )
    workflow_log: str | None = _optional(
        "what the workflow logged, kept when the attempt did not pass (shown on "
        "its own row, never under another item)"
    )
    prompt: str | None = _optional(
        "the row's first user message (clipped to 1000 characters), kept on an errored attempt"
    )
    printed: str | None = _optional(
        "what the rollout printed to stdout/stderr (in-process), its first 2000 "
        "characters; rollouts.log has all of it"
    )
    ungraded: str | None = _optional(
        "why a rollout that ran has no reward: no_grader, no_label or not_graded"
    )
    trajectory_filename: str | None = _optional("the attempt's trajectory.json")

    @property
    def trajectory_path(self) -> str | None:
        """The attempt's trajectory file (``trajectory_filename``)."""
        return self.trajectory_filename


class ReportAttempt(AttemptRecord):
    """A line of the report's ``rows``: an attempt with its row's node id and dataset."""

    # Read leniently: a report's rows are read back from files other tools may have written.
    status: str | None = Field(  # type: ignore[assignment]
        default=None, description="success | failed (the rollout errored) | skipped"
    )
    nodeid: str = Field(description="pytest node id of the row's item")
    dataset: str | None = _optional("the dataset file the row came from")


class RowStats(_Open):
    """A row's statistics over its attempts."""

    attempts: int | None = _optional("attempts run (--osmosis-n)")
    passed_attempts: int | None = _optional("attempts that reached the threshold")
    scored_attempts: int | None = _optional("attempts not skipped")
    flaky: bool | None = _optional("some but not all scored attempts passed")
    reward: RewardStats | None = _optional("reward statistics over the attempts with a reward")
    pass_at_k: dict[str, float] | None = _optional("pass@k by k (two or more scored attempts)")
    pass_hat_k: dict[str, float] | None = _optional("pass^k (every one of k attempts passes) by k")
    cost_usd: float | None = _optional("the attempts' cost, US dollars")


class Fingerprint(_Open):
    """What a row's result depends on: a resume runs the row again when any of it changed."""

    row: str = Field(description="hash of the row's content and label")
    entrypoint: str | None = Field(
        description="the rollout entrypoint and a hash of every file of its folder (or package)"
    )
    env: str | None = _optional(
        "a hash of the environment variables the rollout declares it reads "
        "(OSMOSIS_ENV in its entrypoint), never their values; null when it declares none"
    )
    policy: str | None = Field(description="the policy (a scripted policy with its file's hash)")
    pass_threshold: float = Field(description="the pass threshold")
    row_pass: str = Field(description="the row rule over attempts (--osmosis-row-pass)")
    n: int = Field(description="attempts per row (--osmosis-n)")
    lost_write: str | None = _optional(
        "why a write of the run failed before the row was journaled (its cassette or "
        "trajectory may be lost): a resume runs it again; absent otherwise"
    )


class RowRecord(_Open):
    """A row's verdict over its attempts: one line of ``rows.jsonl``.

    Decided once, where the row's last attempt ends (or where its item gave up waiting),
    journaled once, and read back by the report, the HTML, the gates, the baseline and a
    resume. The report's ``row_verdicts`` entry and ``rows`` lines are views of it.
    """

    nodeid: str = Field(description="pytest node id of the row's item")
    dataset: str | None = _optional("the dataset file the row came from")
    row_key: str = _optional("the row's key", "")
    verdict: str = Field(description="passed | failed | skipped, under the row-pass rule")
    attempts: list[AttemptRecord] = _empty(list, "its attempts")
    stats: dict[str, Any] = _empty(dict, "the row's statistics (a RowStats)")
    fingerprint: dict[str, Any] | None = _optional(
        "what the row's result depends on (a Fingerprint)"
    )
    run_id: str | None = _optional("the run that wrote the line (a later line replaces the row)")

    @property
    def outcome(self) -> str:
        """:attr:`verdict` under the name the ``osmosis_result`` fixture's multi-attempt
        result had before rows became records (users' tests read it)."""
        return self.verdict

    @property
    def passed_attempts(self) -> int:
        """Attempts that reached the threshold."""
        return sum(1 for a in self.attempts if a.passed and a.status != "skipped")

    @property
    def scored_attempts(self) -> int:
        """Attempts not skipped."""
        return sum(1 for a in self.attempts if a.status != "skipped")

    def errored(self) -> bool:
        """A failed row whose rollouts errored (an attempt has no reward because it failed)."""
        return self.verdict == "failed" and any(a.status == "failed" for a in self.attempts)

    def report_rows(self) -> list[dict[str, Any]]:
        """Its attempts as the report's ``rows`` hold them (with node id and dataset)."""
        return [
            {**a.model_dump(), "nodeid": self.nodeid, "dataset": self.dataset}
            for a in self.attempts
        ]

    def verdict_entry(self) -> dict[str, Any]:
        """Its entry in the report's ``row_verdicts``: who it is, its verdict, its statistics."""
        return {
            "nodeid": self.nodeid,
            "dataset": self.dataset,
            "row_key": self.row_key,
            "verdict": self.verdict,
            **self.stats,
        }


class ReportRowVerdict(RowStats):
    """A row's verdict over its attempts, with its statistics (an entry of ``row_verdicts``)."""

    nodeid: str = Field(description="pytest node id of the row's item")
    dataset: str | None = _optional("the dataset file the row came from")
    row_key: str | None = _optional("the row's key")
    verdict: str = Field(description="passed | failed | skipped, under the row-pass rule")


class RowCounts(_Open):
    """Row-level counts: a row is one item, over all its attempts."""

    total: int = Field(description="rows with a result")
    passed: int = Field(description="rows that passed")
    failed: int = Field(
        description="rows that failed: errored + below_threshold (the 'failed' of the terminal's "
        "rows line and of the HTML card)"
    )
    errored: int = _optional(
        "failed rows with at least one attempt whose rollout errored (no reward)", 0
    )
    below_threshold: int | None = _optional(
        "failed rows whose rollouts all ran and whose rewards missed the pass "
        "threshold or the row-pass rule (failed - errored)"
    )
    skipped: int = Field(description="rows whose samples the grader removed")
    ungraded: int | None = _optional(
        "rows whose rollouts all ran with no reward (no Grader, or no "
        "ground_truth/metadata): passed when no pass threshold was set, else failed"
    )
    pass_rate: float = Field(description="passed / (passed + failed)")
    not_run: int = _optional("selected rows with no result", 0)
    pass_rate_interval: ReportInterval | None = _optional("Wilson interval of the rows' pass_rate")


class ReportRegressionTest(_Open):
    """The paired test of a run against its baseline, over the rows both ran."""

    worse: int = Field(description="rows whose pass fraction fell (passed before, failed now)")
    better: int = Field(description="rows whose pass fraction rose")
    p_value: float = Field(
        description="one-sided p-value: the chance of rows this much worse (or more) with no "
        "change (no drop larger than margin); never 0"
    )
    significant: bool = Field(description="p_value < 1 - confidence")
    confidence: float = Field(description="the test's confidence")
    method: str = Field(
        description="'exact McNemar' (one attempt a row), 'exact test stratified by row' or "
        "'Cochran-Mantel-Haenszel test stratified by row' (any other mix of attempts), or "
        "'Mantel-Haenszel risk difference by row against the margin'"
    )
    change: float | None = _optional("mean change of the rows' pass fractions (negative: worse)")
    margin: float | None = _optional("the drop tolerated (--osmosis-regression-margin), 0 for none")
    alternative: str | None = _optional(
        "what a significant result means: 'worse' (by more than margin)"
    )


class ReportBaseline(_Open):
    """The comparison with ``--osmosis-baseline``: changed rows and the paired test."""

    path: str | None = _optional("the baseline report given")
    regressed: list[str] = _empty(list, "node ids that passed in the baseline and fail now")
    improved: list[str] = _empty(list, "node ids that failed in the baseline and pass now")
    new: list[str] = _empty(list, "node ids the baseline lacks")
    gone: list[str] = _empty(list, "node ids of the baseline this run does not have")
    reward_deltas: dict[str, float] = Field(
        default_factory=dict,
        description="by node id, this run's mean reward minus the baseline's, for the rows "
        "whose mean reward changed (a change in reward, not a reward)",
    )
    test: ReportRegressionTest | None = _optional(
        "the paired regression test (absent in older reports)"
    )
    regressed_answers: dict[str, str] | None = _optional(
        "the baseline's last answer of each regressed row, by node id (the HTML "
        "report shows it beside this run's)"
    )


class ReportGate(_Open):
    """The pass-rate gate's decision (``--osmosis-min-pass-rate``)."""

    min_pass_rate: float = Field(description="the threshold the rows' pass rate is held to")
    pass_rate: float = Field(description="the rows' pass rate")
    passed: bool = Field(description="the gate let the run pass")
    reason: str | None = _optional("why it failed without deciding, e.g. 'incomplete run'")
    confidence: float | None = _optional("the gate's confidence (--osmosis-gate-confidence)")
    outcome: Literal["passed", "failed", "undecided"] | None = _optional(
        "the three-way decision at that confidence"
    )
    measure: str | None = _optional("what was judged: 'pass rate' (rows) or 'attempt pass rate'")
    estimate: float | None = _optional("the judged rate")
    estimand: str | None = _optional(
        "what the gate's confidence is about, in words: the rate on the task the "
        "rows are drawn from, and how it was judged"
    )
    interval: ReportInterval | None = _optional("the interval the decision was read from")


class VerdictReason(_Open):
    """One thing the run's verdict was decided on, with the line every output shows for it."""

    kind: Literal["rows", "gate", "tests", "disk", "interruption", "stopped"] = Field(
        description="rows (the rows' own verdicts), gate (a gate: its name says which), tests "
        "(other test items: preflight checks, your own tests), disk (a run file not written), "
        "interruption (a signal), stopped (-x, --maxfail or a plugin stopped the run)"
    )
    name: str = Field(
        description="rows, min-pass-rate, regression, require-grader, tests, disk, the "
        "signal's name, or what stopped the run; a gate's JUnit test case is "
        "osmosis-gate::<name>"
    )
    outcome: Literal["passed", "failed", "tolerated", "incomplete"] = Field(
        description="passed; failed (it fails the run); tolerated (rows below the threshold "
        "that a passing gate counted: they do not fail the run); incomplete"
    )
    line: str = Field(description="what the terminal, JUnit and the markdown summary say of it")


class RunVerdict(_Open):
    """The run's verdict, decided once at its end and read by every output: pytest's counts
    and exit status, JUnit, report.json, the HTML banner and the markdown summary."""

    outcome: Literal["passed", "failed", "incomplete"] = Field(
        description="passed; failed (a reason failed); incomplete (a signal, -x or --maxfail "
        "stopped the run before every row had a result)"
    )
    exit_status: int = Field(
        description="the process's exit status: 0 passed, 1 failed or stopped, 2 interrupted, "
        "12 a run file could not be written"
    )
    reasons: list[VerdictReason] = Field(
        description="everything the verdict was decided on, failing reasons first"
    )


class ReportConfig(_Open):
    """The run's configuration (redacted), as resolved from the flags, the ini and the eval
    config."""

    datasets: list[str] = _empty(list, "--osmosis-dataset")
    entrypoint: str | None = _optional("the rollout entrypoint")
    eval_config: str | None = _optional("--osmosis-config")
    mode: str | None = _optional("in-process or server")
    servers: list[str] = _empty(list, "rollout server URLs")
    policy: str | None = _optional("the policy (or litellm:<model>)")
    record_mode: str | None = _optional("--osmosis-record-mode")
    pass_threshold: float | None = _optional("--osmosis-pass-threshold")
    n: int | str | None = _optional("attempts per row, or 'auto (max K)'")
    row_pass: str | None = _optional("--osmosis-row-pass")
    concurrency: int | None = _optional("--osmosis-concurrency")
    agent_timeout: float | None = _optional("--osmosis-agent-timeout")
    grader_timeout: float | None = _optional("--osmosis-grader-timeout")
    min_pass_rate: float | None = _optional("--osmosis-min-pass-rate")
    confidence: float | None = _optional("--osmosis-confidence")
    gate_confidence: float | None = _optional("--osmosis-gate-confidence")
    gate_undecided: str | None = _optional("--osmosis-gate-undecided")
    baseline: str | None = _optional("--osmosis-baseline")
    allow_partial_baseline: bool | None = _optional("--osmosis-allow-partial-baseline")
    fail_on_regression: bool | None = _optional("--osmosis-fail-on-regression")
    require_grader: bool | None = _optional("--osmosis-require-grader")
    output: str | None = _optional("the run folder")


class ReportSummary(_Open):
    """Run-level figures: the official ``metrics.json`` keys, row counts, completeness."""

    total_samples: int | None = _optional("attempts with a result")
    completed_samples: int | None = _optional("attempts not skipped")
    graded: int | None = _optional("attempts with a reward")
    passed: int | None = _optional("attempts that reached the threshold")
    failed: int | None = _optional(
        "attempts whose rollout errored (the official key, read by the Osmosis "
        "tooling): the terminal's attempts line calls them 'errored'; its 'failed' is "
        "failed + below_threshold. Row counts are under rows."
    )
    below_threshold: int | None = _optional(
        "attempts that ran and scored below the pass threshold (or had no reward): "
        "total_samples - passed - skipped - failed"
    )
    skipped: int | None = _optional("attempts the grader removed")
    pass_rate: float | None = _optional("passed / completed attempts")
    pass_threshold: float | None = _optional("the pass threshold")
    tokens_used: int | None = _optional("tokens over every attempt")
    tokens_estimated: bool | None = _optional("some tokens were estimated")
    reward_stats: RewardStats | None = _optional(
        "reward statistics over every attempt with a reward"
    )
    n_runs: int | None = _optional("attempts per row, when 2 or more")
    pass_at_k: dict[str, float] | None = _optional("mean pass@k over the rows, by k")
    pass_hat_k: dict[str, float] | None = _optional("mean pass^k over the rows, by k")
    pass_rate_interval: ReportInterval | None = _optional(
        "Wilson interval of the attempts' pass_rate (rows.pass_rate_interval: the rows')"
    )
    rows: RowCounts | None = _optional("row-level counts")
    ungraded_why: list[str] | None = _optional(
        "why the ungraded rows' rollouts had no reward, most frequent first: "
        "no_grader (the rollout defines no Grader), no_label (no ground_truth or metadata), "
        "not_graded (the grader set none, or a rollout server's grader did not run)"
    )
    errors_by_type: dict[str, int] | None = _optional(
        "errored attempts by error category, most frequent first"
    )
    cost_usd: float | None = _optional("the run's cost in US dollars; null when nothing was priced")
    cost_estimated: bool | None = _optional("some of the cost was computed from estimated tokens")
    rollouts_wall_s: float | None = _optional(
        "seconds from the first rollout's start to the last one's end"
    )
    complete: bool | None = _optional(
        "every selected row has a result and nothing stopped the run early"
    )
    interrupted: bool | None = _optional("a signal or a crash ended the run")
    stopped_by: str | None = _optional(
        "what stopped an incomplete run: -x, --maxfail=N, SIGINT, SIGTERM, "
        "killed, or disk full writing <file>"
    )
    not_run: int | None = _optional("selected rows with no result")


class ReportResume(_Open):
    """What a resumed run kept from the journal and ran again."""

    journal: str = Field(description="the journal the run resumed")
    kept: int = Field(description="journaled rows that stand, not run again")
    ran_again: dict[str, list[str]] = Field(
        description="reason (errored, pass threshold changed, ...) -> node ids run again"
    )


class ReportDocument(_Open):
    """A whole ``report.json``."""

    schema_id: str | None = Field(
        default=None,
        alias="schema",
        description=f"document format and version, '{REPORT_SCHEMA}' for this release",
    )
    summary: ReportSummary = _empty(ReportSummary, "the run's figures")
    rows: list[ReportAttempt] = _empty(list, "every attempt of every row, in row order")
    row_verdicts: list[ReportRowVerdict] = Field(description="each row's verdict, in row order")
    not_run: list[str] = _empty(list, "node ids selected but not run")
    preflight: list[dict[str, Any]] = _empty(list, "the preflight checks' results")
    config: ReportConfig = _empty(ReportConfig, "the run's configuration (redacted)")
    resume: ReportResume | None = _optional("present when the run resumed an earlier one")
    gate: ReportGate | None = _optional("the pass-rate gate's decision (--osmosis-min-pass-rate)")
    verdict: RunVerdict | None = _optional(
        "the run's verdict and every reason for it (absent in older reports)"
    )
    run_id: str | None = _optional("the run's id (its journal lines')")
    started_at: str | None = _optional("when the session started (UTC, ISO 8601)")
    finished_at: str | None = _optional("when the verdict was decided (UTC, ISO 8601)")
    tool_version: str | None = _optional("pytest-osmosis's version")
    baseline: ReportBaseline | None = _optional(
        "the comparison with --osmosis-baseline, when given"
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
    """The JSON Schema of ``report.json`` (what ``docs/report.schema.json`` holds), with the
    ``rows.jsonl`` line's model beside it under ``$defs``."""
    schema = ReportDocument.model_json_schema(by_alias=True)
    journal = RowRecord.model_json_schema(by_alias=True)
    defs = schema.setdefault("$defs", {})
    defs.update(journal.pop("$defs", {}))
    # The record keeps these two as plain objects (readers index them by key); the schema
    # names their keys.
    for name, model in (("stats", RowStats), ("fingerprint", Fingerprint)):
        sub = model.model_json_schema(by_alias=True)
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
        described = journal["properties"][name]["description"]
        journal["properties"][name] = {
            "$ref": f"#/$defs/{model.__name__}",
            "description": described,
        }
    defs["RowRecord"] = journal
    # The keys CI scripts read are required of a report this release writes; the model
    # itself still reads older reports (a baseline) that lack them.
    schema["required"] = sorted({*schema.get("required", ()), *CI_KEYS})
    schema["$id"] = REPORT_SCHEMA
    schema["title"] = "pytest-osmosis report.json"
    return schema


if __name__ == "__main__":
    print(json.dumps(report_json_schema(), indent=2, sort_keys=True))
