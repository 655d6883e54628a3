"""The ownership-event exporter's edges: inert without its endpoint, a missing extra named with
its fix, and the official bounds on what an event may carry."""

from __future__ import annotations

import sys

import pytest

from osmosis_rollout.errors import MissingExtraError
from osmosis_rollout.server.observability import RolloutObservability
from osmosis_rollout.types import RolloutStatus


def test_without_the_endpoint_nothing_is_exported_or_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", raising=False)
    observability = RolloutObservability()
    observability.start()
    assert not observability.enabled
    with observability.admission("r1", {"osmosis_observability": {"run_id": "run"}}):
        pass
    observability.record("r1", RolloutStatus.QUEUED)
    observability.close()


def test_the_endpoint_without_the_otel_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)  # as if not installed
    with pytest.raises(MissingExtraError) as raised:
        RolloutObservability().start()
    assert str(raised.value) == (
        "opentelemetry-sdk is not installed; this feature needs the 'otel' extra: "
        'pip install "pytest-osmosis[otel]"'
    )


def test_event_fields_take_only_bounded_printable_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_ID", "srv-1")
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_NAME", "bad\nname")
    monkeypatch.delenv("OSMOSIS_ROLLOUT_NAMESPACE", raising=False)
    observability = RolloutObservability()
    metadata = {
        "osmosis_observability": {"run_id": "run-1", "run_name": "y" * 513},
        "prompt": "never sent",
    }
    assert observability.fields("r1", metadata) == {
        "event": "rollout.ownership",
        "rollout_id": "r1",
        "server_id": "srv-1",
        "run_id": "run-1",
    }
    assert observability.fields("r\t1", metadata) is None
    assert observability.fields("r" * 513, metadata) is None
