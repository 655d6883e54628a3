"""``--osmosis-n auto``: attempts spent only while the confidence gate is undecided.

Every row runs once; then, while the gate is undecided, a quarter of the rows at a time, the
least measured first, get one more attempt, until it is decided or every row has
``--osmosis-max-n`` attempts (:func:`osmosis_rollout.runs.gating.auto_round` decides both).
The rounds run before pytest reports the first row, under the keys the row runner gives a
row's attempts (``<nodeid>#<attempt>``), so each item finds its attempts finished and reports
them as it would a fixed ``--osmosis-n``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from osmosis_rollout.runs.gating import RowCounts, auto_round
from pytest_osmosis.options import OsmosisSettings
from pytest_osmosis.results.verdict import STATUS_SKIPPED, attempt_passes

if TYPE_CHECKING:
    import pytest

    from osmosis_rollout.runs.report_model import AttemptRecord
    from pytest_osmosis.keys import RowRef
    from pytest_osmosis.run.engine import Engine


def run_rounds(
    engine: Engine,
    settings: OsmosisSettings,
    rows: Sequence[tuple[pytest.Item, RowRef]],
    *,
    deadline: float,
) -> dict[str, int]:
    """Run every row once, then further attempts while the gate is undecided; return how
    many attempts each row (by node id) got. An attempt with no result within ``deadline``
    (the item deadline) counts as a miss here; its item reports what became of it."""
    keys = [item.nodeid for item, _ in rows]
    attempts = dict.fromkeys(keys, 0)
    counts: list[RowCounts] = [(0, 0)] * len(rows)
    chosen = list(range(len(rows)))
    while chosen:
        futures = []
        for index in chosen:  # one more attempt for each chosen row, all started at once
            attempt = attempts[keys[index]]
            attempts[keys[index]] += 1
            ref = rows[index][1]
            cassette = ref.cassette_key or ref.row.key
            run = functools.partial(
                engine.runner.run_attempt, ref.row, attempt, cassette_key=cassette
            )
            futures.append(engine.scheduler.submit(f"{keys[index]}#{attempt}", run))
        started = time.monotonic()
        for index, future in zip(chosen, futures, strict=True):
            result: AttemptRecord | None
            try:
                result = engine.scheduler.wait(
                    future, max(0.0, started + deadline - time.monotonic())
                )
            except Exception:
                # Timed out, cancelled or failed: a miss for the gate; the row's item reports it.
                result = None
            if result is None or result.status != STATUS_SKIPPED:
                passed, scored = counts[index]
                won = result is not None and attempt_passes(
                    result, settings.pass_threshold, ungraded_passes=not settings.pass_threshold_set
                )
                counts[index] = (passed + won, scored + 1)
        if settings.min_pass_rate is None or settings.gate_confidence is None:
            break
        _, chosen = auto_round(
            counts, settings.min_pass_rate, settings.gate_confidence, settings.max_n
        )
        # A row whose every attempt was skipped keeps its place: it has no scored attempt.
        chosen = [i for i in chosen if attempts[keys[i]] < settings.max_n]
    return attempts
