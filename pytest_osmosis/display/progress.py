"""Live progress while rows run: the counts, the line that shows them, and how it is drawn.

:class:`ProgressState` counts finished rows on an injected clock; :func:`fit` keeps the fields
that fit the terminal; :class:`ProgressDisplay` draws them in place below pytest's line (``bar``,
erased before pytest writes again) or as one plain line per interval (``line``, for CI logs),
through a :class:`Terminal`: nothing here touches pytest, so tests use a fake clock and screen.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal, NamedTuple

from osmosis_rollout.runs.report_text import format_cost
from pytest_osmosis.results.report import Segment

_ERASE_LINE = "\r\x1b[K"
_SEPARATOR = "  "
_ESTIMATED = " (estimated)"


def format_duration(seconds: float | None) -> str:
    """``7s``, ``1m05s``, ``2h03m``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_rate(rate: float | None) -> str:
    """``0.25 rows/s``, ``12.5 rows/s``, ``340 rows/s``; ``- rows/s`` before the first row."""
    if rate is None or not math.isfinite(rate):
        return "- rows/s"
    digits = 2 if rate < 10 else 1 if rate < 100 else 0
    return f"{rate:.{digits}f} rows/s"


class Field(NamedTuple):
    """One field of the status line: its text, its pytest markup, and how long it is kept."""

    text: str
    markup: dict[str, bool]
    keep: int


@dataclass
class _Row:
    category: str
    tokens: int
    tokens_estimated: bool
    cost: float | None
    cost_estimated: bool


@dataclass
class ProgressState:
    """Counts of one run so far; every figure derived from them reads the injected clock.
    ``running`` is the rollouts in flight, or None where it is not known (the pytest-xdist
    controller sees rows finish, not rollouts start)."""

    total: int
    clock: Callable[[], float] = time.monotonic
    started_at: float | None = None
    running: int | None = 0
    _rows: dict[str, _Row] = field(default_factory=dict, repr=False)

    def counts(self) -> Counter[str]:
        """Finished rows by category: ``passed``, ``failed`` (below the threshold),
        ``errored`` (its rollouts errored) and ``skipped`` (the grader removed it)."""
        return Counter(row.category for row in self._rows.values())

    @property
    def done(self) -> int:
        """Rows with a verdict."""
        return len(self._rows)

    @property
    def tokens(self) -> int:
        """Tokens used by the finished rows."""
        return sum(row.tokens for row in self._rows.values())

    def start(self) -> None:
        """Mark the moment rows start running (the rate is measured from here)."""
        if self.started_at is None:
            self.started_at = self.clock()

    def row_finished(
        self,
        key: str,
        verdict: str,
        *,
        errored: bool = False,
        tokens: int = 0,
        tokens_estimated: bool = False,
        cost: float | None = None,
        cost_estimated: bool = False,
    ) -> None:
        """Count one finished row (``passed``, ``failed`` or ``skipped``; a failed row whose
        rollouts errored counts as ``errored``); a later call for its ``key`` replaces this one,
        as pytest's report of a row replaces its early count."""
        self.start()
        category = "errored" if verdict == "failed" and errored else verdict
        self._rows[key] = _Row(category, tokens, tokens_estimated, cost, cost_estimated)

    def rate(self) -> float | None:
        """Rows per second since :meth:`start`, or None before the first row finished."""
        elapsed = 0.0 if self.started_at is None else self.clock() - self.started_at
        if self.done == 0 or elapsed <= 0:
            return None
        return self.done / elapsed

    def eta(self) -> float | None:
        """Seconds until the last row, at the rate so far (None while it is unknown)."""
        if self.done >= self.total:
            return 0.0
        rate = self.rate()
        return None if rate is None else (self.total - self.done) / rate

    def fields(self) -> list[Field]:
        """The status line's fields, in order. A narrow terminal keeps the counts longest, then
        the ETA, the rate, tokens and cost; "running" and a zero "errored" give way to the ETA."""
        counts = self.counts()
        passed, errored, skipped = counts["passed"], counts["errored"], counts["skipped"]
        # "failed" counts the errored rows too, as the summary, the HTML and report.json do.
        failed = counts["failed"] + errored
        fields = [Field(f"osmosis {self.done}/{self.total} rows", {"bold": True}, 100)]
        if self.running is not None:
            fields.append(Field(f"running {self.running}", {}, 60))
        fields += [
            Field(f"passed {passed}", {"green": True} if passed else {}, 90),
            Field(f"failed {failed}", {"red": True} if failed else {}, 95),
            Field(f"errored {errored}", {"red": True} if errored else {}, 94 if errored else 55),
        ]
        if skipped:
            fields.append(Field(f"skipped {skipped}", {"yellow": True}, 88))
        fields.append(Field(format_rate(self.rate()), {}, 50))
        fields.append(Field(f"ETA {format_duration(self.eta())}", {}, 80))
        rows = self._rows.values()
        if self.tokens:
            mark = _ESTIMATED if any(row.tokens_estimated for row in rows if row.tokens) else ""
            fields.append(Field(f"tokens {self.tokens:,}{mark}", {}, 30))
        priced = [row for row in rows if row.cost is not None]
        if priced:
            mark = _ESTIMATED if any(row.cost_estimated for row in priced) else ""
            cost = format_cost(sum(row.cost or 0.0 for row in priced))
            fields.append(Field(f"cost {cost}{mark}", {}, 20))
        return fields


