"""The ATIF v1.7 trajectory document: build it, check it, format it.

A document is a plain ``dict`` ready for ``json.dumps``::

    {"schema_version": "ATIF-v1.7", "session_id": <rollout_id>, "trajectory_id": <rollout_id>,
     "agent": {"name": "osmosis-rollout-sdk", "version": <osmosis_rollout.__version__>},
     "steps": [...], "final_metrics": {"total_steps": n}, "extra": {"osmosis": {...}}}

Plain dicts rather than pydantic models: the pytest plugin writes one document per dataset
row, and building a dict is several times cheaper than validating a model tree.
:func:`validate_atif` holds the schema rules for readers and tests that want them checked.
As in 0.3.8 (no controller reports), documents carry no ``agent.model_name`` and
``final_metrics`` holds only ``total_steps``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import osmosis_rollout
from osmosis_rollout._internal import json_safe as _json_safe
from osmosis_rollout.trajectory.models import (  # the official module's home of the models
    AGENT_ONLY_FIELDS,
    Agent,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)
from osmosis_rollout.trajectory.steps import messages_to_steps

if TYPE_CHECKING:
    from osmosis_rollout.types import RolloutSample

__all__ = [
    "ATIF_PRODUCER_NAME",
    "ATIF_SCHEMA_VERSION",
    "Agent",
    "FinalMetrics",
    "Metrics",
    "Observation",
    "ObservationResult",
    "Step",
    "ToolCall",
    "Trajectory",
    "build_atif",
    "format_atif",
    "validate_atif",
]

logger = logging.getLogger(__name__)

ATIF_SCHEMA_VERSION = "ATIF-v1.7"
ATIF_PRODUCER_NAME = "osmosis-rollout-sdk"

_SOURCES = frozenset({"system", "user", "agent"})
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
# What json.dumps(indent=...) prints for a list of numbers: one element per line.
_NUMERIC_ARRAY = re.compile(rf"\[\n[ ]*{_NUMBER}(?:,\n[ ]*{_NUMBER})*\n[ ]*\]")


def build_atif(
    rollout_id: str,
    sample: RolloutSample | None,
    *,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_fields: Mapping[str, Any] | None = None,
    reward: float | None = None,
    placeholder: bool = True,
) -> dict[str, Any]:
    """Build the ATIF v1.7 document for one rollout's sample.

    Steps come from ``sample.trajectory_messages`` (falling back to ``sample.messages``
    when it is ``None``). ``label``, ``metadata`` and ``extra_fields`` are the request's;
    the sample's own label wins over ``label``, and ``reward`` (when given) over the
    sample's. A rollout with no messages (or no sample) gets one placeholder ``system``
    step, since ATIF requires at least one (none with ``placeholder=False``).
    ``extra.osmosis`` telemetry maps are made JSON-safe (non-finite and unencodable values
    dropped, with a warning).

    Raises ``ValueError`` for a non-finite ``reward``.
    """
    if reward is not None and not math.isfinite(reward):
        raise ValueError(f"reward must be a finite number, got {reward!r}")
    messages = None
    if sample is not None:
        messages = sample.trajectory_messages
        if messages is None:
            messages = sample.messages
    steps = messages_to_steps(messages)
    if not steps and placeholder:
        reason = "no sample" if sample is None else "no messages"
        steps = [
            {
                "step_id": 1,
                "source": "system",
                "message": "",
                "extra": {"placeholder": True, "reason": reason},
            }
        ]

    sample_label, metrics, fields = (None, None, None)
    if sample is not None:
        sample_label, metrics, fields = sample.label, sample.metrics, sample.extra_fields
    osmosis = {
        "rollout_id": rollout_id,
        "label": sample_label if sample_label is not None else label,
        "reward": reward if reward is not None else getattr(sample, "reward", None),
        "sample_metrics": _safe_map(metrics or None, "sample_metrics"),
        "sample_extra_fields": _safe_map(fields or None, "sample_extra_fields"),
        "request_metadata": _safe_map(metadata, "request_metadata"),
        "request_extra_fields": _safe_map(extra_fields, "request_extra_fields"),
    }

    return {
        "schema_version": ATIF_SCHEMA_VERSION,
        "session_id": rollout_id,
        "trajectory_id": rollout_id,
        "agent": {"name": ATIF_PRODUCER_NAME, "version": osmosis_rollout.__version__},
        "steps": steps,
        "final_metrics": {"total_steps": len(steps)},
        "extra": {"osmosis": {key: value for key, value in osmosis.items() if value is not None}},
    }


def _safe_map(value: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    copied = dict(value)
    if not _json_safe.needs_fixing(copied):
        return copied
    dropped: list[str] = []
    fixed: dict[str, Any] = _json_safe.json_safe(copied, dropped)
    if dropped:
        logger.warning(
            "trajectory: dropped values with no JSON form from %s: %s",
            name,
            ", ".join(sorted(set(dropped))),
        )
    return fixed


def format_atif(doc: Mapping[str, Any]) -> str:
    """Serialise a document as indented JSON (2 spaces), numeric arrays kept on one line.

    Non-ASCII text is kept as is (readable UTF-8; ``write_trajectory`` escapes lone
    surrogates when it encodes). Raises ``ValueError`` naming the first offending path
    for a non-finite float, and ``TypeError`` for a value JSON cannot encode.
    """
    try:
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError) as exc:
        path, problem = _locate_unencodable(doc)
        if path is None:
            raise
        raise type(exc)(f"ATIF document is not valid JSON at {path}: {problem}") from exc
    return _NUMERIC_ARRAY.sub(_compact_array, text)


def _compact_array(match: re.Match[str]) -> str:
    items = match.group(0)[1:-1].split(",")
    return "[" + ", ".join(item.strip() for item in items) + "]"


def _locate_unencodable(doc: Any) -> tuple[str | None, str]:
    try:
        return _find_unencodable(doc, "$")
    except RecursionError:
        return "$", "nesting too deep or circular"


def _find_unencodable(value: Any, path: str) -> tuple[str | None, str]:
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"non-finite number {value!r}"
    if value is None or isinstance(value, str | int | float):
        return None, ""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return f"{path}[{key!r}]", f"key of type {type(key).__name__}"
            found = _find_unencodable(item, f"{path}.{key}")
            if found[0] is not None:
                return found
        return None, ""
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _find_unencodable(item, f"{path}[{index}]")
            if found[0] is not None:
                return found
        return None, ""
    return path, f"object of type {type(value).__name__}"


def validate_atif(doc: Mapping[str, Any]) -> None:
    """Check a document against the ATIF v1.7 rules this package relies on.

    Raises ``ValueError`` listing every problem found: step ids sequential from 1,
    known ``source`` values, agent-only fields only on agent steps, observation
    ``source_call_id`` naming a tool call of the same step, tool calls with a string id
    and name and object arguments, ISO 8601 timestamps, ``final_metrics.total_steps``
    equal to the step count, and no non-finite number anywhere.
    """
    problems: list[str] = []
    if not str(doc.get("schema_version", "")).startswith("ATIF-v1."):
        problems.append(f"schema_version: expected ATIF-v1.x, got {doc.get('schema_version')!r}")
    agent = doc.get("agent")
    if not isinstance(agent, Mapping) or not all(
        isinstance(agent.get(key), str) for key in ("name", "version")
    ):
        problems.append("agent: needs string 'name' and 'version'")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        problems.append("steps: needs at least one step")
        steps = []
    for index, step in enumerate(steps):
        problems.extend(_step_problems(index, step))
    final = doc.get("final_metrics")
    if isinstance(final, Mapping) and final.get("total_steps") not in (None, len(steps)):
        problems.append(
            f"final_metrics.total_steps: {final.get('total_steps')!r} != {len(steps)} steps"
        )
    path, problem = _locate_unencodable(doc)
    if path is not None:
        problems.append(f"{path}: {problem}")
    if problems:
        raise ValueError("invalid ATIF document:\n  " + "\n  ".join(problems))


def _step_problems(index: int, step: Any) -> list[str]:
    where = f"steps[{index}]"
    if not isinstance(step, Mapping):
        return [f"{where}: not an object"]
    problems: list[str] = []
    if step.get("step_id") != index + 1:
        problems.append(f"{where}.step_id: expected {index + 1}, got {step.get('step_id')!r}")
    source = step.get("source")
    if source not in _SOURCES:
        problems.append(f"{where}.source: {source!r} is not one of system, user, agent")
    if not isinstance(step.get("message"), str | list):
        problems.append(f"{where}.message: must be a string or a list of content parts")
    if source != "agent":
        problems.extend(
            f"{where}.{name}: only allowed on agent steps"
            for name in AGENT_ONLY_FIELDS
            if step.get(name) is not None
        )
    if step.get("llm_call_count") == 0:
        problems.extend(
            f"{where}.{name}: must be absent when llm_call_count is 0"
            for name in ("metrics", "reasoning_content")
            if step.get(name) is not None
        )
    stamp = step.get("timestamp")
    if stamp is not None:
        try:
            datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{where}.timestamp: {stamp!r} is not ISO 8601")
    call_ids: set[str] = set()
    for call_index, call in enumerate(step.get("tool_calls") or ()):
        call_where = f"{where}.tool_calls[{call_index}]"
        if not isinstance(call, Mapping):
            problems.append(f"{call_where}: not an object")
            continue
        if not isinstance(call.get("tool_call_id"), str) or not isinstance(
            call.get("function_name"), str
        ):
            problems.append(f"{call_where}: needs string tool_call_id and function_name")
        if not isinstance(call.get("arguments"), Mapping):
            problems.append(f"{call_where}.arguments: must be an object")
        call_ids.add(str(call.get("tool_call_id")))
    observation = step.get("observation")
    if observation is not None:
        results = observation.get("results") if isinstance(observation, Mapping) else None
        if not isinstance(results, list):
            problems.append(f"{where}.observation.results: must be a list")
            results = []
        for result_index, result in enumerate(results):
            ref = result.get("source_call_id") if isinstance(result, Mapping) else None
            if ref is not None and ref not in call_ids:
                problems.append(
                    f"{where}.observation.results[{result_index}].source_call_id: "
                    f"{ref!r} names no tool call of this step"
                )
    return problems
