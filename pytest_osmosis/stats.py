"""Per-row statistics over repeated attempts: pass@k, pass^k and the reward spread."""

from __future__ import annotations

import statistics
from typing import Any

from pytest_osmosis.verdict import RowVerdict


def row_stats(verdict: RowVerdict) -> dict[str, Any]:
    """Attempts, passes, flakiness, reward spread, and pass@k / pass^k for this row."""
    from osmosis_rollout.metrics import pass_at_k, pass_hat_k, powers_of_two

    n, c = verdict.scored_attempts, verdict.passed_attempts
    rewards = [a.reward for a in verdict.attempts if a.reward is not None]
    stats: dict[str, Any] = {
        "attempts": len(verdict.attempts),
        "passed_attempts": c,
        "scored_attempts": n,
        "flaky": 0 < c < n,
    }
    if rewards:
        stats["reward"] = {
            "mean": statistics.fmean(rewards),
            "min": min(rewards),
            "max": max(rewards),
            "std": statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
        }
    if n >= 2:
        ks = powers_of_two(n)
        stats["pass_at_k"] = {str(k): pass_at_k(n, c, k) for k in ks}
        stats["pass_hat_k"] = {str(k): pass_hat_k(n, c, k) for k in ks}
    return stats
