"""Gates whose 95% means 95%, simulated: issue 36's targets (and issue 29's), with no model.

A simulated policy passes row ``i`` on each attempt with probability ``p_i``. Rows are drawn
from a *task* whose pass rate is known, afresh every run: ``same`` (every row's ``p_i`` is
the task's rate: the most a run of that rate can vary between attempts) and ``mixed``
(``p_i`` drawn from a Beta distribution of that mean with concentration 2, so most rows
nearly always pass or fail and some are flaky, as in real suites). The decisions are made by
the very functions the plugin calls (:mod:`osmosis_rollout.runs.gating`), ``--osmosis-n
auto``'s rounds included. Every rate is printed with its own 95% Wilson interval: these are
estimates from finite runs too.

1. Calibration: rows drawn from a task whose rate equals the threshold (0.80): how often the
   gate at 95% passes, for n 1, 2, 4, 8 and auto over 20, 40, 100 and 200 rows. Target:
   at most (1 - C)/2 + 1 point = 3.5%.
2. False alarms: an unchanged policy (task 0.85) against a baseline run of its own, any mix
   of attempts (baseline n, this run n) over 10, 40 and 200 rows: how often the one-sided
   regression test fires at 95%. Target: at most 5% + 1 point.
3. Power: a 10-point drop (0.85 to 0.75; in ``mixed`` every ``p_i`` scaled by 0.75/0.85):
   100 rows one attempt each (target >= 45%), 200 rows two attempts each (target >= 90%).
4. Reward-mean coverage: how often the mean reward's interval at 95% holds the true mean,
   for pass/fail and graded rewards, from 10 rows up. Target: >= 93%.
5. Stability and cost (issue 29) on a fixed suite: the three-way gate against the point
   gate, and the attempts ``auto`` spends against a fixed ``--osmosis-n 8``.

    .venv/bin/python bench/bench_gate_sim.py [--runs 1000] [--seed 36] [--sections 1b2345]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _benchlib import machine, table

from osmosis_rollout.runs.gating import (
    RowCounts,
    attempts_gate,
    auto_round,
    regression_test,
    reward_interval,
    rows_gate,
)
from osmosis_rollout.runs.stats import wilson_interval

CONFIDENCE = 0.95
MAX_N = 8


def suite(kind: str, rate: float, rows: int, seed: int) -> list[float]:
    """Each row's chance of passing an attempt: all ``rate``, or Beta-drawn of mean ``rate``."""
    if kind == "same":
        return [rate] * rows
    rng = random.Random(seed)
    concentration = 2.0
    chances = [
        rng.betavariate(rate * concentration, (1 - rate) * concentration) for _ in range(rows)
    ]
    # Rescaled so the suite's true rate is exactly ``rate``, not a draw around it.
    mean = sum(chances) / rows
    return [min(1.0, c * rate / mean) for c in chances]


def attempts(chances: Sequence[float], n: int, rng: random.Random) -> list[RowCounts]:
    """One run, ``n`` attempts a row: each row's (passed, scored)."""
    return [(sum(rng.random() < p for _ in range(n)), n) for p in chances]


def auto_run(
    chances: Sequence[float],
    threshold: float,
    rng: random.Random,
    max_n: int = MAX_N,
    confidence: float = CONFIDENCE,
) -> tuple[str, int]:
    """``--osmosis-n auto``: every row once, then rounds until decided or ``max_n``."""
    counts = attempts(chances, 1, rng)
    spent = len(counts)
    while True:
        decision, more = auto_round(counts, threshold, confidence, max_n)
        if not more:
            return decision.outcome, spent
        for index in more:
            passed, scored = counts[index]
            counts[index] = (passed + (rng.random() < chances[index]), scored + 1)
        spent += len(more)


def rate(hits: int, runs: int) -> str:
    """``2.1% [1.4, 3.1]``: a share of runs and its 95% Wilson interval."""
    interval = wilson_interval(hits, runs)
    return f"{hits / runs:.1%} [{interval.low:.1%}, {interval.high:.1%}]".replace("%,", ",")


