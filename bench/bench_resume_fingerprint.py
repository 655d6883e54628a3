"""What resume's fingerprint costs a run: hashing every file of the rollout's folder, once.

A run computes the run-wide fingerprint once (every row's journal line carries it); before
issue 33 it hashed only the entrypoint file. This measures both side by side, for each example
rollout and for synthetic rollout folders of 100 to 10,000 files of 4 KB, and prints a table.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_resume_fingerprint.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_osmosis.results.resume import file_digest, rollout_digest

REPO = Path(__file__).resolve().parent.parent
REPEATS = 5


def median_ms(call: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def synthetic(root: Path, files: int) -> Path:
    """A rollout folder of ``files`` files of 4 KB, 100 to a subfolder, beside main.py."""
    folder = root / f"rollout-{files}"
    for i in range(files):
        path = folder / f"pkg{i // 100}" / f"module{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i % 256]) * 4096)
    (folder / "main.py").write_text("x = 1\n")
    return folder / "main.py"


def main() -> None:
    rows: list[tuple[str, int, float, float]] = []
    for entry in sorted(REPO.glob("example_rollouts/*/rollouts/*/main.py")):
        files = sum(1 for p in entry.parent.rglob("*") if p.is_file())
        base = entry.parent
        rows.append(
            (
                entry.parent.name,
                files,
                median_ms(lambda e=entry, b=base: file_digest(str(e), base=b)),
                median_ms(lambda e=entry, b=base: rollout_digest(str(e), base=b)),
            )
        )
    with tempfile.TemporaryDirectory() as tmp:
        for count in (100, 1000, 10000):
            entry = synthetic(Path(tmp), count)
            rows.append(
                (
                    f"synthetic {count} x 4 KB",
                    count + 1,
                    median_ms(lambda e=entry: file_digest(str(e), base=e.parent)),
                    median_ms(lambda e=entry: rollout_digest(str(e), base=e.parent)),
                )
            )
    print(f"{'rollout folder':<26}{'files':>7}{'entrypoint ms':>15}{'folder ms':>11}")
    print("-" * 59)
    for name, files, before, after in rows:
        print(f"{name:<26}{files:>7}{before:>15.2f}{after:>11.2f}")


if __name__ == "__main__":
    main()
