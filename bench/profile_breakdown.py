"""Where a process spends its CPU, by owner: ours, the agent framework, LiteLLM, pytest, ...

Runs a command under ``py-spy record`` (raw collapsed stacks, all threads, idle excluded)
and attributes each sample to the owner of its innermost frame ("self" time), and also
reports inclusive time of our two packages (any frame of ours on the stack).

py-spy is not a project dependency: ``.venv/bin/pip install py-spy`` first.

    .venv/bin/python bench/profile_breakdown.py [--rate 250] [--top 15] -- CMD ARGS...
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import table

OWNERS = (
    ("ours: osmosis_rollout", "/osmosis_rollout/"),
    ("ours: pytest_osmosis", "/pytest_osmosis/"),
    ("official: osmosis_ai", "/osmosis_ai/"),
    ("litellm", "/litellm/"),
    ("openai-agents", "/agents/"),
    ("strands", "/strands/"),
    ("openai sdk", "/openai/"),
    ("pydantic", "/pydantic"),
    ("httpx/httpcore/h11/anyio", ("/httpx/", "/httpcore/", "/h11/", "/anyio/")),
    ("uvicorn/starlette/fastapi", ("/uvicorn/", "/starlette/", "/fastapi/")),
    ("pytest/pluggy", ("/_pytest/", "/pluggy/", "/pytest/")),
    ("opentelemetry", "/opentelemetry/"),
    ("asyncio", "/asyncio/"),
    ("json", "/json/"),
)
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def owner_of(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    path = match.group("file") if match else frame
    for name, needles in OWNERS:
        for needle in (needles,) if isinstance(needles, str) else needles:
            if needle in path:
                return name
    if "site-packages" in path:
        return "site-packages: " + path.split("site-packages/")[1].split("/")[0]
    if "/lib/python3" in path:
        return "stdlib (other)"
    return "other: " + Path(path).name


def _short(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame[:80]
    path = match.group("file")
    for marker in ("site-packages/", "/lib/python3.11/", "/lib/python3.12/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({path})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--functions", type=int, default=0, help="also list the top N frames")
    parser.add_argument("--pid", type=int, help="attach to this pid instead of running CMD")
    parser.add_argument("--duration", type=int, default=10, help="seconds, with --pid")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        base = [
            spy,
            "record",
            "-r",
            str(args.rate),
            "-f",
            "raw",
            "-o",
            str(raw),
            "--nonblocking",
            "--full-filenames",
        ]
        if args.pid:
            argv = [*base, "--pid", str(args.pid), "--duration", str(args.duration)]
        else:
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            argv = [*base, "--", *cmd]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        lines = raw.read_text().splitlines()
    self_time: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    ours_callers: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        self_time[owner_of(frames[-1])] += count
        functions[_short(frames[-1])] += count
        for frame in reversed(frames):  # the innermost frame of ours: who asked for the work
            if owner_of(frame).startswith("ours"):
                ours_callers[_short(frame)] += count
                break
        owners = {owner_of(f) for f in frames}
        for name in owners:
            if name.startswith("ours"):
                inclusive[name] += count
    print(f"{total} samples at {args.rate} Hz (active threads only)")
    print("self time by owner of the innermost frame:")
    print(
        table(
            ["owner", "samples", "%"],
            [[n, c, f"{100 * c / total:.1f}"] for n, c in self_time.most_common(args.top)],
        )
    )
    if args.functions:
        print("top frames (self):")
        rows = [[f, c, f"{100 * c / total:.1f}"] for f, c in functions.most_common(args.functions)]
        print(table(["frame", "samples", "%"], rows))
        print("innermost frame of ours on each stack (work our code asked for, any owner):")
        rows = [
            [f, c, f"{100 * c / total:.1f}"] for f, c in ours_callers.most_common(args.functions)
        ]
        print(table(["frame", "samples", "%"], rows))
    print("inclusive (a frame of ours anywhere on the stack):")
    print(
        table(
            ["owner", "samples", "%"],
            [[n, c, f"{100 * c / total:.1f}"] for n, c in sorted(inclusive.items())],
        )
    )


if __name__ == "__main__":
    main()
