"""The live progress line in real runs: under a pseudo-terminal and in a plain pipe.

Each terminal run is replayed onto a model screen (tests/terminal_screen.py): the line must
have been drawn while rows ran, and nothing of it may be left once pytest is done.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from terminal_screen import run_in_pty, screen
from workspaces import multiply_rows

SLOW_POLICY = '''
import re
import time


def policy(request):
    """Takes half a second, then multiplies (and says 'I do not know' when asked to be wrong)."""
    time.sleep(0.5)
    text = request.messages[-1]["content"]
    if "wrong" in text:
        return "I do not know"
    numbers = [int(n) for n in re.findall(r"-?\\d+", text)]
    return f"The answer is {numbers[0] * numbers[1]}"
'''

ARGS = (
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
    "--osmosis-concurrency=2",
    "-p",
    "no:cacheprovider",
)
STATUS = re.compile(r"osmosis (\d+)/(\d+) rows")


@pytest.fixture
def slow(workspace: Callable[..., Path]) -> Path:
    return workspace(multiply_rows(8, wrong={5}), policy=SLOW_POLICY)


def _pytest_in_pty(
    root: Path, *args: str, columns: int = 120, lines: int = 50
) -> tuple[str, list[str]]:
    raw, code = run_in_pty(
        [sys.executable, "-m", "pytest", *ARGS, *args], root, columns=columns, lines=lines
    )
    assert code == 1, raw[-3000:]  # row-5 fails
    return raw, screen(raw, columns)


_SGR = re.compile(r"\x1b\[[0-9;]*m")
_DRAWN_LINE = re.compile(
    r"osmosis(?: \d+/\d+ rows|: (?:starting|importing|checking) )[^\r\n]*?(?=\r|\n|\x1b\[K|\x1b\[1A|$)"
)


def _status_lines(raw: str) -> list[str]:
    """Every status line the display drew (a start-up step or the counts), without colours."""
    return [m.group(0) for m in _DRAWN_LINE.finditer(_SGR.sub("", raw))]


def _drawn(raw: str) -> list[tuple[int, int]]:
    return [(int(done), int(total)) for done, total in STATUS.findall(raw)]


def _no_status_left(lines: list[str]) -> None:
    assert not [line for line in lines if STATUS.search(line)], "\n".join(lines)


def test_on_a_terminal_the_line_updates_in_place_and_leaves_no_trace(slow: Path) -> None:
    raw, lines = _pytest_in_pty(slow)
    drawn = _drawn(raw)
    assert len(drawn) >= 2 and all(total == 8 for _, total in drawn)
    assert drawn == sorted(drawn)  # the count only goes up
    assert "running " in raw and "rows/s" in raw and "ETA" in raw
    _no_status_left(lines)
    # pytest's own progress line is whole: every dot in place, then the percentage.
    progress = next(line for line in lines if line.startswith("data/test.jsonl "))
    assert re.fullmatch(r"data/test\.jsonl \.{5}F\.{2} +\[100%\]", progress), progress
    assert lines.count("") < len(lines) // 2


def test_verbose_lines_stay_whole_with_the_reward_beside_the_outcome(slow: Path) -> None:
    raw, lines = _pytest_in_pty(slow, "-v")
    assert _drawn(raw)
    _no_status_left(lines)
    rows = [line for line in lines if line.startswith("data/test.jsonl::row-")]
    assert len(rows) == 8
    assert re.fullmatch(r"data/test\.jsonl::row-0 PASSED reward=1\.0 +\[ *\d+%\]", rows[0])
    assert re.fullmatch(r"data/test\.jsonl::row-5 FAILED reward=0\.0 < 1\.0 +\[ *\d+%\]", rows[5])


def test_quiet_and_capture_no_runs_stay_clean(slow: Path) -> None:
    for args, expected in (
        (("-q",), r"\.{7}F\.{2} +\[100%\]"),  # the 2 preflight items have no file prefix here
        (("-s",), r"data/test\.jsonl \.{5}F\.{2}"),  # pytest shows no percentage with -s
    ):
        raw, lines = _pytest_in_pty(slow, *args)
        assert _drawn(raw), args
        _no_status_left(lines)
        assert any(re.fullmatch(expected, line) for line in lines), (args, lines)


def test_under_xdist_the_controller_shows_every_workers_rows(slow: Path) -> None:
    raw, lines = _pytest_in_pty(slow, "-n", "2")
    drawn = _drawn(raw)
    assert drawn[-1] == (8, 8)  # both workers' rows add up, and the last one is shown
    _no_status_left(lines)
    assert any(line.startswith("8 passed") or "1 failed, 9 passed" in line for line in lines)


def test_off_draws_nothing(slow: Path) -> None:
    raw, _ = _pytest_in_pty(slow, "--osmosis-progress=off")
    assert not _drawn(raw)


def test_in_a_pipe_plain_lines_come_once_per_interval(
    slow: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest_subprocess(*ARGS, "--osmosis-progress-interval=0.5")
    out = result.stdout.str()
    assert "\x1b[" not in out and "\r" not in out
    lines = [line for line in result.stdout.lines if STATUS.match(line)]
    assert lines, out
    seconds = float(re.search(r" in ([\d.]+)s", out).group(1))  # type: ignore[union-attr]
    assert len(lines) <= seconds / 0.5 + 1


def test_the_default_interval_keeps_a_short_ci_run_quiet(
    slow: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest_subprocess(*ARGS)
    lines = [line for line in result.stdout.lines if STATUS.match(line)]
    seconds = float(re.search(r" in ([\d.]+)s", result.stdout.str()).group(1))  # type: ignore[union-attr]
    assert len(lines) <= seconds // 30  # none at all unless the machine took 30 s for 8 rows


def test_a_forced_bar_writes_nothing_into_junit_or_the_report(
    slow: Path, pytester: pytest.Pytester
) -> None:
    pytester.runpytest_subprocess(
        *ARGS, "--osmosis-progress=bar", "--junitxml=junit.xml", "--osmosis-report=r.json"
    )
    for name in ("junit.xml", "r.json"):
        assert not STATUS.search((slow / name).read_text(encoding="utf-8")), name


def test_an_unknown_mode_names_the_choices(slow: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*ARGS, "--osmosis-progress=fancy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--osmosis-progress: invalid mode 'fancy'; choose one of off, auto, line, bar*"]
    )


def test_without_pytests_terminal_reporter_nothing_is_drawn(
    slow: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest_subprocess(*ARGS, "-p", "no:terminal", "--osmosis-progress=bar")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # row-5 fails; no crash at start-up
    assert not STATUS.search(result.stdout.str())


@pytest.mark.parametrize(
    ("columns", "lines", "args"),
    [(80, 24, ()), (80, 24, ("-v",)), (120, 30, ()), (120, 30, ("-v",))],
    ids=["80x24", "80x24-v", "120x30", "120x30-v"],
)
def test_the_line_fits_the_terminal_and_shows_the_eta_at_80_columns(
    slow: Path, columns: int, lines: int, args: tuple[str, ...]
) -> None:
    raw, screen_lines = _pytest_in_pty(slow, *args, columns=columns, lines=lines)
    drawn = _status_lines(raw)
    counts = [line for line in drawn if STATUS.match(line)]
    assert counts, raw[-3000:]
    assert all(len(line) < columns for line in drawn), [s for s in drawn if len(s) >= columns]
    # Fields go whole: every one drawn ends a known field, none is cut mid-word.
    for line in counts:
        assert re.search(r"ETA (\?|\d+s|\d+m\d\ds)(  |$)", line), line
    _no_status_left(screen_lines)


def test_start_up_steps_show_before_the_first_row(slow: Path) -> None:
    raw, screen_lines = _pytest_in_pty(slow, columns=80, lines=24)
    drawn = _status_lines(raw)
    steps = [line for line in drawn if line.startswith("osmosis: ")]
    assert steps[:2] == [
        "osmosis: starting the policy endpoint…",
        "osmosis: importing rollouts/demo/main.py…",
    ], drawn[:5]
    assert drawn.index(steps[-1]) < next(i for i, s in enumerate(drawn) if STATUS.match(s))
    assert not [line for line in screen_lines if "importing" in line]  # erased like the counts


def test_under_xdist_every_report_is_drawn_at_a_sane_rate(slow: Path) -> None:
    raw, screen_lines = _pytest_in_pty(slow, "-n", "2", columns=120, lines=30)
    counts = [line for line in _status_lines(raw) if STATUS.match(line)]
    shown = [int(STATUS.match(line).group(1)) for line in counts]  # type: ignore[union-attr]
    # Drawn as reports come: from the first half of the run on, up to the last row (two
    # reports landing in one redraw tick share a line).
    assert shown == sorted(shown) and shown[0] <= 4 and shown[-1] == 8, counts
    assert len(set(shown)) >= 5, counts
    assert all(len(line) < 120 for line in counts)
    # 8 rows of 0.5 s, 2 at a time on each of 2 workers: at most 8 rows a second, never
    # thousands (the rate counts from the workers' start, not from the first report).
    rates = [float(m) for m in re.findall(r"([\d.]+) rows/s", "\n".join(counts))]
    assert rates and max(rates) < 20, counts
    _no_status_left(screen_lines)


FAST_POLICY = """
import re


def policy(request):
    numbers = [int(n) for n in re.findall(r"-?\\d+", request.messages[-1]["content"])]
    return f"The answer is {numbers[0] * numbers[1]}"
"""


def test_a_fast_run_still_prints_its_interval_lines(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(150), policy=FAST_POLICY)
    result = pytester.runpytest_subprocess(*ARGS, "--osmosis-progress-interval=0.2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    lines = [line for line in result.stdout.lines if STATUS.match(line)]
    seconds = float(re.search(r" in ([\d.]+)s", result.stdout.str()).group(1))  # type: ignore[union-attr]
    assert 1 <= len(lines) <= seconds / 0.2 + 1, result.stdout.str()
