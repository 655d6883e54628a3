"""pytest-osmosis: dataset rows as pytest items, rollouts run concurrently, rewards asserted."""

__all__: list[str] = []
