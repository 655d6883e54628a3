"""The HTML report's cost per row: the table that says why each row failed (issue 35) vs before.

The same synthetic report rendered by two trees' ``osmosis_rollout/runs/html.py``, side by side in one run:
``before`` (``--before-rev``, default the merge base with ``main``, read with ``git show``)
and ``after`` (this checkout). Each row has one attempt with a trajectory file on disk (a
user prompt, an agent answer with a tool call and its result, the label); one row in five
errored (message, prompt, printed output), the others carry a grader reason. Trees
alternate, ``--repeats`` times. Reported: render time per row and page bytes per row
(medians), and after/before.

    .venv/bin/python bench/bench_html_rows.py [--rows 5000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import REPO, machine, median, table

# Where the page lives since it moved beside the report it renders; a ``--before-rev`` older
# than that move has the page at pytest_osmosis/results/html.py and cannot be loaded here.
HTML = "osmosis_rollout/runs/html.py"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def document(root: Path, rows: int) -> dict[str, Any]:
    """A report of ``rows`` rows, each with a trajectory written under ``root``."""
    attempts, verdicts = [], []
    for i in range(rows):
        key = f"row-{i}"
        path = root / f"{key}.json"
        steps = [
            {"source": "user", "message": f"What is {i} times 7? Use the tool."},
            {
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {"tool_call_id": "c1", "function_name": "multiply", "arguments": {"a": i}}
                ],
                "observation": {"results": [{"source_call_id": "c1", "content": str(7 * i)}]},
            },
            {"source": "agent", "message": f"The answer is {7 * i}."},
        ]
        extra = {"osmosis": {"label": str(7 * i), "reward": 1.0}}
        path.write_text(json.dumps({"steps": steps, "extra": extra}), encoding="utf-8")
        errored = i % 5 == 0
        attempts.append(
            {
                "nodeid": f"data/test.jsonl::{key}",
                "row_key": key,
                "run_index": 0,
                "rollout_id": f"{key}.0.abcd",
                "status": "failed" if errored else "success",
                "reward": None if errored else float(i % 2),
                "passed": not errored and i % 2 == 1,
                "error_type": "agent_error" if errored else None,
                "err_message": "ValueError: the tool said no" if errored else None,
                "prompt": f"What is {i} times 7?" if errored else None,
                "printed": "calling the model\n" * 5 if errored else None,
                "grader": None if errored else {"reason": f"expected {7 * i}, got it wrong"},
                "last_assistant": f"The answer is {7 * i}.",
                "tokens": 120,
                "duration_ms": 800.0,
                "trajectory_filename": str(path),
            }
        )
        verdicts.append(
            {
                "nodeid": f"data/test.jsonl::{key}",
                "row_key": key,
                "verdict": "passed" if attempts[-1]["passed"] else "failed",
            }
        )
    summary = {"rows": {"total": rows, "pass_rate": 0.4}, "pass_threshold": 1.0}
    return {"summary": summary, "rows": attempts, "row_verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before-rev", default=None, help="default: merge base with main")
    args = parser.parse_args()
    rev = (
        args.before_rev
        or subprocess.check_output(
            ["git", "merge-base", "HEAD", "main"], cwd=REPO, text=True
        ).strip()
    )
    print(machine())
    print(f"before: {rev[:12]}; after: {REPO} (working tree); {args.rows} rows")
    with tempfile.TemporaryDirectory(prefix="bench-html-") as tmp:
        before_file = Path(tmp) / "html_before.py"
        before_file.write_text(
            subprocess.check_output(["git", "show", f"{rev}:{HTML}"], cwd=REPO, text=True)
        )
        trees = {
            "before": load(before_file, "html_before"),
            "after": load(REPO / HTML, "html_after"),
        }
        doc = document(Path(tmp), args.rows)
        seconds: dict[str, list[float]] = {name: [] for name in trees}
        sizes: dict[str, int] = {}
        for repeat in range(args.repeats):
            order = list(trees) if repeat % 2 == 0 else list(reversed(trees))
            for name in order:
                started = time.perf_counter()
                page = trees[name].render(doc)
                seconds[name].append(time.perf_counter() - started)
                sizes[name] = len(page.encode("utf-8"))
    rows = [
        [
            name,
            f"{1e6 * median(seconds[name]) / args.rows:.0f}",
            f"{sizes[name] / args.rows:.0f}",
        ]
        for name in trees
    ]
    rows.append(
        [
            "after/before",
            f"{median(seconds['after']) / median(seconds['before']):.2f}",
            f"{sizes['after'] / sizes['before']:.2f}",
        ]
    )
    print(table(["tree", "render us/row", "page bytes/row"], rows))


if __name__ == "__main__":
    main()
