"""``pytest --osmosis-ray ADDRESS``: dataset rows run on a Ray cluster, reported as in-process.

The same 100-row workspace runs twice in pytest subprocesses, in-process and through a
local Ray cluster; items, rewards, report rows and trajectories must agree, and every file
lands in the run's output directory on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ray_support import RayCluster
from workspaces import MAIN_PY, POLICY_PY, multiply_rows, write_rows

pytestmark = pytest.mark.timeout(600)

ROWS = 100
WRONG = {3, 50, 97}
COMPARED = ("row_key", "row_index", "run_index", "status", "reward", "error_type", "passed",
            "nodeid", "last_assistant", "policy_calls")  # fmt: skip


@pytest.fixture
def workspace(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = pytester.path
    (root / "rollouts" / "demo").mkdir(parents=True)
    (root / "rollouts" / "demo" / "main.py").write_text(MAIN_PY, encoding="utf-8")
    (root / "policy.py").write_text(POLICY_PY, encoding="utf-8")
    write_rows(root / "data" / "test.jsonl", multiply_rows(ROWS, wrong=WRONG, ids=True))
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(root / ".artifacts"))
    return root


def _run(pytester: pytest.Pytester, output: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        f"--osmosis-output={output}",
        "-p",
        "no:cacheprovider",
        *extra,
        timeout=400,
    )
    report = json.loads((pytester.path / output / "report.json").read_text(encoding="utf-8"))
    return result, report


def test_rows_through_ray_match_in_process_rows(
    pytester: pytest.Pytester, workspace: Path, ray_cluster: RayCluster
) -> None:
    local, local_report = _run(pytester, "out/local")
    on_ray, ray_report = _run(
        pytester,
        "out/ray",
        f"--osmosis-ray={ray_cluster.address}",
        "--osmosis-policy-host=127.0.0.1",
    )

    assert local.parseoutcomes() == on_ray.parseoutcomes()
    assert on_ray.parseoutcomes()["failed"] == len(WRONG)

    def comparable(report: dict[str, Any]) -> list[dict[str, Any]]:
        rows = sorted(report["rows"], key=lambda r: r["row_index"])
        return [{key: row[key] for key in COMPARED} for row in rows]

    assert len(ray_report["rows"]) == ROWS
    assert comparable(ray_report) == comparable(local_report)
    assert ray_report["summary"]["rows"] == local_report["summary"]["rows"]
    for row in ray_report["rows"]:
        trajectory = Path(row["trajectory_filename"])
        assert trajectory.is_file()
        assert (pytester.path / "out" / "ray") in trajectory.parents


def test_osmosis_ray_with_a_rollout_server_is_a_usage_error(
    pytester: pytest.Pytester, workspace: Path
) -> None:
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-ray=auto",
        "--osmosis-server=http://127.0.0.1:9",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-ray*--osmosis-server*"])


def test_a_wildcard_policy_host_is_a_usage_error(
    pytester: pytest.Pytester, workspace: Path
) -> None:
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-policy-host=0.0.0.0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-policy-host: '0.0.0.0' is not an address*"])


def test_cassettes_recorded_through_ray_land_here_and_replay_in_process(
    pytester: pytest.Pytester, workspace: Path, ray_cluster: RayCluster
) -> None:
    recorded = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-record-mode=once",
        "--osmosis-limit=3",
        f"--osmosis-ray={ray_cluster.address}",
        timeout=300,
    )
    assert recorded.ret == pytest.ExitCode.OK, recorded.stdout.str()[-2000:]
    assert len(sorted((workspace / "data" / "cassettes").rglob("*.json"))) == 3
    (workspace / "policy.py").unlink()
    replayed = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-limit=3", timeout=300
    )
    assert replayed.parseoutcomes() == recorded.parseoutcomes()
