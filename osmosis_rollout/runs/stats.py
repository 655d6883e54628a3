"""The statistics behind gates that do not flap: intervals, paired tests, repeated looks.

Pure Python (``math``, ``statistics``, ``random``): the base install needs no scipy, and the
tests check every function against scipy's implementation. Each function cites where its
method comes from:

- :func:`wilson_interval`: Wilson, E. B. (1927). Probable inference, the law of succession,
  and statistical inference. *Journal of the American Statistical Association* 22(158),
  209-212. The score interval for a binomial proportion; unlike the textbook
  ``p +- z*sqrt(p(1-p)/n)`` it stays inside [0, 1] and keeps its coverage near 0% and 100%.
- :func:`mean_interval`: Student (1908). The probable error of a mean. *Biometrika* 6(1),
  1-25. The t interval for a mean; the t quantile comes from the regularized incomplete beta
  function (:func:`regularized_beta`, a continued fraction evaluated by Lentz's method).
- :func:`mcnemar_exact`: McNemar, Q. (1947). Note on the sampling error of the difference
  between correlated proportions or percentages. *Psychometrika* 12(2), 153-157. Only the
  discordant pairs (rows that passed in one run and failed in the other) carry information;
  under no change each is equally likely to go either way, so the count that got worse is
  Binomial(discordant, 1/2). The exact form sums that binomial's tail.
- :func:`sign_test`: the same binomial test on the signs of paired differences (rows whose
  pass fraction fell against rows whose fraction rose, over repeats); with one attempt per
  row it *is* the exact McNemar test.
- :func:`paired_t_test`: Student (1908) again, on paired differences: their mean over its
  standard error. Unlike the sign test it needs no symmetry, only a mean of zero under no
  change, so it compares pass fractions measured over different numbers of attempts.
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

import functools
import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Interval",
    "binomial_confidence_sequence",
    "binomial_tail",
    "mcnemar_exact",
    "mean_interval",
    "mean_interval_from_moments",
    "mixture_radius",
    "normal_quantile",
    "paired_permutation_test",
    "paired_t_test",
    "regularized_beta",
    "sign_test",
    "student_t_cdf",
    "student_t_quantile",
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
        return {
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "method": self.method,
        }

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
    n = float(trials)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
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


def student_t_quantile(p: float, df: float) -> float:
    """``t`` with ``P(T <= t) = p`` for Student's t with ``df`` degrees of freedom."""
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


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student's t interval for the mean of ``values``; None for fewer than two values.

    ``mean +- t(1 - alpha/2, n - 1) * s / sqrt(n)``, ``s`` the sample standard deviation.
    """
    alpha = _alpha(confidence)
    n = len(values)
    if n < 2:
        return None
    mean = statistics.fmean(values)
    half = student_t_quantile(1.0 - alpha / 2.0, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return Interval(mean - half, mean + half, confidence, "t")


def mean_interval_from_moments(
    mean: float, population_std: float, count: int, confidence: float = 0.95
) -> Interval | None:
    """:func:`mean_interval` from a summary's ``mean``, population ``std`` and ``count``."""
    alpha = _alpha(confidence)
    if count < 2:
        return None
    sample_std = population_std * math.sqrt(count / (count - 1))
    half = student_t_quantile(1.0 - alpha / 2.0, count - 1) * sample_std / math.sqrt(count)
    return Interval(mean - half, mean + half, confidence, "t")


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


def mcnemar_exact(worse: int, better: int) -> float:
    """The exact McNemar test's two-sided p-value for paired pass/fail results (McNemar 1947).

    ``worse``: pairs that passed before and failed now; ``better``: the reverse. Under no
    change ``worse ~ Binomial(worse + better, 1/2)``; the p-value is twice the smaller tail,
    at most 1 (with no discordant pair, 1).
    """
    if worse < 0 or better < 0:
        raise ValueError(f"counts must be >= 0, got worse={worse}, better={better}")
    n = worse + better
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_tail(min(worse, better), n))


def sign_test(differences: Sequence[float]) -> float:
    """The two-sided sign test's p-value for paired differences (zeros carry no sign).

    With 0/1 pass results (one attempt per row) this is :func:`mcnemar_exact`.
    """
    negative = sum(1 for d in differences if d < 0)
    positive = sum(1 for d in differences if d > 0)
    return mcnemar_exact(negative, positive)


def paired_t_test(differences: Sequence[float]) -> float:
    """The two-sided paired t-test's p-value: ``mean / (s / sqrt(n))`` on ``n - 1`` degrees
    of freedom. Fewer than two differences, or all equal to zero, give 1; all equal and not
    zero, 0."""
    n = len(differences)
    if n < 2:
        return 1.0
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    if spread == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (spread / math.sqrt(n))
    return min(1.0, 2.0 * student_t_cdf(-abs(t), n - 1))


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


def _mixture_excess(x: float, log_inverse_alpha: float) -> float:
    """The squared radius of :func:`mixture_radius` in units of the variance, at ``x = rho*V``."""
    return (1.0 + x) * (2.0 * log_inverse_alpha + math.log1p(1.0 / x))


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
    rho = _best_ratio(log_inverse_alpha) / tuned_variance
    return math.sqrt(variance * _mixture_excess(rho * variance, log_inverse_alpha))


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
