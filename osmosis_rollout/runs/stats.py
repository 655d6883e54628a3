"""The statistics behind gates that do not flap: intervals, paired tests, repeated looks.

Pure Python (``math``, ``statistics``, ``random``): the base install needs no scipy, and the
tests check every function against scipy's implementation. Each function cites where its
method comes from:

- :func:`wilson_interval`: Wilson, E. B. (1927). Probable inference, the law of succession,
  and statistical inference. *Journal of the American Statistical Association* 22(158),
  209-212. The score interval for a binomial proportion; unlike the textbook
  ``p +- z*sqrt(p(1-p)/n)`` it stays inside [0, 1] and keeps its coverage near 0% and 100%.
- :func:`student_t_quantile`: Student (1908). The probable error of a mean. *Biometrika*
  6(1), 1-25. The t quantile comes from the regularized incomplete beta function
  (:func:`regularized_beta`, a continued fraction evaluated by Lentz's method).
- The exact McNemar test (McNemar, Q. (1947). Note on the sampling error of the difference
  between correlated proportions or percentages. *Psychometrika* 12(2), 153-157): only the
  rows that passed in one run and failed in the other carry information; under no change
  the count that got worse is Binomial(discordant, 1/2), summed by :func:`binomial_tail`.
  It is :func:`stratified_exact_test` with one attempt a row on each side.
- :func:`clustered_interval`: the mean of bounded values (a row's pass fraction over its
  attempts, a reward) with Wilson's score interval at an *effective* sample size, the count
  divided by the design effect (Kish, L. (1965). *Survey Sampling*, ch. 8; Korn, E. L. and
  Graubard, B. I. (1998). Confidence intervals for proportions with small expected number of
  positive counts estimated from survey data. *Survey Methodology* 24(2), 193-201, who also
  take the quantile from Student's t on ``count - 1`` degrees of freedom). Its variance is
  the spread *between* the values, so it estimates the mean of the population they are
  drawn from, and it stays inside [0, 1].
- :func:`stratified_exact_test` and :func:`cmh_test`: the comparison of two runs with any
  number of attempts a row, each row a stratum (Mantel, N. and Haenszel, W. (1959).
  Statistical aspects of the analysis of data from retrospective studies of disease.
  *J. Natl. Cancer Inst.* 22(4), 719-748; the exact conditional form: Zelen, M. (1971). The
  analysis of several 2x2 contingency tables. *Biometrika* 58(1), 129-137). Under no change
  a row's attempts, before and after, are exchangeable: given the row's total passes, the
  count after is hypergeometric.
- :func:`mh_risk_difference`: the Mantel-Haenszel risk difference over rows and its variance
  (Greenland, S. and Robins, J. M. (1985). *Biometrics* 41(1), 55-68; Sato, T. (1989). On
  the variance estimator for the Mantel-Haenszel risk difference. *Biometrics* 45(4),
  1323-1324), for a test against a non-inferiority margin.
- :func:`paired_permutation_test`: Fisher, R. A. (1935). *The Design of Experiments*, ch. 3.
  Under no change each paired difference is as likely to have either sign; the p-value is
  the share of sign flips whose total is at least as far from zero as the observed one
  (every flip when few rows differ, else a seeded Monte Carlo sample, counted as Phipson, B.
  and Smyth, G. K. (2010), *Stat. Appl. Genet. Mol. Biol.* 9(1), so it is never 0).
- :func:`binomial_confidence_sequence` and :func:`mixture_radius`: confidence sequences,
  intervals that hold at every number of trials at once, so a run may look after each batch
  of attempts and stop as soon as the gate is decided without raising its error rate.
  Robbins, H. (1970). Statistical methods related to the law of the iterated logarithm.
  *Annals of Mathematical Statistics* 41(5), 1397-1409 (mixture martingales); Ville, J.
  (1939). *Etude critique de la notion de collectif* (a nonnegative martingale exceeds
  1/alpha with probability at most alpha, ever); Howard, S. R., Ramdas, A., McAuliffe, J.
  and Sekhon, J. (2021). Time-uniform, nonparametric, nonasymptotic confidence sequences.
  *Annals of Statistics* 49(2), 1055-1080 (the beta-binomial and normal mixtures);
  Waudby-Smith, I., Arnold, D., Wu, J. and Ramdas, A. (2024). Time-uniform central limit
  theory and asymptotic confidence sequences. *Annals of Statistics* 52(6) (the normal
  mixture with an estimated variance).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXACT_STRATA_LIMIT",
    "ClusteredMean",
    "Interval",
    "Table",
    "binomial_confidence_sequence",
    "binomial_tail",
    "clustered_interval",
    "clustered_interval_from_moments",
    "cmh_test",
    "mh_risk_difference",
    "mixture_radius",
    "normal_quantile",
    "paired_permutation_test",
    "regularized_beta",
    "stratified_exact_test",
    "student_t_cdf",
    "student_t_quantile",
    "two_sided_quantile",
    "wilson_interval",
]

EXACT_PERMUTATION_LIMIT = 12
"""At most this many nonzero differences: every sign flip is counted (2**12 = 4096)."""


@dataclass(frozen=True)
class Interval:
    """A two-sided interval for a rate or a mean, at ``confidence``, and how it was made."""

    low: float
    high: float
    confidence: float
    method: str

    def as_dict(self) -> dict[str, Any]:
        """``{low, high, confidence, method}``, as the JSON report holds it."""
        return dataclasses.asdict(self)

    def contains(self, value: float) -> bool:
        """True when ``low <= value <= high``."""
        return self.low <= value <= self.high


def _alpha(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return 1.0 - confidence


def normal_quantile(p: float) -> float:
    """The standard normal quantile: ``z`` with ``P(Z <= z) = p``."""
    return statistics.NormalDist().inv_cdf(p)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """Wilson's score interval for a proportion: ``successes`` of ``trials`` (Wilson 1927).

    The interval is every ``p`` the score test at ``1 - confidence`` does not reject:
    ``(p_hat + z^2/2n +- z*sqrt(p_hat(1-p_hat)/n + z^2/4n^2)) / (1 + z^2/n)``. No trials
    leaves everything possible: ``[0, 1]``.
    """
    alpha = _alpha(confidence)
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return Interval(0.0, 1.0, confidence, "wilson")
    z = normal_quantile(1.0 - alpha / 2.0)
    low, high = _wilson_bounds(successes / trials, float(trials), z)
    return Interval(low, high, confidence, "wilson")


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``, for ``a, b > 0``.

    The continued fraction converges fast for ``x < (a + 1) / (a + b + 2)``; above it the
    symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` is used instead.
    """
    if a <= 0 or b <= 0:
        raise ValueError(f"need a, b > 0, got a={a!r}, b={b!r}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The incomplete beta continued fraction, evaluated by the modified Lentz method."""
    tiny = 1e-300

    def guard(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c = 1.0
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    result = d
    for m in range(1, 10_000):
        # The even step, then the odd step, of the fraction's terms.
        even = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        d = 1.0 / guard(1.0 + even * d)
        c = guard(1.0 + even / c)
        result *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        d = 1.0 / guard(1.0 + odd * d)
        c = guard(1.0 + odd / c)
        step = d * c
        result *= step
        if abs(step - 1.0) < 1e-15:
            break
    return result


def student_t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df!r}")
    if t * t < df:
        # Near the median: the central part, I at t^2 / (df + t^2), keeps its precision.
        half = 0.5 * regularized_beta(0.5, df / 2.0, t * t / (df + t * t))
        return 0.5 + half if t > 0 else 0.5 - half
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=1024)
def student_t_quantile(p: float, df: float) -> float:
    """``t`` with ``P(T <= t) = p`` for Student's t with ``df`` degrees of freedom (cached:
    a gate asks for the same few quantiles at every look)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be between 0 and 1 (exclusive), got {p!r}")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    high = 1.0
    while student_t_cdf(high, df) < p:
        high *= 2.0
    return _bisect(lambda t: student_t_cdf(t, df) - p, 0.0, high)


def two_sided_quantile(confidence: float, count: int) -> float:
    """The two-sided quantile for a mean of ``count`` values: Student's t on ``count - 1``
    degrees of freedom, the normal one for a single value."""
    alpha = _alpha(confidence)
    if count > 1:
        return student_t_quantile(1.0 - alpha / 2.0, count - 1)
    return normal_quantile(1.0 - alpha / 2.0)


def _bisect(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of an increasing ``f`` between ``low`` (negative) and ``high`` (positive)."""
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if f(middle) < 0.0:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def binomial_tail(k: int, n: int) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, 1/2)``, summed exactly in integers."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    term = total = 1  # C(n, 0)
    for j in range(k):
        term = term * (n - j) // (j + 1)
        total += term
    return total / (1 << n)


