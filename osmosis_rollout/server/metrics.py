"""Prometheus text-format metrics of one rollout server (``GET /metrics``, opt-in).

Counters and the latency histogram are fed by the server's status observers; gauges are read
at scrape time. No client library is needed: the exposition format is small and stable.

- ``osmosis_rollouts_admitted_total``
- ``osmosis_rollouts_rejected_total{reason}``: ``shutting_down`` (503), ``queue_full`` (429),
  ``duplicate`` (409)
- ``osmosis_rollouts_finished_total{status,category}``: terminal results (``category="none"``
  when the result has no error category)
- ``osmosis_rollouts_active``: execution tasks not done
- ``osmosis_rollouts_queued``: rollouts waiting for an execution slot (the backend's
  ``concurrency.queued`` when it reports one, else server progress still ``queued``)
- ``osmosis_rollouts_in_status{status}``: live rollouts by server progress
- ``osmosis_rollout_result_latency_seconds``: admission to fixed result (histogram)
- with ``max_concurrent`` set (``serve`` sets ``auto``): ``osmosis_concurrency_limit``,
  ``osmosis_concurrency_queue_bound``, ``osmosis_event_loop_lag_seconds``,
  ``osmosis_rollout_slot_latency_seconds{kind="smoothed"|"baseline"}`` (the adaptive
  limit's signals) and ``osmosis_concurrency_limit_info{mode,state}``
- under ``serve``: ``osmosis_connections_open``, ``osmosis_connections_shed_total{reason}``
  (``header_timeout``, ``slow_body``, ``over_connection_cap``)
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition content type."""

LATENCY_BUCKETS: tuple[float, ...] = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
)
"""Upper bounds (seconds) of the latency histogram buckets; ``+Inf`` is implied."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in pairs)
    return f"{{{inner}}}" if inner else ""


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if isinstance(value, float) else str(value)


@dataclass
class Histogram:
    """A cumulative-bucket histogram over :data:`LATENCY_BUCKETS`."""

    counts: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        """Record one observation."""
        index = bisect.bisect_left(LATENCY_BUCKETS, value)
        if index < len(self.counts):
            self.counts[index] += 1
        self.total += value
        self.count += 1


@dataclass
class RolloutMetrics:
    """The counters a server keeps; :meth:`render` produces the exposition text."""

    admitted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    finished: Counter[tuple[str, str]] = field(default_factory=Counter)
    latency: Histogram = field(default_factory=Histogram)

    def record_admitted(self) -> None:
        """A rollout was admitted (202)."""
        self.admitted += 1

    def record_rejected(self, reason: str) -> None:
        """Admission was refused for ``reason``."""
        self.rejected[reason] += 1

    def record_finished(self, status: str, category: str | None, latency_sec: float) -> None:
        """A rollout's result was fixed ``latency_sec`` after its admission."""
        self.finished[(status, category or "none")] += 1
        self.latency.observe(max(latency_sec, 0.0))

    def render(
        self,
        *,
        active: int,
        queued: int,
        in_status: Mapping[str, int],
        admission: Mapping[str, Any] | None = None,
        connections: Mapping[str, Any] | None = None,
    ) -> str:
        """The Prometheus text exposition of every metric.

        ``admission`` and ``connections`` are the objects ``/health`` shows under those keys.
        """
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        family("osmosis_rollouts_admitted_total", "counter", "Rollouts admitted (202).")
        lines.append(f"osmosis_rollouts_admitted_total {self.admitted}")
        family("osmosis_rollouts_rejected_total", "counter", "Admissions refused, by reason.")
        for reason in ("shutting_down", "queue_full", "duplicate"):
            lines.append(
                f"osmosis_rollouts_rejected_total{_labels([('reason', reason)])} "
                f"{self.rejected[reason]}"
            )
        family(
            "osmosis_rollouts_finished_total",
            "counter",
            "Rollouts that reached a terminal result, by status and error category.",
        )
        for (status, category), count in sorted(self.finished.items()):
            labels = _labels([("status", status), ("category", category)])
            lines.append(f"osmosis_rollouts_finished_total{labels} {count}")
        family("osmosis_rollouts_active", "gauge", "Execution tasks not yet done.")
        lines.append(f"osmosis_rollouts_active {active}")
        family("osmosis_rollouts_queued", "gauge", "Rollouts waiting for an execution slot.")
        lines.append(f"osmosis_rollouts_queued {queued}")
        family("osmosis_rollouts_in_status", "gauge", "Live rollouts by server-side status.")
        for status in ("queued", "running", "grading"):
            lines.append(
                f"osmosis_rollouts_in_status{_labels([('status', status)])} "
                f"{in_status.get(status, 0)}"
            )
        name = "osmosis_rollout_result_latency_seconds"
        family(name, "histogram", "Seconds from admission to the fixed result.")
        cumulative = 0
        for bound, count in zip(LATENCY_BUCKETS, self.latency.counts, strict=True):
            cumulative += count
            lines.append(f"{name}_bucket{_labels([('le', _number(bound))])} {cumulative}")
        lines.append(f'{name}_bucket{{le="+Inf"}} {self.latency.count}')
        lines.append(f"{name}_sum {_number(self.latency.total)}")
        lines.append(f"{name}_count {self.latency.count}")
        if admission is not None:
            _render_admission(admission, family, lines)
        if connections is not None:
            family("osmosis_connections_open", "gauge", "Open HTTP connections.")
            lines.append(f"osmosis_connections_open {connections['open']}")
            family("osmosis_connections_shed_total", "counter", "Connections closed by the server.")
            shed = connections["shed"]
            for reason in ("header_timeout", "slow_body", "over_connection_cap"):
                labels = _labels([("reason", reason)])
                lines.append(f"osmosis_connections_shed_total{labels} {shed.get(reason, 0)}")
        return "\n".join(lines) + "\n"


def _render_admission(admission: Mapping[str, Any], family: Any, lines: list[str]) -> None:
    family("osmosis_concurrency_limit", "gauge", "Rollouts allowed to run at once now.")
    lines.append(f"osmosis_concurrency_limit {admission['limit']}")
    family("osmosis_concurrency_queue_bound", "gauge", "Rollouts allowed to wait for a slot.")
    lines.append(f"osmosis_concurrency_queue_bound {admission['queue_bound']}")
    family("osmosis_concurrency_limit_info", "gauge", "The limit's mode and state (always 1).")
    labels = _labels([("mode", str(admission["mode"])), ("state", str(admission["state"]))])
    lines.append(f"osmosis_concurrency_limit_info{labels} 1")
    family("osmosis_event_loop_lag_seconds", "gauge", "Mean lateness of a 25 ms timer.")
    lines.append(f"osmosis_event_loop_lag_seconds {_number(float(admission['loop_lag_sec']))}")
    family(
        "osmosis_rollout_slot_latency_seconds",
        "gauge",
        "Seconds a finished rollout held its slot: smoothed, and the baseline.",
    )
    for kind, key in (("smoothed", "latency_sec"), ("baseline", "baseline_latency_sec")):
        value = admission.get(key)
        if value is not None:
            labels = _labels([("kind", kind)])
            lines.append(f"osmosis_rollout_slot_latency_seconds{labels} {_number(float(value))}")


__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "Histogram", "RolloutMetrics"]
