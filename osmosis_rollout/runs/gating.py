"""Gate decisions with a stated confidence: pass-rate gates, the paired regression test, and
where further attempts go.

The plugin's gates (:mod:`pytest_osmosis.results.gates`), its ``--osmosis-n auto`` rounds
(:mod:`pytest_osmosis.run.auto_repeats`) and the simulation benchmark (``bench/bench_gate_sim.py``)
all decide through these functions, so the benchmark's error rates are the plugin's.
The statistics themselves, with their references, are in :mod:`osmosis_rollout.runs.stats`.

What is estimated. A run's rows are fixed; what varies between two runs of the same rollout
and policy is each attempt's outcome: row ``i`` passes an attempt with some probability
``p_i``. The rows' pass rate with one attempt a row has the expected value ``mean(p_i)``, and
so does the mean over rows of each row's pass fraction with repeats (``c_i / n_i``, whatever
``n_i`` each row got): that is the attempt pass rate the gate judges when rows are repeated.

- One attempt a row: Wilson's interval on the rows that passed, of those scored. It treats
  the rows as draws of one coin; rows of unequal difficulty vary less than that, so the
  interval is, if anything, wide.
- Repeats: the per-row mean, with the variance of each row's fraction estimated from its own
  attempts (a row seen once contributes the pooled rate's ``q(1 - q)``, the most rows of that
  mean rate could vary). With ``--osmosis-n auto`` the run looks after every round, so the
  half-width is a normal-mixture confidence sequence's (:func:`~osmosis_rollout.runs.stats.mixture_radius`)
  rather than ``z * sqrt(V)``: stopping as soon as the gate is decided does not raise its
  error rate (checked by the benchmark at a true rate equal to the threshold).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from osmosis_rollout.runs.stats import (
    Interval,
    mean_interval_from_moments,
    mixture_radius,
    normal_quantile,
    paired_t_test,
    sign_test,
    wilson_interval,
)

__all__ = [
    "GateDecision",
    "GateOutcome",
    "RegressionTest",
    "RowCounts",
    "attempts_gate",
    "attempts_interval",
    "auto_round",
    "decide",
    "next_attempts",
    "percent",
    "regression_test",
    "rows_gate",
    "summary_intervals",
]

GateOutcome = Literal["passed", "failed", "undecided"]
RowCounts = tuple[int, int]
"""A row's ``(passed attempts, scored attempts)``."""

ROUND_SHARE = 4
"""Each round of ``--osmosis-n auto`` gives one more attempt to at most 1/4 of the rows."""


def percent(value: float) -> str:
    """``82.5%``; a whole percentage without decimals when it is one (``80%``)."""
    text = f"{value:.1%}"
    return text.replace(".0%", "%") if text.endswith(".0%") else text


@dataclass(frozen=True)
class GateDecision:
    """A pass-rate gate's three-way verdict and the interval it was read from."""

    outcome: GateOutcome
    estimate: float
    interval: Interval
    threshold: float
    measure: str = "pass rate"
    """What was judged: ``pass rate`` (rows) or ``attempt pass rate`` (repeats)."""

    def describe(self) -> str:
        """``gate: pass rate 81.0% [72.1%, 87.6%] vs 80%: undecided at 95%: add rows or attempts``."""
        head = (
            f"gate: {self.measure} {self.estimate:.1%} "
            f"[{self.interval.low:.1%}, {self.interval.high:.1%}] vs {percent(self.threshold)}: "
            f"{self.outcome} at {percent(self.interval.confidence)}"
        )
        if self.outcome == "undecided":
            return head + ": add rows or attempts"
        return head

    def as_dict(self) -> dict[str, Any]:
        """The report's view of the decision."""
        return {
            "outcome": self.outcome,
            "measure": self.measure,
            "estimate": self.estimate,
            "interval": self.interval.as_dict(),
        }


def decide(interval: Interval, threshold: float) -> GateOutcome:
    """Passed when the lower bound reaches ``threshold``, failed when the upper bound is below
    it, else undecided."""
    if interval.low >= threshold:
        return "passed"
    if interval.high < threshold:
        return "failed"
    return "undecided"


