"""The pytest plugin in server mode drives the OFFICIAL rollout server like the in-process run.

``pytest --osmosis-dataset data/test.jsonl --osmosis-policy policy.py:policy
--osmosis-server <official>`` (the plugin is the controller: our PolicyServer plus our
RolloutClient) must give every row the verdict, reward and error type that the in-process run
of the same entrypoint, migrated to ``osmosis_rollout``, gives.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from interop_support import SCRIPTS, ServerProcess, migrate_imports
from workspaces import POLICY_PY, multiply_rows, write_rows

pytestmark = pytest.mark.timeout(900)  # the first run builds the official venv


def _summary_line(result: pytest.RunResult) -> str:
    return next(line for line in result.stdout.lines if line.startswith("rows: "))


def _rows_by_key(report: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each row's verdict with its (single) attempt's status, reward and error type."""
    attempts = {
        a["row_key"]: (a["status"], a.get("reward"), a.get("error_type")) for a in report["rows"]
    }
    return {v["row_key"]: (v["verdict"], *attempts[v["row_key"]]) for v in report["row_verdicts"]}


def test_server_mode_against_the_official_server_matches_the_in_process_run(
    official_server: ServerProcess, pytester: pytest.Pytester
) -> None:
    root = pytester.path
    rows: list[dict[str, Any]] = [
        {**row, "metadata": {"mode": "multiply"}} for row in multiply_rows(6, wrong={2}, ids=True)
    ]
    rows.append({**rows[0], "id": "case-fail", "metadata": {"mode": "fail"}})
    write_rows(root / "data" / "test.jsonl", rows)
    (root / "policy.py").write_text(textwrap.dedent(POLICY_PY), encoding="utf-8")
    (root / "ours").mkdir()
    (root / "ours" / "main.py").write_text(
        migrate_imports((SCRIPTS / "rollout_main.py").read_text(encoding="utf-8")),
        encoding="utf-8",
    )
    common = ["--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy"]

    in_process = pytester.runpytest(
        *common, "--osmosis-rollout=ours/main.py", "--osmosis-report=in-process.json"
    )
    served = pytester.runpytest(
        *common, f"--osmosis-server={official_server.url}", "--osmosis-report=served.json"
    )

    # One row below the threshold, one whose rollout errored (an error, as a broken fixture).
    in_process.assert_outcomes(passed=5 + 2, failed=1, errors=1)  # preflight: dataset, entrypoint
    served.assert_outcomes(passed=5 + 1, failed=1, errors=1)  # preflight: dataset (no entrypoint)
    assert _summary_line(served) == _summary_line(in_process)
    assert "rows: 7  passed: 5  failed: 2" in _summary_line(served)
    local = json.loads((root / "in-process.json").read_text(encoding="utf-8"))
    remote = json.loads((root / "served.json").read_text(encoding="utf-8"))
    assert _rows_by_key(remote) == _rows_by_key(local)
    assert remote["summary"]["errors_by_type"] == {"agent_error": 1}
    assert _rows_by_key(remote)["case-fail"][3] == "agent_error"
