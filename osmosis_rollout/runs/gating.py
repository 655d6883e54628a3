"""Gate decisions with a stated confidence: pass-rate gates, the paired regression test, and
where further attempts go.

The plugin's gates (:mod:`pytest_osmosis.results.gates`), its ``--osmosis-n auto`` rounds
(:mod:`pytest_osmosis.run.auto_repeats`) and the simulation benchmark (``bench/bench_gate_sim.py``)
all decide through these functions, so the benchmark's error rates are the plugin's.
The statistics themselves, with their references, are in :mod:`osmosis_rollout.runs.stats`.

What is estimated: the pass rate of the *task* the rows are drawn from, for every number of
attempts. A run's rows are a sample of the task; row ``i`` passes an attempt with its own
probability ``p_i``, and the gate judges ``mean(p_i)`` over the task, not over these rows: a
second run on other rows of the same task should reach the same verdict at the same
confidence.

- One attempt a row: Wilson's interval on the rows that passed, of those scored.
- Repeats (``--osmosis-n N`` or ``auto``): the mean over rows of each row's pass fraction,
  with an interval *clustered by row* (:func:`~osmosis_rollout.runs.stats.clustered_interval`):
  its variance is the spread between the rows' fractions, so attempts narrow it only as far
  as the rows differ less than coins would, and 20 rows stay 20 rows however often each ran.
  With ``--osmosis-n auto`` the run looks after every round, so the quantile is a
  normal-mixture confidence sequence's (:func:`~osmosis_rollout.runs.stats.mixture_radius`),
  valid at every look at once.
- A row rule given with repeats (``--osmosis-row-pass any`` for pass@k, ``majority``, ...):
  the rate that rule defines, a task row passing it over its ``N`` attempts; Wilson's
  interval over the rows' verdicts.
- A threshold of 1 means every row must pass: any miss shows the task's rate is below it.

The regression test against a baseline is one-sided ("worse"), stratified by row, exact
when it is cheap (:func:`regression_test`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from osmosis_rollout.runs.stats import (
    EXACT_STRATA_LIMIT,
    Interval,
    Table,
    binomial_tail,
    clustered_interval,
    clustered_interval_from_moments,
    cmh_test,
    mh_risk_difference,
    mixture_radius,
    stratified_exact_test,
    two_sided_quantile,
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
    "reward_interval",
    "rows_gate",
    "rule_gate",
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
    """What was judged: ``pass rate`` (rows), ``attempt pass rate`` (repeats) or
    ``row pass rate (any of 3)`` (a row rule over repeats)."""
    rows: int = 0
    """How many rows were scored."""

    @property
    def estimand(self) -> str:
        """What the gate's confidence is about, in words, for the terminal and the report."""
        what = {
            "pass rate": "the pass rate",
            "attempt pass rate": "the pass rate of one attempt",
        }.get(self.measure, "the " + self.measure)
        rule = (
            "every row must pass"
            if self.threshold >= 1.0
            else f"{self.interval.method} at {percent(self.interval.confidence)}"
        )
        return f"{what} on the task the {self.rows} rows are drawn from ({rule})"

    def describe(self) -> str:
        """``gate: pass rate 81.0% [72.1%, 87.6%] vs 80%: undecided at 95%: add rows or attempts``."""
        head = (
            f"gate: {self.measure} {self.estimate:.1%} "
            f"[{self.interval.low:.1%}, {self.interval.high:.1%}] vs {percent(self.threshold)}: "
            f"{self.outcome} at {percent(self.interval.confidence)}"
        )
        return head + (": add rows or attempts" if self.outcome == "undecided" else "")

    def as_dict(self) -> dict[str, Any]:
        """The report's view of the decision."""
        return {
            "outcome": self.outcome,
            "measure": self.measure,
            "estimate": self.estimate,
            "estimand": self.estimand,
            "interval": self.interval.as_dict(),
        }


def decide(interval: Interval, threshold: float, estimate: float) -> GateOutcome:
    """Passed when the lower bound reaches ``threshold``, failed when the upper bound is below
    it, else undecided. A threshold of 1 (every row must pass) is decided by the estimate
    itself: no interval's lower bound reaches 1, and one miss shows the rate is below it."""
    if threshold >= 1.0:
        return "passed" if estimate >= 1.0 else "failed"
    if interval.low >= threshold:
        return "passed"
    if interval.high < threshold:
        return "failed"
    return "undecided"


