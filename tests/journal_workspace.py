"""A workspace whose rows say what their rollout does: wait for the journal, hang, exit.

Each row's prompt is a list of steps the workflow follows, e.g. ``"after 3; answer"``:

- ``after N``: wait (at most 60 s) until ``out/rows.jsonl`` holds N lines;
- ``hang``: sleep 120 s (a rollout that is still running when the run stops);
- ``exit``: ``os._exit(3)`` (the whole process dies, as with an OOM kill);
- ``wrong``: answer something other than the label;
- ``write-file PATH``: create a plain file at PATH (to break an output path mid-run);
- ``once-exit``: ``os._exit(3)`` unless ``exited.flag`` exists (then just answer);
- ``wait-for FILE``: wait (at most 60 s) until FILE exists;
- ``raise-unless FILE``: raise ``RuntimeError`` (the row errors) unless FILE exists.

Every rollout that starts appends its row key to ``executed.txt`` (outside the run
directory), so a test can tell which rows a run really executed.
"""

from __future__ import annotations

import json
from pathlib import Path

MAIN_PY = """
import asyncio
import os
import re
from pathlib import Path

from osmosis_rollout import AgentWorkflow, Grader

OUT = Path(os.environ.get("JOURNAL_TEST_OUT", "out"))


def journaled() -> int:
    try:
        return len((OUT / "rows.jsonl").read_text().splitlines())
    except FileNotFoundError:
        return 0


class Steps(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        with open("executed.txt", "a") as fh:
            fh.write(text.split(":", 1)[0] + "\\n")
        match = re.search(r"after (\\d+)", text)
        if match:
            for _ in range(600):
                if journaled() >= int(match.group(1)):
                    break
                await asyncio.sleep(0.1)
            else:
                return [*ctx.prompt, {"role": "assistant", "content": "the journal never got there"}]
        match = re.search(r"wait-for (\\S+)", text)
        if match:
            for _ in range(600):
                if Path(match.group(1)).exists():
                    break
                await asyncio.sleep(0.1)
        match = re.search(r"raise-unless (\\S+)", text)
        if match and not Path(match.group(1)).exists():
            raise RuntimeError("the server went away")
        match = re.search(r"write-file (\\S+)", text)
        if match:
            Path(match.group(1)).parent.mkdir(parents=True, exist_ok=True)
            Path(match.group(1)).write_text("in the way")
        if "once-exit" in text:
            if not Path("exited.flag").exists():
                Path("exited.flag").write_text("1")
                os._exit(3)
        elif "exit" in text:
            os._exit(3)
        if "hang" in text:
            await asyncio.sleep(120)
        answer = "no" if "wrong" in text else "ok"
        return [*ctx.prompt, {"role": "assistant", "content": answer}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""

POLICY_PY = """
def policy(request):
    return "unused"
"""


def write_workspace(root: Path, steps: list[str]) -> Path:
    """rollouts/steps/main.py, policy.py and data/test.jsonl with one row per step list."""
    (root / "rollouts" / "steps").mkdir(parents=True, exist_ok=True)
    (root / "rollouts" / "steps" / "main.py").write_text(MAIN_PY, encoding="utf-8")
    (root / "policy.py").write_text(POLICY_PY, encoding="utf-8")
    (root / "data").mkdir(exist_ok=True)
    rows = [{"user_prompt": f"row-{i}: {s}", "ground_truth": "ok"} for i, s in enumerate(steps)]
    (root / "data" / "test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    return root


def executed(root: Path) -> list[str]:
    """The rows whose rollouts started, in start order."""
    path = root / "executed.txt"
    return path.read_text().split() if path.exists() else []


def row_ids(indices: range | list[int]) -> list[str]:
    """The node ids of rows ``indices`` of data/test.jsonl."""
    return [f"data/test.jsonl::row-{i}" for i in indices]


def journal_lines(out: Path) -> list[dict[str, object]]:
    """The parsed lines of ``out/rows.jsonl`` (empty when it does not exist)."""
    path = out / "rows.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
