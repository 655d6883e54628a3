"""The platform's upload rules on top of normalisation: :func:`validate_dataset`."""

from __future__ import annotations

from pathlib import Path

from osmosis_rollout.dataset.problems import counted
from osmosis_rollout.dataset.rows import MIN_PLATFORM_ROWS, DatasetReport
from osmosis_rollout.dataset.scan import recall, scan

__all__ = ["validate_dataset"]


def validate_dataset(path: str | Path, *, min_rows: int = MIN_PLATFORM_ROWS) -> DatasetReport:
    """Check a dataset file against the upload and normalisation rules; never raises for it.

    Errors: anything :func:`load_dataset` rejects, plus the upload rules (every JSONL line
    has the first line's keys; in metadata mode every row holds a non-empty JSON object
    with no nested ``{}``, 64-bit integers and one type per key across rows; the Parquet
    metadata column is a struct or string; at most 5 GB). Warnings: fewer than
    ``min_rows`` rows (the platform's upload minimum), Parquet content not checked
    because pyarrow is missing. Stops reading after :data:`MAX_REPORTED_ERRORS` errors.
    A file :func:`load_dataset` has just read whole, unchanged since, is not read again.
    """
    report = recall(path) or scan(path, None).upload_report()
    if 0 < report.n_rows < min_rows and not report.truncated:
        report.warnings.append(
            f"only {counted(report.n_rows, 'row')}: the platform needs at least {min_rows} "
            "to upload this dataset"
        )
    return report
