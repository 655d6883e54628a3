"""Gate decisions: the three-way pass-rate gate, the paired regression test, auto's rounds."""

from __future__ import annotations

import random

import pytest

from osmosis_rollout.runs.gating import (
    attempts_gate,
    auto_round,
    next_attempts,
    regression_test,
    rows_gate,
    summary_intervals,
)


def test_the_gate_passes_only_when_the_whole_interval_clears_the_threshold() -> None:
    assert rows_gate(95, 100, 0.80, 0.95).outcome == "passed"
    assert rows_gate(60, 100, 0.80, 0.95).outcome == "failed"
    undecided = rows_gate(81, 100, 0.80, 0.95)
    assert undecided.outcome == "undecided"
    assert undecided.describe() == (
        "gate: pass rate 81.0% [72.2%, 87.5%] vs 80%: undecided at 95%: add rows or attempts"
    )


def test_a_gate_on_no_scored_row_is_undecided_unless_the_threshold_is_zero() -> None:
    assert rows_gate(0, 0, 0.5, 0.95).outcome == "undecided"
    assert rows_gate(0, 0, 0.0, 0.95).outcome == "passed"


def test_repeats_narrow_the_attempt_pass_rate_interval() -> None:
    once = attempts_gate([(1, 1)] * 85 + [(0, 1)] * 15, 0.8, 0.95, anytime=False)
    eight = attempts_gate([(7, 8)] * 85 + [(6, 8)] * 15, 0.8, 0.95, anytime=False)
    assert once.interval.high - once.interval.low > 2 * (eight.interval.high - eight.interval.low)
    assert eight.estimate == pytest.approx((85 * 7 / 8 + 15 * 6 / 8) / 100)
    assert eight.describe().startswith("gate: attempt pass rate 85.6% [")


def test_looking_every_round_widens_the_interval() -> None:
    counts = [(3, 4)] * 100
    single = attempts_gate(counts, 0.8, 0.95, anytime=False).interval
    anytime = attempts_gate(counts, 0.8, 0.95, anytime=True).interval
    assert anytime.low < single.low and anytime.high > single.high
    assert anytime.method == "per-row mean, normal-mixture confidence sequence"


def test_a_row_whose_attempts_all_agreed_still_carries_doubt() -> None:
    interval = attempts_gate([(2, 2)] * 50, 0.99, 0.95, anytime=False).interval
    assert interval.low < 1.0


def test_auto_gives_the_least_measured_rows_the_next_attempts_in_row_order() -> None:
    counts = [(1, 2), (0, 1), (1, 1), (3, 3), (0, 8), (1, 1), (1, 2), (0, 1)]
    assert next_attempts(counts, max_n=8) == [1, 2]
    assert next_attempts([(8, 8), (3, 8)], max_n=8) == []


def test_auto_stops_adding_attempts_once_the_gate_is_decided() -> None:
    decided, more = auto_round([(1, 1)] * 100, 0.5, 0.95, 8)
    assert decided.outcome == "passed" and more == []
    undecided, more = auto_round([(1, 1)] * 80 + [(0, 1)] * 20, 0.8, 0.95, 8)
    assert undecided.outcome == "undecided" and len(more) == 25


def test_noise_between_two_runs_of_one_policy_is_not_a_regression() -> None:
    pairs = [((1, 1), (0, 1))] * 25 + [((0, 1), (1, 1))] * 26 + [((1, 1), (1, 1))] * 149
    test = regression_test(pairs, 0.95)
    assert (test.worse, test.better, test.p_value, test.significant) == (25, 26, 1.0, False)
    assert test.method == "exact McNemar"
    assert test.describe() == "regressions: 25 rows worse, 26 better: not significant (p = 1.00)"


def test_a_real_drop_is_a_significant_regression() -> None:
    pairs = [((1, 1), (0, 1))] * 40 + [((0, 1), (1, 1))] * 10 + [((1, 1), (1, 1))] * 150
    test = regression_test(pairs, 0.95)
    assert test.regressed
    assert test.describe().startswith(
        "regressions: 40 rows worse, 10 better: a significant regression (p = "
    )


def test_repeats_compare_each_rows_pass_fraction() -> None:
    pairs = [((4, 4), (3, 4))] * 12 + [((2, 4), (2, 4))] * 5 + [((0, 4), (1, 4))]
    test = regression_test(pairs, 0.95)
    assert (test.worse, test.better) == (12, 1)
    assert test.method == "sign test on per-row pass fractions"
    assert test.regressed


def test_unequal_attempts_are_compared_by_the_mean_change_not_by_signs() -> None:
    """Baseline once a row, now eight times: a 0.9 row "falls" from 1/1 to 7/8 far more often
    than it "rises" from 0/1, so counting signs would call an unchanged policy a regression."""
    rng = random.Random(3)
    runs, fired, signs_fired = 200, 0, 0
    for _ in range(runs):
        pairs = [
            ((int(rng.random() < 0.9), 1), (sum(rng.random() < 0.9 for _ in range(8)), 8))
            for _ in range(100)
        ]
        test = regression_test(pairs, 0.95)
        assert test.method == "paired t-test on per-row pass fractions"
        fired += test.regressed
        signs_fired += test.worse > 2 * test.better
    assert fired / runs <= 0.05
    assert signs_fired / runs > 0.9


def test_an_unchanged_policy_fires_the_regression_test_at_most_at_its_error_rate() -> None:
    rng = random.Random(1)
    runs, fired = 300, 0
    for _ in range(runs):
        pairs = [((int(rng.random() < 0.85), 1), (int(rng.random() < 0.85), 1)) for _ in range(200)]
        fired += regression_test(pairs, 0.95).regressed
    assert fired / runs <= 0.05


def test_a_summary_gains_intervals_for_its_rates_and_mean_reward() -> None:
    summary = {
        "passed": 33,
        "completed_samples": 40,
        "graded": 40,
        "rows": {"passed": 8, "failed": 2, "total": 10},
        "reward_stats": {"mean": 0.8, "std": 0.4, "median": 1.0, "min": 0.0, "max": 1.0},
    }
    extra = summary_intervals(summary, 0.9)
    assert extra["pass_rate_interval"]["method"] == "wilson"
    assert extra["pass_rate_interval"]["confidence"] == 0.9
    assert extra["rows"]["total"] == 10
    assert (
        extra["rows"]["pass_rate_interval"]["low"]
        < 0.8
        < extra["rows"]["pass_rate_interval"]["high"]
    )
    mean = extra["reward_stats"]["mean_interval"]
    assert mean["method"] == "t" and mean["low"] < 0.8 < mean["high"]
