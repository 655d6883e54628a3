"""Every count pytest prints matches what runs: preflight items are collected like any item."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

from osmosis_rollout.runs.report import rebuild_report

ARGS = ("--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy")
ITEMS = 6  # 4 rows + the dataset and entrypoint checks


def test_collected_counts_the_preflight_items_and_matches_what_passes(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest(*ARGS)
    result.stdout.fnmatch_lines([f"collected {ITEMS} items", f"*= {ITEMS} passed in *"])


def test_collect_only_lists_as_many_ids_as_it_counts(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest(*ARGS, "--co", "-q")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert len(ids) == ITEMS
    assert ids[:2] == ["osmosis-preflight::dataset[test.jsonl]", "osmosis-preflight::entrypoint"]
    result.stdout.fnmatch_lines([f"{ITEMS} tests collected in *"])


def test_k_counts_selected_and_deselected_as_they_run(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest(*ARGS, "-k", "not row-2")
    result.stdout.fnmatch_lines(
        [
            f"collected {ITEMS} items / 1 deselected / {ITEMS - 1} selected",
            "*= 5 passed, 1 deselected in *",
        ]
    )


def test_k_deselects_the_preflight_items_like_any_other(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest(*ARGS, "-k", "not osmosis-preflight")
    result.stdout.fnmatch_lines(
        [f"collected {ITEMS} items / 2 deselected / 4 selected", "*= 4 passed, 2 deselected in *"]
    )


def test_last_failed_counts_the_rerun_and_the_rest(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4, wrong={3}))
    pytester.runpytest(*ARGS)
    result = pytester.runpytest(*ARGS, "--lf")
    result.stdout.fnmatch_lines(
        [
            f"collected {ITEMS} items / {ITEMS - 1} deselected / 1 selected",
            "run-last-failure: rerun previous 1 failure",
            f"*= 1 failed, {ITEMS - 1} deselected in *",
        ]
    )


def test_preflight_only_counts_the_rows_as_deselected(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest(*ARGS, "--osmosis-preflight-only")
    result.stdout.fnmatch_lines(
        [f"collected {ITEMS} items / 4 deselected / 2 selected", "*= 2 passed, 4 deselected*"]
    )


def test_xdist_runs_each_collected_item_once(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest_subprocess(*ARGS, "-n", "2")
    result.stdout.fnmatch_lines([f"*= {ITEMS} passed in *"])
    assert f"2 workers [{ITEMS} items]" in result.stdout.str()


def test_verbose_shows_each_rows_reward_beside_its_outcome(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3, wrong={1}))
    result = pytester.runpytest(*ARGS, "-v")
    result.stdout.fnmatch_lines(
        [
            "*data/test.jsonl::row-0 PASSED reward=1.0 *",
            "*data/test.jsonl::row-1 FAILED reward=0.0 < 1.0 *",
            "*data/test.jsonl::row-2 PASSED reward=1.0 *",
            "FAILED data/test.jsonl::row-1 - Failed: row-1*",  # pytest's own short summary
        ]
    )


@pytest.mark.parametrize("stop", [("--maxfail=3",), ("-x",)])
def test_maxfail_under_xdist_agrees_with_pytest_and_reports_every_row(
    workspace: Callable[..., Path], pytester: pytest.Pytester, stop: tuple[str, ...]
) -> None:
    workspace(multiply_rows(20, wrong=set(range(1, 20, 2))))
    result = pytester.runpytest_subprocess(
        *ARGS, "--osmosis-output=out", *stop, "-n", "2", "-rA", timeout=300
    )
    # The rows pytest reported (the preflight items may have been cut short too).
    lines = result.stdout.lines
    failed = sum(line.startswith("FAILED data/test.jsonl::row-") for line in lines)
    passed = sum(line.startswith("PASSED data/test.jsonl::row-") for line in lines)
    reported = failed + passed
    assert failed >= (3 if stop[0] == "--maxfail=3" else 1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    flag = "--maxfail=3" if stop[0] == "--maxfail=3" else "-x"
    result.stdout.fnmatch_lines(
        [
            f"rows: {reported}  passed: {passed}  failed: {failed}*",
            f"INCOMPLETE: stopped by {flag}: {20 - reported} of 20 rows not run*",
        ]
    )
    document = json.loads((pytester.path / "out" / "report.json").read_text())
    rows = document["summary"]["rows"]
    assert (rows["total"], rows["passed"], rows["failed"]) == (reported, passed, failed)
    assert rows["not_run"] == 20 - reported
    verdicts = {r["nodeid"] for r in document["row_verdicts"]}
    assert verdicts.isdisjoint(document["not_run"])
    assert verdicts | set(document["not_run"]) == {f"data/test.jsonl::row-{i}" for i in range(20)}
    # Rebuilt from the journal, the report says the same: rows a worker journaled after
    # pytest stopped reporting count in neither.
    rebuilt, _ = rebuild_report(pytester.path / "out")
    assert rebuilt["summary"]["rows"] == rows
    assert rebuilt["not_run"] == document["not_run"]
