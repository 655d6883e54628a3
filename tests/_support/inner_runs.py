"""How the suite starts a pytest inside a test (pytester, or ``python -m pytest`` in a subprocess).

The suite's venv holds pytest plugins that only the suite itself uses: schemathesis' plugin
imports hypothesis whole at start-up, ~1 s of CPU for every pytest that starts, respx's ~0.2 s
(httpx's mocking layers), and the suite starts ~170 inner runs. Inner runs block those
plugins, so they start as light as a user's run in a venv without the test extras.
"""

from __future__ import annotations

#: ``PYTEST_ADDOPTS`` for every inner run (set by the autouse fixture in ``tests/conftest.py``).
INNER_RUN_ADDOPTS = (
    "-p no:schemathesis -p no:hypothesispytest -p no:respx "
    "-o asyncio_default_fixture_loop_scope=function"
)
"""Also sets pytest-asyncio's loop scope, as the suite's own configuration does: unset, the
plugin's deprecation warning would open every inner run's output."""
