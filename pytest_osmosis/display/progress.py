"""Live progress while rows run: the counts, the line that shows them, and how it is drawn.

:class:`ProgressState` counts rows as they finish (done/total, running, passed, failed,
errored, skipped, tokens, cost) and knows the rate and the ETA; it reads time only through
an injected clock. :func:`progress_fields` turns a state into the status line's fields, and
:func:`fit` keeps those that fit the terminal, dropping whole fields by priority (the counts
last, then the ETA and rate, tokens and cost first) rather than cutting one mid-word.
:class:`ProgressDisplay` decides when to draw it:

- ``bar``: on a terminal, one line redrawn in place a few times a second. It is drawn on
  the line *below* pytest's current one and erased before pytest writes again (the cursor
  goes back up to the column where pytest left it), so pytest's dots, ``-v`` lines and
  percentages are never overwritten.
- ``line``: without a terminal (CI logs), one plain line every ``interval`` seconds, never
  more than one per interval.

Nothing here touches pytest: the display writes through callables, so the plugin decides
where output goes (with pytest's capturing suspended) and tests drive it with a fake clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from pytest_osmosis.results.report import format_cost

DEFAULT_INTERVAL_SEC = 30.0
"""Seconds between two plain lines (``--osmosis-progress-interval``)."""
BAR_REFRESH_SEC = 0.25
"""Seconds between two redraws of the in-place line: a few times a second."""

Segment = tuple[str, dict[str, bool]]
"""A piece of the status line and its pytest markup (``{"green": True}``, ...)."""

_ERASE_LINE = "\r\x1b[K"
_UP = "\x1b[1A"


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

    ``running`` is how many rollouts are in flight, or None where it is not known (the
    pytest-xdist controller sees rows finish, not rollouts start).
    """

    total: int
    clock: Callable[[], float] = time.monotonic
    started_at: float | None = None
    running: int | None = 0
    _rows: dict[str, _Row] = field(default_factory=dict, repr=False)

    def _count(self, category: str) -> int:
        return sum(1 for row in self._rows.values() if row.category == category)

    @property
    def passed(self) -> int:
        """Rows that passed."""
        return self._count("passed")

    @property
    def failed(self) -> int:
        """Rows that scored below the threshold."""
        return self._count("failed")

    @property
    def errored(self) -> int:
        """Rows whose rollouts errored."""
        return self._count("errored")

    @property
    def skipped(self) -> int:
        """Rows the grader removed."""
        return self._count("skipped")

    @property
    def done(self) -> int:
        """Rows with a verdict."""
        return len(self._rows)

    @property
    def tokens(self) -> int:
        """Tokens used by the finished rows."""
        return sum(row.tokens for row in self._rows.values())

    @property
    def tokens_estimated(self) -> bool:
        """True when some of those tokens were estimated."""
        return any(row.tokens_estimated for row in self._rows.values() if row.tokens)

    @property
    def cost(self) -> float | None:
        """The finished rows' cost in US dollars, or None when none was priced."""
        costs = [row.cost for row in self._rows.values() if row.cost is not None]
        return sum(costs) if costs else None

    @property
    def cost_estimated(self) -> bool:
        """True when some of that cost came from estimated tokens."""
        return any(row.cost_estimated for row in self._rows.values() if row.cost is not None)

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
        """Count one finished row; a later call for the same ``key`` replaces the earlier one.

        ``verdict`` is ``passed``, ``failed`` or ``skipped``; a failed row whose rollouts
        errored (rather than scoring below the threshold) is counted as ``errored``. The
        plugin counts a row when its rollouts finish and again, authoritatively, when pytest
        reports it.
        """
        self.start()
        category = "errored" if verdict == "failed" and errored else verdict
        self._rows[key] = _Row(category, tokens, tokens_estimated, cost, cost_estimated)

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (0 before it)."""
        if self.started_at is None:
            return 0.0
        return max(0.0, self.clock() - self.started_at)

    def rate(self) -> float | None:
        """Rows per second so far, or None before the first row finished."""
        elapsed = self.elapsed()
        if self.done == 0 or elapsed <= 0:
            return None
        return self.done / elapsed

    def eta(self) -> float | None:
        """Seconds until the last row, at the rate so far (None while it is unknown)."""
        remaining = max(0, self.total - self.done)
        if remaining == 0:
            return 0.0
        rate = self.rate()
        return None if rate is None else remaining / rate


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


class Field(NamedTuple):
    """One field of the status line: its text, its pytest markup, and how long it is kept.

    When the line does not fit, fields go whole, lowest ``keep`` first, so a narrow terminal
    shows fewer fields rather than one cut mid-word.
    """

    text: str
    markup: dict[str, bool]
    keep: int


# What a narrow terminal keeps longest: the counts, then the ETA and the rate, then tokens and
# cost. "running" and a zero "errored" say least of the counts, so they give way to the ETA.
_KEEP_DONE = 100
_KEEP_FAILED = 95
_KEEP_ERRORED = 94
_KEEP_PASSED = 90
_KEEP_SKIPPED = 88
_KEEP_ETA = 80
_KEEP_RUNNING = 60
_KEEP_ZERO_ERRORED = 55
_KEEP_RATE = 50
_KEEP_TOKENS = 30
_KEEP_COST = 20
_SEPARATOR = "  "


def format_rate(rate: float | None) -> str:
    """``0.25 rows/s``, ``12.5 rows/s``, ``340 rows/s``; ``- rows/s`` before the first row."""
    if rate is None or not math.isfinite(rate):
        return "- rows/s"
    if rate < 10:
        return f"{rate:.2f} rows/s"
    if rate < 100:
        return f"{rate:.1f} rows/s"
    return f"{rate:.0f} rows/s"


def progress_fields(state: ProgressState) -> list[Field]:
    """The status line's fields, in the order they are shown."""
    fields = [Field(f"osmosis {state.done}/{state.total} rows", {"bold": True}, _KEEP_DONE)]
    if state.running is not None:
        fields.append(Field(f"running {state.running}", {}, _KEEP_RUNNING))
    fields += [
        Field(f"passed {state.passed}", {"green": True} if state.passed else {}, _KEEP_PASSED),
        # "failed" counts the errored rows too, as the summary, the HTML and report.json do.
        Field(
            f"failed {state.failed + state.errored}",
            {"red": True} if state.failed or state.errored else {},
            _KEEP_FAILED,
        ),
        Field(
            f"errored {state.errored}",
            {"red": True} if state.errored else {},
            _KEEP_ERRORED if state.errored else _KEEP_ZERO_ERRORED,
        ),
    ]
    if state.skipped:
        fields.append(Field(f"skipped {state.skipped}", {"yellow": True}, _KEEP_SKIPPED))
    fields.append(Field(format_rate(state.rate()), {}, _KEEP_RATE))
    fields.append(Field(f"ETA {format_duration(state.eta())}", {}, _KEEP_ETA))
    if state.tokens:
        estimated = " (estimated)" if state.tokens_estimated else ""
        fields.append(Field(f"tokens {state.tokens:,}{estimated}", {}, _KEEP_TOKENS))
    if state.cost is not None:
        estimated = " (estimated)" if state.cost_estimated else ""
        fields.append(Field(f"cost {format_cost(state.cost)}{estimated}", {}, _KEEP_COST))
    return fields


