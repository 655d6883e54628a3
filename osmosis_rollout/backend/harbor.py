"""The official SDK's Harbor backend path; importing it raises :class:`PlatformOnlyError`.

Harbor trials run an agent inside a sandboxed container (Docker, Daytona, SkyPilot) and are
started by the official ``osmosis`` CLI and the Osmosis platform. This package runs rollouts
in-process (``LocalBackend``) and has no container engine, so it offers no Harbor backend
rather than one that would pretend to run. docs/platform.md says which tool does what.
"""

from osmosis_rollout.errors import PlatformOnlyError

raise PlatformOnlyError(
    "osmosis_rollout has no Harbor backend: Harbor trials (sandboxed containers on Docker, "
    "Daytona or SkyPilot) run through the official SDK, "
    "'from osmosis_ai.rollout.backend.harbor import HarborBackend' with "
    'pip install "osmosis-ai[harbor]". Test the same AgentWorkflow and Grader locally with '
    "osmosis_rollout.LocalBackend; see docs/platform.md (Harbor) for what runs where."
)
