"""Where a dataset row becomes a test item.

``--osmosis-dataset data/test.jsonl`` makes pytest collect that file with
:class:`DatasetFile`, whose children are one :class:`RowItem` per selected row, named by the
row's ``id`` column, else ``row-<n>``: ``data/test.jsonl::row-3``. Ids are stable across
runs, so ``-k``, ``--lf``, ``--sw``, baselines and xdist all address the same rows.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from osmosis_rollout.dataset import DatasetRow, load_dataset
from osmosis_rollout.errors import DatasetError
from osmosis_rollout.runs.journal import ROLLOUTS_LOG
from osmosis_rollout.runs.report_model import RowRecord
from osmosis_rollout.sample_text import first_user_text
from pytest_osmosis.keys import ROW_KEY, RowRef
from pytest_osmosis.options import BY_FLAG
from pytest_osmosis.results.verdict import VerdictHookError, failure_message
from pytest_osmosis.run.policy_choice import CassetteKeys
from pytest_osmosis.run.session import OsmosisSession, ensure_session

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr


def rerun_command(config: pytest.Config, path: Path, name: str) -> str:
    """The command that runs just this row, from where pytest was invoked.

    It keeps the command line's ``--osmosis-*`` options but those naming where this run writes,
    and empties those the ini file names, so the pasted line never replaces (nor resumes) this
    run. A dataset outside the rootdir would move pytest's rootdir and ini file once its path is
    an argument, so the line then pins this run's ini file (``-c``), or the rootdir.
    """
    invocation = config.invocation_params.dir
    nodeid = f"{Path(os.path.relpath(path, invocation)).as_posix()}::{name}"
    from_ini = [
        f"-o osmosis_{stem}="
        for stem in sorted(_DESTINATIONS)
        if config.getini(f"osmosis_{stem}") not in (None, "", [])
    ]
    pinned: list[str] = []
    if not path.is_relative_to(config.rootpath):
        if config.inipath is not None:
            pinned = ["-c", os.path.relpath(config.inipath, invocation)]
        else:
            pinned = [f"--rootdir={os.path.relpath(config.rootpath, invocation)}"]
    command = shlex.join(["pytest", *pinned, *_osmosis_args(config.invocation_params.args)])
    return " ".join([command, *from_ini, "'" + nodeid.replace("'", "'\\''") + "'"])


_DESTINATIONS = frozenset({"output", "report", "html", "markdown", "resume"})


def _osmosis_args(args: Sequence[str]) -> list[str]:
    """The ``--osmosis-*`` options among ``args`` with their values, but the destinations."""
    kept: list[str] = []
    rest = iter(args)
    for arg in rest:
        spec = BY_FLAG.get(arg.split("=", 1)[0])  # its flag or its alias
        if spec is not None:
            one_word = "=" in arg or spec.kind == "flag"
            option = [arg] if one_word else [arg, *itertools.islice(rest, 1)]
            if spec.stem not in _DESTINATIONS:
                kept += option
    return kept


class OsmosisUsageFailure(Exception):
    """A user mistake found while collecting or running: shown without a traceback."""


class DatasetFile(pytest.File):
    """A dataset file given by ``--osmosis-dataset``; its rows are the items."""

    def collect(self) -> Iterator[pytest.Item]:
        settings = ensure_session(self.config).settings
        try:
            rows = load_dataset(self.path, rows=settings.rows, limit=settings.limit)
        except DatasetError as exc:
            raise OsmosisUsageFailure(str(exc)) from exc
        keys = CassetteKeys(self.config, settings)
        for row in rows:
            yield RowItem.from_parent(
                self, name=row.key, row=row, cassette_key=keys.for_row(self.path, row.key)
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str | TerminalRepr:  # type: ignore[override]
        if isinstance(excinfo.value, OsmosisUsageFailure):
            return f"pytest-osmosis: bad dataset\n{excinfo.value}"
        return super().repr_failure(excinfo)


class RowItem(pytest.Item):
    """One dataset row: runs its attempts (started ahead by the scheduler) and asserts the reward."""

    def __init__(self, *, row: DatasetRow, cassette_key: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.row = row
        # The key its cassettes are recorded under (see ``policy_choice.CassetteKeys``).
        self.stash[ROW_KEY] = RowRef(row, cassette_key=cassette_key, dataset=str(self.path))
        # What setup waited for: the verdict and the threshold's own outcome, or why there is none.
        self._waited: tuple[RowRecord, str] | BaseException | None = None

    def describe(self) -> str:
        line = f" line {self.row.line}" if self.row.line else ""
        return f"{self.name} ({self.path.name}{line})"

    def setup(self) -> None:
        """Wait for the row's rollouts (started ahead), as a test waits for its fixtures: a row
        whose rollout errored never reached its assertion (the reward), so it errors here (``E``,
        JUnit's ``<error>``) as a broken fixture does, unless a pass-rate gate counts it."""
        super().setup()
        session = ensure_session(self.config)
        ref = self.stash[ROW_KEY]
        try:
            verdict = session.rows.wait_for_row(
                self.nodeid, self.row, cassette_key=ref.cassette_key, dataset=ref.dataset
            )
        except Exception as exc:
            ours = isinstance(exc, pytest.UsageError | VerdictHookError)
            why = str(exc) if ours else f"could not start the rollouts: {type(exc).__name__}: {exc}"
            self._waited = OsmosisUsageFailure(why)
            return
        self._properties(verdict)
        row = session.book.get(self.nodeid)
        builtin = row.builtin if row is not None and row.builtin is not None else verdict.verdict
        self._waited = (verdict, builtin)
        gated = session.settings.min_pass_rate is not None  # the gate counts errored rows too
        if builtin == verdict.verdict and verdict.errored() and not gated:
            self._show_printed(verdict, "setup")
            pytest.fail(self._failure_message(session, verdict), pytrace=False)

    def runtest(self) -> None:
        waited = self._waited
        if isinstance(waited, BaseException):
            raise waited
        if waited is None:
            raise OsmosisUsageFailure("the row's rollouts were not waited for (no setup ran)")
        verdict, builtin = waited
        by_hook = verdict.verdict != builtin  # a pytest_osmosis_row_verdict hook overrode it
        if verdict.verdict == "skipped":
            raise pytest.skip.Exception(
                "skipped by a pytest_osmosis_row_verdict hook"
                if by_hook
                else "the grader removed the sample (remove_sample=True)",
                _use_item_location=True,
            )
        if verdict.verdict != "failed":
            return
        session = ensure_session(self.config)
        if by_hook:
            rewards = ", ".join(
                "-" if a.reward is None else f"{a.reward:g}" for a in verdict.attempts
            )
            message = (
                f"{self.describe()}: failed by a pytest_osmosis_row_verdict hook "
                f"(the threshold alone said {builtin}; rewards: {rewards})"
            )
        else:
            message = self._failure_message(session, verdict)
        if session.settings.min_pass_rate is not None:
            # A pass-rate gate counts this miss and decides the run (its own test case, see
            # gate_cases): the row is an expected failure, as pytest's xfail is. Without a
            # traceback, as a miss is: pytest would format one (parsing each frame's source
            # file) for every such row, tenths of a second each, and show it nowhere.
            raise pytest.xfail.Exception(message.splitlines()[0], pytrace=False)
        if not by_hook:
            self._show_printed(verdict, "call")
        pytest.fail(message, pytrace=False)

    def _failure_message(self, session: OsmosisSession, verdict: RowRecord) -> str:
        return failure_message(
            row_desc=self.describe(),
            verdict=verdict,
            threshold=session.settings.pass_threshold,
            rule=session.settings.row_pass,
            label=self.row.label,
            # A rollout server logs its tracebacks itself, not in our rollouts.log.
            log_path=None
            if session.settings.servers or session.settings.serve
            else str(session.output / ROLLOUTS_LOG),
            rerun=rerun_command(self.config, self.path, self.name),
            prompt=first_user_text(self.row.initial_messages),
        )

    def _show_printed(self, verdict: RowRecord, when: str) -> None:
        # What the rollouts printed, as the failure's "Captured rollout output" section (with
        # ``-s`` it went to the terminal as it was printed).
        printed = [a for a in verdict.attempts if a.printed]
        if not printed or self.config.getoption("capture", None) == "no":
            return
        many = len(verdict.attempts) > 1
        text = "\n".join(
            (f"attempt {a.run_index}:\n" if many else "") + str(a.printed) for a in printed
        )
        self.add_report_section(when, "rollout output", text + "\n")

    def teardown(self) -> None:
        """Let go of the row's content (prompt, metadata, parsed record) once it is reported, so
        a 10,000-row run does not hold every row until it ends; its key, line and label stay."""
        super().teardown()
        self._waited = None
        self.row = dataclasses.replace(self.row, raw={}, initial_messages=[], metadata=None)
        self.stash[ROW_KEY] = dataclasses.replace(self.stash[ROW_KEY], row=self.row)

    def _properties(self, verdict: RowRecord) -> None:
        # Flat properties, for JUnit XML readers.
        last = verdict.attempts[-1]
        for name, value in (
            ("osmosis_reward", last.reward),
            ("osmosis_status", last.status),
            ("osmosis_error_type", last.error_type),
            ("osmosis_rollout_id", last.rollout_id),
            ("osmosis_tokens", sum(a.tokens or 0 for a in verdict.attempts)),
            ("osmosis_duration_ms", round(sum(a.duration_ms for a in verdict.attempts), 3)),
        ):
            if value is not None:
                self.user_properties.append((name, value))

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, OsmosisUsageFailure):
            return f"pytest-osmosis: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # The row's line in the dataset (0-based, as pytest counts), so skips point at it. The
        # domain must be the tail of the node id: pytest's verbose line is built from it.
        return self.path, (self.row.line - 1 if self.row.line else 0), self.name
