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


# Within 1e-12 of 1, 1 - x has few bits left and scipy's betainc is off by more than its
# own precision (at x = 1 - 2**-53, I(0.5, 0.5) is 1 - 6.7e-9; scipy says 1 - 9.5e-9).
@given(st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.floats(0.0, 1.0 - 1e-12))
def test_the_regularized_beta_is_scipys(a_scale: float, b_scale: float, x: float) -> None:
    a, b = a_scale * 50, b_scale * 50
    assert stats.regularized_beta(a, b, x) == pytest.approx(
        special.betainc(a, b, x), rel=1e-9, abs=1e-12
    )


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


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 12, max_attempts: int = 6) -> list[stats.Table]:
    """Rows of two runs, any mix of attempts: ``(passed after, after, passed before, before)``."""
    rows = []
    for _ in range(draw(st.integers(1, max_rows))):
        after, before = draw(st.integers(1, max_attempts)), draw(st.integers(1, max_attempts))
        rows.append((draw(st.integers(0, after)), after, draw(st.integers(0, before)), before))
    return rows


def _scipy_stratified_lower_tail(rows: list[stats.Table]) -> float:
    """``P(S <= s)`` by convolving scipy's hypergeometric pmfs with numpy."""
    distribution, lowest, observed = np.array([1.0]), 0, 0
    for after, after_n, before, before_n in rows:
        total, passes = after_n + before_n, after + before
        low, high = max(0, after_n - (total - passes)), min(after_n, passes)
        pmf = sp.hypergeom(total, passes, after_n).pmf(np.arange(low, high + 1))
        distribution = np.convolve(distribution, pmf)
        lowest, observed = lowest + low, observed + after
    return float(distribution[: observed - lowest + 1].sum())


@settings(deadline=None, max_examples=150)
@given(tables())
def test_the_stratified_exact_test_is_scipys_hypergeometric_convolution(
    rows: list[stats.Table],
) -> None:
    ours = stats.stratified_exact_test(rows)
    assert ours == pytest.approx(_scipy_stratified_lower_tail(rows), rel=1e-9, abs=1e-12)
    assert 0.0 < ours <= 1.0


@given(tables(max_rows=1, max_attempts=12))
def test_one_row_is_fishers_exact_test(rows: list[stats.Table]) -> None:
    ((after, after_n, before, before_n),) = rows
    _, expected = sp.fisher_exact(
        [[after, after_n - after], [before, before_n - before]], alternative="less"
    )
    assert stats.stratified_exact_test(rows) == pytest.approx(expected, rel=1e-9)


@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_one_attempt_each_side_is_the_one_sided_exact_mcnemar_test(
    worse: int, better: int, same: int
) -> None:
    rows = [(0, 1, 1, 1)] * worse + [(1, 1, 0, 1)] * better + [(1, 1, 1, 1)] * same
    expected = 1.0 if worse + better == 0 else sp.binomtest(better, worse + better).pvalue
    if worse + better:
        expected = sp.binomtest(better, worse + better, alternative="less").pvalue
    assert stats.stratified_exact_test(rows) == pytest.approx(expected, rel=1e-9)
    assert stats.binomial_tail(better, worse + better) == pytest.approx(expected, rel=1e-9)


@given(tables(max_rows=40, max_attempts=8))
def test_the_cmh_test_is_the_textbook_statistic(rows: list[stats.Table]) -> None:
    table = np.array(rows, dtype=float)
    a, n1, c, n0 = table.T
    total, passes = n1 + n0, a + c
    variance = float(np.sum(n1 * n0 * passes * (total - passes) / (total**2 * (total - 1))))
    ours = stats.cmh_test(rows)
    if variance == 0:
        assert ours == 1.0
        return
    z = (float(np.sum(a - n1 * passes / total)) + 0.5) / math.sqrt(variance)
    assert ours == pytest.approx(float(sp.norm.cdf(z)), rel=1e-9, abs=1e-15)


