"""A ``--osmosis-serve`` rollout server that dies mid-run: the row it died in and the rows
after it fail at once, each saying how the server ended and what it last wrote, until three
have and no further row starts; rows done before it keep their verdicts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import MAIN_PY, multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"

DYING_MAIN = MAIN_PY.replace(
    "    async def run(self, ctx: AgentWorkflowContext):\n",
    "    async def run(self, ctx: AgentWorkflowContext):\n"
    "        if 'die' in ctx.prompt[-1]['content']:\n"
    "            import os\n"
    "            print('rollout server: about to exit with status 3', flush=True)\n"
    "            os._exit(3)\n",
)
"""The workspace's rollout, whose workflow ends its server's process on a row saying 'die'."""


def test_a_dead_serve_subprocess_fails_the_remaining_rows_with_its_exit_status_and_log(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    rows = multiply_rows(6)
    rows[2]["user_prompt"] += " die"
    assert DYING_MAIN != MAIN_PY
    root = workspace(rows, main=DYING_MAIN)
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-serve",
        "--osmosis-concurrency=1",
        "--osmosis-report=report.json",
    )
    report = json.loads((root / "report.json").read_text())
    rows_by_index = {r["row_index"]: r for r in report["rows"]}
    reported = sorted(rows_by_index)
    assert [rows_by_index[i]["passed"] for i in reported] == [True] * 2 + [False] * (
        len(reported) - 2
    ), result.stdout.str()[-3000:]
    # After three rows failed on the dead server, no further row was started (infra_breaker).
    assert 3 <= len(reported) < 6 and report["summary"]["complete"] is False
    assert "(no new row started): the --osmosis-serve rollout server exited with status 3;" in (
        result.stdout.str()
    )
    for i in reported[2:]:
        row = rows_by_index[i]
        assert row["error_type"] == "server_exited"
        message = row["err_message"]
        assert message.startswith("the --osmosis-serve rollout server exited with status 3;")
        assert "rollout server: about to exit with status 3" in message
    # The rows after the death were never sent: no admission retried against a dead port.
    rollouts_log = next(root.glob(".osmosis/runs/*/rollouts.log")).read_text()
    assert not [
        line for line in rollouts_log.splitlines() if "retrying" in line and "row-2" not in line
    ]
