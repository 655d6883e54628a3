"""Run metrics: the platform summary keys, pass@k and pass^k."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from osmosis_rollout.runs.metrics import aggregate, pass_at_k, pass_hat_k, powers_of_two, row_stats


def _row(
    row_index: int,
    run_index: int = 0,
    status: str = "success",
    reward: Any = None,
    tokens: Any = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {"row_index": row_index, "run_index": run_index, "status": status}
    if reward is not None:
        row["reward"] = reward
    if tokens is not None:
        row["tokens"] = tokens
    return row


def test_summary_has_the_platform_keys() -> None:
    summary = aggregate([_row(0, reward=1.0, tokens=5), _row(1, reward=0.0)], 1.0)
    assert summary == {
        "total_samples": 2,
        "completed_samples": 2,
        "graded": 2,
        "passed": 1,
        "failed": 0,
        "skipped": 0,
        "pass_rate": 0.5,
        "pass_threshold": 1.0,
        "tokens_used": 5,
        "reward_stats": {"mean": 0.5, "median": 0.5, "std": 0.5, "min": 0.0, "max": 1.0},
    }


def test_pass_rate_excludes_skipped_from_scored() -> None:
    summary = aggregate([_row(0, reward=1.0), _row(1, status="skipped"), _row(2, reward=0.0)], 1.0)
    assert (summary["completed_samples"], summary["skipped"]) == (2, 1)
    assert summary["pass_rate"] == 0.5


def test_passed_uses_a_greater_or_equal_threshold() -> None:
    rows = [_row(0, reward=0.5), _row(1, reward=0.49999), _row(2, reward=0.9)]
    assert aggregate(rows, 0.5)["passed"] == 2


def test_a_zero_threshold_passes_every_graded_row_but_not_reward_less_ones() -> None:
    rows = [_row(0, reward=0.0), _row(1, reward=-0.0), _row(2, status="failed")]
    assert aggregate(rows, 0.0)["passed"] == 2


def test_a_failed_row_without_a_reward_is_not_graded() -> None:
    summary = aggregate([_row(0, status="failed"), _row(1, reward=1.0)], 1.0)
    assert (summary["graded"], summary["failed"]) == (1, 1)


def test_reward_less_failures_stay_in_the_pass_rate_denominator() -> None:
    rows = [_row(0, reward=1.0)] + [_row(i, status="failed") for i in range(1, 4)]
    assert aggregate(rows, 1.0)["pass_rate"] == 0.25


def test_skipped_rows_are_the_only_thing_excluded_from_scored() -> None:
    rows = [
        _row(0, status="skipped"),
        _row(1, status="failed"),
        _row(2, status="failed", reward=1.0),  # a reward on a failure still counts as a pass
        _row(3, status="success"),
    ]
    summary = aggregate(rows, 1.0)
    assert (summary["completed_samples"], summary["passed"]) == (3, 1)


def test_tokens_are_summed_across_every_row() -> None:
    rows = [_row(0, tokens=10), _row(1, status="skipped", tokens=5), _row(2, tokens=True)]
    assert aggregate(rows, 1.0)["tokens_used"] == 15  # skipped included, booleans ignored


def test_reward_stats_use_the_population_deviation() -> None:
    stats = aggregate([_row(i, reward=r) for i, r in enumerate([1.0, 2.0, 4.0])], 1.0)[
        "reward_stats"
    ]
    assert stats["std"] == pytest.approx(statistics.pstdev([1.0, 2.0, 4.0]))
    assert (stats["median"], stats["min"], stats["max"]) == (2.0, 1.0, 4.0)


def test_a_single_reward_has_zero_deviation() -> None:
    assert aggregate([_row(0, reward=0.3)], 1.0)["reward_stats"]["std"] == 0.0


def test_reward_stats_are_absent_without_rewards() -> None:
    assert "reward_stats" not in aggregate([_row(0, status="failed")], 1.0)


@pytest.mark.parametrize("reward", [True, "1.0", float("nan"), float("inf")])
def test_non_numeric_or_non_finite_rewards_count_as_no_reward(reward: Any) -> None:
    summary = aggregate([_row(0, reward=reward)], 0.0)
    assert (summary["graded"], summary["passed"]) == (0, 0)


def test_an_empty_index_aggregates_without_dividing_by_zero() -> None:
    summary = aggregate([], 1.0)
    assert summary["pass_rate"] == 0 and isinstance(summary["pass_rate"], int)
    assert summary["total_samples"] == 0
    assert "reward_stats" not in summary and "n_runs" not in summary


def test_single_attempt_runs_have_no_pass_at_k() -> None:
    summary = aggregate([_row(i, reward=1.0) for i in range(5)], 1.0)
    assert "n_runs" not in summary and "pass_at_k" not in summary and "pass_hat_k" not in summary


def test_pass_at_k_is_reported_for_multi_attempt_runs() -> None:
    # Row 0 passes 1 of 4 attempts, row 1 passes all 4.
    rows = [_row(0, run, reward=1.0 if run == 0 else 0.0) for run in range(4)]
    rows += [_row(1, run, reward=1.0) for run in range(4)]
    summary = aggregate(rows, 1.0)
    assert summary["n_runs"] == 4
    assert summary["pass_at_k"] == {
        "1": pytest.approx((0.25 + 1.0) / 2),
        "2": pytest.approx((0.5 + 1.0) / 2),
        "4": pytest.approx(1.0),
    }
    assert summary["pass_hat_k"] == {
        "1": pytest.approx((0.25 + 1.0) / 2),
        "2": pytest.approx((0.0 + 1.0) / 2),
        "4": pytest.approx((0.0 + 1.0) / 2),
    }


def test_pass_at_k_needs_two_points() -> None:
    # run_index 1 only on a skipped row: n_runs is 2 but no row has two scored attempts.
    rows = [_row(0, 0, reward=1.0), _row(0, 1, status="skipped")]
    summary = aggregate(rows, 1.0)
    assert summary["n_runs"] == 2
    assert "pass_at_k" not in summary and "pass_hat_k" not in summary


def test_pass_at_k_counts_a_reward_less_failure_as_a_non_pass() -> None:
    rows = [_row(0, 0, reward=1.0), _row(0, 1, status="failed")]
    assert aggregate(rows, 1.0)["pass_at_k"] == {"1": 0.5, "2": 1.0}


def test_unbiased_pass_at_k() -> None:
    for n, c, k in [(10, 3, 1), (10, 3, 5), (20, 0, 4), (7, 7, 3), (5, 2, 4)]:
        expected = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_k_beyond_the_attempt_count() -> None:
    with pytest.raises(ValueError, match="exceeds the attempt count"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="exceeds the attempt count"):
        pass_hat_k(3, 1, 4)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0)])
def test_invalid_counts_are_rejected(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_hat_k_is_the_chance_all_k_attempts_pass() -> None:
    assert pass_hat_k(10, 3, 2) == pytest.approx(math.comb(3, 2) / math.comb(10, 2))
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_hat_k(4, 3, 4) == 0.0


def test_powers_of_two_stop_at_the_limit() -> None:
    assert powers_of_two(0) == []
    assert powers_of_two(8) == [1, 2, 4, 8]
    assert powers_of_two(11) == [1, 2, 4, 8]


def test_row_stats_summarise_one_rows_repeats() -> None:
    stats = row_stats([1.0, None, 0.0, 1.0], [True, False, False, True])
    assert (stats["attempts"], stats["scored_attempts"], stats["passed_attempts"]) == (4, 4, 2)
    assert stats["flaky"] is True
    assert stats["pass_at_k"] == {
        "1": pytest.approx(0.5),
        "2": pytest.approx(5 / 6),
        "4": pytest.approx(1.0),
    }
    assert stats["pass_hat_k"] == {
        "1": pytest.approx(0.5),
        "2": pytest.approx(1 / 6),
        "4": pytest.approx(0.0),
    }
    assert stats["reward"] == {
        "mean": pytest.approx(2 / 3),
        "median": 1.0,
        "std": pytest.approx(statistics.pstdev([1.0, 0.0, 1.0])),
        "min": 0.0,
        "max": 1.0,
    }


def test_row_stats_leave_skipped_attempts_out_of_the_denominator() -> None:
    stats = row_stats([1.0, None, 1.0], [True, None, True])
    assert (stats["attempts"], stats["scored_attempts"], stats["passed_attempts"]) == (3, 2, 2)
    assert stats["flaky"] is False
    assert stats["pass_at_k"] == {"1": 1.0, "2": 1.0}


def test_row_stats_leave_out_k_beyond_the_attempts() -> None:
    stats = row_stats([1.0, 1.0, 0.0], [True, True, False], ks=[1, 3, 5])
    assert set(stats["pass_at_k"]) == {"1", "3"}


def test_row_stats_of_one_attempt_have_no_curves_and_no_reward_without_one() -> None:
    stats = row_stats([None], [False])
    assert stats == {
        "attempts": 1,
        "passed_attempts": 0,
        "scored_attempts": 1,
        "flaky": False,
    }
    empty = row_stats([], [])
    assert (empty["attempts"], empty["scored_attempts"]) == (0, 0)
    assert "pass_at_k" not in empty and "reward" not in empty


def test_row_stats_reject_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="2 rewards but 1 pass flags"):
        row_stats([1.0, 0.0], [True])


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 40))
def test_pass_curves_are_probabilities_ordered_by_k(data: st.DataObject, n: int) -> None:
    c = data.draw(st.integers(0, n))
    at = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    hat = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert at[0] == pytest.approx(c / n) and hat[0] == pytest.approx(c / n)
    assert all(0.0 <= value <= 1.0 for value in at + hat)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(at))  # more tries, more pass@k
    assert all(a + 1e-12 >= b for a, b in itertools.pairwise(hat))  # harder to pass all
    assert all(h <= a + 1e-12 for h, a in zip(hat, at, strict=True))
