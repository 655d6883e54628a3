"""osmosis_rollout.runs.stats agrees with scipy's implementations, and its confidence sequences hold
at every look."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special
from scipy import stats as sp

from osmosis_rollout.runs import stats

confidences = st.sampled_from([0.8, 0.9, 0.95, 0.99])


@st.composite
def counts(draw: st.DrawFn, max_trials: int = 400) -> tuple[int, int]:
    trials = draw(st.integers(1, max_trials))
    return draw(st.integers(0, trials)), trials


@given(counts(), confidences)
def test_the_wilson_interval_is_scipys(pair: tuple[int, int], confidence: float) -> None:
    successes, trials = pair
    ours = stats.wilson_interval(successes, trials, confidence)
    theirs = sp.binomtest(successes, trials).proportion_ci(confidence, method="wilson")
    assert ours.low == pytest.approx(theirs.low, abs=1e-12)
    assert ours.high == pytest.approx(theirs.high, abs=1e-12)
    assert ours.contains(successes / trials)


def test_no_trials_leave_every_rate_possible() -> None:
    assert stats.wilson_interval(0, 0).as_dict() == {
        "low": 0.0,
        "high": 1.0,
        "confidence": 0.95,
        "method": "wilson",
    }


@given(st.floats(0.001, 0.999), st.floats(0.5, 200))
def test_the_t_quantile_is_scipys(p: float, df: float) -> None:
    assert stats.student_t_quantile(p, df) == pytest.approx(sp.t.ppf(p, df), rel=1e-9, abs=1e-9)


@given(st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.floats(0.0, 1.0))
def test_the_regularized_beta_is_scipys(a_scale: float, b_scale: float, x: float) -> None:
    a, b = a_scale * 50, b_scale * 50
    assert stats.regularized_beta(a, b, x) == pytest.approx(
        special.betainc(a, b, x), rel=1e-9, abs=1e-12
    )


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=60), confidences)
def test_the_mean_interval_is_scipys_t_interval(values: list[float], confidence: float) -> None:
    ours = stats.mean_interval(values, confidence)
    assert ours is not None
    if np.std(values) == 0:
        assert ours.low == pytest.approx(ours.high)
        return
    low, high = sp.t.interval(
        confidence, len(values) - 1, loc=np.mean(values), scale=sp.sem(values)
    )
    assert ours.low == pytest.approx(low, rel=1e-7, abs=1e-9)
    assert ours.high == pytest.approx(high, rel=1e-7, abs=1e-9)
    moments = stats.mean_interval_from_moments(
        float(np.mean(values)), float(np.std(values)), len(values), confidence
    )
    assert moments is not None
    assert moments.low == pytest.approx(low, rel=1e-7, abs=1e-9)


def test_one_value_has_no_mean_interval() -> None:
    assert stats.mean_interval([0.5]) is None


@given(st.integers(0, 300), st.integers(0, 300))
def test_the_exact_mcnemar_test_is_scipys_binomial_test(worse: int, better: int) -> None:
    ours = stats.mcnemar_exact(worse, better)
    if worse + better == 0:
        assert ours == 1.0
        return
    assert ours == pytest.approx(sp.binomtest(worse, worse + better, 0.5).pvalue, rel=1e-9)


def test_noise_between_two_runs_is_not_a_regression() -> None:
    # The run: 25 rows worse and 26 better between two runs of the same policy.
    assert stats.mcnemar_exact(25, 26) == 1.0
    assert stats.mcnemar_exact(40, 10) < 1e-4


@given(st.lists(st.integers(-8, 8).map(lambda k: k / 8), max_size=60))
def test_the_sign_test_counts_signs_like_scipy(differences: list[float]) -> None:
    negative = sum(d < 0 for d in differences)
    positive = sum(d > 0 for d in differences)
    expected = (
        1.0 if negative + positive == 0 else sp.binomtest(negative, negative + positive).pvalue
    )
    assert stats.sign_test(differences) == pytest.approx(expected, rel=1e-9)


@given(st.lists(st.integers(-8, 8).map(lambda k: k / 8), min_size=2, max_size=80))
def test_the_paired_t_test_is_scipys(differences: list[float]) -> None:
    ours = stats.paired_t_test(differences)
    if np.std(differences) == 0:
        assert ours == (1.0 if differences[0] == 0 else 0.0)
        return
    assert ours == pytest.approx(sp.ttest_1samp(differences, 0.0).pvalue, rel=1e-7, abs=1e-12)


def _scipy_sign_flip(differences: list[float], resamples: float) -> float:
    result = sp.permutation_test(
        (np.array(differences),),
        lambda x, axis: np.sum(x, axis=axis),
        permutation_type="samples",
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(0),
    )
    return float(result.pvalue)


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.integers(-8, 8).map(lambda k: k / 8), min_size=1, max_size=10).filter(
        lambda ds: sum(1 for d in ds if d) >= 2
    )
)
def test_the_exact_permutation_test_is_scipys(differences: list[float]) -> None:
    nonzero = [d for d in differences if d]
    assert stats.paired_permutation_test(differences) == pytest.approx(
        _scipy_sign_flip(nonzero, np.inf), rel=1e-9
    )


@settings(deadline=None, max_examples=10)
@given(st.lists(st.integers(-8, 8).map(lambda k: k / 8), min_size=13, max_size=16))
def test_the_sampled_permutation_test_is_close_to_every_flip(differences: list[float]) -> None:
    nonzero = [d for d in differences if d]
    if len(nonzero) <= stats.EXACT_PERMUTATION_LIMIT:
        return
    exact = _scipy_sign_flip(nonzero, np.inf)
    sampled = stats.paired_permutation_test(differences, resamples=2000, seed=3)
    assert abs(sampled - exact) < 0.04
    assert sampled == stats.paired_permutation_test(differences, resamples=2000, seed=3)


@given(counts(), confidences)
def test_the_confidence_sequence_stops_where_the_mixture_reaches_one_over_alpha(
    pair: tuple[int, int], confidence: float
) -> None:
    successes, trials = pair
    cs = stats.binomial_confidence_sequence(successes, trials, confidence)
    failures = trials - successes
    assert cs.contains(successes / trials)

    def log_mixture(p: float) -> float:
        log_likelihood = successes * math.log(p) + failures * math.log1p(-p)
        return float(special.betaln(0.5 + successes, 0.5 + failures) - special.betaln(0.5, 0.5)) - (
            log_likelihood
        )

    limit = math.log(1 / (1 - confidence))
    for end in (cs.low, cs.high):
        if 0.0 < end < 1.0:
            assert log_mixture(end) == pytest.approx(limit, abs=1e-6)


@given(counts(max_trials=2000).filter(lambda c: c[1] >= 20), confidences)
def test_the_confidence_sequence_is_wider_than_the_one_look_interval(
    pair: tuple[int, int], confidence: float
) -> None:
    cs = stats.binomial_confidence_sequence(*pair, confidence)
    wilson = stats.wilson_interval(*pair, confidence)
    assert cs.low <= wilson.low + 1e-12
    assert cs.high >= wilson.high - 1e-12


def test_looking_after_every_trial_keeps_the_confidence_sequence_error_rate() -> None:
    """Time-uniform coverage: the truth leaves the sequence, at any of 300 looks, in at most
    alpha of the runs; the one-look Wilson interval checked at each look leaves far more often."""
    rng = random.Random(29)
    runs, looks, truth, confidence = 400, 300, 0.3, 0.9
    sequence_misses = wilson_misses = 0
    for _ in range(runs):
        successes = 0
        cs_missed = wilson_missed = False
        for trial in range(1, looks + 1):
            successes += rng.random() < truth
            if trial % 10:
                continue
            cs_missed = cs_missed or not stats.binomial_confidence_sequence(
                successes, trial, confidence
            ).contains(truth)
            wilson_missed = wilson_missed or not stats.wilson_interval(
                successes, trial, confidence
            ).contains(truth)
        sequence_misses += cs_missed
        wilson_misses += wilson_missed
    assert sequence_misses / runs <= 1 - confidence
    assert wilson_misses / runs > 2 * (1 - confidence)


def test_the_normal_mixture_radius_holds_over_every_look_of_a_random_walk() -> None:
    rng = random.Random(7)
    runs, steps, confidence = 500, 400, 0.95
    misses = 0
    for _ in range(runs):
        total = 0.0
        for step in range(1, steps + 1):
            total += rng.gauss(0.0, 1.0)
            variance = 1.0 / step  # of the running mean
            if abs(total / step) > stats.mixture_radius(
                variance, confidence, tuned_variance=1.0 / 50
            ):
                misses += 1
                break
    assert misses / runs <= 1 - confidence


@given(st.floats(1e-6, 1.0), confidences)
def test_the_mixture_radius_is_wider_than_one_look(variance: float, confidence: float) -> None:
    one_look = stats.normal_quantile(1 - (1 - confidence) / 2) * math.sqrt(variance)
    assert stats.mixture_radius(variance, confidence, tuned_variance=variance) > one_look
    assert stats.mixture_radius(0.0, confidence, tuned_variance=0.1) == 0.0


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5])
def test_a_confidence_outside_zero_to_one_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        stats.wilson_interval(1, 2, confidence)
