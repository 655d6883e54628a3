"""Render a 200-row HTML report and screenshot it in headless Chromium: docs/img/html-report.png.

    .venv/bin/python scripts/report_screenshot.py [OUT.png]

Builds a scratch copy of example_rollouts/multiply-openai with 200 rows (a few with a wrong
label, a few whose model call fails), runs the plugin once for a baseline and again with
two attempts per row against it (some labels changed: regressions and improvements), opens
the report, checks the page made no request and logged no error, opens one failed row's
conversation and saves the screenshot.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from chromium_cdp import Browser  # noqa: E402

EXAMPLE = ROOT / "example_rollouts" / "multiply-openai"
POLICY = '''
"""The example's reference policy, except that a prompt saying "(flaky)" makes the model call fail."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "reference", Path(__file__).parent / "rollouts" / "multiply-openai" / "policy.py"
)
_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_reference)


def policy(request):
    if "(flaky)" in (request.last_user_message or ""):
        raise RuntimeError("upstream model returned 503 Service Unavailable")
    return _reference.policy(request)
'''


def _rows(changed: bool) -> list[dict[str, str]]:
    rng = random.Random(7)
    rows = []
    for i in range(200):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        label = a * b
        prompt = f"What is {a} times {b}?"
        if i % 17 == 5:
            label += 1  # a wrong label: the row fails
        if i % 29 == 11:
            prompt += " (flaky)"
        if changed and i in (3, 40, 77):
            label += 10  # regressions against the baseline
        if changed and i in (22, 56):
            label = a * b  # improvements: the label was wrong in the baseline
        rows.append(
            {
                "id": f"mul-{i + 1}",
                "system_prompt": "You are a careful calculator. Use the multiply tool.",
                "user_prompt": prompt,
                "ground_truth": str(label),
            }
        )
    return rows


def _run(workspace: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", *args],
        cwd=workspace,
        check=False,
        stdout=subprocess.DEVNULL,
        timeout=900,
    )


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img" / "html-report.png"
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch) / "multiply-openai"
        shutil.copytree(EXAMPLE, workspace)
        (workspace / "flaky_policy.py").write_text(POLICY, encoding="utf-8")
        data = workspace / "data" / "test.jsonl"
        common = ["--osmosis-policy=flaky_policy.py:policy", "--osmosis-concurrency=32"]
        for changed, extra in (
            (False, ["--osmosis-report=baseline.json"]),
            (
                True,
                ["--osmosis-n=2", "--osmosis-baseline=baseline.json", "--osmosis-html=report.html"],
            ),
        ):
            data.write_text("".join(json.dumps(r) + "\n" for r in _rows(changed)), encoding="utf-8")
            _run(workspace, *common, *extra)
        report = workspace / "report.html"
        with Browser(Path(scratch) / "profile", width=1400, height=1500) as browser:
            browser.open(report.as_uri())
            shown = browser.eval("document.getElementById('count').textContent")
            browser.eval(
                "document.querySelector('tbody.group tr.row[data-outcome=failed]').click()"
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            browser.screenshot(out, full_height=1500)
            problems = browser.console_errors + browser.external_requests
        print(f"{shown}; console errors and external requests: {problems or 'none'}")
        print(f"wrote {out}")
        return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
