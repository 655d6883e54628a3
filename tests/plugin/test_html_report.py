"""The HTML report's content, rendered from report documents written by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osmosis_rollout.runs.html import render, row_outcome, write_html


def _attempt(key: str, **fields: Any) -> dict[str, Any]:
    attempt: dict[str, Any] = {
        "nodeid": f"data/t.jsonl::{key}",
        "row_key": key,
        "run_index": 0,
        "rollout_id": f"{key}.0.abcd",
        "status": "success",
        "reward": 1.0,
        "error_type": None,
        "err_message": None,
        "tokens": 100,
        "duration_ms": 1500.0,
        "trajectory_filename": None,
    }
    attempt.update(fields)
    return attempt


def _document(attempts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    nodes: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        nodes.setdefault(a["nodeid"], []).append(a)
    verdicts = []
    for nodeid, group in nodes.items():
        ok = all(a.get("status") == "success" and a.get("reward") == 1.0 for a in group)
        verdict: dict[str, Any] = {
            "nodeid": nodeid,
            "row_key": group[0]["row_key"],
            "verdict": "passed" if ok else "failed",
            "attempts": len(group),
            "passed_attempts": sum(1 for a in group if a.get("reward") == 1.0),
            "scored_attempts": len(group),
        }
        if len(group) > 1:
            verdict["pass_at_k"] = {"1": 0.5, "2": 1.0}
        verdicts.append(verdict)
    summary = {
        "rows": {"total": len(verdicts), "pass_rate": 0.5},
        "pass_threshold": 1.0,
        "tokens_used": 300,
        "reward_stats": {"mean": 0.5},
    }
    summary.update(extra.pop("summary", {}))
    return {"summary": summary, "rows": attempts, "row_verdicts": verdicts, **extra}


def test_a_row_whose_rollout_failed_is_errored_not_failed() -> None:
    assert row_outcome("failed", [{"status": "failed"}]) == "errored"
    assert row_outcome("failed", [{"status": "success"}]) == "failed"
    assert row_outcome("passed", [{"status": "success"}]) == "passed"
    page = render(
        _document(
            [
                _attempt("a"),
                _attempt("b", reward=0.0),
                _attempt(
                    "c", status="failed", reward=None, error_type="timeout", err_message="slow"
                ),
            ]
        )
    )
    assert 'data-outcome="errored"' in page and 'data-outcome="failed"' in page
    assert '<option value="timeout">timeout (1)</option>' in page
    assert 'data-errors="timeout"' in page


def test_the_page_makes_no_request_and_escapes_what_rows_carry() -> None:
    page = render(_document([_attempt("<script>alert(1)</script>", err_message="<b>")]))
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "http://" not in page and "https://" not in page


def test_three_histograms_reward_latency_and_tokens() -> None:
    page = render(_document([_attempt("a"), _attempt("b", reward=0.0, duration_ms=3000.0)]))
    assert page.count('<svg class="histogram"') == 3
    for label in (
        "reward histogram",
        "latency per attempt (s) histogram",
        "tokens per attempt histogram",
    ):
        assert f'aria-label="{label}"' in page


def test_pass_at_k_shows_only_when_rows_are_repeated() -> None:
    once = render(_document([_attempt("a")]))
    assert "pass@k" not in once
    twice = render(_document([_attempt("a"), _attempt("a", run_index=1, reward=0.0)]))
    assert ">pass@k</th>" in twice
    assert "1/2 @1 0.50 @2 1.00" in twice
    assert "attempt 0" in twice and "attempt 1" in twice


def test_the_baseline_names_regressions_and_improvements() -> None:
    page = render(
        _document(
            [_attempt("a", reward=0.0), _attempt("b")],
            baseline={
                "path": "old.json",
                "regressed": ["data/t.jsonl::a"],
                "improved": ["data/t.jsonl::b"],
                "new": [],
                "gone": ["data/t.jsonl::z"],
                "reward_deltas": {"data/t.jsonl::a": -1.0, "data/t.jsonl::b": 0.5},
            },
        )
    )
    assert "1 regressed, 1 improved, 0 new, 1 gone (against old.json)" in page
    assert '<span class="tag regressed">regressed</span>' in page
    assert '<span class="tag improved">improved</span>' in page
    assert 'data-kind="regressed"' in page and 'data-kind="improved"' in page
    assert ">vs baseline</th>" in page and ">-1 passed before<" in page
    assert ">+0.5 failed before<" in page


def test_no_baseline_no_baseline_column() -> None:
    page = render(_document([_attempt("a")]))
    assert "vs baseline" not in page and 'data-kind="regressed"' not in page


def test_cost_shows_per_row_and_in_total_when_known() -> None:
    plain = render(_document([_attempt("a")]))
    assert ">cost</th>" not in plain
    page = render(
        _document(
            [_attempt("a", cost_usd=0.0012), _attempt("b", cost_usd=0.0030)],
            summary={"cost_usd": 0.0042, "cost_estimated": True},
        )
    )
    assert ">cost</th>" in page
    assert "$0.0012" in page and "cost (estimated)" in page and "$0.0042" in page


def test_an_incomplete_run_and_the_gate_say_so_at_the_top() -> None:
    page = render(
        _document(
            [_attempt("a")],
            summary={"complete": False, "stopped_by": "-x", "not_run": {"count": 7}},
            gate={"min_pass_rate": 0.8, "pass_rate": 0.5, "passed": False},
        )
    )
    assert "Incomplete run (-x): 7 row(s) not run" in page
    assert "gate: pass rate 50.0% &lt; 80.0%: failed" in page


def test_the_conversation_shows_tool_calls_and_their_results(tmp_path: Path) -> None:
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(
        json.dumps(
            {
                "steps": [
                    {"source": "user", "message": "What is 6 times 7?"},
                    {
                        "source": "agent",
                        "message": "",
                        "tool_calls": [
                            {
                                "tool_call_id": "c1",
                                "function_name": "multiply",
                                "arguments": {"a": 6, "b": 7},
                            }
                        ],
                        "observation": {"results": [{"source_call_id": "c1", "content": "42"}]},
                    },
                    {"source": "agent", "message": "The product is 42."},
                ],
                "extra": {"osmosis": {"reward": 1.0, "label": "42"}},
            }
        ),
        encoding="utf-8",
    )
    page = render(_document([_attempt("a", trajectory_filename=str(trajectory))]))
    assert '<div class="call">&rarr; multiply({&quot;a&quot;: 6, &quot;b&quot;: 7})</div>' in page
    assert '<div class="result">&larr; 42</div>' in page
    assert "The product is 42." in page and "label: 42 &middot; grader reward: 1.0" in page


def test_a_missing_trajectory_is_said_plainly() -> None:
    page = render(_document([_attempt("a", trajectory_filename="/nowhere/trajectory.json")]))
    assert "No trajectory was written for this attempt." in page


def test_write_html_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    write_html(target, _document([_attempt("a")]))
    assert target.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


def test_long_tool_arguments_are_laid_out_over_lines(tmp_path: Path) -> None:
    trajectory = tmp_path / "trajectory.json"
    long_args = {"query": "x" * 120}
    trajectory.write_text(
        json.dumps(
            {
                "steps": [
                    {
                        "source": "agent",
                        "tool_calls": [
                            {
                                "tool_call_id": "c",
                                "function_name": "search",
                                "arguments": json.dumps(long_args),
                            }
                        ],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    page = render(_document([_attempt("a", trajectory_filename=str(trajectory))]))
    assert "&rarr; search(\n{\n  &quot;query&quot;: &quot;xxx" in page


def _search_text(page: str, key: str) -> str:
    start = page.index(f'<tbody class="group" id="row-{key}" data-text="{key} ')
    return page[start : page.index('"><tr', start)]


def test_search_covers_the_prompt_messages_and_tool_calls(tmp_path: Path) -> None:
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(
        json.dumps(
            {
                "steps": [
                    {"source": "user", "message": "Multiply Six by Seven"},
                    {
                        "source": "agent",
                        "message": "",
                        "tool_calls": [
                            {"tool_call_id": "c1", "function_name": "lookup_table", "arguments": {}}
                        ],
                    },
                ]
            }
        ),
        encoding="utf-8",
    )
    page = render(_document([_attempt("a", trajectory_filename=str(trajectory))]))
    text = _search_text(page, "a")
    assert "multiply six by seven" in text and "lookup_table({})" in text


def test_the_graders_reason_shows_above_the_conversation() -> None:
    page = render(
        _document(
            [
                _attempt(
                    "a",
                    reward=0.0,
                    grader={"reason": "WARNING g: expected 4, got 3", "metrics": {"chars": 1}},
                )
            ]
        )
    )
    reason = page.index('<div class="reason"><b>grader said</b><pre>WARNING g: expected 4, got 3')
    assert reason < page.index("No trajectory was written for this attempt.")
    assert "metrics: {&quot;chars&quot;: 1}" in page


def test_an_errored_row_shows_its_prompt_and_diagnostics_path() -> None:
    page = render(
        _document(
            [
                _attempt(
                    "a",
                    status="failed",
                    reward=None,
                    error_type="agent_error",
                    err_message="boom",
                    prompt="What is 6 times 7?",
                    diagnostics_path="/run/rollouts/a.0.abcd/diagnostics.json",
                )
            ]
        )
    )
    assert '<div class="who">prompt</div>What is 6 times 7?</div>' in page
    assert "diagnostics: /run/rollouts/a.0.abcd/diagnostics.json" in page
    assert "what is 6 times 7?" in _search_text(page, "a")


def test_a_regressed_row_fills_vs_baseline_and_shows_both_answers() -> None:
    page = render(
        _document(
            [_attempt("a", reward=0.0, last_assistant="It is 41.")],
            baseline={
                "path": "old.json",
                "regressed": ["data/t.jsonl::a"],
                "improved": [],
                "new": [],
                "gone": [],
                "reward_deltas": {},
                "regressed_answers": {"data/t.jsonl::a": "It is 42."},
            },
        )
    )
    assert ">passed before</td>" in page
    assert (
        '<div class="beside"><div><div class="who">baseline answer</div>It is 42.</div>'
        '<div><div class="who">this run\'s answer</div>It is 41.</div></div>'
    ) in page


def _collapsed_row(page: str, key: str) -> str:
    start = page.index(f'<tbody class="group" id="row-{key}"')
    start = page.index('<tr class="row"', start)
    return page[start : page.index("</tr>", start)]


def _labelled_trajectory(path: Path, label: str) -> str:
    path.write_text(
        json.dumps({"steps": [], "extra": {"osmosis": {"label": label, "reward": 0.0}}}),
        encoding="utf-8",
    )
    return str(path)


def test_a_collapsed_row_shows_its_reason_answer_and_label(tmp_path: Path) -> None:
    trajectory = _labelled_trajectory(tmp_path / "t.json", "forty-two")
    page = render(
        _document(
            [
                _attempt(
                    "a",
                    reward=0.0,
                    last_assistant="The answer is 41",
                    grader={"reason": "expected 42, got 41"},
                    trajectory_filename=trajectory,
                ),
                _attempt(
                    "b", status="failed", reward=None, error_type="timeout", err_message="slow"
                ),
            ]
        )
    )
    row = _collapsed_row(page, "a")
    assert "expected 42, got 41" in row
    assert "The answer is 41" in row
    assert "forty-two" in row
    assert "timeout: slow" in _collapsed_row(page, "b")


def test_attempts_that_failed_the_same_way_are_said_once_in_the_row() -> None:
    failed = {"status": "failed", "reward": None, "error_type": "timeout", "err_message": "slow"}
    page = render(_document([_attempt("a", **failed), _attempt("a", run_index=1, **failed)]))
    assert "timeout: slow (\u00d72)</div>" in _collapsed_row(page, "a")


def test_search_covers_the_label(tmp_path: Path) -> None:
    trajectory = _labelled_trajectory(tmp_path / "t.json", "Forty-Two")
    page = render(_document([_attempt("a", trajectory_filename=trajectory)]))
    assert "forty-two" in page[page.index('data-text="a ') :].split('"><tr', 1)[0]


def test_an_attempt_shows_its_traceback_and_what_it_printed() -> None:
    page = render(
        _document(
            [
                _attempt(
                    "a",
                    status="failed",
                    reward=None,
                    error_type="workflow_error",
                    err_message="ValueError: no",
                    error_traceback='File "rollouts/demo/main.py", line 42, in run\nValueError: no',
                    error_where="rollouts/demo/main.py:42 in run",
                    printed="hello from the rollout",
                )
            ]
        )
    )
    detail = page[page.index('<tr class="detail"') :]
    assert "traceback" in detail and "rollouts/demo/main.py&quot;, line 42, in run" in detail
    assert "printed" in detail and "hello from the rollout" in detail
    assert "workflow_error: ValueError: no (at rollouts/demo/main.py:42 in run)" in (
        _collapsed_row(page, "a")
    )


def test_each_row_has_a_deep_link_and_takes_keyboard_focus() -> None:
    page = render(_document([_attempt("case 1/a")]))
    assert '<tbody class="group" id="row-case_1_a"' in page
    assert 'href="#row-case_1_a"' in page
    row = page[page.index('<tr class="row"') :]
    assert row.startswith('<tr class="row" tabindex="0" aria-expanded="false"')


def test_rows_with_one_key_in_two_datasets_get_distinct_anchors() -> None:
    first = _attempt("a")
    second = _attempt("a", nodeid="data/u.jsonl::a")
    page = render(_document([first, second]))
    assert 'id="row-a"' in page and 'id="row-a-2"' in page


def test_the_gate_card_states_what_the_gate_judges() -> None:
    estimand = "the pass rate on the task the 4 rows are drawn from (every row must pass)"
    page = render(
        _document(
            [_attempt("a")],
            gate={
                "min_pass_rate": 0.5,
                "pass_rate": 1.0,
                "passed": True,
                "measure": "pass rate",
                "estimand": estimand,
            },
        )
    )
    assert f"judges {estimand}" in page
