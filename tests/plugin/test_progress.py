"""The progress state, its status line and when the display draws it, on an injected clock."""

from __future__ import annotations

import pytest

from osmosis_rollout.runs.report_text import format_cost
from pytest_osmosis.display.progress import (
    Field,
    ProgressDisplay,
    ProgressState,
    Terminal,
    fit,
    format_duration,
    format_rate,
    progress_line,
    progress_segments,
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Screen:
    """Records what the display writes, and plays pytest's cursor column."""

    def __init__(self, width: int = 120) -> None:
        self.out = ""
        self.column = 0
        self.width = width

    def terminal(self) -> Terminal:
        return Terminal(
            write=lambda text, markup: self._write(text),
            column=lambda: self.column,
            width=lambda: self.width,
        )

    def _write(self, text: str) -> None:
        self.out += text


def test_rows_count_once_and_split_into_passed_failed_errored_skipped() -> None:
    clock = Clock()
    state = ProgressState(total=6, clock=clock)
    state.row_finished("a", "passed", tokens=10)
    state.row_finished("a", "passed", tokens=10)  # the same row reported twice counts once
    state.row_finished("b", "failed")
    state.row_finished("c", "failed", errored=True)
    state.row_finished("d", "skipped")
    assert state.done == 4
    assert state.counts() == {"passed": 1, "failed": 1, "errored": 1, "skipped": 1}
    assert state.tokens == 10


def test_rate_and_eta_come_from_the_clock() -> None:
    clock = Clock()
    state = ProgressState(total=10, clock=clock)
    state.start()
    assert state.rate() is None and state.eta() is None
    clock.now += 4.0
    for key in "abcd":
        state.row_finished(key, "passed")
    assert state.rate() == pytest.approx(1.0)
    assert state.eta() == pytest.approx(6.0)
    for key in "efghij":
        state.row_finished(key, "passed")
    assert state.eta() == 0.0


def test_the_status_line_names_every_count_tokens_and_cost() -> None:
    clock = Clock()
    state = ProgressState(total=20, clock=clock)
    state.start()
    state.running = 4
    clock.now += 10.0
    state.row_finished("a", "passed", tokens=1200, tokens_estimated=True, cost=0.0021)
    state.row_finished("b", "failed", tokens=800, cost=0.0010, cost_estimated=True)
    assert progress_line(state) == (
        "osmosis 2/20 rows  running 4  passed 1  failed 1  errored 0  0.20 rows/s  ETA 1m30s"
        "  tokens 2,000 (estimated)  cost $0.0031 (estimated)"
    )


def test_no_cost_is_shown_when_none_is_known() -> None:
    state = ProgressState(total=1, clock=Clock())
    state.row_finished("a", "passed", tokens=5)
    assert "cost" not in progress_line(state)
    assert "estimated" not in progress_line(state)


def test_passes_are_green_and_failures_red() -> None:
    state = ProgressState(total=3, clock=Clock())
    state.row_finished("a", "passed")
    state.row_finished("b", "failed")
    state.row_finished("c", "failed", errored=True)
    markup = {text.split()[0]: m for text, m in progress_segments(state)}
    assert markup["passed"] == {"green": True}
    assert markup["failed"] == {"red": True}
    assert markup["errored"] == {"red": True}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (7.2, "7s"), (65, "1m05s"), (7380, "2h03m"), (float("inf"), "?")],
)
def test_durations_read_as_a_person_says_them(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def test_costs_keep_small_amounts_visible() -> None:
    assert format_cost(0.00042) == "$0.0004"
    assert format_cost(0.042) == "$0.042"
    assert format_cost(1234.5) == "$1,234.50"


def test_fit_drops_whole_fields_lowest_priority_first_and_keeps_their_order() -> None:
    fields = [Field("abcdef", {}, 100), Field("gh", {"red": True}, 10), Field("ijk", {}, 50)]
    assert fit(fields, None) == [("abcdef", {}), ("  gh", {"red": True}), ("  ijk", {})]
    assert fit(fields, 13) == [("abcdef", {}), ("  ijk", {})]  # "gh" goes whole, not "ijk"'s end
    assert fit(fields, 6) == [("abcdef", {})]
    assert fit(fields, 3) == [("abc", {})]  # only a first field wider than the terminal is cut


def _busy_state() -> ProgressState:
    clock = Clock()
    state = ProgressState(total=400, clock=clock)
    state.start()
    state.running = 8
    clock.now += 100.0
    for i in range(37):
        state.row_finished(f"r{i}", "failed" if i < 3 else "passed", tokens=1234, cost=0.002)
    state.row_finished("e", "failed", errored=True)
    return state


@pytest.mark.parametrize("width", [40, 60, 79, 100, 119, 200])
def test_the_line_fits_any_width_with_whole_fields(width: int) -> None:
    state = _busy_state()
    whole = progress_line(state).split("  ")
    line = progress_line(state, width)
    assert len(line) <= width
    assert all(field in whole for field in line.split("  "))  # no field is cut mid-word
    assert line.startswith("osmosis 38/400 rows")


def test_a_narrow_line_keeps_counts_then_eta_and_drops_tokens_and_cost_first() -> None:
    state = _busy_state()
    assert progress_line(state, 79) == (
        "osmosis 38/400 rows  running 8  passed 34  failed 4  errored 1  ETA 15m53s"
    )
    assert progress_line(state, 60) == "osmosis 38/400 rows  passed 34  failed 4  errored 1"
    wide = progress_line(state, 200)
    assert "0.38 rows/s" in wide and "tokens 45,658" in wide and "cost $0.074" in wide


def test_at_80_columns_the_eta_of_a_typical_run_is_visible() -> None:
    clock = Clock()
    state = ProgressState(total=1000, clock=clock)
    state.start()
    state.running = 16
    clock.now += 30.0
    for i in range(120):
        state.row_finished(f"r{i}", "passed", tokens=2000, cost=0.01)
    line = progress_line(state, 79)
    assert line.endswith("ETA 3m40s"), line
    assert "rows/s" not in line  # the rate gave way first


def test_rates_read_sensibly_at_any_speed() -> None:
    assert format_rate(None) == "- rows/s"
    assert format_rate(0.256) == "0.26 rows/s"
    assert format_rate(12.34) == "12.3 rows/s"
    assert format_rate(1459.2) == "1459 rows/s"


def test_a_start_up_step_shows_on_the_bar_until_the_counts_replace_it() -> None:
    screen = Screen(width=80)
    display = ProgressDisplay(ProgressState(total=3, clock=Clock()), screen.terminal(), mode="bar")
    display.status("osmosis: importing rollouts/demo/main.py…")
    assert screen.out == "\nosmosis: importing rollouts/demo/main.py…" and display.shown
    assert display.update()  # the counts come at once, drawn over the step
    assert screen.out.endswith(
        "\r\x1b[Kosmosis 0/3 rows  running 0  passed 0  failed 0  errored 0  - rows/s  ETA ?"
    )
    plain = Screen()
    ProgressDisplay(ProgressState(total=3), plain.terminal(), mode="line").status("importing")
    assert plain.out == ""  # CI logs keep to one line per interval


def test_the_bar_draws_below_pytests_line_and_clears_back_to_its_column() -> None:
    clock = Clock()
    screen = Screen()
    screen.column = 17  # pytest wrote "data/test.jsonl .." and waits for the next item
    display = ProgressDisplay(ProgressState(total=5, clock=clock), screen.terminal(), mode="bar")
    assert display.update()
    assert screen.out.startswith("\nosmosis 0/5 rows")
    assert display.shown
    display.clear()
    assert screen.out.endswith("\r\x1b[K\x1b[1A\x1b[17C")
    assert not display.shown
    display.clear()  # clearing twice writes nothing more
    assert screen.out.endswith("\x1b[17C")


def test_the_bar_redraws_in_place_a_few_times_a_second_at_most() -> None:
    clock = Clock()
    screen = Screen()
    state = ProgressState(total=5, clock=clock)
    display = ProgressDisplay(state, screen.terminal(), mode="bar", refresh=0.25)
    assert display.update()
    assert not display.update()  # too soon
    clock.now += 0.1
    assert not display.update()
    clock.now += 0.2
    state.row_finished("a", "passed")
    assert display.update()
    # The second draw erases the first in place: one newline in all, no second line.
    assert screen.out.count("\n") == 1
    assert screen.out.endswith("\r\x1b[Kosmosis 1/5 rows" + screen.out.split("osmosis 1/5 rows")[1])


def test_the_bar_never_wraps() -> None:
    screen = Screen(width=30)
    display = ProgressDisplay(ProgressState(total=5, clock=Clock()), screen.terminal(), mode="bar")
    display.update()
    assert len(screen.out.lstrip("\n")) <= 29


def test_the_bar_stays_hidden_when_pytests_line_already_fills_the_terminal() -> None:
    screen = Screen(width=40)
    screen.column = 45
    display = ProgressDisplay(ProgressState(total=5, clock=Clock()), screen.terminal(), mode="bar")
    display.update()
    assert screen.out == "" and not display.shown


def test_plain_lines_come_once_per_interval_never_more() -> None:
    clock = Clock()
    screen = Screen()
    state = ProgressState(total=100, clock=clock)
    display = ProgressDisplay(state, screen.terminal(), mode="line", interval=30.0)
    assert not display.update()  # nothing at the start: the first line comes after an interval
    for _ in range(290):  # 29 s of updates, ten a second
        clock.now += 0.1
        display.update()
    assert display.lines_written == 0
    clock.now += 1.5
    assert display.update()
    for _ in range(299):  # just under another interval
        clock.now += 0.1
        display.update()
    assert display.lines_written == 1
    clock.now += 0.2
    assert display.update()
    assert display.lines_written == 2
    assert screen.out.count("\n") == 2
    assert all(line.startswith("osmosis ") for line in screen.out.splitlines())
    assert "\x1b" not in screen.out


def test_a_plain_line_starts_on_a_fresh_line() -> None:
    clock = Clock()
    screen = Screen()
    screen.column = 20
    display = ProgressDisplay(
        ProgressState(total=2, clock=clock), screen.terminal(), mode="line", interval=1
    )
    display.update()
    clock.now += 1
    display.update()
    assert screen.out.startswith("\nosmosis 0/2 rows")
    display.clear()  # nothing to erase in plain mode
    assert screen.out.endswith("\n") and "\x1b" not in screen.out


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="'bar' or 'line'"):
        ProgressDisplay(ProgressState(total=1), Screen().terminal(), mode="fancy")  # type: ignore[arg-type]


def test_a_later_report_of_a_row_replaces_its_early_count() -> None:
    state = ProgressState(total=2, clock=Clock())
    state.row_finished("a", "passed", tokens=10)  # when its rollouts finished
    state.row_finished("a", "failed", tokens=10)  # when pytest reported it (a verdict hook said so)
    assert (state.done, state.counts(), state.tokens) == (1, {"failed": 1}, 10)


def test_running_is_left_out_where_it_is_not_known() -> None:
    state = ProgressState(total=2, clock=Clock(), running=None)
    assert "running" not in progress_line(state)


def test_a_forced_redraw_ignores_the_refresh_but_not_the_line_interval() -> None:
    clock = Clock()
    bar = ProgressDisplay(ProgressState(total=1, clock=clock), Screen().terminal(), mode="bar")
    assert bar.update()
    assert bar.update(force=True)
    line = ProgressDisplay(
        ProgressState(total=1, clock=clock), Screen().terminal(), mode="line", interval=30
    )
    assert not line.update(force=True)