def rows_gate(passed: int, scored: int, threshold: float, confidence: float) -> GateDecision:
    """The gate on the rows' pass rate, one attempt a row: Wilson's interval."""
    interval = wilson_interval(passed, scored, confidence)
    estimate = passed / scored if scored else 0.0
    return GateDecision(decide(interval, threshold), estimate, interval, threshold)


def _row_variances(counts: Sequence[RowCounts]) -> float:
    """The estimated variance of the sum of the rows' pass fractions."""
    singles = [passed for passed, scored in counts if scored == 1]
    total = 0.0
    if singles:
        # Rows seen once: their spread is unknown, at most the pooled rate's (adjusted by
        # two passes and two misses, as Agresti and Coull do, so 0% and 100% are not certain).
        q = (sum(singles) + 2) / (len(singles) + 4)
        total += len(singles) * q * (1.0 - q)
    for passed, scored in counts:
        if scored < 2:
            continue
        unbiased = passed * (scored - passed) / (scored * (scored - 1))
        # A row whose attempts all agreed is not known to be certain: half an attempt of doubt.
        q = (passed + 0.5) / (scored + 1)
        total += max(unbiased, q * (1.0 - q) / scored) / scored
    return total


def attempts_interval(
    counts: Sequence[RowCounts], confidence: float, *, anytime: bool
) -> tuple[float, Interval]:
    """The mean of the rows' pass fractions and its interval (rows with no scored attempt are
    left out). ``anytime``: valid at every look of ``--osmosis-n auto``'s rounds."""
    scored_rows = [(p, n) for p, n in counts if n > 0]
    rows = len(scored_rows)
    if not rows:
        return 0.0, Interval(0.0, 1.0, confidence, "no scored rows")
    estimate = math.fsum(p / n for p, n in scored_rows) / rows
    variance = _row_variances(scored_rows) / (rows * rows)
    if anytime:
        # Tightest around four attempts a row at a 50% pass rate; loose by little elsewhere.
        radius = mixture_radius(variance, confidence, tuned_variance=0.25 / (4 * rows))
        method = "per-row mean, normal-mixture confidence sequence"
    else:
        radius = normal_quantile(1.0 - (1.0 - confidence) / 2.0) * math.sqrt(variance)
        method = "per-row mean, normal"
    low, high = max(0.0, estimate - radius), min(1.0, estimate + radius)
    return estimate, Interval(low, high, confidence, method)


def attempts_gate(
    counts: Sequence[RowCounts], threshold: float, confidence: float, *, anytime: bool
) -> GateDecision:
    """The gate on the attempt pass rate over repeated rows (:func:`attempts_interval`)."""
    estimate, interval = attempts_interval(counts, confidence, anytime=anytime)
    return GateDecision(
        decide(interval, threshold), estimate, interval, threshold, "attempt pass rate"
    )


def next_attempts(counts: Sequence[RowCounts], max_n: int) -> list[int]:
    """The rows (indices into ``counts``) to give one more attempt: the least measured first.

    The rows with the fewest scored attempts, in row order, below ``max_n``; at most a quarter
    of the rows (at least one) a round, so the next look comes soon. The choice never reads
    a row's own results: giving more attempts to the rows that looked flaky would stop the
    others on a lucky streak and bias the suite's pass rate up (the benchmark measured a
    true 0.80 suite passing a 0.80 gate in 30% of runs that way).
    """
    open_rows = sorted(
        (scored, index) for index, (_, scored) in enumerate(counts) if scored < max_n
    )
    batch = max(1, math.ceil(len(counts) / ROUND_SHARE))
    return [index for _, index in open_rows[:batch]]


def auto_round(
    counts: Sequence[RowCounts], threshold: float, confidence: float, max_n: int
) -> tuple[GateDecision, list[int]]:
    """One look of ``--osmosis-n auto``: the gate's decision on the attempts so far (valid at
    every look) and the rows to give one more attempt, none once it is decided or every row
    has ``max_n`` attempts."""
    decision = attempts_gate(counts, threshold, confidence, anytime=True)
    if decision.outcome != "undecided":
        return decision, []
    return decision, next_attempts(counts, max_n)


