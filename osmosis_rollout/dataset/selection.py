"""Row selection: ``rows="3,7,10-20"`` specs."""

from __future__ import annotations

import re

from osmosis_rollout.dataset.problems import counted
from osmosis_rollout.errors import DatasetError

__all__ = ["check_in_range", "parse_ranges", "parse_row_spec"]

_ROW_TOKEN_RE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_ranges(spec: str) -> list[tuple[int, int]]:
    tokens = [token.strip() for token in spec.split(",")]
    if not spec.strip() or any(not token for token in tokens):
        raise DatasetError(
            f"invalid row selection {spec!r}",
            fix="use comma-separated 0-based indices or ranges, e.g. '3,7,10-20'",
        )
    ranges: list[tuple[int, int]] = []
    for token in tokens:
        match = _ROW_TOKEN_RE.match(token)
        if match is None:
            raise DatasetError(
                f"invalid row selection {spec!r}: {token!r} is not an index or a range",
                fix="use comma-separated 0-based indices or ranges, e.g. '3,7,10-20'",
            )
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if start > end:
            raise DatasetError(
                f"invalid row selection {spec!r}: the range {token!r} is inverted",
                fix=f"write it as {end}-{start}",
            )
        ranges.append((start, end))
    return ranges


def check_in_range(ranges: list[tuple[int, int]], n: int, *, path: str | None) -> None:
    beyond = sorted((max(start, n), end) for start, end in ranges if end >= n)
    if beyond:
        shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in beyond[:5])
        valid = f"0-{n - 1}" if n else "none"
        raise DatasetError(
            f"row selection reaches past the end: {shown} (the dataset has "
            f"{counted(n, 'row')}; valid indices: {valid})",
            path=path,
            fix="select 0-based row indices below the row count",
        )


def parse_row_spec(spec: str, n: int) -> list[int]:
    """``"3,7,10-20"`` -> sorted, de-duplicated 0-based indices, all below ``n``.

    Raises :class:`DatasetError` for malformed input, an inverted range (``"5-2"``)
    or an index ``>= n``.
    """
    ranges = parse_ranges(spec)
    check_in_range(ranges, n, path=None)
    return sorted({index for start, end in ranges for index in range(start, end + 1)})
