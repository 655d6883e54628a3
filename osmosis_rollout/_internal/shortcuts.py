"""The one switch for the speed shortcuts: ``OSMOSIS_NO_SHORTCUTS=1`` turns them all off.

A shortcut is a faster path beside a standard one. Each is kept only because the 200 ms
policy benchmark (``bench/bench_plugin_throughput.py --workflow agents``; figures in
``bench/RESULTS.md``, issue 25) shows it moves realistic work by more than 5%, and each asks
:func:`shortcuts_enabled` where it picks its path, so the standard path stays one variable
away and stays tested (``scripts/test.sh`` runs the integration tests once with it set).

The shortcuts behind it (a new one asks the same function):

- the lean LiteLLM stand-in (:mod:`osmosis_rollout.integrations._endpoint`): the
  integrations' calls to the rollout's endpoint go over one pooled httpx client instead of
  ``litellm.acompletion`` (LiteLLM's router costs milliseconds of CPU per call);
- the in-process route (:mod:`osmosis_rollout.transport.in_process`): that pooled client reaches a
  policy endpoint of this process started with ``in_process=True`` without a socket,
  instead of over loopback.

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
