"""Common mistakes stop the run at once with one message that names the fix.

A misspelled path or ini key, a syntax error in the rollout, a CSV with the wrong header:
each is said once, where it is, with the near match when there is one.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

POLICY = "--osmosis-policy=policy.py:policy"


def test_a_misspelled_dataset_path_suggests_the_near_file(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest("--osmosis-dataset=data/tset.jsonl", POLICY)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --osmosis-dataset: file not found: data/tset.jsonl; did you mean data/test.jsonl?"]
    )


def test_a_dataset_in_a_missing_folder_names_the_nearest_folder_that_exists(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest("--osmosis-dataset=data/eval/test.jsonl", POLICY)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --osmosis-dataset: file not found: data/eval/test.jsonl "
            "(there is no folder data/eval; the nearest that exists is data)"
        ]
    )


def test_a_folder_given_as_the_dataset_lists_its_dataset_files(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest("--osmosis-dataset=data", POLICY)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --osmosis-dataset: data is a folder; name a file in it (data/test.jsonl)"]
    )


def test_a_misspelled_ini_key_is_an_error_naming_the_closest_key(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    pytester.makeini(
        "[pytest]\nosmosis_datset = data/test.jsonl\nosmosis_policy = policy.py:policy\n"
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # not "no tests ran" (exit 5)
    result.stderr.fnmatch_lines(
        ["ERROR: *tox.ini: unknown option osmosis_datset; did you mean osmosis_dataset?"]
    )


def test_other_plugins_ini_keys_are_left_alone(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    pytester.makeini(
        "[pytest]\nosmosis_dataset = data/test.jsonl\nosmosis_policy = policy.py:policy\n"
        "timeout = 60\n"
    )
    assert pytester.runpytest().ret == pytest.ExitCode.OK


def test_a_syntax_error_in_main_py_reads_as_file_line_message(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace()
    main = root / "rollouts" / "demo" / "main.py"
    main.write_text(main.read_text() + "\ndef broken(:\n    pass\n")
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lineno = main.read_text().splitlines().index("def broken(:") + 1
    result.stderr.fnmatch_lines(
        [f"ERROR: rollouts/demo/main.py:{lineno}: SyntaxError: *", "    def broken(:"]
    )
    assert "_pytest.outcomes.Exit" not in result.stdout.str() + result.stderr.str()
    assert not (root / ".osmosis").exists()  # stopped before any run directory


def test_a_csv_with_the_wrong_header_says_what_is_missing_once(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace()
    (root / "data" / "bad.csv").write_text("prompt,answer\nWhat is 2 times 3?,6\n")
    result = pytester.runpytest("--osmosis-dataset=data/bad.csv", POLICY)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a bad dataset is a collection error
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*bad.csv, column 'user_prompt': the header has 'answer', 'prompt'; it lacks "
            "'user_prompt' (did you mean 'prompt'?) and 'ground_truth' (or its alias 'label')",
            "  fix: add a 'user_prompt' and a 'ground_truth' (or 'label') column*",
        ]
    )
    assert out.count("fix:") == 1 and "case-sensitive" not in out


def outside_dataset_workspace(root: Path) -> Path:
    """ws/ (rollout, policy, the policy named in its pyproject.toml) and shared/ext.jsonl
    beside it, outside ws/."""
    from workspaces import MAIN_PY, POLICY_PY, multiply_rows, write_rows

    ws = root / "ws"
    (ws / "rollouts" / "demo").mkdir(parents=True)
    (ws / "rollouts" / "demo" / "main.py").write_text(MAIN_PY)
    (ws / "policy.py").write_text(POLICY_PY)
    (ws / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nosmosis_policy = "policy.py:policy"\n'
    )
    write_rows(root / "shared" / "ext.jsonl", multiply_rows(3, wrong={1}))
    return ws


def test_a_dataset_outside_the_rootdir_never_moves_the_rootdir_or_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = outside_dataset_workspace(pytester.path)
    monkeypatch.chdir(ws)
    # Written with a space, pytest takes the value for a test path before the plugin loads.
    spaced = pytester.runpytest("--osmosis-dataset", "../shared/ext.jsonl")
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    spaced.stderr.fnmatch_lines(
        [
            f"*--osmosis-dataset ../shared/ext.jsonl moved pytest's rootdir from {ws} to "
            f"{pytester.path} and left {ws / 'pyproject.toml'} unread*"
            "write --osmosis-dataset=../shared/ext.jsonl*"
        ]
    )
    assert not (ws / ".osmosis").exists()

    joined = pytester.runpytest("--osmosis-dataset=../shared/ext.jsonl", "-v")
    joined.stdout.fnmatch_lines([f"rootdir: {ws}", "configfile: pyproject.toml"])
    joined.assert_outcomes(passed=2 + 2, failed=1)
    # Rows of a dataset outside the rootdir are named by its path from the rootdir, as
    # pytest names nothing else there: two such datasets never share row ids.
    joined.stdout.fnmatch_lines(["../shared/ext.jsonl::row-0 PASSED*"])

    # The failing row's rerun line names the row by a path outside the rootdir, which
    # pytest reads before the plugin loads: the line pins the ini file, so it runs as copied.
    rerun = next(line for line in joined.stdout.lines if line.strip().startswith("rerun:"))
    command = shlex.split(rerun.split("rerun:", 1)[1])
    assert command[0] == "pytest"
    again = pytester.runpytest(*command[1:])
    again.stdout.fnmatch_lines([f"rootdir: {ws}", "configfile: pyproject.toml"])
    again.assert_outcomes(failed=1)


@pytest.mark.parametrize("flag", ["--osmosis-html", "--osmosis-html-report"])
def test_an_existing_output_outside_the_rootdir_given_after_a_space_is_refused_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    """The second run of ``--osmosis-html ../out/page.html``: the page the first run wrote
    now exists, so pytest took it for a test path and the workspace's ini (the one naming
    the dataset) went unread: the run collected nothing, without a word of why."""
    ws = outside_dataset_workspace(pytester.path)
    monkeypatch.chdir(ws)
    page = pytester.path / "out" / "page.html"
    page.parent.mkdir()
    page.write_text("<html>an earlier run's page</html>")
    (ws / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nosmosis_policy = "policy.py:policy"\n'
        'osmosis_dataset = ["../shared/ext.jsonl"]\n'
    )

    spaced = pytester.runpytest(flag, "../out/page.html")
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    spaced.stderr.fnmatch_lines(
        [
            f"*{flag} ../out/page.html moved pytest's rootdir from "
            f"{ws} to {pytester.path} and left {ws / 'pyproject.toml'} unread*"
            f"write {flag}=../out/page.html*"
        ]
    )
    joined = pytester.runpytest(f"{flag}=../out/page.html", "--osmosis-overwrite")
    joined.assert_outcomes(passed=2 + 2, failed=1)
    assert "row-0" in page.read_text()
