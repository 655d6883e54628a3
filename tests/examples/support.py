"""Helpers for the example-rollout tests (imported as ``examples.support``): copy a workspace,
run pytest or the CLI on it, check the summary."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from _support.inner_runs import INNER_RUN_ADDOPTS

from osmosis_rollout.templates import EXAMPLES as EXAMPLES_RENDERED

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "example_rollouts"

#: Example workspace -> the template it is rendered from.
EXAMPLE_TEMPLATES = {name: example.template for name, example in EXAMPLES_RENDERED.items()}

#: Preflight items every example run adds before its rows: dataset, entrypoint, eval config.
PREFLIGHT_ITEMS = 3

#: Environment a developer may have set that would change what these runs pin down.
_SCRUBBED = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_CURRENT_TEST",
    "OSMOSIS_ROLLOUT_STREAMING",
    "JUDGE_MODEL",
)

SUBPROCESS_TIMEOUT = 300


@dataclass(frozen=True)
class Run:
    """A finished subprocess: exit status and output."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        """Everything needed to see why an assertion failed."""
        return (
            f"$ {' '.join(self.args)}\nexit status {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test's environment without the variables that would change a run."""
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED}
    env["PYTEST_ADDOPTS"] = INNER_RUN_ADDOPTS
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, *, timeout: float = SUBPROCESS_TIMEOUT, **env: str) -> Run:
    """Run ``args`` in ``cwd`` and capture its output (bounded by ``timeout``)."""
    done = subprocess.run(
        args,
        cwd=cwd,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(args, done.returncode, done.stdout, done.stderr)


def run_pytest(cwd: Path, *args: str, timeout: float = SUBPROCESS_TIMEOUT) -> Run:
    """``python -m pytest -p no:cacheprovider ARGS`` in ``cwd``."""
    return run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd, timeout=timeout
    )


def run_cli(cwd: Path, *args: str, timeout: float = SUBPROCESS_TIMEOUT) -> Run:
    """``python -m osmosis_rollout.cli ARGS`` in ``cwd`` (the ``osmosis-rollout`` command)."""
    return run([sys.executable, "-m", "osmosis_rollout.cli", *args], cwd, timeout=timeout)


def copy_example(name: str, destination: Path) -> Path:
    """A fresh copy of ``example_rollouts/<name>`` (no run outputs or caches)."""
    target = destination / name
    shutil.copytree(
        EXAMPLES / name,
        target,
        ignore=shutil.ignore_patterns(".osmosis", "__pycache__", ".pytest_cache"),
    )
    return target


def count_rows(path: Path) -> int:
    """Non-blank lines of a JSONL dataset."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def assert_all_rows_passed(result: Run, rows: int) -> None:
    """Exit 0, the osmosis summary counts every row as passed, and pytest agrees."""
    assert result.returncode == 0, result.explain()
    summary = re.search(
        r"^rows: (\d+)\s+passed: (\d+)\s+failed: (\d+)\s+skipped: (\d+)\s+pass rate: 100\.0%",
        result.stdout,
        re.MULTILINE,
    )
    assert summary is not None, result.explain()
    assert summary.groups() == (str(rows), str(rows), "0", "0"), result.explain()
    final = re.search(r"^=+ (.*) in [\d.]+s", result.stdout, re.MULTILINE)
    assert final is not None, result.explain()
    assert re.match(rf"{rows + PREFLIGHT_ITEMS} passed\b", final.group(1)), result.explain()
    assert "failed" not in final.group(1) and "error" not in final.group(1), result.explain()


def read_report(workspace: Path) -> dict[str, object]:
    """The JSON report of the single run under ``<workspace>/.osmosis/runs``."""
    reports = sorted((workspace / ".osmosis" / "runs").glob("*/report.json"))
    assert len(reports) == 1, reports
    loaded: dict[str, object] = json.loads(reports[0].read_text(encoding="utf-8"))
    return loaded
