"""pytest hooks, options, fixtures and markers of pytest-osmosis (registered via ``pytest11``)."""

from __future__ import annotations
