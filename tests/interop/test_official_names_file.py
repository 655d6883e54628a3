"""The committed list of official names is what ``scripts/official_names.py`` generates now."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "official_names.py"
COMMITTED = ROOT / "tests" / "core" / "official_names_0_3_8.json"


def test_the_committed_official_names_match_the_installed_official_sdk(
    official_python: Path,
) -> None:
    done = subprocess.run(
        [str(official_python), str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(COMMITTED.read_text(encoding="utf-8")), (
        f"regenerate with: {official_python} {SCRIPT} > {COMMITTED}"
    )