def paired_permutation_test(
    differences: Sequence[float], *, resamples: int = 10_000, seed: int = 0
) -> float:
    """The two-sided sign-flip permutation test's p-value for paired differences (Fisher 1935).

    The statistic is the sum of the differences; the p-value the share of sign flips whose
    sum is at least as far from zero. Every flip is counted when at most
    :data:`EXACT_PERMUTATION_LIMIT` differences are nonzero, otherwise ``resamples`` flips
    drawn with ``random.Random(seed)`` give ``(1 + hits) / (1 + resamples)``.
    """
    nonzero = [float(d) for d in differences if d != 0]
    if not nonzero:
        return 1.0
    observed = abs(math.fsum(nonzero))
    # Sums equal to the observed one up to rounding count as reaching it.
    reach = observed - 1e-9 * max(1.0, observed)
    if len(nonzero) <= EXACT_PERMUTATION_LIMIT:
        hits = sum(
            1
            for signs in itertools.product((1.0, -1.0), repeat=len(nonzero))
            if abs(math.fsum(s * d for s, d in zip(signs, nonzero, strict=True))) >= reach
        )
        return hits / (1 << len(nonzero))
    rng = random.Random(seed)
    hits = 0
    for _ in range(resamples):
        total = math.fsum(d if rng.random() < 0.5 else -d for d in nonzero)
        hits += abs(total) >= reach
    return (1 + hits) / (1 + resamples)


