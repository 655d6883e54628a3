"""How a report's numbers read, in every place a user reads them: the terminal summary, the
markdown summary and the HTML page say a cost, an interval or a baseline change the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from osmosis_rollout.runs.gating import percent

__all__ = ["baseline_counts", "format_cost", "interval_text", "ungraded_line"]


def format_cost(cost: float) -> str:
    """US dollars with enough digits to see small amounts: ``$0.0042``, ``$1.23``."""
    if cost >= 1:
        return f"${cost:,.2f}"
    if cost >= 0.01:
        return f"${cost:.3f}"
    return f"${cost:.4f}"


def interval_text(interval: Any, fmt: str = "{:.1%}") -> str:
    """`` [74.1%, 88.6%] (95%)`` for a report's ``{low, high, confidence}``, else nothing."""
    if not isinstance(interval, dict):
        return ""
    low, high = fmt.format(interval["low"]), fmt.format(interval["high"])
    return f" [{low}, {high}] ({percent(interval['confidence'])})"


def baseline_counts(baseline: dict[str, Any]) -> str:
    """``1 regressed, 2 improved, 0 new, 0 gone``: the rows that changed against a baseline."""
    changes = ("regressed", "improved", "new", "gone")
    return ", ".join(f"{len(baseline.get(key) or [])} {key}" for key in changes)


UNGRADED_WHY = {
    "no_grader": "{entrypoint} defines no Grader",
    "no_label": "rows with no ground_truth or metadata: the grader did not run",
    "not_graded": "the grader set no reward",
}


def ungraded_line(summary: dict[str, Any], entrypoint: str | None) -> str | None:
    """``ungraded: 8 rows (rollouts/x/main.py defines no Grader)``, or None when every row
    that ran was graded."""
    count = (summary.get("rows") or {}).get("ungraded") or 0
    if not count:
        return None
    shown = _relative(entrypoint) if entrypoint else "the rollout"
    whys = summary.get("ungraded_why") or ["not_graded"]
    why = "; ".join(UNGRADED_WHY.get(w, w).format(entrypoint=shown) for w in whys)
    return f"ungraded: {count} row{'' if count == 1 else 's'} ({why})"


def _relative(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path.cwd()).as_posix()
    except (ValueError, OSError):
        return path
