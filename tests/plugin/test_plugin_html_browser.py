"""The HTML report renders in a real headless browser with no network."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
def test_the_html_report_shows_rows_and_a_conversation_in_chromium(
    workspace: Callable[..., Path], pytester: pytest.Pytester, tmp_path: Path
) -> None:
    root = workspace(multiply_rows(4, wrong={1}))
    pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-html=report.html",
    )
    assert CHROMIUM is not None
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            (root / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "pytest-osmosis report" in dom
    for key in ("row-0", "row-1", "row-2", "row-3"):
        assert f"<td>{key}</td>" in dom
    assert 'class="failed">failed</td>' in dom
    assert "What is 3 times 4? wrong" in dom  # the failed row's conversation: the user's turn
    assert "I do not know" in dom  # and the assistant's answer