def task_chances(kind: str, rate: float, rows: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh draw of rows from the task: each row's chance of passing an attempt."""
    if kind == "same":
        return np.full(rows, rate)
    concentration = 2.0
    return rng.beta(rate * concentration, (1 - rate) * concentration, size=rows)


def draw(chances: np.ndarray, n: int, rng: np.random.Generator) -> list[RowCounts]:
    """One run, ``n`` attempts a row."""
    return [(int(c), n) for c in rng.binomial(n, chances)]


def calibration(
    runs: int,
    seed: int,
    confidence: float = CONFIDENCE,
    row_counts: Sequence[int] = (20, 40, 100, 200),
) -> list[list[object]]:
    lines = []
    threshold = 0.80
    for kind in ("same", "mixed"):
        for rows in row_counts:
            rng = np.random.default_rng(seed)
            line: list[object] = [f"{kind}, {rows} rows"]
            for n in ("1", "2", "4", "8", "auto"):
                passed = 0
                for _ in range(runs):
                    chances = task_chances(kind, threshold, rows, rng)
                    if n == "auto":
                        outcome, _ = auto_run(
                            list(chances),
                            threshold,
                            random.Random(int(rng.integers(2**32))),
                            confidence=confidence,
                        )
                    elif n == "1":
                        counts = draw(chances, 1, rng)
                        outcome = rows_gate(
                            sum(p for p, _ in counts), rows, threshold, confidence
                        ).outcome
                    else:
                        counts = draw(chances, int(n), rng)
                        outcome = attempts_gate(
                            counts, threshold, confidence, anytime=False
                        ).outcome
                    passed += outcome == "passed"
                line.append(rate(passed, runs))
            lines.append(line)
    return lines


def false_alarms(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for rows in (10, 40, 200):
        for before_n, after_n in ((1, 1), (1, 2), (1, 4), (1, 8), (2, 2), (4, 4)):
            line: list[object] = [f"{rows} rows, n {before_n} vs {after_n}"]
            method = ""
            for kind in ("same", "mixed"):
                rng = np.random.default_rng(seed + rows + 10 * after_n + before_n)
                fired = 0
                for _ in range(runs):
                    chances = task_chances(kind, 0.85, rows, rng)
                    before, after = draw(chances, before_n, rng), draw(chances, after_n, rng)
                    test = regression_test(list(zip(before, after, strict=True)), CONFIDENCE)
                    method = test.method if kind == "mixed" else method
                    fired += test.regressed
                line.append(rate(fired, runs))
            lines.append([*line, method])
    return lines


def power(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for rows, n in ((100, 1), (200, 1), (200, 2), (100, 4)):
        line: list[object] = [f"{rows} rows, n {n} each side"]
        for kind in ("same", "mixed"):
            rng = np.random.default_rng(seed + 2)
            detected = 0
            for _ in range(runs):
                before_chances = task_chances(kind, 0.85, rows, rng)
                after_chances = before_chances * 0.75 / 0.85
                before, after = draw(before_chances, n, rng), draw(after_chances, n, rng)
                test = regression_test(list(zip(before, after, strict=True)), CONFIDENCE)
                detected += test.regressed
            line.append(rate(detected, runs))
        lines.append(line)
    return lines


def _graded(rng: np.random.Generator, size: int) -> np.ndarray:
    """A grader giving partial credit: 0, 0.5 or 1 (20/20/60%)."""
    return rng.choice(np.array([0.0, 0.5, 1.0]), size=size, p=[0.2, 0.2, 0.6])


REWARDS: dict[str, tuple[float, Callable[[np.random.Generator, int], np.ndarray]]] = {
    "pass/fail, p 0.5": (0.5, lambda rng, k: rng.binomial(1, 0.5, k).astype(float)),
    "pass/fail, p 0.8": (0.8, lambda rng, k: rng.binomial(1, 0.8, k).astype(float)),
    "pass/fail, p 0.9": (0.9, lambda rng, k: rng.binomial(1, 0.9, k).astype(float)),
    "0 / 0.5 / 1, mean 0.7": (0.7, _graded),
    "Beta(2, 2), mean 0.5": (0.5, lambda rng, k: rng.beta(2.0, 2.0, k)),
    "Beta(5, 1), mean 0.83": (5 / 6, lambda rng, k: rng.beta(5.0, 1.0, k)),
}


def reward_coverage(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for name, (mean, sample) in REWARDS.items():
        line: list[object] = [name]
        for count in (10, 20, 40, 100):
            rng = np.random.default_rng(seed + count)
            covered = 0
            for _ in range(runs):
                rewards = sample(rng, count)
                interval = reward_interval(
                    float(rewards.mean()),
                    float(rewards.std()),
                    count,
                    (float(rewards.min()), float(rewards.max())),
                    CONFIDENCE,
                )
                covered += interval is not None and interval.contains(mean)
            line.append(rate(covered, runs))
        lines.append(line)
    return lines


def stability(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for kind in ("same", "mixed"):
        for rate in (0.90, 0.80):
            chances = suite(kind, rate, 100, seed)
            rng = random.Random(seed + 3)
            point = flips = 0
            previous: bool | None = None
            one: dict[str, int] = {"passed": 0, "failed": 0, "undecided": 0}
            auto: dict[str, int] = {"passed": 0, "failed": 0, "undecided": 0}
            spent = 0
            for _ in range(runs):
                counts = attempts(chances, 1, rng)
                passed = sum(p for p, _ in counts)
                point_pass = passed / len(counts) >= 0.80
                point += point_pass
                flips += previous is not None and point_pass != previous
                previous = point_pass
                one[rows_gate(passed, len(counts), 0.80, CONFIDENCE).outcome] += 1
                outcome, cost = auto_run(chances, 0.80, rng)
                auto[outcome] += 1
                spent += cost
            lines.append(
                [
                    f"true {rate:.2f} vs 0.80, {kind}",
                    f"{point / runs:.1%}",
                    f"{flips / (runs - 1):.1%}",
                    _three_way(one, runs),
                    _three_way(auto, runs),
                    f"{spent / runs / len(chances):.2f}",
                ]
            )
    return lines


def _three_way(outcomes: dict[str, int], runs: int) -> str:
    return "/".join(f"{outcomes[k] / runs:.1%}" for k in ("passed", "failed", "undecided"))


def cost(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for kind in ("same", "mixed"):
        for rate in (0.90, 0.85, 0.80, 0.75, 0.70):
            chances = suite(kind, rate, 100, seed)
            right = "passed" if rate > 0.80 else "failed" if rate < 0.80 else None
            rng = random.Random(seed + 4)
            results = {"auto": [0, 0, 0], "fixed 8": [0, 0, 0]}  # wrong, undecided, attempts
            for _ in range(runs):
                outcome, spent = auto_run(chances, 0.80, rng)
                fixed = attempts_gate(
                    attempts(chances, MAX_N, rng), 0.80, CONFIDENCE, anytime=False
                ).outcome
                for name, verdict, attempts_spent in (
                    ("auto", outcome, spent),
                    ("fixed 8", fixed, MAX_N * len(chances)),
                ):
                    wrong = verdict != "undecided" and verdict != right
                    results[name][0] += wrong
                    results[name][1] += verdict == "undecided"
                    results[name][2] += attempts_spent
            auto, fixed_n = results["auto"], results["fixed 8"]
            lines.append(
                [
                    f"true {rate:.2f} vs 0.80, {kind}",
                    f"{auto[2] / runs / len(chances):.2f}",
                    f"{auto[0] / runs:.1%}",
                    f"{auto[1] / runs:.1%}",
                    f"{fixed_n[2] / runs / len(chances):.2f}",
                    f"{fixed_n[0] / runs:.1%}",
                    f"{fixed_n[1] / runs:.1%}",
                    f"{auto[2] / fixed_n[2]:.2f}",
                ]
            )
    return lines


def cost_near(runs: int, seed: int) -> list[list[object]]:
    """5 points from the threshold: ``auto`` with ``--osmosis-max-n 16``."""
    lines = []
    for kind in ("same", "mixed"):
        for rate in (0.85, 0.75):
            chances = suite(kind, rate, 100, seed)
            right = "passed" if rate > 0.80 else "failed"
            rng = random.Random(seed + 5)
            wrong = undecided = spent = 0
            for _ in range(runs):
                outcome, cost = auto_run(chances, 0.80, rng, max_n=16)
                wrong += outcome not in ("undecided", right)
                undecided += outcome == "undecided"
                spent += cost
            lines.append(
                [
                    f"true {rate:.2f} vs 0.80, {kind}",
                    f"{spent / runs / len(chances):.2f}",
                    f"{wrong / runs:.1%}",
                    f"{undecided / runs:.1%}",
                    f"{spent / runs / len(chances) / MAX_N:.2f}",
                ]
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument(
        "--sections",
        default="1b2345",
        help="which sections to run, e.g. 14 (default all: 1 1b 2 3 4 5)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    print(machine())
    print(f"{args.runs} seeded runs per cell, seed {args.seed}, confidence {CONFIDENCE:.0%}\n")
    if "1" in args.sections:
        print(
            "1. calibration: rows drawn from a task at rate 0.80, threshold 0.80: the gate "
            "passes (target <= 3.5%)"
        )
        print(
            table(
                ["task, rows", "n 1", "n 2", "n 4", "n 8", "n auto"],
                calibration(args.runs, args.seed),
            )
        )
    if "b" in args.sections:
        print("\n1b. the same at confidence 99% (target <= 1.5%)")
        print(
            table(
                ["task, rows", "n 1", "n 2", "n 4", "n 8", "n auto"],
                calibration(args.runs, args.seed, 0.99, (20, 40)),
            )
        )
    if "2" in args.sections:
        print(
            "\n2. false alarms: an unchanged policy (task 0.85) against its own baseline, "
            "one-sided test at 95% (target <= 6%)"
        )
        print(
            table(
                ["rows, baseline n vs this run", "same", "mixed", "test"],
                false_alarms(args.runs, args.seed),
            )
        )
    if "3" in args.sections:
        print(
            "\n3. power: a 10-point drop (0.85 to 0.75), detected at 95% one-sided "
            "(targets: 100 rows n 1 >= 45%, 200 rows n 2 >= 90%)"
        )
        print(table(["rows, attempts", "same", "mixed"], power(args.runs, args.seed)))
    if "4" in args.sections:
        print("\n4. reward-mean interval at 95%: how often it holds the true mean (target >= 93%)")
        print(
            table(
                ["rewards", "10 rows", "20 rows", "40 rows", "100 rows"],
                reward_coverage(args.runs, args.seed),
            )
        )
    if "5" in args.sections:
        stability_and_cost(args.runs, args.seed)
    print(f"\n({time.perf_counter() - started:.0f} s)")


def stability_and_cost(runs: int, seed: int) -> None:
    """Issue 29's sections on a fixed suite (``suite``), with today's gates."""
    print("\n5a. stability: 100 rows, threshold 0.80 (three-way columns: passed/failed/undecided)")
    print(
        table(
            [
                "suite",
                "point gate passes",
                "point gate flips",
                "three-way, n 1",
                "three-way, n auto",
                "auto attempts/row",
            ],
            stability(runs, seed),
        )
    )
    print("\n5b. cost: n auto (max 8) against a fixed n 8, 100 rows, threshold 0.80")
    print(
        table(
            [
                "suite",
                "auto attempts/row",
                "auto wrong",
                "auto undecided",
                "n 8 attempts/row",
                "n 8 wrong",
                "n 8 undecided",
                "auto/n 8",
            ],
            cost(runs, seed),
        )
    )
    print("\n5c. cost 5 points from the threshold: n auto with --osmosis-max-n 16")
    print(
        table(
            ["suite", "auto attempts/row", "auto wrong", "auto undecided", "auto/n 8"],
            cost_near(runs, seed),
        )
    )


if __name__ == "__main__":
    main()
