"""The dataset contract: read a dataset file, check it, and turn rows into rollout inputs.

Two entry points share one read of the file (:mod:`.scan`):

- :func:`load_dataset` selects rows (``rows="3,7,10-20"`` or ``limit``) and normalises each
  into a :class:`DatasetRow` (``initial_messages``, ``label``, ``metadata``), exactly as the
  platform's eval controller does. Any bad input stops the load with one
  :class:`~osmosis_rollout.errors.DatasetError` listing up to five problems.
- :func:`validate_dataset` applies the platform upload rules on top (uniform JSONL keys,
  metadata-mode storage rules, size) and returns a :class:`DatasetReport` instead of raising.
  The platform's four-row minimum is only a warning here: local files may be smaller.

Formats: ``.jsonl``, ``.csv`` and ``.parquet`` (Parquet needs the ``parquet`` extra). Column
names are case-sensitive.

In every error, ``row`` is what an editor shows: the 1-based line for JSONL and CSV (the CSV
header is line 1), the 1-based record number for Parquet.
"""

from osmosis_rollout.dataset.load import load_dataset, row_from_dict
from osmosis_rollout.dataset.problems import MAX_REPORTED_ERRORS
from osmosis_rollout.dataset.rows import (
    MAX_PLATFORM_BYTES,
    MIN_PLATFORM_ROWS,
    SUPPORTED_EXTENSIONS,
    DatasetMode,
    DatasetReport,
    DatasetRow,
)
from osmosis_rollout.dataset.selection import parse_row_spec
from osmosis_rollout.dataset.upload import validate_dataset

__all__ = [
    "MAX_PLATFORM_BYTES",
    "MAX_REPORTED_ERRORS",
    "MIN_PLATFORM_ROWS",
    "SUPPORTED_EXTENSIONS",
    "DatasetMode",
    "DatasetReport",
    "DatasetRow",
    "load_dataset",
    "parse_row_spec",
    "row_from_dict",
    "validate_dataset",
]
