"""Run metrics from per-attempt results: pass rate, reward statistics, pass@k and pass^k.

:func:`aggregate` reproduces the platform's ``metrics.json`` ``summary`` from
``index.jsonl``-shaped rows (``row_index``, ``run_index``, ``status`` of
``success|failed|skipped``, ``reward``, ``tokens``), so a local number agrees with the
one the platform shows. Beyond the platform it adds ``pass_hat_k`` (pass^k: the chance
that *all* k attempts pass). :func:`row_stats` gives the same numbers for one row's repeats.

Rules worth knowing: only skipped rows leave the pass-rate denominator (a failure with no
reward counts as a non-pass); a reward passes when ``reward >= pass_threshold``; a
non-numeric, boolean or non-finite reward counts as no reward.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["aggregate", "pass_at_k", "pass_hat_k", "powers_of_two", "reward_stats", "row_stats"]


def _check_counts(n: int, c: int, k: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"k={k} exceeds the attempt count n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): the chance at least one of k attempts passes.

    ``n`` attempts, ``c`` of them passed: ``1 - C(n-c, k) / C(n, k)``, computed as a
    product for stability. Raises :class:`ValueError` when ``k > n`` (or counts are invalid).
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    all_fail = 1.0
    for i in range(k):
        all_fail *= (n - c - i) / (n - i)
    return 1.0 - all_fail


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k: the chance that all k attempts pass, ``C(c, k) / C(n, k)``.

    Raises :class:`ValueError` when ``k > n`` (or counts are invalid).
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``: the k values reported for ``limit`` attempts."""
    return [1 << i for i in range(max(limit, 0).bit_length())]


def _reward(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    reward = float(value)
    return reward if math.isfinite(reward) else None


def reward_stats(rewards: Iterable[float | None]) -> dict[str, float] | None:
    """``{mean, median, std, min, max}`` over the numeric rewards, or ``None`` if there are none.

    ``std`` is the population standard deviation (0.0 for a single reward).
    """
    values = [r for r in (_reward(value) for value in rewards) if r is not None]
    if not values:
        return None
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def _curves(
    counts: Iterable[tuple[int, int]], ks: Iterable[int]
) -> tuple[dict[str, float], dict[str, float]]:
    """Mean pass@k and pass^k per k over rows with at least k attempts."""
    rows = list(counts)
    at_k: dict[str, float] = {}
    hat_k: dict[str, float] = {}
    for k in ks:
        eligible = [(n, c) for n, c in rows if n >= k]
        if eligible:
            at_k[str(k)] = statistics.fmean(pass_at_k(n, c, k) for n, c in eligible)
            hat_k[str(k)] = statistics.fmean(pass_hat_k(n, c, k) for n, c in eligible)
    return at_k, hat_k


def aggregate(rows: Iterable[Mapping[str, Any]], pass_threshold: float = 1.0) -> dict[str, Any]:
    """The ``metrics.json`` summary for a run's attempt rows.

    Keys: ``total_samples``, ``completed_samples`` (non-skipped), ``graded`` (with a
    reward), ``passed``, ``failed`` (status failed), ``skipped``, ``pass_rate``
    (passed / completed, integer 0 when nothing completed), ``pass_threshold``,
    ``tokens_used`` (every row, skipped included), ``reward_stats`` (only when a reward
    exists). When ``n_runs = max run_index + 1`` is at least 2 and two or more k values
    (1, 2, 4, ...) have an eligible row: ``n_runs``, ``pass_at_k`` and ``pass_hat_k`` as
    ``{"1": x, "2": y, ...}``.
    """
    attempts: dict[Any, list[int]] = {}  # row_index -> [attempts, passes]
    rewards: list[float] = []
    total = passed = failed = skipped = tokens_used = 0
    max_run_index = -1
    for row in rows:
        total += 1
        run_index = row.get("run_index")
        if isinstance(run_index, int) and not isinstance(run_index, bool):
            max_run_index = max(max_run_index, run_index)
        tokens = row.get("tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            tokens_used += tokens
        status = row.get("status")
        if status == "skipped":
            skipped += 1
            continue
        if status == "failed":
            failed += 1
        reward = _reward(row.get("reward"))
        is_pass = reward is not None and reward >= pass_threshold
        if reward is not None:
            rewards.append(reward)
        passed += is_pass
        row_index = row.get("row_index")
        if isinstance(row_index, int) and not isinstance(row_index, bool):
            counts = attempts.setdefault(row_index, [0, 0])
            counts[0] += 1
            counts[1] += is_pass

    completed = total - skipped
    summary: dict[str, Any] = {
        "total_samples": total,
        "completed_samples": completed,
        "graded": len(rewards),
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
        "pass_rate": passed / completed if completed else 0,
        "pass_threshold": pass_threshold,
        "tokens_used": tokens_used,
    }
    stats = reward_stats(rewards)
    if stats is not None:
        summary["reward_stats"] = stats
    n_runs = max_run_index + 1
    if n_runs >= 2:
        summary["n_runs"] = n_runs
        at_k, hat_k = _curves(
            ((attempts[key][0], attempts[key][1]) for key in sorted(attempts)),
            powers_of_two(n_runs),
        )
        # A single point is not a curve: the platform reports pass@k only with two or more.
        if len(at_k) >= 2:
            summary["pass_at_k"] = at_k
            summary["pass_hat_k"] = hat_k
    return summary


def row_stats(
    rewards: Sequence[float | None], passes: Sequence[bool | None], ks: Iterable[int] | None = None
) -> dict[str, Any]:
    """Statistics over one row's repeated attempts (the report's per-row stats).

    ``passes[i]`` says whether attempt ``i`` passed, or is ``None`` when it was skipped (the
    grader removed its sample: it leaves the denominator); ``rewards[i]`` is its reward or
    ``None``. Keys: ``attempts`` (all), ``scored_attempts`` (not skipped),
    ``passed_attempts``, ``flaky`` (some but not all scored attempts passed); ``reward``
    (:func:`reward_stats`) when any attempt has a numeric reward; ``pass_at_k`` and
    ``pass_hat_k`` (``{"1": x, "2": y, ...}``) when two or more attempts were scored, for
    ``ks`` (default 1, 2, 4, ... up to the scored count; larger k values are left out).
    """
    if len(rewards) != len(passes):
        raise ValueError(f"got {len(rewards)} rewards but {len(passes)} pass flags")
    scored = [passed for passed in passes if passed is not None]
    n, c = len(scored), sum(1 for passed in scored if passed)
    stats: dict[str, Any] = {
        "attempts": len(passes),
        "passed_attempts": c,
        "scored_attempts": n,
        "flaky": 0 < c < n,
    }
    reward = reward_stats(rewards)
    if reward is not None:
        stats["reward"] = reward
    if n >= 2:
        wanted = powers_of_two(n) if ks is None else sorted({k for k in ks if 1 <= k <= n})
        stats["pass_at_k"], stats["pass_hat_k"] = _curves([(n, c)], wanted)
    return stats
