"""Where the per-row memory of a plugin run goes (issue 16, target 5), by owner.

Runs pytest in-process under ``tracemalloc`` (started at ``pytest_sessionstart``, so
imports are not traced) twice per size: the null rollout through the
plugin (as ``bench_memory.py``: answer padded to ``--payload`` bytes) and a plain
parametrized test with the same number of items (pytest's own floor). At the start of
``pytest_sessionfinish`` (before the plugin finalizes; every row's result has been
reported) it collects garbage, takes a snapshot and charges each live block to an owner:
the innermost frame of its allocation traceback that is not the standard library
(``osmosis_rollout``, ``pytest_osmosis``, ``_pytest``, ``pluggy``, another site-package or
the test module); blocks allocated by the standard library alone are ``stdlib``. Prints
live bytes per extra row for each owner between the two sizes, plus the tracemalloc peak
and ``ru_maxrss``, then the allocation sites (ours and pytest's) that grow the most per row. tracemalloc with deep tracebacks slows the run several times: use small
sizes.

It prints the tables twice: at the start of ``pytest_sessionfinish`` and at the end of the
run (``pytest_unconfigure``, after the plugin read its journal back and wrote the report).

    .venv/bin/python bench/profile_memory.py [--sizes 1000,5000] [--payload 4096] [--frames 30]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import OURS_PYTHON, machine, null_workspace, run_child, table

CHILD = """
import gc, json, os, resource, sys, sysconfig, time, tracemalloc
from collections import Counter

t0 = time.perf_counter()
import pytest

STDLIB = sysconfig.get_paths()["stdlib"]


def owner(tb):
    for frame in reversed(tb):  # most recent first
        name = frame.filename
        if "/osmosis_rollout/" in name:
            return "ours: osmosis_rollout"
        if "/pytest_osmosis/" in name:
            return "ours: pytest_osmosis"
        if "/_pytest/" in name or name.endswith("/pytest/__init__.py"):
            return "pytest (_pytest)"
        if "/site-packages/" in name:
            return name.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
        if name.startswith("<") or name.startswith(STDLIB):
            continue
        return "test module / workspace"
    return "stdlib only"


def snapshot():
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    snap = tracemalloc.take_snapshot()
    by = Counter()
    lines = Counter()
    for stat in snap.statistics("traceback"):
        who = owner(stat.traceback)
        by[who] += stat.size
        if who.startswith("ours") or who.startswith("pytest"):
            mine = ("osmosis_rollout/", "pytest_osmosis/") if who.startswith("ours") else ("/_pytest/",)
            here = next(f for f in reversed(stat.traceback) if any(m in f.filename for m in mine))
            where = f"{here.filename.rsplit('/', 2)[-2]}/{here.filename.rsplit('/', 1)[-1]}:{here.lineno}"
            lines[f"{who.split(':')[0].split(' ')[0]} at {where}"] += stat.size
    return {"owners": dict(by), "lines": dict(lines), "current": current, "peak": peak,
            "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


class Snap:
    result = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        tracemalloc.start(int(os.environ["BENCH_FRAMES"]))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        Snap.result["reported"] = snapshot()

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        # After the plugin wrote its report and pytest its summary: the end of the run.
        Snap.result["end"] = snapshot()


rc = pytest.main(sys.argv[1:], plugins=[Snap()])
with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"rc": int(rc), "wall": time.perf_counter() - t0, **Snap.result}, fh)
"""

PLAIN_TEST = """
import os

import pytest


@pytest.mark.parametrize("i", range(int(os.environ["BENCH_ROWS"])))
def test_plain(i):
    assert i >= 0
