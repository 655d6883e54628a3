"""The HTML report in a real headless Chromium: rows sort, search and filter, conversations open,
the console stays clean and the page asks the network for nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chromium_cdp import CHROMIUM, Browser
from workspaces import POLICY_PY, multiply_rows

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)

FLAKY_POLICY = (
    POLICY_PY
    + '''

_plain = policy


def policy(request):
    """Like the multiplying policy, but a prompt that says 'boom' makes the model call fail."""
    if "boom" in request.messages[-1]["content"]:
        raise RuntimeError("the model exploded")
    return _plain(request)
'''
)

SHOWN = "document.getElementById('count').textContent"
VISIBLE_KEYS = (
    "Array.from(document.querySelectorAll('tbody.group:not([hidden]) tr.row td:first-child'))"
    ".map(td => td.dataset.v)"
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with Browser(tmp_path / "profile") as opened:
        yield opened


@pytest.fixture
def report(workspace: Callable[..., Path], pytester: pytest.Pytester) -> Path:
    rows = multiply_rows(12, wrong={1, 4}, ids=True)
    for i in (7, 10):
        rows[i]["user_prompt"] += " boom"
    root = workspace(rows, policy=FLAKY_POLICY)
    args = ["--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy"]
    pytester.runpytest(*args, "--osmosis-report=base.json")
    # The baseline run had row 5 failing and row 4 passing: one regression, one improvement.
    baseline = json.loads((root / "base.json").read_text(encoding="utf-8"))
    for verdict in baseline["row_verdicts"]:
        if verdict["row_key"] == "case-5":
            verdict["verdict"] = "failed"
        if verdict["row_key"] == "case-4":
            verdict["verdict"] = "passed"
    (root / "base.json").write_text(json.dumps(baseline), encoding="utf-8")
    pytester.runpytest(
        *args, "--osmosis-n=2", "--osmosis-baseline=base.json", "--osmosis-html=report.html"
    )
    return root / "report.html"


def test_rows_filter_by_outcome_error_type_baseline_and_search(
    report: Path, browser: Browser
) -> None:
    browser.open(report.as_uri())
    assert browser.eval(SHOWN) == "showing 12 of 12 rows"

    def click(selector: str) -> None:
        browser.eval(f"document.querySelector({json.dumps(selector)}).click()")

    click("button[data-kind=failed]")
    assert browser.eval(VISIBLE_KEYS) == ["case-1", "case-4"]
    click("button[data-kind=errored]")
    assert browser.eval(VISIBLE_KEYS) == ["case-7", "case-10"]
    click("button[data-kind=regressed]")
    assert browser.eval(VISIBLE_KEYS) == ["case-4"]
    click("button[data-kind=improved]")
    assert browser.eval(VISIBLE_KEYS) == ["case-5"]
    click("button[data-kind=all]")
    browser.eval(
        "{ const s = document.getElementById('errtype'); s.value = 'policy_error';"
        "s.dispatchEvent(new Event('change')) }"
    )
    assert browser.eval(VISIBLE_KEYS) == ["case-7", "case-10"]
    browser.eval(
        "{ const s = document.getElementById('errtype'); s.value = '';"
        "s.dispatchEvent(new Event('change'));"
        "const q = document.getElementById('search'); q.value = 'CASE-1';"
        "q.dispatchEvent(new Event('input')) }"
    )
    assert browser.eval(VISIBLE_KEYS) == ["case-1", "case-10", "case-11"]
    assert browser.eval(SHOWN) == "showing 3 of 12 rows"
    assert browser.console_errors == []
    assert browser.external_requests == []


def test_columns_sort_and_a_row_opens_to_its_conversations(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri())
    header = 'th[data-col="0"]'
    browser.eval(f"document.querySelector('{header}').click()")
    keys = browser.eval(VISIBLE_KEYS)
    assert keys[:3] == ["case-0", "case-1", "case-2"] and keys[-1] == "case-11"  # numeric order
    browser.eval(f"document.querySelector('{header}').click()")
    assert browser.eval(VISIBLE_KEYS)[0] == "case-11"
    assert browser.eval(f"document.querySelector('{header}').getAttribute('aria-sort')") == (
        "descending"
    )
    detail_shown = (
        "getComputedStyle(document.querySelector('tbody.group:not([hidden]) tr.detail')).display"
    )
    assert browser.eval(detail_shown) == "none"
    browser.eval("document.querySelector('tbody.group:not([hidden]) tr.row').click()")
    assert browser.eval(detail_shown) == "table-row"
    text = browser.eval("document.querySelector('tbody.group.open tr.detail').innerText")
    assert "attempt 0" in text and "attempt 1" in text
    assert "What is 13 times 14?" in text and "The answer is 182" in text
    assert browser.console_errors == []
    assert browser.external_requests == []


def test_searching_a_prompts_text_finds_its_row(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri())
    browser.eval(
        "{ const q = document.getElementById('search'); q.value = 'what is 9 times 10';"
        "q.dispatchEvent(new Event('input')) }"
    )
    assert browser.eval(VISIBLE_KEYS) == ["case-7"]
    assert browser.console_errors == []


def test_a_regressed_row_shows_the_baselines_answer_beside_the_new_one(
    report: Path, browser: Browser
) -> None:
    browser.open(report.as_uri())
    browser.eval("document.querySelector('button[data-kind=regressed]').click()")
    assert browser.eval(VISIBLE_KEYS) == ["case-4"]
    cells = "Array.from(document.querySelectorAll('tbody.group:not([hidden]) tr.row td')).map(td => td.innerText)"
    assert "passed before" in browser.eval(cells)
    browser.eval("document.querySelector('tbody.group:not([hidden]) tr.row').click()")
    beside = browser.eval(
        "Array.from(document.querySelectorAll('tbody.group.open .beside > div'))"
        ".map(d => d.innerText)"
    )
    assert [text.split("\n")[0].lower() for text in beside] == [
        "baseline answer",
        "this run's answer",
    ]
    assert all("I do not know" in text for text in beside), beside
    assert browser.console_errors == []
    assert browser.external_requests == []


def test_the_browser_check_sees_an_external_request_when_there_is_one(
    tmp_path: Path, browser: Browser
) -> None:
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!doctype html><img src="http://127.0.0.1:9/x.png"><script>console.error("bad")</script>',
        encoding="utf-8",
    )
    browser.open(page.as_uri())
    assert browser.external_requests == ["http://127.0.0.1:9/x.png"]
    assert "bad" in browser.console_errors


def test_errored_rows_sort_with_the_lowest_rewards_both_ways(
    report: Path, browser: Browser
) -> None:
    browser.open(report.as_uri())
    reward = "document.querySelector('th[data-col=\"2\"]').click()"
    browser.eval(reward)
    assert sorted(browser.eval(VISIBLE_KEYS)[:2]) == ["case-10", "case-7"]
    browser.eval(reward)
    assert sorted(browser.eval(VISIBLE_KEYS)[-2:]) == ["case-10", "case-7"]
    assert browser.console_errors == []


def test_a_deep_link_opens_its_row_and_clicking_a_row_sets_the_link(
    report: Path, browser: Browser
) -> None:
    browser.open(report.as_uri() + "#row-case-7")
    assert browser.eval("document.getElementById('row-case-7').classList.contains('open')")
    assert browser.eval("document.querySelectorAll('tbody.group.open').length") == 1
    focused = "document.activeElement.closest('tbody').id"
    assert browser.eval(focused) == "row-case-7"  # Tab and Enter go on from the linked row
    browser.eval("document.querySelector('#row-case-3 tr.row').click()")
    assert browser.eval("location.hash") == "#row-case-3"
    assert browser.console_errors == []


def test_a_row_opens_from_the_keyboard(report: Path, browser: Browser) -> None:
    browser.open(report.as_uri())
    browser.eval(
        "{ const r = document.querySelector('#row-case-2 tr.row'); r.focus();"
        "r.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})) }"
    )
    assert browser.eval("document.activeElement.closest('tbody').id") == "row-case-2"
    assert browser.eval("document.getElementById('row-case-2').classList.contains('open')")
    assert (
        browser.eval("document.querySelector('#row-case-2 tr.row').getAttribute('aria-expanded')")
        == "true"
    )


def test_the_why_column_shows_each_failed_rows_reason_without_opening_it(
    report: Path, browser: Browser
) -> None:
    browser.open(report.as_uri())
    why = "document.querySelector('#row-case-7 tr.row').innerText"
    assert "the model exploded" in browser.eval(why)
    below = browser.eval("document.querySelector('#row-case-1 tr.row').innerText")
    assert "answer: I do not know" in below and "label: " in below
