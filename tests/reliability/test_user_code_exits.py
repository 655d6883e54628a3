"""User code that raises SystemExit or KeyboardInterrupt fails its own row, in a real run.

Each case is a whole ``pytest`` process over a five-row workspace, in-process and behind a
served rollout server (``--osmosis-serve``): the row whose workflow or grader exits fails
and is named, the other four pass, and the run ends (the subprocess timeout is only a
hang guard).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HANG_GUARD_SEC = 300

MAIN_PY = """
import sys

from osmosis_rollout import AgentWorkflow, Grader


class Answer(AgentWorkflow):
    {kind}run(self, ctx):
        if ctx.prompt[-1]["content"] == "row 2":
            {workflow_exit}
        return [*ctx.prompt, {{"role": "assistant", "content": "42"}}]


class Exact(Grader):
    async def grade(self, ctx):
        if ctx.sample.messages[0]["content"] == "row 3":
            {grader_exit}
        ctx.set_reward(1.0)
"""


def _run(tmp_path: Path, main: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rollouts" / "demo").mkdir(parents=True)
    (tmp_path / "rollouts" / "demo" / "main.py").write_text(textwrap.dedent(main))
    (tmp_path / "policy.py").write_text("def policy(request):\n    return 'ok'\n")
    rows = [{"user_prompt": f"row {i}", "ground_truth": "42"} for i in range(5)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(tmp_path / "artifacts"))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--osmosis-dataset=data/test.jsonl",
            "--osmosis-policy=policy.py:policy",
            "--osmosis-output=out",
            "--osmosis-agent-timeout=60",
            "--osmosis-grader-timeout=60",
            *extra,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SEC,
    )


def _verdicts(tmp_path: Path) -> dict[str, str]:
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    return {r["row_key"]: r["verdict"] for r in report["row_verdicts"]}


@pytest.mark.parametrize("mode", [(), ("--osmosis-serve",)], ids=["in-process", "served"])
@pytest.mark.parametrize(
    ("kind", "workflow_exit", "grader_exit", "shown"),
    [
        (
            "async def ",
            "sys.exit(3)",
            "pass",
            "row-2 (test.jsonl line 3): rollout failed [agent_error]: SystemExit: 3",
        ),
        (
            "def ",
            "raise KeyboardInterrupt",
            "pass",
            "row-2 (test.jsonl line 3): rollout failed [agent_error]: KeyboardInterrupt",
        ),
        ("async def ", "pass", "sys.exit(4)", "row-3 (test.jsonl line 4): "),
    ],
    ids=["workflow-sys-exit", "sync-workflow-keyboard-interrupt", "grader-sys-exit"],
)
def test_one_row_exiting_fails_alone(
    tmp_path: Path,
    mode: tuple[str, ...],
    kind: str,
    workflow_exit: str,
    grader_exit: str,
    shown: str,
) -> None:
    main = MAIN_PY.format(kind=kind, workflow_exit=workflow_exit, grader_exit=grader_exit)
    result = _run(tmp_path, main, *mode)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    failed = "row-3" if grader_exit != "pass" else "row-2"
    assert _verdicts(tmp_path) == {
        f"row-{i}": ("failed" if f"row-{i}" == failed else "passed") for i in range(5)
    }
    assert shown in output
    if grader_exit != "pass":
        assert "SystemExit: 4 raised by the grader" in output
