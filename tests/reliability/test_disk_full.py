"""A full disk stops the run loudly: no new rows, an incomplete report, a distinct exit status.

The output folder is a 200 KB tmpfs: the journal and trajectories fill it long before 300 rows
are done. The run stops submitting rows, says ``INCOMPLETE: stopped by disk full writing ...``
and exits 12; the failing ``rollouts.log`` handler says so once instead of logging its own
errors without end. A full disk under the cassettes being recorded, or under the run's
trajectories (another mount), stops the run the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

WRITE_FAILED = 12
FEW_ROWS = 8
"""Rows enough to have several in flight when a nearly full disk fills."""

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


@contextlib.contextmanager
def mounted_tmpfs(disk: Path, size: str = "200k") -> Iterator[Path]:
    """A ``size`` tmpfs mounted on ``disk`` (root only), unmounted afterwards."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    disk.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
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


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 200 KB tmpfs mounted for the test (root only), unmounted afterwards."""
    with mounted_tmpfs(tmp_path / "disk") as disk:
        yield disk


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
    # Whichever of the run's files hits the full disk first (the journal or a trajectory).
    result.stdout.fnmatch_lines(
        ["*INCOMPLETE: stopped by disk full writing *: * of 300 rows not run*"]
    )
    # One line says the log could not be written; its errors are not logged again and again.
    assert out.count("Traceback") <= 1, out[-3000:]
    assert len(out) < 200_000
    journal = tiny_disk / "out" / "rows.jsonl"
    data = journal.read_bytes() if journal.exists() else b""
    assert data == b"" or data.endswith(b"\n")  # whole lines only: a torn write is cut back


CALLING_MAIN_PY = """
import httpx
from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context


class Ask(AgentWorkflow):
    async def run(self, ctx):
        rollout = get_rollout_context()
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                rollout.chat_completions_url + "/chat/completions",
                headers={"Authorization": f"Bearer {rollout.api_key}"},
                json={"model": "osmosis-rollout", "messages": ctx.prompt},
            )
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"]
        return [*ctx.prompt, {"role": "assistant", "content": reply["content"]}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""


def write_big_rows(root: Path, main: str, rows: int = 300) -> None:
    (root / "rollouts" / "big").mkdir(parents=True, exist_ok=True)
    (root / "rollouts" / "big" / "main.py").write_text(main)
    (root / "policy.py").write_text("def policy(request):\n    return 'ok'\n")
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "test.jsonl").write_text(
        "".join(
            f'{{"user_prompt": "row-{i} {"z" * 300}", "ground_truth": "ok"}}\n' for i in range(rows)
        )
    )


def test_a_full_disk_under_the_cassettes_being_recorded_stops_the_run_with_exit_12(
    pytester: pytest.Pytester, tiny_disk: Path
) -> None:
    write_big_rows(pytester.path, CALLING_MAIN_PY)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-record-mode=once",
        f"--osmosis-cassette-dir={tiny_disk / 'cassettes'}",
        "--osmosis-output=out",
        "--osmosis-progress=off",
        timeout=120,
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == WRITE_FAILED, out[-3000:]
    result.stdout.fnmatch_lines(
        ["*INCOMPLETE: stopped by disk full writing *attempt-0.json: * of 300 rows not run*"]
    )
    # The model answered every row that ran: a cassette that could not be kept is the
    # run's failure, not the rows'.
    assert "policy_error" not in out, out[-3000:]


def test_a_resume_after_a_full_cassette_disk_records_every_row_the_disk_lost(
    pytester: pytest.Pytester, tiny_disk: Path
) -> None:
    write_big_rows(pytester.path, CALLING_MAIN_PY, rows=FEW_ROWS)
    # Room for about one cassette: the rows in flight when the disk fills finish without one.
    stat = os.statvfs(tiny_disk)
    (tiny_disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 4096))
    args = (
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-record-mode=once",
        "--osmosis-progress=off",
    )
    full = pytester.runpytest_subprocess(
        *args, f"--osmosis-cassette-dir={tiny_disk}", "--osmosis-output=out", timeout=120
    )
    assert full.ret == WRITE_FAILED, full.stdout.str()[-3000:]

    # Room again (another folder): the resume records what the full disk lost.
    resumed = pytester.runpytest_subprocess(
        *args, "--osmosis-cassette-dir=cassettes", "--osmosis-resume=out", timeout=120
    )
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()[-3000:]

    def recorded(folder: Path, i: int) -> bool:
        cassette = folder / "data" / "test.jsonl" / f"row-{i}" / "attempt-0.json"
        return cassette.is_file() and cassette.stat().st_size > 0

    lost = [
        i
        for i in range(FEW_ROWS)
        if not (recorded(tiny_disk, i) or recorded(pytester.path / "cassettes", i))
    ]
    assert lost == [], f"passed on resume with no cassette recorded: rows {lost[:10]}"


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_trajectories_on_a_full_mount_stop_the_run_with_exit_12(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    write_big_rows(pytester.path, MAIN_PY, rows=1)
    args = (
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-output=out",
        "--osmosis-progress=off",
    )
    pytester.runpytest_subprocess(*args, timeout=120).assert_outcomes(passed=1 + 2)
    shutil.rmtree(pytester.path / "out" / "rollouts")
    write_big_rows(pytester.path, MAIN_PY, rows=300)
    with mounted_tmpfs(pytester.path / "out" / "rollouts"):
        result = pytester.runpytest_subprocess(*args, "--osmosis-overwrite", *workers, timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == WRITE_FAILED, out[-3000:]
    result.stdout.fnmatch_lines(
        ["*INCOMPLETE: stopped by disk full writing rollouts/*trajectory.json: * rows not run*"]
    )
