"""``--osmosis-n auto``: attempts spent only while the confidence gate is undecided.

Every row runs once; then, while the gate (``--osmosis-min-pass-rate`` at
``--osmosis-gate-confidence``) is undecided, a quarter of the rows at a time, the least
measured first, get one more attempt, until it is decided or every row has
``--osmosis-max-n`` attempts (:func:`osmosis_rollout.runs.gating.auto_round` decides both, as it
does in ``bench/bench_gate_sim.py``).

The rounds run on the scheduler before pytest reports the first row, under the same future
keys (``<nodeid>#<attempt>``) the session gives a row's attempts, so each row's item finds
its attempts already finished and reports them as it would a fixed ``--osmosis-n``: items,
ids, the journal and the report do not change. Only the number of attempts per row does
(:attr:`AutoRepeats.attempts`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from osmosis_rollout.runs.gating import RowCounts, auto_round
from osmosis_rollout.runs.report_model import AttemptRecord
from pytest_osmosis.options import OsmosisSettings
from pytest_osmosis.results.verdict import STATUS_SKIPPED, attempt_passes

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.run.engine import Engine


@dataclass(frozen=True)
class AutoRow:
    """A row ``auto`` runs: its item's node id (the attempts' key), the row, its cassettes."""

    key: str
    row: DatasetRow
    cassette_key: str | None = None


@dataclass
class AutoRepeats:
    """How many attempts ``auto`` gave each row, and how many rounds it looked."""

    attempts: dict[str, int] = field(default_factory=dict)
    rounds: int = 0

    def attempts_for(self, key: str) -> int:
        """The attempts the row under ``key`` got (one for a row ``auto`` did not run)."""
        return self.attempts.get(key, 1)


def run_rounds(
    engine: Engine, settings: OsmosisSettings, rows: Sequence[AutoRow], *, deadline: float
) -> AutoRepeats:
    """Run every row once, then further attempts while the gate is undecided.

    ``deadline``: how long one attempt may take (the item deadline); an attempt that gives no
    result within it counts as a miss here, and its item reports what became of it.
    """
    repeats = AutoRepeats({row.key: 0 for row in rows})
    counts: list[RowCounts] = [(0, 0)] * len(rows)
    gate = settings.min_pass_rate is not None and settings.gate_confidence is not None
    chosen = list(range(len(rows)))
    while chosen:
        repeats.rounds += 1
        for index, result in zip(
            chosen, _run_round(engine, rows, chosen, repeats, deadline), strict=True
        ):
            passed, scored = counts[index]
            if result is None or result.status != STATUS_SKIPPED:
                counts[index] = (passed + _passes(result, settings), scored + 1)
        if not gate:
            break
        assert settings.min_pass_rate is not None and settings.gate_confidence is not None
        _, chosen = auto_round(
            counts, settings.min_pass_rate, settings.gate_confidence, settings.max_n
        )
        # A row whose every attempt was skipped keeps its place: it has no scored attempt.
        chosen = [i for i in chosen if repeats.attempts[rows[i].key] < settings.max_n]
    return repeats


def _passes(result: AttemptRecord | None, settings: OsmosisSettings) -> int:
    if result is None:
        return 0
    return int(
        attempt_passes(
            result, settings.pass_threshold, ungraded_passes=not settings.pass_threshold_set
        )
    )


def _run_round(
    engine: Engine,
    rows: Sequence[AutoRow],
    chosen: list[int],
    repeats: AutoRepeats,
    deadline: float,
) -> list[AttemptRecord | None]:
    """One more attempt for each chosen row, all started at once; their results in order
    (None for an attempt that failed to give one)."""
    scheduler = engine.scheduler
    futures: list[concurrent.futures.Future[AttemptRecord]] = []
    for index in chosen:
        row = rows[index]
        attempt = repeats.attempts[row.key]
        repeats.attempts[row.key] = attempt + 1
        futures.append(
            scheduler.submit(
                f"{row.key}#{attempt}",
                functools.partial(
                    engine.runner.run_attempt,
                    row.row,
                    attempt,
                    cassette_key=row.cassette_key or row.row.key,
                ),
            )
        )
    started = time.monotonic()
    results: list[AttemptRecord | None] = []
    for future in futures:
        try:
            results.append(scheduler.wait(future, max(0.0, started + deadline - time.monotonic())))
        except Exception:
            # Timed out, cancelled or failed: a miss for the gate; the row's item reports it.
            results.append(None)
    return results
