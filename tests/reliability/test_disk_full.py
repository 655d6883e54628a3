"""A full disk stops the run loudly: no new rows, an incomplete report, a distinct exit status.

The output folder is a 200 KB tmpfs: the journal fills it long before 300 rows are done.
The run stops submitting rows, says ``INCOMPLETE: stopped by disk full writing rows.jsonl``
and exits 12; the failing ``rollouts.log`` handler says so once instead of logging its own
errors without end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

WRITE_FAILED = 12

MAIN_PY = """
import logging

from osmosis_rollout import AgentWorkflow, Grader

log = logging.getLogger("osmosis_rollout.user")


class Chatty(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        log.warning("working on %s %s", text, "x" * 200)
        print("printed by", text, "y" * 200)
        return [*ctx.prompt, {"role": "assistant", "content": "ok"}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 200 KB tmpfs mounted for the test (root only), unmounted afterwards."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30, check=False)


def test_a_full_disk_stops_the_run_with_an_incomplete_report_and_exit_12(
    pytester: pytest.Pytester, tiny_disk: Path
) -> None:
    (pytester.path / "rollouts" / "chatty").mkdir(parents=True)
    (pytester.path / "rollouts" / "chatty" / "main.py").write_text(MAIN_PY)
    (pytester.path / "policy.py").write_text("def policy(request):\n    return 'unused'\n")
    (pytester.path / "data").mkdir()
    rows = "".join(
        f'{{"user_prompt": "row-{i} {"z" * 300}", "ground_truth": "ok"}}\n' for i in range(300)
    )
    (pytester.path / "data" / "test.jsonl").write_text(rows)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        f"--osmosis-output={tiny_disk / 'out'}",
        "--osmosis-progress=off",
        timeout=120,
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == WRITE_FAILED, out[-3000:]
    result.stdout.fnmatch_lines(
        ["*INCOMPLETE: stopped by disk full writing rows.jsonl: * of 300 rows not run*"]
    )
    # One line says the log could not be written; its errors are not logged again and again.
    assert out.count("Traceback") <= 1, out[-3000:]
    assert len(out) < 200_000
    journal = tiny_disk / "out" / "rows.jsonl"
    data = journal.read_bytes() if journal.exists() else b""
    assert data == b"" or data.endswith(b"\n")  # whole lines only: a torn write is cut back