def rows_gate(passed: int, scored: int, threshold: float, confidence: float) -> GateDecision:
    """The gate on the rows' pass rate, one attempt a row: Wilson's interval."""
    interval = wilson_interval(passed, scored, confidence)
    estimate = passed / scored if scored else 0.0
    return GateDecision(
        decide(interval, threshold, estimate), estimate, interval, threshold, rows=scored
    )


def rule_gate(
    passed: int, scored: int, threshold: float, confidence: float, rule: str, attempts: int
) -> GateDecision:
    """The gate on the rate a row rule defines over ``attempts`` attempts a row (``any`` is
    pass@k): each row's verdict is one draw from the task, so Wilson's interval over rows."""
    decision = rows_gate(passed, scored, threshold, confidence)
    return dataclasses.replace(decision, measure=f"row pass rate ({rule} of {attempts})")


def attempts_interval(
    counts: Sequence[RowCounts], confidence: float, *, anytime: bool
) -> tuple[float, Interval]:
    """The mean of the rows' pass fractions and its interval clustered by row (rows with no
    scored attempt are left out). ``anytime``: valid at every look of ``--osmosis-n auto``'s
    rounds, the quantile a normal-mixture confidence sequence's (never below the t quantile).
    """
    scored_rows = [(p, n) for p, n in counts if n > 0]
    rows = len(scored_rows)
    if not rows:
        return 0.0, Interval(0.0, 1.0, confidence, "no scored rows")
    fractions = [p / n for p, n in scored_rows]
    attempts = float(sum(n for _, n in scored_rows))
    mean = clustered_interval(fractions, confidence, max_size=attempts)
    if not anytime:
        low, high = mean.interval.low, mean.interval.high
        return mean.estimate, Interval(low, high, confidence, "wilson, clustered by row")
    # The variance the interval was read at (the pseudo-rows keep it above 0 at 0% and 100%).
    centre = (mean.estimate * rows + 1.0) / (rows + 2.0)
    variance = centre * (1.0 - centre) / mean.effective_size
    # Tightest around four attempts a row at a 50% pass rate; loose by little elsewhere.
    radius = mixture_radius(variance, confidence, tuned_variance=0.25 / (4 * rows))
    quantile = max(radius / math.sqrt(variance), two_sided_quantile(confidence, rows))
    anytime_mean = clustered_interval(fractions, confidence, max_size=attempts, quantile=quantile)
    interval = anytime_mean.interval
    return anytime_mean.estimate, Interval(
        interval.low, interval.high, confidence, "wilson, clustered by row, confidence sequence"
    )


