"""What ``osmosis-rollout`` prints about itself: its version, and help text without markup."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import osmosis_rollout
from osmosis_rollout.cli import SUBCOMMANDS, main

# Raw reStructuredText a terminal would show as is: ``literal`` and :role:`target`.
RST_MARKUP = re.compile(r"``|:[a-z]+:`")


def test_version_prints_the_package_version_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "osmosis_rollout.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"osmosis-rollout {osmosis_rollout.__version__}\n"


@pytest.mark.parametrize("command", [[], *([name] for name in sorted(SUBCOMMANDS))])
def test_help_shows_no_raw_rst_markup(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: osmosis-rollout")
    assert RST_MARKUP.findall(text) == [], text