def fit(fields: list[Field], width: int | None = None) -> list[Segment]:
    """The fields that fit in ``width`` characters, as pieces to write (all of them without one).

    Fields are dropped whole, lowest ``keep`` first, until the rest fit with their separators;
    only a first field wider than the whole terminal is cut.
    """
    kept = list(fields)

    def length(chosen: list[Field]) -> int:
        return sum(len(f.text) for f in chosen) + len(_SEPARATOR) * max(0, len(chosen) - 1)

    if width is not None:
        while len(kept) > 1 and length(kept) > width:
            kept.remove(min(kept, key=lambda f: f.keep))
    segments: list[Segment] = []
    for i, (text, markup, _) in enumerate(kept):
        segments.append((text if i == 0 else _SEPARATOR + text, markup))
    if width is not None and segments and len(segments[0][0]) > width:
        segments = [(segments[0][0][: max(0, width)], segments[0][1])]
    return segments


def progress_segments(state: ProgressState, width: int | None = None) -> list[Segment]:
    """The status line as pieces with pytest markup, fitted to ``width`` when one is given."""
    return fit(progress_fields(state), width)


def progress_line(state: ProgressState, width: int | None = None) -> str:
    """The status line as plain text."""
    return "".join(text for text, _ in progress_segments(state, width))


