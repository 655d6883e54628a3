"""What a rollout result looks like on the wire.

:func:`to_wire_result` turns a backend's :class:`ExecutionResult` into the JSON object that
``GET /rollout/{id}/result`` serves. The rules, in order:

1. ``trajectory_messages`` never leaves the server (it is archived, not sent);
2. ``metrics``/``extra_fields`` are made JSON-safe (foreign numbers become builtins,
   non-finite values and unencodable objects are dropped);
3. the sample is test-encoded with the same strict encoder the HTTP layer uses; a sample
   that still cannot be encoded (an object or a lone surrogate inside a message) is replaced
   by a reward-only sample, so a diagnostic payload can never make a reward unpollable;
4. the reward is nulled unless the rollout succeeded and the sample was not removed;
5. lone surrogates in ``err_message`` become ``?``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from osmosis_rollout.types import (
    ExecutionResult,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)

logger = logging.getLogger(__name__)

WIRE_SAMPLE_KEYS = ("messages", "label", "reward", "remove_sample", "metrics", "extra_fields")
"""The keys of a wire sample, in the order they are sent."""


# The encoder json.dumps would build for these arguments on every call (it keeps no state).
_STRICT_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
)


def strict_json_bytes(content: Any) -> bytes:
    """Encode ``content`` exactly as Starlette's ``JSONResponse`` does (NaN and surrogates raise)."""
    return _STRICT_ENCODER.encode(content).encode("utf-8")


def replace_surrogates(text: str) -> str:
    """``text`` with lone surrogates replaced by ``?`` so it encodes as UTF-8."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


_NOT_SENT = {"trajectory_messages"}  # never mutated


def _sample_dict(sample: RolloutSample) -> dict[str, Any]:
    dumped = sample.model_dump(mode="json", exclude=_NOT_SENT)
    if tuple(dumped) == WIRE_SAMPLE_KEYS:
        return dumped  # RolloutSample's own fields, already in wire order
    return {key: dumped[key] for key in WIRE_SAMPLE_KEYS}


def _reward_only(sample: RolloutSample) -> dict[str, Any]:
    return {
        "messages": [],
        "label": replace_surrogates(sample.label) if sample.label is not None else None,
        "reward": sample.reward,
        "remove_sample": sample.remove_sample,
        "metrics": {},
        "extra_fields": {},
    }


def wire_sample(rollout_id: str, sample: RolloutSample) -> dict[str, Any]:
    """The JSON object of ``sample`` on the wire (steps 1-3 above; the reward is kept)."""
    try:
        encoded = _sample_dict(sample.json_safe_copy())
        strict_json_bytes(encoded)
    except (TypeError, ValueError, RecursionError):
        logger.warning(
            "rollout %s: sample cannot be serialized; returning its reward only",
            rollout_id,
            exc_info=True,
        )
        return _reward_only(sample)
    return encoded


def to_wire_result(rollout_id: str, result: ExecutionResult) -> dict[str, Any]:
    """The ``RolloutResultResponse`` JSON object for ``result``; every key is present."""
    sample = None if result.sample is None else wire_sample(rollout_id, result.sample)
    return _result(rollout_id, result, sample)


def _result(
    rollout_id: str, result: ExecutionResult, sample: dict[str, Any] | None
) -> dict[str, Any]:
    if sample is not None and (
        result.status is not RolloutStatus.SUCCESS or sample["remove_sample"]
    ):
        sample["reward"] = None
    category = result.err_category
    return {
        "rollout_id": rollout_id,
        "status": RolloutStatus(result.status).value,
        "sample": sample,
        "err_message": (
            replace_surrogates(result.err_message) if result.err_message is not None else None
        ),
        "err_category": RolloutErrorCategory(category).value if category is not None else None,
    }


def status_only(rollout_id: str, status: RolloutStatus) -> dict[str, Any]:
    """The response for a rollout still in flight, or a terminal one with no sample/error."""
    return {
        "rollout_id": rollout_id,
        "status": RolloutStatus(status).value,
        "sample": None,
        "err_message": None,
        "err_category": None,
    }


__all__ = [
    "WIRE_SAMPLE_KEYS",
    "replace_surrogates",
    "status_only",
    "strict_json_bytes",
    "to_wire_result",
    "wire_sample",
]
