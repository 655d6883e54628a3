"""The run folder belongs to one run: locked while it runs, and never holding foreign files.

A second run on a folder in use fails at start (exit 4) naming the holder; a folder that
holds files no run of ours made is refused with their names, and nothing in it is touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from journal_workspace import executed, journal_lines, row_ids, write_workspace

PREFLIGHT = 2
BASE = (
    "-p",
    "no:cacheprovider",
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
)


def test_a_second_run_on_a_folder_in_use_refuses_and_the_first_is_intact(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong", "wait-for go.flag", "answer"])
    first = pytester.popen(
        [sys.executable, "-m", "pytest", *BASE, "--osmosis-output=out"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if len(journal_lines(root / "out")) >= 3 or first.poll() is not None:
                break
            time.sleep(0.05)
        second = pytester.runpytest_subprocess(*BASE, "--osmosis-output=out", timeout=60)
        assert second.ret == pytest.ExitCode.USAGE_ERROR
        second.stderr.fnmatch_lines(
            [f"*--osmosis-output*out is in use by another run (pid {first.pid}, started *)*"]
        )
        (root / "go.flag").write_text("1")
        out, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
    assert first.returncode == pytest.ExitCode.TESTS_FAILED, out.decode()
    document = json.loads((root / "out" / "report.json").read_text())
    assert [r["nodeid"] for r in document["row_verdicts"]] == row_ids(range(4))
    rows = dict(document["summary"]["rows"])
    rows.pop("pass_rate_interval")
    assert rows == {
        "total": 4,
        "passed": 3,
        "failed": 1,
        "errored": 0,
        "below_threshold": 1,
        "ungraded": 0,
        "skipped": 0,
        "pass_rate": 0.75,
        "not_run": 0,
    }
    assert sorted(str(line["nodeid"]) for line in journal_lines(root / "out")) == row_ids(range(4))
    assert sorted(executed(root)) == ["row-0", "row-1", "row-2", "row-3"]


def test_a_dataset_in_the_output_folder_is_refused_not_deleted(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "answer"])
    (root / "evals").mkdir()
    dataset = (root / "data" / "test.jsonl").read_text()
    (root / "evals" / "rows.jsonl").write_text(dataset)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=evals/rows.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-output=evals",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--osmosis-output*evals holds files this run did not create: rows.jsonl*"]
    )
    assert (root / "evals" / "rows.jsonl").read_text() == dataset
    assert sorted(p.name for p in (root / "evals").iterdir()) == ["rows.jsonl"]
    assert executed(root) == []


def test_an_unrelated_run_json_is_refused_not_overwritten(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer"])
    (root / "out").mkdir()
    (root / "out" / "run.json").write_text('{"mine": true}')
    result = pytester.runpytest(*BASE, "--osmosis-output=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*out holds files this run did not create: run.json*"])
    assert (root / "out" / "run.json").read_text() == '{"mine": true}'


def test_a_folder_of_an_earlier_run_is_reused_and_an_empty_one_adopted(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong"])
    (root / "out").mkdir()
    pytester.runpytest(*BASE, "--osmosis-output=out").assert_outcomes(
        passed=1 + PREFLIGHT, failed=1
    )
    run = json.loads((root / "out" / "run.json").read_text())
    assert run["run_id"]
    write_workspace(root, ["answer", "answer"])
    refused = pytester.runpytest(*BASE, "--osmosis-output=out")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR  # an earlier run's: replaced when asked
    refused.stderr.fnmatch_lines(["*--osmosis-output: *out holds an earlier run*"])
    again = pytester.runpytest(*BASE, "--osmosis-output=out", "--osmosis-overwrite")
    again.assert_outcomes(passed=2 + PREFLIGHT)
    assert json.loads((root / "out" / "run.json").read_text())["run_id"] != run["run_id"]
    assert len(journal_lines(root / "out")) == 2


@pytest.mark.parametrize(
    ("flag", "path", "what"),
    [
        ("--osmosis-report", "data/test.jsonl", "the dataset"),
        ("--osmosis-html", "rollouts/steps/main.py", "the rollout entrypoint"),
        ("--osmosis-report", "policy.py", "the policy"),
        (
            "--osmosis-html",
            "data/cassettes/data/test.jsonl/row-0/attempt-0.json",
            "inside the cassettes folder",
        ),
        ("--osmosis-report", "rollouts/steps/helper.py", "a module of the rollout"),
        ("--osmosis-html", "pyproject.toml", "the ini file"),
        ("--osmosis-markdown", "data/test.jsonl", "the dataset"),
    ],
)
def test_a_report_path_that_names_an_input_is_refused_and_the_input_is_intact(
    pytester: pytest.Pytester, flag: str, path: str, what: str
) -> None:
    root = write_workspace(pytester.path, ["answer", "answer"])
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_text("{}")
    before = target.read_bytes()
    # Even asked to replace what an earlier run wrote, a run never writes over its inputs.
    result = pytester.runpytest(
        *BASE, "--osmosis-output=out", f"{flag}={path}", "--osmosis-overwrite"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{flag}: {path} is {what} this run reads*choose another path*"])
    assert target.read_bytes() == before
    assert executed(root) == []


@pytest.mark.parametrize(
    ("flag", "path", "clash"),
    [
        ("--osmosis-html", "out/rows.jsonl", "is the journal this run writes"),
        ("--junitxml", "out/rows.jsonl", "is the journal this run writes"),
        ("--osmosis-report", "out/run.json", "is the run file this run writes"),
        ("--osmosis-html", "out/rollouts.log", "is the rollouts' log this run writes"),
        ("--osmosis-html", "out/report.json", "is where --osmosis-output writes its report"),
        ("--junitxml", "out/rollouts/j.xml", "is inside the trajectories folder this run writes"),
        ("--osmosis-report", "out", "is the run folder this run writes"),
    ],
)
def test_a_report_path_that_names_a_file_of_the_run_itself_is_refused(
    pytester: pytest.Pytester, flag: str, path: str, clash: str
) -> None:
    write_workspace(pytester.path, ["answer"])
    result = pytester.runpytest(*BASE, "--osmosis-output=out", f"{flag}={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{flag}: {path} {clash}*choose another path*"])
    assert executed(pytester.path) == []


def test_two_outputs_naming_one_file_are_refused(pytester: pytest.Pytester) -> None:
    write_workspace(pytester.path, ["answer"])
    result = pytester.runpytest(
        *BASE, "--osmosis-output=out", "--osmosis-report=r.json", "--osmosis-html=r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-html: r.json is where --osmosis-report writes*"])
    # The run's own report.json named again by --osmosis-report is the same file: allowed.
    same = pytester.runpytest(*BASE, "--osmosis-output=out", "--osmosis-report=out/report.json")
    same.assert_outcomes(passed=1 + PREFLIGHT)


def test_a_report_path_that_names_the_baseline_is_refused(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer"])
    pytester.runpytest(*BASE, "--osmosis-output=first").assert_outcomes(passed=1 + PREFLIGHT)
    before = (root / "first" / "report.json").read_bytes()
    result = pytester.runpytest(
        *BASE,
        "--osmosis-output=out",
        "--osmosis-baseline=first/report.json",
        "--osmosis-report=first/report.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-report: first/report.json is the baseline*"])
    assert (root / "first" / "report.json").read_bytes() == before


def test_a_fresh_run_under_xdist_never_inherits_an_earlier_runs_journal(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["answer"] * 6)
    pytester.runpytest(*BASE, "--osmosis-output=out").assert_outcomes(passed=6 + PREFLIGHT)
    (root / "data" / "other.jsonl").write_text(
        "".join(
            json.dumps({"id": f"o{i}", "user_prompt": f"o{i}: wrong", "ground_truth": "ok"}) + "\n"
            for i in range(3)
        )
    )

    fresh = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/other.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-output=out",
        # Replacing an earlier run is asked for (a run refuses it otherwise, exit 4).
        "--osmosis-overwrite",
        "-n",
        "2",
        timeout=300,
    )
    fresh.assert_outcomes(failed=3, passed=PREFLIGHT)
    other = [f"data/other.jsonl::o{i}" for i in range(3)]
    assert sorted(str(line["nodeid"]) for line in journal_lines(root / "out")) == other
    run = json.loads((root / "out" / "run.json").read_text())
    assert sorted(run["selected"]) == other
    document = json.loads((root / "out" / "report.json").read_text())
    assert sorted(r["nodeid"] for r in document["row_verdicts"]) == other

    rebuilt = subprocess.run(
        [sys.executable, "-m", "osmosis_rollout.cli", "report", "rebuild", "out"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    document = json.loads((root / "out" / "report.json").read_text())
    assert sorted(r["nodeid"] for r in document["row_verdicts"]) == other