def fit(fields: list[Field], width: int | None = None) -> list[Segment]:
    """The fields that fit in ``width`` characters (all without one), as pieces to write. Fields
    go whole, lowest ``keep`` first, so a narrow terminal shows fewer fields rather than one cut
    mid-word; only a first field wider than the terminal is cut."""
    kept = list(fields)
    if width is not None:
        while len(kept) > 1 and len(_SEPARATOR.join(f.text for f in kept)) > width:
            kept.remove(min(kept, key=lambda f: f.keep))
        if kept and len(kept[0].text) > width:
            kept = [kept[0]._replace(text=kept[0].text[: max(0, width)])]
    return [(_SEPARATOR + text if i else text, markup) for i, (text, markup, _) in enumerate(kept)]


def progress_segments(state: ProgressState, width: int | None = None) -> list[Segment]:
    """The status line as pieces with pytest markup, fitted to ``width`` when one is given."""
    return fit(state.fields(), width)


def progress_line(state: ProgressState, width: int | None = None) -> str:
    """The status line as plain text."""
    return "".join(text for text, _ in progress_segments(state, width))


@dataclass
class Terminal:
    """Where the display writes: ``write(text, markup)``, ``column()`` (where pytest left the
    cursor on its current line), the terminal's ``width()``, and ``flush()``."""

    write: Callable[[str, dict[str, bool]], None]
    column: Callable[[], int]
    width: Callable[[], int]
    flush: Callable[[], None] = lambda: None


@dataclass
class ProgressDisplay:
    """Draws a :class:`ProgressState` as an in-place line (``bar``) or periodic lines (``line``)."""

    state: ProgressState
    terminal: Terminal
    _: KW_ONLY
    mode: Literal["bar", "line"]
    interval: float = 30.0  # seconds between plain lines (--osmosis-progress-interval)
    refresh: float = 0.25  # seconds between redraws of the in-place line
    shown: bool = field(default=False, init=False)  # the in-place line is on the screen
    lines_written: int = field(default=0, init=False)
    _column: int = field(default=0, init=False)
    _last_draw: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.mode not in ("bar", "line"):
            raise ValueError(f"mode must be 'bar' or 'line', got {self.mode!r}")

    def due(self, *, force: bool = False) -> bool:
        """True when :meth:`update` would draw now (so a caller can skip preparing for it)."""
        now = self.state.clock()
        if self.mode == "bar":
            return force or self._last_draw is None or now - self._last_draw >= self.refresh
        # The first plain line comes one interval after the start, then one per interval.
        since = self._last_draw if self._last_draw is not None else self.state.started_at
        return since is not None and now - since >= self.interval

    def update(self, *, force: bool = False) -> bool:
        """Draw when it is time to (a few times a second, or once per interval); True if drawn.
        ``force`` redraws the in-place line now; plain lines still keep to one per interval."""
        self.state.start()
        if not self.due(force=force):
            return False
        if self.mode == "bar":
            self._draw_bar(self.state.fields())
        else:
            if self.terminal.column() > 0:
                self.terminal.write("\n", {})
            self._write([*progress_segments(self.state), ("\n", {})])
            self.lines_written += 1
        self._last_draw = self.state.clock()
        return True

    def status(self, text: str) -> None:
        """Show ``text`` (a start-up step) on the in-place line until the counts replace it
        (not in plain lines: they keep to one per interval)."""
        if self.mode == "bar":
            self._draw_bar([Field(text, {}, 100)])

    def _draw_bar(self, fields: list[Field]) -> None:
        # The last column is left free: a line that reaches it wraps on some terminals.
        width = max(1, self.terminal.width() - 1)
        if self.shown:
            self.terminal.write(_ERASE_LINE, {})
        else:
            column = self.terminal.column()
            if column >= width:
                return  # pytest's line already wrapped: going back up would miss it
            self._column = column
            self.terminal.write("\n", {})
            self.shown = True
        self._write(fit(fields, width))

    def _write(self, segments: list[Segment]) -> None:
        for text, markup in segments:
            self.terminal.write(text, markup)
        self.terminal.flush()

    def clear(self) -> None:
        """Erase the in-place line and put the cursor back where pytest left it."""
        if not self.shown:
            return
        back = f"\x1b[{self._column}C" if self._column else ""
        self._write([(_ERASE_LINE + "\x1b[1A" + back, {})])  # erase, up one line, to the column
        self.shown = False
