"""How close LocalBackend gets to ideal concurrency on I/O-bound rollouts.

Runs N rollouts of a trivial async workflow (one ``asyncio.sleep``) plus a trivial grader
through ``LocalBackend.execute`` at several ``max_concurrent`` settings and prints, for each,
the median wall time of ``--repeats`` runs next to the ideal ``ceil(N / c) * sleep``.

    .venv/bin/python bench/bench_local_concurrency.py
    .venv/bin/python bench/bench_local_concurrency.py --rollouts 200 --sleep 0.02 --concurrency 32 1
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from typing import Any

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutStatus,
)


class SleepyWorkflow(AgentWorkflow[Any]):
    """Waits ``metadata["sleep"]`` seconds (a stand-in for one model call), then answers."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        assert ctx.metadata is not None
        await asyncio.sleep(ctx.metadata["sleep"])
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class ExactMatch(Grader):
    """Reward 1 when the last message equals the label."""

    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(float(ctx.sample.messages[-1]["content"] == ctx.label))


async def run_once(rollouts: int, concurrency: int, sleep: float, artifact_root: str) -> float:
    """Wall seconds for ``rollouts`` concurrent executes on a fresh backend."""
    config = AgentWorkflowConfig(
        name="bench", concurrency=ConcurrencyConfig(max_concurrent=concurrency)
    )
    backend = LocalBackend(
        workflow=SleepyWorkflow,
        workflow_config=config,
        grader=ExactMatch,
        artifact_root=artifact_root,
    )
    requests = [
        ExecutionRequest(
            id=f"bench-{concurrency}-{i}",
            prompt=[{"role": "user", "content": "2+2?"}],
            label="4",
            metadata={"sleep": sleep},
        )
        for i in range(rollouts)
    ]
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(backend.execute(r) for r in requests))
    elapsed = time.perf_counter() - started
    failed = [o.result for o in outcomes if o.result.status is not RolloutStatus.SUCCESS]
    if failed:
        raise SystemExit(f"{len(failed)} rollouts failed, first: {failed[0]!r}")
    await backend.shutdown()
    return elapsed


def main() -> None:
    """Parse flags, run the grid, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.02, help="seconds per workflow")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 1])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    header = f"{'rollouts':>8} {'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="osmosis-bench-") as artifact_root:
        for concurrency in args.concurrency:
            walls = [
                asyncio.run(run_once(args.rollouts, concurrency, args.sleep, artifact_root))
                for _ in range(args.repeats)
            ]
            wall = statistics.median(walls)
            ideal = math.ceil(args.rollouts / concurrency) * args.sleep
            print(
                f"{args.rollouts:>8} {concurrency:>11} {wall:>8.3f} {ideal:>8.3f} "
                f"{wall / ideal:>6.2f}"
            )


if __name__ == "__main__":
    main()