def binomial_confidence_sequence(
    successes: int, trials: int, confidence: float = 0.95, *, prior: float = 0.5
) -> Interval:
    """A confidence sequence for a proportion: valid at every number of trials at once.

    The beta-binomial mixture (Robbins 1970; Howard et al. 2021): for each candidate ``p``,
    ``M(p) = B(a + s, b + f) / B(a, b) / (p^s (1 - p)^f)`` is a nonnegative martingale with
    mean 1 when ``p`` is the truth, so by Ville's inequality it ever reaches ``1/alpha``
    with probability at most ``alpha``. The interval is every ``p`` with ``M(p) < 1/alpha``;
    ``a = b = prior`` (0.5, Jeffreys). It always holds ``s/n``, and it is wider than
    :func:`wilson_interval` at the same confidence: the price of looking as often as you like.
    """
    alpha = _alpha(confidence)
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    method = "beta-binomial confidence sequence"
    if trials == 0:
        return Interval(0.0, 1.0, confidence, method)
    failures = trials - successes
    log_marginal = _log_beta(prior + successes, prior + failures) - _log_beta(prior, prior)
    limit = math.log(1.0 / alpha)

    def excess(p: float) -> float:
        """``log M(p) - log(1/alpha)``: negative inside the interval."""
        log_likelihood = (successes * math.log(p) if successes else 0.0) + (
            failures * math.log1p(-p) if failures else 0.0
        )
        return log_marginal - log_likelihood - limit

    estimate = successes / trials
    low = 0.0 if successes == 0 else _bisect(lambda p: -excess(p), 1e-300, estimate)
    high = 1.0 if failures == 0 else _bisect(excess, estimate, 1.0 - 1e-16)
    return Interval(low, high, confidence, method)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def mixture_radius(variance: float, confidence: float, *, tuned_variance: float) -> float:
    """The half-width of a normal-mixture confidence sequence for an estimate of this variance.

    For an estimate whose error behaves like a Gaussian martingale, with variance ``V``
    falling as data arrive, the error stays below
    ``sqrt(V (1 + rho V) (2 log(1/alpha) + log(1 + 1/(rho V))))`` at every look at once, with
    probability ``1 - alpha`` (Robbins 1970; Howard et al. 2021; with an estimated variance,
    asymptotically: Waudby-Smith et al. 2024). ``rho`` is fixed in advance so the radius is
    tightest when ``V == tuned_variance``, where it is about 1.5 times the single-look
    ``z * sqrt(V)`` at 95%.
    """
    alpha = _alpha(confidence)
    if variance < 0 or tuned_variance <= 0:
        raise ValueError(
            f"need variance >= 0 and tuned_variance > 0, got {variance!r}, {tuned_variance!r}"
        )
    if variance == 0.0:
        return 0.0
    log_inverse_alpha = math.log(1.0 / alpha)
    x = _best_ratio(log_inverse_alpha) / tuned_variance * variance  # rho * V
    return math.sqrt(variance * ((1.0 + x) * (2.0 * log_inverse_alpha + math.log1p(1.0 / x))))