@dataclass(frozen=True)
class RegressionTest:
    """The paired test of a run against its baseline over the rows both ran."""

    worse: int
    better: int
    p_value: float
    significant: bool
    confidence: float
    method: str
    change: float = 0.0
    """The mean change of the rows' pass fractions (negative: worse)."""

    @property
    def regressed(self) -> bool:
        """A significant change, for the worse."""
        return self.significant and self.change < 0

    def as_dict(self) -> dict[str, Any]:
        """``{worse, better, p_value, significant, confidence, method, change}``."""
        return {
            "worse": self.worse,
            "better": self.better,
            "p_value": self.p_value,
            "significant": self.significant,
            "confidence": self.confidence,
            "method": self.method,
            "change": self.change,
        }

    def describe(self) -> str:
        """``regressions: 25 rows worse, 26 better: not significant (p = 1.00)``."""
        if not self.significant:
            verdict = "not significant"
        elif self.change < 0:
            verdict = "a significant regression"
        else:
            verdict = "a significant improvement"
        return (
            f"regressions: {self.worse} rows worse, {self.better} better: {verdict} "
            f"(p = {format_p(self.p_value)})"
        )


def format_p(p: float) -> str:
    """``1.00``, ``0.03``, ``2.4e-05``."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.1e}"


def regression_test(
    pairs: Sequence[tuple[RowCounts, RowCounts]], confidence: float
) -> RegressionTest:
    """Compare each row's pass fraction now with the baseline's: ``(before, after)`` counts.

    - One attempt a row on both sides: the exact McNemar test on the rows that went from pass
      to fail (worse) and from fail to pass (better).
    - The same number of attempts on both sides of every row: the sign test on the change of
      each row's pass fraction (the same binomial test; under no change a row is as likely to
      fall as to rise because its two sides are alike).
    - Otherwise (``--osmosis-n auto``, or a baseline run with another ``--osmosis-n``): a
      fraction over 1 attempt and one over 8 are not alike, a row at 0.9 is far likelier to
      "fall" from 1/1 to 7/8 than to rise from 0/1, and the sign test would call noise a
      regression; the paired t-test on the changes needs only that they average zero.

    Rows with no scored attempt on either side are left out. Significant when
    ``p < 1 - confidence``.
    """
    scored = [(before, after) for before, after in pairs if before[1] > 0 and after[1] > 0]
    differences = [after[0] / after[1] - before[0] / before[1] for before, after in scored]
    if all(before[1] == after[1] for before, after in scored):
        p_value = sign_test(differences)
        one = all(before[1] == 1 for before, _ in scored)
        method = "exact McNemar" if one else "sign test on per-row pass fractions"
    else:
        p_value = paired_t_test(differences)
        method = "paired t-test on per-row pass fractions"
    return RegressionTest(
        worse=sum(1 for d in differences if d < 0),
        better=sum(1 for d in differences if d > 0),
        p_value=p_value,
        significant=p_value < 1.0 - confidence,
        confidence=confidence,
        method=method,
        change=math.fsum(differences) / len(differences) if differences else 0.0,
    )


def summary_intervals(summary: Mapping[str, Any], confidence: float) -> dict[str, Any]:
    """The intervals a report's ``summary`` gains: ``pass_rate_interval`` (attempts),
    ``rows.pass_rate_interval`` and ``reward_stats.mean_interval``, as ``{low, high,
    confidence, method}``; returned as the summary's keys to update (``rows`` and
    ``reward_stats`` whole)."""
    extra: dict[str, Any] = {
        "pass_rate_interval": wilson_interval(
            int(summary.get("passed", 0)), int(summary.get("completed_samples", 0)), confidence
        ).as_dict()
    }
    rows = summary.get("rows")
    if isinstance(rows, Mapping):
        scored = int(rows.get("passed", 0)) + int(rows.get("failed", 0))
        extra["rows"] = {
            **rows,
            "pass_rate_interval": wilson_interval(
                int(rows.get("passed", 0)), scored, confidence
            ).as_dict(),
        }
    reward = summary.get("reward_stats")
    if isinstance(reward, Mapping):
        interval = mean_interval_from_moments(
            float(reward["mean"]), float(reward["std"]), int(summary.get("graded", 0)), confidence
        )
        extra["reward_stats"] = {
            **reward,
            "mean_interval": None if interval is None else interval.as_dict(),
        }
    return extra
