"""Attribute one thread's samples in a py-spy raw profile (``-f raw``) to owners.

Each sample is charged to the innermost frame outside the standard library: our packages
(``osmosis_rollout``, ``pytest_osmosis``), another top-level package (``agents``,
``pydantic``, ``anyio``...) or the example rollout. A sample whose leaf is a selector/lock
wait is ``idle/wait``; a sample under an import gets `` [import]``.

    .venv/bin/py-spy record --idle --threads -r 200 -f raw -o prof.txt -- <command>
    .venv/bin/python bench/pyspy_owners.py prof.txt osmosis-rollouts [--rate 200]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

FRAME = re.compile(r"\((.*?):\d+\)$")
IDLE = ("select (", "poll (", "wait (", "sleep")


def owner(frames: list[str]) -> str:
    """The innermost non-stdlib owner of a stack (frames outermost first)."""
    for frame in reversed(frames):
        match = FRAME.search(frame)
        name = match.group(1) if match else frame
        if "osmosis_rollout/" in name:
            return "ours: osmosis_rollout"
        if "pytest_osmosis/" in name:
            return "ours: pytest_osmosis"
        if "_pytest/" in name:
            return "pytest"
        if "site-packages/" in name:
            return name.split("site-packages/", 1)[1].split("/", 1)[0]
        if "rollouts/" in name:
            return "example rollout"
        if name.startswith("<"):
            continue
        top = name.lstrip("/").split("/")[0].removesuffix(".py")
        if top in sys.stdlib_module_names or top.startswith("_") or "python3" in name:
            continue
        return top
    return "stdlib only"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile")
    parser.add_argument("thread", help="substring of the thread label, e.g. osmosis-rollouts")
    parser.add_argument("--rate", type=int, default=200, help="py-spy sampling rate (Hz)")
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    with open(args.profile) as fh:
        for line in fh:
            stack, n = line.rsplit(" ", 1)
            frames = stack.split(";")
            if args.thread not in frames[0]:
                continue
            if any(k in frames[-1] for k in IDLE):
                label = "idle/wait"
            else:
                label = owner(frames[1:])
                if any("_find_and_load" in f for f in frames):
                    label += " [import]"
            counts[label] += int(n)
    total = sum(counts.values())
    print(f"{args.thread}: {total} samples = {total / args.rate:.3f} s at {args.rate} Hz")
    for label, n in counts.most_common():
        print(f"{n / args.rate * 1000:7.0f} ms  {100 * n / max(total, 1):5.1f}%  {label}")


if __name__ == "__main__":
    main()
