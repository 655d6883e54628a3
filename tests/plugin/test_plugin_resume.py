"""An honest resume: the verdict, the summary, the report and the exit status cover every row.

A resumed run reads the journal of the run it continues: rows journaled with the same
fingerprint (row content and label, rollout file, policy, threshold, row rule, attempts)
and a result are kept; errored rows and rows whose fingerprint changed run again, and the
summary and the report say how many and why. A torn last journal line is cut back first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from journal_workspace import executed, journal_lines, row_ids, write_workspace

from osmosis_rollout.runs.journal import read_journal

PREFLIGHT = 2
BASE = (
    "-p",
    "no:cacheprovider",
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
)
RUN = (*BASE, "--osmosis-output=out")
RESUME = (*BASE, "--osmosis-resume=out")


def report(root: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((root / "out" / "report.json").read_text())
    return document


def drop_rows(out: Path, nodeids: list[str]) -> None:
    """Remove rows from the journal, as if the run was killed before they were written."""
    path = out / "rows.jsonl"
    kept = [
        line
        for line in path.read_text().splitlines(keepends=True)
        if json.loads(line)["nodeid"] not in nodeids
    ]
    path.write_text("".join(kept))


def test_a_resumed_failing_run_exits_with_the_verdict_of_every_row(
    pytester: pytest.Pytester,
) -> None:
    steps = ["wrong" if i % 2 else "answer" for i in range(20)]
    root = write_workspace(pytester.path, steps)
    first = pytester.runpytest(*RUN)
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    drop_rows(root / "out", row_ids([0, 2]))  # two passing rows never journaled

    second = pytester.runpytest(*RESUME)
    # The kept rows that failed are one failed case of pytest's own (osmosis-run::kept-rows).
    second.assert_outcomes(passed=2 + PREFLIGHT, failed=1, deselected=18)
    assert second.ret == pytest.ExitCode.TESTS_FAILED, second.stdout.str()
    second.stdout.fnmatch_lines(["rows: 20  passed: 10  failed: 10*"])
    summary = report(root)["summary"]
    assert summary["rows"]["total"] == 20 and summary["rows"]["failed"] == 10  # type: ignore[index]
    assert summary["complete"] is True  # type: ignore[index]


def test_a_resume_with_nothing_left_prints_the_summary_and_rewrites_the_report(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong", "answer"])
    pytester.runpytest(*RUN).assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    (root / "out" / "report.json").unlink()

    again = pytester.runpytest(*RESUME)
    again.assert_outcomes(passed=PREFLIGHT, failed=1, deselected=3)
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    again.stdout.fnmatch_lines(
        [
            "*osmosis summary*",
            "rows: 3  passed: 2  failed: 1*",
            "resumed: 3 rows already in */out/rows.jsonl were not run again",
        ]
    )
    assert report(root)["summary"]["rows"]["total"] == 3  # type: ignore[index]
    assert executed(root) == ["row-0", "row-1", "row-2"]


def test_errored_rows_run_again_on_resume_unless_kept(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "raise-unless fixed.flag", "answer"])
    pytester.runpytest(*RUN).assert_outcomes(passed=2 + PREFLIGHT, errors=1)

    kept = pytester.runpytest(*RESUME, "--osmosis-resume-keep-errors")
    # The kept row that errored fails the run, and pytest's counts say so (not a green line
    # with exit 1).
    kept.assert_outcomes(passed=PREFLIGHT, failed=1, deselected=3)
    kept.stdout.fnmatch_lines(["FAILED osmosis-run::kept-rows - rows kept by --osmosis-resume: 1*"])
    assert kept.ret == pytest.ExitCode.TESTS_FAILED
    assert executed(root) == ["row-0", "row-1", "row-2"]

    (root / "fixed.flag").write_text("1")
    again = pytester.runpytest(*RESUME)
    again.assert_outcomes(passed=1 + PREFLIGHT, deselected=2)
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    assert executed(root)[3:] == ["row-1"]
    again.stdout.fnmatch_lines(["resumed: 1 row ran again: errored (1)"])
    summary = report(root)["summary"]
    assert summary["rows"]["passed"] == 3 and summary["rows"]["errored"] == 0  # type: ignore[index]


def test_the_keep_errors_ini_twin_keeps_errored_rows(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "raise-unless fixed.flag"])
    pytester.runpytest(*RUN)
    (root / "fixed.flag").write_text("1")
    pytester.makeini("[pytest]\nosmosis_resume_keep_errors = true\n")
    kept = pytester.runpytest(*RESUME)
    kept.assert_outcomes(passed=PREFLIGHT, failed=1, deselected=2)
    assert executed(root) == ["row-0", "row-1"]


def test_a_journal_cut_mid_line_resumes_every_row_exactly_once(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong", "answer", "answer"])
    pytester.runpytest(*RUN).assert_outcomes(passed=3 + PREFLIGHT, failed=1)
    journal = root / "out" / "rows.jsonl"
    data = journal.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut_row = json.loads(data[last_start:])["nodeid"]
    journal.write_bytes(data[: last_start + 40])  # killed mid-write: a torn last line

    resumed = pytester.runpytest(*RESUME)
    resumed.assert_outcomes(passed=1 + PREFLIGHT, failed=1, deselected=3)
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED  # row-1 failed in the first run
    resumed.stdout.fnmatch_lines(["*rows.jsonl: cut a torn last line (40 bytes)*"])
    rows, bad = read_journal(journal)
    assert bad == 0
    assert sorted(r.nodeid for r in rows) == row_ids(range(4))
    document = report(root)
    assert [r["nodeid"] for r in document["row_verdicts"]] == row_ids(range(4))  # type: ignore[union-attr]
    assert sorted(r["nodeid"] for r in document["rows"]) == row_ids(range(4))  # type: ignore[union-attr]
    assert cut_row in row_ids(range(4))
    # The next resume has nothing left to run: the row written after the cut was not lost.
    again = pytester.runpytest(*RESUME)
    again.assert_outcomes(passed=PREFLIGHT, failed=1, deselected=4)


def write_labels(root: Path, steps: list[str], labels: list[str]) -> None:
    rows = [
        {"user_prompt": f"row-{i}: {s}", "ground_truth": label}
        for i, (s, label) in enumerate(zip(steps, labels, strict=True))
    ]
    (root / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_resume_reruns_exactly_the_rows_whose_fingerprint_changed(
    pytester: pytest.Pytester,
) -> None:
    steps = ["answer", "answer", "answer", "answer"]
    root = write_workspace(pytester.path, steps)
    pytester.runpytest(*RUN).assert_outcomes(passed=4 + PREFLIGHT)

    # One row's label changes: that row alone runs again, and now fails.
    write_labels(root, steps, ["ok", "ok", "changed", "ok"])
    label = pytester.runpytest(*RESUME)
    label.assert_outcomes(failed=1, passed=PREFLIGHT, deselected=3)
    assert executed(root)[4:] == ["row-2"]
    label.stdout.fnmatch_lines(["rows: 4  passed: 3  failed: 1*"])
    label.stdout.fnmatch_lines(["resumed: 1 row ran again: row content or label changed (1)"])
    assert report(root)["resume"]["ran_again"] == {  # type: ignore[index]
        "row content or label changed": row_ids([2])
    }

    # The threshold changes: every row's verdict depends on it, so every row runs again.
    write_labels(root, steps, ["ok", "ok", "ok", "ok"])
    threshold = pytester.runpytest(*RESUME, "--osmosis-pass-threshold=0.5")
    threshold.assert_outcomes(passed=4 + PREFLIGHT)
    assert sorted(executed(root)[5:]) == ["row-0", "row-1", "row-2", "row-3"]
    threshold.stdout.fnmatch_lines(["resumed: 4 rows ran again: pass threshold changed (4)"])
    document = report(root)
    assert document["summary"]["rows"]["passed"] == 4  # type: ignore[index]
    assert document["config"]["pass_threshold"] == 0.5  # type: ignore[index]
    assert len(document["rows"]) == 4  # type: ignore[arg-type]


def test_each_journal_line_carries_the_rows_fingerprint(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "answer"])
    pytester.runpytest(*RUN).assert_outcomes(passed=2 + PREFLIGHT)
    fingerprints = [line["fingerprint"] for line in journal_lines(root / "out")]
    assert all(
        set(f) == {"row", "entrypoint", "env", "policy", "pass_threshold", "row_pass", "n"}  # type: ignore[arg-type]
        for f in fingerprints
    )
    assert fingerprints[0]["row"] != fingerprints[1]["row"]  # type: ignore[index]


HELPER_MAIN = """
import os