@dataclass
class Terminal:
    """Where and how the display writes.

    ``write(text, markup)`` writes to the terminal (with pytest's capturing suspended);
    ``column()`` is where pytest left the cursor on its current line; ``width()`` is the
    terminal's width.
    """

    write: Callable[[str, dict[str, bool]], None]
    column: Callable[[], int]
    width: Callable[[], int]
    flush: Callable[[], None] = lambda: None


class ProgressDisplay:
    """Draws a :class:`ProgressState` as an in-place line (``bar``) or periodic lines (``line``)."""

    def __init__(
        self,
        state: ProgressState,
        terminal: Terminal,
        *,
        mode: Literal["bar", "line"],
        interval: float = DEFAULT_INTERVAL_SEC,
        refresh: float = BAR_REFRESH_SEC,
    ) -> None:
        if mode not in ("bar", "line"):
            raise ValueError(f"mode must be 'bar' or 'line', got {mode!r}")
        self.state = state
        self.terminal = terminal
        self.mode = mode
        self.interval = interval
        self.refresh = refresh
        self.shown = False
        """True while the in-place line is on the screen (and pytest must not write)."""
        self._column = 0
        self._last_draw: float | None = None
        self.lines_written = 0

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

        ``force`` redraws the in-place line now (the last row is in); plain lines still keep
        to one per interval.
        """
        self.state.start()
        if not self.due(force=force):
            return False
        if self.mode == "bar":
            self._draw_bar()
        else:
            self._draw_line()
        self._last_draw = self.state.clock()
        return True

    def status(self, text: str) -> None:
        """Show ``text`` (a start-up step) on the in-place line until the counts replace it.

        Plain-line mode shows nothing: its lines keep to one per interval.
        """
        if self.mode == "bar":
            self._draw_bar([Field(text, {}, _KEEP_DONE)])

    def _draw_bar(self, fields: list[Field] | None = None) -> None:
        # The last column is left free: a line that reaches it wraps on some terminals.
        width = max(1, self.terminal.width() - 1)
        segments = fit(fields if fields is not None else progress_fields(self.state), width)
        if self.shown:
            self.terminal.write(_ERASE_LINE, {})
        else:
            column = self.terminal.column()
            if column >= width:
                return  # pytest's line already wrapped: going back up would miss it
            self._column = column
            self.terminal.write("\n", {})
            self.shown = True
        for text, markup in segments:
            self.terminal.write(text, markup)
        self.terminal.flush()

    def _draw_line(self) -> None:
        if self.terminal.column() > 0:
            self.terminal.write("\n", {})
        for text, markup in progress_segments(self.state):
            self.terminal.write(text, markup)
        self.terminal.write("\n", {})
        self.terminal.flush()
        self.lines_written += 1

    def clear(self) -> None:
        """Erase the in-place line and put the cursor back where pytest left it."""
        if not self.shown:
            return
        back = f"\x1b[{self._column}C" if self._column else ""
        self.terminal.write(_ERASE_LINE + _UP + back, {})
        self.terminal.flush()
        self.shown = False