@functools.lru_cache(maxsize=32)
def _best_ratio(log_inverse_alpha: float) -> float:
    """The ``x = rho V`` that minimizes the mixture radius: ``1/x - log(1 + 1/x) = 2 log(1/alpha)``."""
    target = 2.0 * log_inverse_alpha
    # u - log(1 + u) increases in u > 0; solve for u = 1/x.
    high = 1.0
    while high - math.log1p(high) < target:
        high *= 2.0
    u = _bisect(lambda u: u - math.log1p(u) - target, 0.0, high)
    return 1.0 / u


def _wilson_bounds(estimate: float, size: float, z: float) -> tuple[float, float]:
    """Wilson's score bounds at ``estimate`` over an effective ``size`` (any positive real)."""
    denominator = 1.0 + z * z / size
    centre = (estimate + z * z / (2.0 * size)) / denominator
    half = z * math.sqrt(estimate * (1.0 - estimate) / size + z * z / (4.0 * size * size))
    half /= denominator
    # At 0 or 1 the bound is the estimate itself; rounding would leave it a hair inside.
    low = 0.0 if estimate <= 0.0 else max(0.0, centre - half)
    high = 1.0 if estimate >= 1.0 else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class ClusteredMean:
    """A mean of bounded values, the effective sample size its interval used, and the interval."""

    estimate: float
    effective_size: float
    interval: Interval


def clustered_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    *,
    max_size: float = math.inf,
    quantile: float | None = None,
) -> ClusteredMean:
    """The mean of ``values`` in [0, 1], drawn independently from one population, and a
    Wilson-type interval for the population's mean (Kish 1965; Korn and Graubard 1998).

    :func:`clustered_interval_from_moments` on the values' mean and population variance.
    """
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError("clustered_interval needs values in [0, 1]; rescale them first")
    count = len(values)
    mean = math.fsum(values) / count if count else 0.0
    variance = math.fsum((v - mean) ** 2 for v in values) / count if count else 0.0
    return clustered_interval_from_moments(
        mean, variance, count, confidence, max_size=max_size, quantile=quantile
    )


def clustered_interval_from_moments(
    mean: float,
    population_variance: float,
    count: int,
    confidence: float = 0.95,
    *,
    max_size: float = math.inf,
    quantile: float | None = None,
) -> ClusteredMean:
    """A Wilson-type interval for the mean of a population of values in [0, 1], from
    ``count`` draws of mean ``mean`` and population variance ``population_variance``.

    A value in [0, 1] of mean ``mu`` varies at most as a coin does, ``mu (1 - mu)``; the
    *design effect* ``D`` is how much less it varies here, estimated from the values' spread
    with one pseudo-value at 0 and one at 1 added (a small sample cannot claim its values
    never differ: ten rows that all passed every attempt say little about rows that always
    fail). The interval is Wilson's at the mean over ``count / D`` effective trials, at least
    ``count`` and at most ``max_size`` (a row's pass fraction over ``k`` attempts is never
    surer than its ``k`` attempts), with Student's t quantile on ``count - 1`` degrees of
    freedom unless ``quantile`` is given (a confidence sequence's). Values all at 0 or 1
    (variance ``mean (1 - mean)``) give Wilson's interval over them, exactly.
    """
    _alpha(confidence)  # refuses a confidence outside (0, 1), before any early return
    if count < 1:
        return ClusteredMean(0.0, 0.0, Interval(0.0, 1.0, confidence, "no values"))
    mean = min(1.0, max(0.0, mean))
    if quantile is None and abs(population_variance - mean * (1.0 - mean)) <= 1e-9:
        interval = wilson_interval(round(mean * count), count, confidence)
        return ClusteredMean(mean, float(count), interval)
    # The spread of the values and the two pseudo-values, from the moments.
    padded_mean = (mean * count + 1.0) / (count + 2)
    squares = (population_variance + mean * mean) * count + 1.0
    padded_variance = max(0.0, squares - (count + 2) * padded_mean**2) / (count + 1)
    effect = padded_variance / (padded_mean * (1.0 - padded_mean))
    size = min(count / effect, max_size) if effect > 0 else max_size
    size = max(size, float(count))
    if quantile is None:
        quantile = two_sided_quantile(confidence, count)
    low, high = _wilson_bounds(mean, size, quantile)
    return ClusteredMean(mean, size, Interval(low, high, confidence, "wilson, clustered"))


