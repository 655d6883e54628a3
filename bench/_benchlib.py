"""Shared helpers for the bench scripts: child processes that report JSON, medians, tables,
and the official ``osmosis-ai`` 0.3.8 virtualenv (Python 3.12) cached under ``bench/.cache``."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
OFFICIAL_VENV = CACHE / "official-venv"
OFFICIAL_PYTHON_312 = "/root/.pyenv/versions/3.12.1/bin/python"
OFFICIAL_REQUIREMENT = "osmosis-ai[openai-agents,strands,server]==0.3.8"
OURS_PYTHON = sys.executable

# LiteLLM fetches a remote model cost map at import unless told not to (and retries with
# sleeps when offline): every child runs with the local map, ours and the official SDK's.
BASE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OTEL_SDK_DISABLED": "true",
    "STRANDS_OTEL_ENABLE_CONSOLE_EXPORT": "false",
}


def official_python(variant: str = "openai") -> str:
    """The official SDK's interpreter, creating and filling its virtualenv on first use.

    ``openai`` (also used for the server bench): ``osmosis-ai[openai-agents,strands,server]``
    exactly as pip resolves it. ``strands``: ``osmosis-ai[strands,server]`` plus
    ``mcp==2.3.0`` forced over the resolved 1.30.0. The official requirements admit only
    ``mcp<2`` next to strands-agents 1.62 (``mcp<2.2``, and osmosis-ai excludes 2.0/2.1),
    but litellm 1.106.12 routes every tool-carrying ``acompletion`` through its MCP
    handler, which imports ``mcp.types.CacheableResult`` (absent before 2.2): with the
    resolved set every official Strands rollout fails with ``APIConnectionError`` before
    any request is sent. Forcing mcp 2.3.0 is the smallest change that lets it run.
    """
    venv = OFFICIAL_VENV if variant == "openai" else CACHE / "official-strands-venv"
    requirement = (
        OFFICIAL_REQUIREMENT if variant == "openai" else "osmosis-ai[strands,server]==0.3.8"
    )
    python = venv / "bin" / "python"
    marker = venv / ".installed-0.3.8"
    if not marker.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"creating {venv} with {requirement} ...", file=sys.stderr)
        subprocess.run([OFFICIAL_PYTHON_312, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], check=True)
        if variant == "strands":
            subprocess.run([str(python), "-m", "pip", "install", "-q", "mcp==2.3.0"], check=True)
        marker.write_text(requirement + "\n")
    return str(python)


def run_child(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
) -> dict[str, Any]:
    """Run a child that writes a JSON report to ``$BENCH_REPORT``; return that report."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        report = Path(fh.name)
    try:
        full_env = {**os.environ, **BASE_ENV, **(env or {}), "BENCH_REPORT": str(report)}
        proc = subprocess.run(
            list(argv), cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0 or report.stat().st_size == 0:
            raise SystemExit(
                f"child failed ({proc.returncode}): {' '.join(argv)}\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        data: dict[str, Any] = json.loads(report.read_text())
        return data
    finally:
        report.unlink(missing_ok=True)


def median(values: Sequence[float]) -> float:
    """The median (of at least one value)."""
    return float(statistics.median(values))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A fixed-width text table: first column left-aligned, the rest right-aligned."""
    cells = [[str(h) for h in headers]] + [
        [f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=False)
        ]
        lines.append("  ".join(parts))
        if n == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def machine() -> str:
    """One line describing the machine and load."""
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = "unknown cpu"
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} vCPU {cpu}; CPython {sys.version.split()[0]}; "
        f"load average {load[0]:.1f} at start"
    )


PYTEST_RUSAGE = """
import json, os, resource, sys, time
t0 = time.perf_counter()
import pytest
rc = pytest.main(sys.argv[1:])
wall = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"rc": int(rc), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
               "maxrss_kb": usage.ru_maxrss}, fh)
"""
"""Runs pytest in-process and reports its wall time (after interpreter start), the process's
CPU time (all threads, start-up included) and peak RSS."""

NULL_ROLLOUT = """
from osmosis_rollout import AgentWorkflow, Grader

PAYLOAD = "x" * int(__import__("os").environ.get("BENCH_PAYLOAD", "0"))


class Null(AgentWorkflow):
    async def run(self, ctx):
        if PAYLOAD:
            return [*ctx.prompt, {"role": "assistant", "content": PAYLOAD}]
        return ctx.prompt


class Trivial(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""
"""A workflow that returns its prompt (plus ``$BENCH_PAYLOAD`` bytes when set) and a grader
that always rewards 1.0."""

NULL_POLICY = """
def policy(request):
    return "unused"
"""


def null_workspace(root: Path, rows: int) -> Path:
    """A workspace with the null rollout, a never-called policy and ``rows`` rows."""
    (root / "rollouts" / "null").mkdir(parents=True, exist_ok=True)
    (root / "rollouts" / "null" / "main.py").write_text(NULL_ROLLOUT)
    (root / "policy.py").write_text(NULL_POLICY)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "data").mkdir(exist_ok=True)
    with (root / "data" / f"rows{rows}.jsonl").open("w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"user_prompt": f"row {i}", "ground_truth": "x"}) + "\n")
    (root / "pytest_rusage.py").write_text(PYTEST_RUSAGE)
    return root
