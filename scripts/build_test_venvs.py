"""Build the virtualenvs the test suite installs from the package index, before pytest runs.

``scripts/test.sh`` runs this first, so that no test installs anything under a test timeout.
Each venv (see ``tests/_support/venvs.py``) is built once into ``~/.cache/pytest-osmosis`` (or
``$PYTEST_OSMOSIS_TEST_VENVS``) and kept while what it is built from is unchanged; all are
built at once, and the whole step is bounded by ``$PYTEST_OSMOSIS_VENV_BUILD_TIMEOUT`` seconds
(default 600; 0 only reports what is built, building nothing). A venv that cannot be built
(no network, no Python >= 3.12, out of time) is reported here and its tests skip with the
reason; this script always exits 0.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _support import venvs

TIMEOUT_ENV = "PYTEST_OSMOSIS_VENV_BUILD_TIMEOUT"


def main() -> int:
    """Build every venv the suite uses, at once; print one line per venv."""
    timeout = float(os.environ.get(TIMEOUT_ENV) or 600)
    deadline = time.monotonic() + timeout
    outcomes: dict[str, str] = {}

    def build(venv: venvs.Prebuilt) -> None:
        if timeout <= 0:
            outcomes[venv.name] = venvs.status(venv)
        else:
            outcomes[venv.name] = venvs.build(venv, deadline)

    threads = [threading.Thread(target=build, args=(v,), daemon=True) for v in venvs.ALL]
    for thread in threads:
        thread.start()
    for thread in threads:
        # Each build bounds its own subprocesses by the deadline; this is the last resort.
        thread.join(max(0.0, deadline - time.monotonic()) + 30)
    for venv in venvs.ALL:
        print(outcomes.get(venv.name, f"{venv.name}: NOT BUILT (over {timeout:.0f}s)"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