Table = tuple[int, int, int, int]
"""One row's attempts in two runs: ``(passed after, attempts after, passed before,
attempts before)``."""


def _check_table(table: Table) -> None:
    after, after_n, before, before_n = table
    if not (0 <= after <= after_n and 0 <= before <= before_n):
        raise ValueError(f"need 0 <= passed <= attempts on both sides, got {table}")


def _hypergeometric(table: Table) -> tuple[int, list[float]]:
    """The passes after, given the row's total passes, under no change: ``(lowest, pmf)``."""
    after, after_n, before, before_n = table
    total, passes = after_n + before_n, after + before
    lowest, highest = max(0, after_n - (total - passes)), min(after_n, passes)
    denominator = math.comb(total, after_n)
    pmf = [
        math.comb(passes, x) * math.comb(total - passes, after_n - x) / denominator
        for x in range(lowest, highest + 1)
    ]
    return lowest, pmf


EXACT_STRATA_LIMIT = 60
"""At most this many informative rows: the exact conditional distribution is convolved."""


def stratified_exact_test(tables: Sequence[Table]) -> float:
    """The exact one-sided p-value that the runs' rows passed *less often* after (Zelen 1971).

    Each row is a stratum: under no change its ``attempts after + attempts before`` are
    exchangeable, so given the row's total passes, its passes after follow the hypergeometric
    distribution. The p-value is ``P(S <= s)`` for ``S`` the sum over rows of those
    independent counts and ``s`` the observed one: never 0, at most 1. With one attempt a
    row on each side it is the one-sided exact McNemar test.
    """
    strata = []
    for table in tables:
        _check_table(table)
        strata.append(_hypergeometric(table))
    # Only P(S <= s) is wanted: sums past s - lowest are never read, so never kept.
    reach = sum(table[0] for table in tables) - sum(low for low, _ in strata)
    distribution = [1.0]
    for _, pmf in strata:
        if len(pmf) == 1:
            continue
        merged = [0.0] * min(len(distribution) + len(pmf) - 1, reach + 1)
        for i, p in enumerate(distribution):
            for j, q in enumerate(pmf[: len(merged) - i]):
                merged[i + j] += p * q
        distribution = merged
    return min(1.0, math.fsum(distribution))


def cmh_test(tables: Sequence[Table]) -> float:
    """The Cochran-Mantel-Haenszel one-sided p-value that rows passed less often after.

    The normal approximation of :func:`stratified_exact_test`'s distribution (Mantel and
    Haenszel 1959): ``z = (sum(a - E a) + 1/2) / sqrt(sum Var a)`` with each row's
    hypergeometric mean and variance and a continuity correction of one half; ``Phi(z)``.
    No informative row (each row passed every attempt, or none, on both sides) gives 1.
    """
    excess = variance = 0.0
    for table in tables:
        _check_table(table)
        after, after_n, before, before_n = table
        total, passes = after_n + before_n, after + before
        excess += after - after_n * passes / total
        variance += after_n * before_n * passes * (total - passes) / (total * total * (total - 1))
    if variance == 0.0:
        return 1.0
    return statistics.NormalDist().cdf((excess + 0.5) / math.sqrt(variance))


def mh_risk_difference(tables: Sequence[Table]) -> tuple[float, float]:
    """The Mantel-Haenszel risk difference (after minus before) over rows and Sato's variance.

    ``RD = sum((a n0 - c n1) / N) / sum(n1 n0 / N)`` for ``a`` of ``n1`` passing after and
    ``c`` of ``n0`` before, ``N = n0 + n1``; ``Var = (RD P + Q) / W^2`` (Sato 1989). No rows
    give ``(0.0, 0.0)``.
    """
    weight = numerator = p_sum = q_sum = 0.0
    for table in tables:
        _check_table(table)
        a, n1, c, n0 = table
        total = n0 + n1
        weight += n1 * n0 / total
        numerator += (a * n0 - c * n1) / total
        p_sum += (n1 * n1 * c - n0 * n0 * a + n1 * n0 * (n0 - n1) / 2.0) / (total * total)
        q_sum += (a * (n0 - c) + c * (n1 - a)) / (2.0 * total)
    if weight == 0.0:
        return 0.0, 0.0
    difference = numerator / weight
    return difference, max(0.0, (difference * p_sum + q_sum) / (weight * weight))