from osmosis_rollout import AgentWorkflow, Grader
from answers import ANSWER

OSMOSIS_ENV = ["EXPECTED_ANSWER"]


class Answer(AgentWorkflow):
    async def run(self, ctx):
        return [*ctx.prompt, {"role": "assistant", "content": ANSWER}]


class Exact(Grader):
    async def grade(self, ctx):
        expected = os.environ.get("EXPECTED_ANSWER", "ok")
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == expected else 0.0)
"""


def write_helper_workspace(root: Path, rows: int) -> Path:
    """A rollout whose answer comes from a module beside main.py and whose grader reads
    ``EXPECTED_ANSWER``, which main.py declares in ``OSMOSIS_ENV``."""
    write_workspace(root, ["answer"] * rows)
    (root / "rollouts" / "steps" / "main.py").write_text(HELPER_MAIN)
    (root / "rollouts" / "steps" / "answers.py").write_text('ANSWER = "ok"\n')
    return root


def test_a_resume_reruns_every_row_when_a_module_the_rollout_imports_changed(
    pytester: pytest.Pytester,
) -> None:
    root = write_helper_workspace(pytester.path, 4)
    pytester.runpytest(*RUN).assert_outcomes(passed=4 + PREFLIGHT)

    (root / "rollouts" / "steps" / "answers.py").write_text('ANSWER = "no"\n')
    resumed = pytester.runpytest(*RESUME)
    resumed.assert_outcomes(failed=4, passed=PREFLIGHT)
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED
    resumed.stdout.fnmatch_lines(["resumed: 4 rows ran again: rollout files changed (4)"])


def test_a_resume_reruns_every_row_when_a_declared_environment_variable_changed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_helper_workspace(pytester.path, 4)
    monkeypatch.setenv("EXPECTED_ANSWER", "ok")
    pytester.runpytest(*RUN).assert_outcomes(passed=4 + PREFLIGHT)

    monkeypatch.setenv("EXPECTED_ANSWER", "something else")
    resumed = pytester.runpytest(*RESUME)
    resumed.assert_outcomes(failed=4, passed=PREFLIGHT)
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED
    resumed.stdout.fnmatch_lines(["resumed: 4 rows ran again: environment changed (4)"])
    # The journal holds a digest of the values, never the values themselves.
    assert "something else" not in (pytester.path / "out" / "rows.jsonl").read_text()


def test_files_outside_the_rollout_folder_do_not_rerun_rows(pytester: pytest.Pytester) -> None:
    root = write_helper_workspace(pytester.path, 2)
    pytester.runpytest(*RUN).assert_outcomes(passed=2 + PREFLIGHT)
    (root / "notes.txt").write_text("unrelated")
    (root / "rollouts" / "steps" / "__pycache__").mkdir(exist_ok=True)
    (root / "rollouts" / "steps" / "__pycache__" / "stale.pyc").write_bytes(b"x")
    pytester.runpytest(*RESUME).assert_outcomes(passed=PREFLIGHT, deselected=2)


def test_an_env_declaration_that_is_not_a_list_of_names_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    root = write_helper_workspace(pytester.path, 2)
    main = root / "rollouts" / "steps" / "main.py"
    main.write_text(main.read_text().replace('["EXPECTED_ANSWER"]', '["EXPECTED_" + "ANSWER"]'))
    result = pytester.runpytest(*RUN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: *main.py:7: OSMOSIS_ENV must be a list of environment variable names written out as strings*"
        ]
    )


def test_a_rollout_at_the_workspace_root_does_not_fingerprint_its_datasets(
    pytester: pytest.Pytester,
) -> None:
    root = write_helper_workspace(pytester.path, 4)
    for name in ("main.py", "answers.py"):
        (root / "rollouts" / "steps" / name).rename(root / name)
    pytester.runpytest(*RUN, "--osmosis-rollout=main.py").assert_outcomes(passed=4 + PREFLIGHT)

    # One row's label changes: that row alone runs again, not every row of the dataset.
    write_labels(root, ["answer"] * 4, ["ok", "no", "ok", "ok"])
    resumed = pytester.runpytest(*RESUME, "--osmosis-rollout=main.py")
    resumed.assert_outcomes(passed=1 + PREFLIGHT, deselected=3)
    resumed.stdout.fnmatch_lines(["resumed: 1 row ran again: row content or label changed (1)"])


def test_a_resume_of_another_datasets_run_is_refused_naming_the_dataset(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer", "answer"])
    (root / "data" / "other.jsonl").write_text(
        json.dumps({"id": "o0", "user_prompt": "o0: answer", "ground_truth": "ok"}) + "\n"
    )
    other = ("-p", "no:cacheprovider", "--osmosis-policy=policy.py:policy")
    first = pytester.runpytest(*other, "--osmosis-dataset=data/other.jsonl", "--osmosis-output=out")
    first.assert_outcomes(passed=1 + PREFLIGHT)

    # The workspace's own dataset, resuming the run of data/other.jsonl: its row would count
    # in a verdict about data/test.jsonl.
    resumed = pytester.runpytest(*RESUME)
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR
    resumed.stderr.fnmatch_lines(
        ["*--osmosis-resume*out*data/other.jsonl*this run does not read*--osmosis-dataset*"]
    )
    assert executed(root) == ["o0"]
    assert [line["nodeid"] for line in journal_lines(root / "out")] == ["data/other.jsonl::o0"]


def test_a_refused_resume_names_every_dataset_that_continues_the_run(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer"])
    (root / "data" / "other.jsonl").write_text(
        json.dumps({"id": "o0", "user_prompt": "o0: answer", "ground_truth": "ok"}) + "\n"
    )
    both = ("--osmosis-dataset=data/test.jsonl", "--osmosis-dataset=data/other.jsonl")
    other = ("-p", "no:cacheprovider", "--osmosis-policy=policy.py:policy")
    first = pytester.runpytest(*other, *both, "--osmosis-output=out")
    first.assert_outcomes(passed=2 + PREFLIGHT + 1)  # a dataset check each

    # The run read both: the way to continue it passes both, not only the one left out
    # (which a resume would then refuse for data/test.jsonl's rows).
    resumed = pytester.runpytest(*RESUME)
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR
    resumed.stderr.fnmatch_lines(
        ["*pass --osmosis-dataset=data/other.jsonl --osmosis-dataset=data/test.jsonl to continue*"]
    )
