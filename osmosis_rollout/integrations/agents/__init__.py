"""Agent-framework adapters: import ``openai_agents`` or ``strands`` explicitly."""

__all__: list[str] = []