"""


def measure(root: Path, mode: str, rows: int, payload: int, frames: int) -> dict[str, Any]:
    """One traced pytest run: ``mode`` is ``plugin`` or ``plain``."""
    env = {"BENCH_PAYLOAD": str(payload), "BENCH_FRAMES": str(frames), "BENCH_ROWS": str(rows),
           "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(root / "art")}  # fmt: skip
    if mode == "plugin":
        argv = [OURS_PYTHON, "traced_pytest.py", "-q", "-p", "no:cacheprovider",
                f"--osmosis-dataset=data/rows{rows}.jsonl", "--osmosis-policy=policy.py:policy",
                f"--osmosis-output=out/{rows}"]  # fmt: skip
        shutil.rmtree(root / "out" / str(rows), ignore_errors=True)  # a run replaces no earlier run
    else:
        argv = [OURS_PYTHON, "traced_pytest.py", "-q", "-p", "no:cacheprovider", "plain"]
    report = run_child(argv, cwd=root, env=env)
    if report["rc"] != 0:
        raise SystemExit(f"{mode} run with {rows} rows exited {report['rc']}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,5000", help="two comma-separated row counts")
    parser.add_argument("--payload", type=int, default=4096)
    parser.add_argument("--frames", type=int, default=30, help="tracemalloc traceback depth")
    args = parser.parse_args()
    small, large = (int(n) for n in args.sizes.split(","))
    print(machine())
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="profile-memory-") as tmp:
        root = Path(tmp)
        for rows in (small, large):
            null_workspace(root, rows)
        (root / "plain").mkdir()
        (root / "plain" / "test_plain.py").write_text(PLAIN_TEST)
        (root / "traced_pytest.py").write_text(CHILD)
        for mode in ("plain", "plugin"):
            for rows in (small, large):
                runs[mode, rows] = measure(root, mode, rows, args.payload, args.frames)
    for phase, when in PHASES.items():
        for mode in ("plain", "plugin"):
            print_owners(
                mode, when, runs[mode, small][phase], runs[mode, large][phase], small, large, args
            )


PHASES = {
    "reported": "at sessionfinish (every row reported, before the plugin's report)",
    "end": "at unconfigure (report files and summary written)",
}


def print_owners(
    mode: str,
    when: str,
    lo: dict[str, Any],
    hi: dict[str, Any],
    small: int,
    large: int,
    args: argparse.Namespace,
) -> None:
    """One table: live bytes per extra row by owner between two sizes (plus our sites)."""
    extra = large - small
    owners = sorted(
        set(lo["owners"]) | set(hi["owners"]),
        key=lambda o: -(hi["owners"].get(o, 0) - lo["owners"].get(o, 0)),
    )
    body: list[list[Any]] = []
    for name in owners:
        a, b = lo["owners"].get(name, 0), hi["owners"].get(name, 0)
        if max(a, b) < 64 * 1024:
            continue
        body.append([name, f"{a / 1e6:.1f}", f"{b / 1e6:.1f}", f"{(b - a) / extra:.0f}"])
    total = (hi["current"] - lo["current"]) / extra
    body.append(["all traced (live)", f"{lo['current'] / 1e6:.1f}",
                 f"{hi['current'] / 1e6:.1f}", f"{total:.0f}"])  # fmt: skip
    body.append(["tracemalloc peak", f"{lo['peak'] / 1e6:.1f}", f"{hi['peak'] / 1e6:.1f}",
                 f"{(hi['peak'] - lo['peak']) / extra:.0f}"])  # fmt: skip
    body.append(["ru_maxrss", f"{lo['maxrss_kb'] / 1024:.1f}", f"{hi['maxrss_kb'] / 1024:.1f}",
                 f"{(hi['maxrss_kb'] - lo['maxrss_kb']) * 1024 / extra:.0f}"])  # fmt: skip
    for who, top in (("ours", 10), ("pytest", 8)):
        sites = sorted(
            (k for k in set(lo["lines"]) | set(hi["lines"]) if k.startswith(who)),
            key=lambda k: -(hi["lines"].get(k, 0) - lo["lines"].get(k, 0)),
        )[:top]
        for key in sites:
            grown = hi["lines"].get(key, 0) - lo["lines"].get(key, 0)
            if grown / extra >= 16:
                body.append([f"  {key}", "", "", f"{grown / extra:.0f}"])
    print(f"\n{mode}: live {when}, payload {args.payload} B, {args.frames} frames")
    print(table(["owner", f"MB @{small}", f"MB @{large}", "B/extra row"], body))


if __name__ == "__main__":
    main()