def attempts_gate(
    counts: Sequence[RowCounts], threshold: float, confidence: float, *, anytime: bool
) -> GateDecision:
    """The gate on the task's attempt pass rate over repeated rows (:func:`attempts_interval`)."""
    estimate, interval = attempts_interval(counts, confidence, anytime=anytime)
    return GateDecision(
        decide(interval, threshold, estimate),
        estimate,
        interval,
        threshold,
        "attempt pass rate",
        rows=sum(1 for _, n in counts if n > 0),
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
    """The one-sided paired test of a run against its baseline over the rows both ran:
    did the rows pass less often now (by more than ``margin``)?"""

    worse: int
    better: int
    p_value: float
    significant: bool
    confidence: float
    method: str
    change: float = 0.0
    """The mean change of the rows' pass fractions (negative: worse)."""
    margin: float = 0.0
    """The drop tolerated (``--osmosis-regression-margin``): significant means worse by more."""
    alternative: str = "worse"
    """What a significant result means, in words (``worse by more than 0.02`` with a margin)."""

    @property
    def regressed(self) -> bool:
        """A significant drop (the test is one-sided: only "worse" is tested)."""
        return self.significant

    def as_dict(self) -> dict[str, Any]:
        """``{worse, better, p_value, significant, confidence, method, change, margin,
        alternative}``."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """``regressions: 25 rows worse, 26 better: not significant (p = 0.61, one-sided)``."""
        verdict = "a significant regression" if self.significant else "not significant"
        margin = f", margin {percent(self.margin)}" if self.margin else ""
        return (
            f"regressions: {self.worse} rows worse, {self.better} better: {verdict} "
            f"(p = {format_p(self.p_value)}, one-sided{margin})"
        )


def format_p(p: float) -> str:
    """``1.00``, ``0.03``, ``2.4e-05``."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.1e}"


def regression_test(
    pairs: Sequence[tuple[RowCounts, RowCounts]], confidence: float, *, margin: float = 0.0
) -> RegressionTest:
    """Did the rows pass less often now than in the baseline? ``(before, after)`` counts.

    One-sided at ``1 - confidence``: an unchanged policy is called a regression in at most
    that share of runs, whatever the attempts on either side. Each row is a stratum, so a
    row that always passes and one that never does each carry their own rate:

    - One attempt a row on both sides: the exact McNemar test (the rows that went from pass
      to fail against the reverse).
    - Any other mix of attempts: the exact conditional test stratified by row
      (:func:`~osmosis_rollout.runs.stats.stratified_exact_test`), or, past
      :data:`~osmosis_rollout.runs.stats.EXACT_STRATA_LIMIT` informative rows, its
      Cochran-Mantel-Haenszel normal approximation.
    - ``margin > 0`` (a non-inferiority margin): significant only when the drop is larger than
      ``margin``, by the Mantel-Haenszel risk difference with Sato's variance.

    Rows with no scored attempt on either side are left out. Significant when
    ``p < 1 - confidence``; the p-value is never 0.
    """
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin!r}")
    scored = [(before, after) for before, after in pairs if before[1] > 0 and after[1] > 0]
    differences = [after[0] / after[1] - before[0] / before[1] for before, after in scored]
    worse = sum(1 for d in differences if d < 0)
    better = sum(1 for d in differences if d > 0)
    tables: list[Table] = [(a[0], a[1], b[0], b[1]) for b, a in scored]
    if margin > 0.0:
        difference, variance = mh_risk_difference(tables)
        p_value = (
            1.0
            if variance == 0.0
            else statistics.NormalDist().cdf((difference + margin) / math.sqrt(variance))
        )
        method = "Mantel-Haenszel risk difference by row against the margin"
    elif all(before[1] == 1 and after[1] == 1 for before, after in scored):
        p_value = binomial_tail(better, worse + better) if worse + better else 1.0
        method = "exact McNemar"
    else:
        informative = sum(1 for a, an, b, bn in tables if 0 < a + b < an + bn)
        if informative <= EXACT_STRATA_LIMIT:
            p_value = stratified_exact_test(tables)
            method = "exact test stratified by row"
        else:
            p_value = cmh_test(tables)
            method = "Cochran-Mantel-Haenszel test stratified by row"
    return RegressionTest(
        worse=worse,
        better=better,
        p_value=p_value,
        significant=p_value < 1.0 - confidence,
        confidence=confidence,
        method=method,
        change=math.fsum(differences) / len(differences) if differences else 0.0,
        margin=margin,
        alternative=f"worse by more than {margin:g}" if margin else "worse",
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
        passed = int(rows.get("passed", 0))
        of_rows = wilson_interval(passed, passed + int(rows.get("failed", 0)), confidence)
        extra["rows"] = {**rows, "pass_rate_interval": of_rows.as_dict()}
    reward = summary.get("reward_stats")
    if isinstance(reward, Mapping):
        graded = int(summary.get("graded", 0))
        interval = reward_interval(
            float(reward["mean"]),
            float(reward["std"]),
            graded,
            (float(reward["min"]), float(reward["max"])),
            confidence,
        )
        extra["reward_stats"] = {
            **reward,
            "mean_interval": None if interval is None else interval.as_dict(),
            "graded": graded,
            # Attempts whose rollout errored have no reward: the mean leaves them out.
            "errored_left_out": int(summary.get("failed", 0)),
        }
    return extra


def reward_interval(
    mean: float, population_std: float, count: int, extremes: tuple[float, float], confidence: float
) -> Interval | None:
    """An interval for the mean reward that stays inside the rewards' range, from a summary's
    moments; None for no reward.

    The range is [0, 1], widened to the lowest and highest reward seen; the rewards, rescaled
    to it, get :func:`~osmosis_rollout.runs.stats.clustered_interval_from_moments` with
    Student's t quantile on ``count - 1`` degrees of freedom: for pass/fail rewards that is
    Wilson's interval with the t quantile (at least 93.3% coverage at 95% for 10 to 100
    rewards and any rate from 5% to 95%, where Wilson's own dips to 89.8%); for graded ones
    Wilson's shape at an effective size read from their spread, so 30 equal rewards still
    leave doubt.
    """
    if count < 1:
        return None
    low, high = min(0.0, extremes[0]), max(1.0, extremes[1])
    width = high - low
    quantile = two_sided_quantile(confidence, count)
    scaled = clustered_interval_from_moments(
        (mean - low) / width, (population_std / width) ** 2, count, confidence, quantile=quantile
    ).interval
    return Interval(
        low + scaled.low * width, low + scaled.high * width, confidence, "wilson, t quantile"
    )
