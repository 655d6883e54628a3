"""Run a command under a pseudo-terminal, and replay what it wrote onto a model screen.

The screen understands what pytest and the live progress write: printable text, ``\\r``,
``\\n``, erase to end of line (``ESC[K``), cursor up (``ESC[nA``) and right (``ESC[nC``), and
colours (``ESC[...m``, dropped). What is left on it is what a person sees at the end.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time
from collections.abc import Sequence
from pathlib import Path

from _support.inner_runs import INNER_RUN_ADDOPTS

_CSI = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])")


def run_in_pty(
    argv: Sequence[str],
    cwd: Path,
    *,
    columns: int = 120,
    lines: int = 50,
    timeout: float = 300.0,
) -> tuple[str, int]:
    """Run ``argv`` in ``cwd`` on a ``columns`` x ``lines`` terminal; return its output and exit code."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the command
        os.chdir(cwd)
        os.environ.update({"COLUMNS": str(columns), "LINES": str(lines), "TERM": "xterm"})
        os.environ["PYTEST_ADDOPTS"] = INNER_RUN_ADDOPTS
        os.execvp(argv[0], list(argv))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    pid = 0
                    break
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    status = 0
    if pid:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
    return data.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status) if pid else 0


def screen(output: str, columns: int = 120) -> list[str]:
    """The lines left on a terminal of ``columns`` after ``output`` was written to it."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(output):
        char = output[i]
        if char == "\x1b":
            match = _CSI.match(output, i)
            if match is None:
                i += 1
                continue
            arg, command = match.groups()
            count = int(arg) if arg.isdigit() else 1
            if command == "K":
                del lines[row][col:]
            elif command == "A":
                row = max(0, row - count)
            elif command == "C":
                col += count
            i = match.end()
            continue
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
            col = 0
            while len(lines) <= row:
                lines.append([])
        else:
            if col >= columns:  # the terminal wraps
                row, col = row + 1, 0
                while len(lines) <= row:
                    lines.append([])
            line = lines[row]
            while len(line) < col:
                line.append(" ")
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
        i += 1
    return ["".join(line).rstrip() for line in lines]
