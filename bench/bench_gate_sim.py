"""Gates that do not flap, simulated: issue 29's four targets, with no model.

A simulated policy passes row ``i`` on each attempt with probability ``p_i`` (seeded), so a
run is a draw of every attempt's outcome; the decisions are made by the very functions the
plugin calls (:mod:`osmosis_rollout.runs.gating`), ``--osmosis-n auto``'s rounds included.
Two kinds of suites: ``same`` (every row passes with the same probability: the most a suite of
that pass rate can vary) and ``mixed`` (``p_i`` drawn once from a Beta distribution of that
mean with concentration 2, so most rows nearly always pass or fail and some are flaky, as in
real suites).

1. False alarms: 1,000 runs of an unchanged policy against a baseline run of its own, 200
   rows: how often the paired test calls a significant regression (fails the run with
   ``--osmosis-gate-confidence 0.95 --osmosis-fail-on-regression``), beside the naive "any
   row regressed" rule (``--osmosis-fail-on-regression`` without a confidence); also with the
   run repeating each row 4 times against a baseline run once (the paired t-test's case).
2. Power: a 10-point drop (0.85 to 0.75; in ``mixed``, every ``p_i`` scaled by 0.75/0.85)
   over 200 rows: how often the regression is significant, one attempt a row and with repeats.
3. Stability: true pass rate 0.90 against a threshold 0.80, 100 rows, gate confidence 0.95:
   the three-way gate with ``--osmosis-n auto`` (and with one attempt a row), beside the
   point-estimate gate (``--osmosis-min-pass-rate`` alone) and how often it flips between two
   consecutive runs; and the same at a true rate equal to the threshold, where any decided
   verdict is an error.
4. Cost: attempts per row of ``--osmosis-n auto`` (max 8) against a fixed ``--osmosis-n 8``
   at the same confidence, with each one's decision error and undecided rates; and, 5 points
   from the threshold, ``auto`` allowed up to 16 attempts a row.

    .venv/bin/python bench/bench_gate_sim.py [--runs 1000] [--seed 29]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _benchlib import machine, table

from osmosis_rollout.runs.gating import (
    RowCounts,
    attempts_gate,
    auto_round,
    regression_test,
    rows_gate,
)

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
    chances: Sequence[float], threshold: float, rng: random.Random, max_n: int = MAX_N
) -> tuple[str, int]:
    """``--osmosis-n auto``: every row once, then rounds until decided or ``max_n``."""
    counts = attempts(chances, 1, rng)
    spent = len(counts)
    while True:
        decision, more = auto_round(counts, threshold, CONFIDENCE, max_n)
        if not more:
            return decision.outcome, spent
        for index in more:
            passed, scored = counts[index]
            counts[index] = (passed + (rng.random() < chances[index]), scored + 1)
        spent += len(more)


def false_alarms(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for kind, now_n in (("same", 1), ("mixed", 1), ("same", 4), ("mixed", 4)):
        chances = suite(kind, 0.85, 200, seed)
        rng = random.Random(seed + 1)
        paired = naive = worse_total = better_total = 0
        method = ""
        for _ in range(runs):
            before, after = attempts(chances, 1, rng), attempts(chances, now_n, rng)
            test = regression_test(list(zip(before, after, strict=True)), CONFIDENCE)
            method = test.method
            paired += test.regressed
            naive += test.worse > 0
            worse_total += test.worse
            better_total += test.better
        lines.append(
            [
                f"unchanged 0.85, {kind}, n 1 vs {now_n}",
                method,
                f"{worse_total / runs:.1f}/{better_total / runs:.1f}",
                f"{paired / runs:.1%}",
                f"{naive / runs:.1%}",
            ]
        )
    return lines


def power(runs: int, seed: int) -> list[list[object]]:
    lines = []
    for kind in ("same", "mixed"):
        before_chances = suite(kind, 0.85, 200, seed)
        after_chances = [p * 0.75 / 0.85 for p in before_chances]
        for n in (1, 2, 4):
            rng = random.Random(seed + 2)
            detected = 0
            for _ in range(runs):
                before = attempts(before_chances, n, rng)
                after = attempts(after_chances, n, rng)
                test = regression_test(list(zip(before, after, strict=True)), CONFIDENCE)
                detected += test.regressed
            lines.append([f"0.85 -> 0.75, {kind}", n, f"{detected / runs:.1%}"])
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    started = time.perf_counter()
    print(machine())
    print(f"{args.runs} seeded runs per line, seed {args.seed}, confidence {CONFIDENCE:.0%}\n")
    print(
        "1. false alarms: an unchanged policy against its own baseline, 200 rows "
        "(baseline n 1, this run n 1 or 4)"
    )
    print(
        table(
            ["suite", "test", "worse/better", "paired test fires", "any row regressed fires"],
            false_alarms(args.runs, args.seed),
        )
    )
    print("\n2. power: a 10-point drop over 200 rows (both runs with n attempts a row)")
    print(table(["suite", "n", "regression detected"], power(args.runs, args.seed)))
    print("\n3. stability: 100 rows, threshold 0.80 (three-way columns: passed/failed/undecided)")
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
            stability(args.runs, args.seed),
        )
    )
    print("\n4. cost: n auto (max 8) against a fixed n 8, 100 rows, threshold 0.80")
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
            cost(args.runs, args.seed),
        )
    )
    print("\n4b. cost 5 points from the threshold: n auto with --osmosis-max-n 16")
    print(
        table(
            ["suite", "auto attempts/row", "auto wrong", "auto undecided", "auto/n 8"],
            cost_near(args.runs, args.seed),
        )
    )
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
