"""Execution backends: the contract and the in-process implementation."""

from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.backend.local import LocalBackend

__all__ = ["ExecutionBackend", "LocalBackend"]