def test_equal_changes_in_every_row_never_give_a_p_value_of_zero() -> None:
    """Issue 36, finding 3: the t-test said p = 0 when every row changed alike."""
    for rows in ([(0, 4, 1, 1)] * 2, [(0, 4, 1, 1)] * 3, [(3, 4, 1, 1)] * 3):
        assert 0.0 < stats.stratified_exact_test(rows) <= 1.0
        assert 0.0 < stats.cmh_test(rows) <= 1.0
    assert stats.stratified_exact_test([(0, 4, 1, 1)] * 2) == pytest.approx(1 / 25)


@given(tables(max_rows=30, max_attempts=8))
def test_the_mantel_haenszel_risk_difference_is_the_textbook_estimate(
    rows: list[stats.Table],
) -> None:
    table = np.array(rows, dtype=float)
    a, n1, c, n0 = table.T
    total = n1 + n0
    weight = np.sum(n1 * n0 / total)
    expected = float(np.sum((a * n0 - c * n1) / total) / weight)
    difference, variance = stats.mh_risk_difference(rows)
    assert difference == pytest.approx(expected, abs=1e-12)
    assert variance >= 0.0


def test_sato_s_variance_is_the_spread_of_the_risk_difference_over_runs() -> None:
    rng = np.random.default_rng(36)
    after_n, before_n = rng.integers(1, 6, 60), rng.integers(1, 6, 60)
    chance = rng.uniform(0.3, 0.95, 60)
    estimates, variances = [], []
    for _ in range(3000):
        after = rng.binomial(after_n, np.clip(chance - 0.05, 0, 1))
        before = rng.binomial(before_n, chance)
        difference, variance = stats.mh_risk_difference(
            list(
                zip(
                    after.tolist(),
                    after_n.tolist(),
                    before.tolist(),
                    before_n.tolist(),
                    strict=True,
                )
            )
        )
        estimates.append(difference)
        variances.append(variance)
    assert float(np.mean(variances)) == pytest.approx(float(np.var(estimates)), rel=0.08)


@given(st.lists(st.booleans(), min_size=1, max_size=200), confidences)
def test_the_clustered_interval_of_pass_or_fail_values_is_wilsons(
    values: list[bool], confidence: float
) -> None:
    ours = stats.clustered_interval([float(v) for v in values], confidence)
    theirs = sp.binomtest(sum(values), len(values)).proportion_ci(confidence, method="wilson")
    assert ours.interval.low == pytest.approx(theirs.low, abs=1e-9)
    assert ours.interval.high == pytest.approx(theirs.high, abs=1e-9)
    assert ours.effective_size == len(values)


@given(
    st.lists(st.integers(0, 8).map(lambda k: k / 8), min_size=2, max_size=200).filter(
        lambda vs: any(v not in (0.0, 1.0) for v in vs)
    ),
    confidences,
)
def test_the_clustered_interval_is_wilsons_at_the_effective_size(
    values: list[float], confidence: float
) -> None:
    count, attempts = len(values), 8 * len(values)
    ours = stats.clustered_interval(values, confidence, max_size=attempts)
    padded = np.array([*values, 0.0, 1.0])
    effect = padded.var(ddof=1) / (padded.mean() * (1 - padded.mean()))
    size = min(max(count / effect, count), attempts)
    z = sp.t.ppf(1 - (1 - confidence) / 2, count - 1)
    mean = float(np.mean(values))
    centre = (mean + z * z / (2 * size)) / (1 + z * z / size)
    half = z * math.sqrt(mean * (1 - mean) / size + z * z / (4 * size * size)) / (1 + z * z / size)
    assert ours.effective_size == pytest.approx(size, rel=1e-9)
    assert ours.interval.low == pytest.approx(max(0.0, centre - half), abs=1e-9)
    assert ours.interval.high == pytest.approx(min(1.0, centre + half), abs=1e-9)
    assert 0.0 <= ours.interval.low <= mean <= ours.interval.high <= 1.0


def test_rows_that_all_agree_still_leave_doubt_about_the_task() -> None:
    """Twenty rows that passed all eight attempts say no more about rows that always fail
    than twenty single passes do."""
    agreed = stats.clustered_interval([1.0] * 20, 0.95, max_size=160).interval
    assert agreed.low == pytest.approx(stats.wilson_interval(20, 20).low)
    equal = stats.clustered_interval([0.5] * 30, 0.95)
    assert equal.interval.low < 0.5 < equal.interval.high
