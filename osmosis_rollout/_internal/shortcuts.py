"""The one switch for the speed shortcuts: ``OSMOSIS_NO_SHORTCUTS=1`` turns them all off.

A shortcut is a faster path beside a standard one. Each is kept only because a differential
test shows it behaves as the standard path does (request bytes, errors, retries, streaming,
usage) and the real-model benchmark (``bench/bench_model_server.py``; figures in
``bench/RESULTS.md``, issue 34) shows it earns at least 10%. Each asks
:func:`shortcuts_enabled` where it picks its path, so the standard path stays one variable
away and stays tested (``scripts/test.sh`` runs the integration tests once with it set).

The shortcut behind it (a new one asks the same function): the lean LiteLLM stand-in
(:mod:`osmosis_rollout.integrations._endpoint`): the integrations' calls to the rollout's
endpoint are posted through the ``openai`` SDK as LiteLLM posts them, without LiteLLM's
router around the call (milliseconds of CPU per call).

The variable is read at each choice (it costs a dictionary lookup), so a test or a process
may set it at any time. Unset, empty or ``0``: shortcuts on; any other value: off.
"""

from __future__ import annotations

import os

__all__ = ["ENV_VAR", "shortcuts_enabled"]

ENV_VAR = "OSMOSIS_NO_SHORTCUTS"
"""The environment variable that turns every speed shortcut off."""


def shortcuts_enabled() -> bool:
    """True unless ``OSMOSIS_NO_SHORTCUTS`` is set to something other than empty or ``0``."""
    return os.environ.get(ENV_VAR, "").strip() in ("", "0")
