"""Preflight checks, run first and reported as their own items.

``osmosis-preflight::dataset[<file>]``, ``osmosis-preflight::entrypoint`` and
``osmosis-preflight::eval-config``: the checks of :mod:`osmosis_rollout.workspace.preflight` (the
same ones ``osmosis-rollout validate`` runs), each a test item. A failed
:class:`~osmosis_rollout.workspace.preflight.CheckResult` fails its item, its warnings become
:class:`PreflightWarning`. ``--osmosis-preflight-only`` runs just these: the fast CI step
before submission.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.workspace.preflight import (
    CheckResult,
    check_dataset,
    check_entrypoint,
    check_eval_config,
)

PREFLIGHT = "osmosis-preflight"
Check = Callable[[], CheckResult]


class PreflightFailure(Exception):
    """A failed preflight check: shown as its message, without a traceback."""


class PreflightWarning(UserWarning):
    """A preflight finding that does not fail the check (e.g. a dataset under 4 rows)."""


class PreflightCollector(pytest.Collector):
    """Holds the preflight items of the session."""

    def __init__(self, *, checks: list[tuple[str, Check]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = checks

    def collect(self) -> Iterator[pytest.Item]:
        for name, check in self.checks:
            yield PreflightItem.from_parent(self, name=name, check=check)


class PreflightItem(pytest.Item):
    """One preflight check."""

    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        # The one place a check result becomes a pytest outcome.
        result = self.check()
        for warning in result.warnings:
            warnings.warn(PreflightWarning(f"{self.name}: {warning}"), stacklevel=1)
        if not result.ok:
            raise PreflightFailure(result.detail)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, PreflightFailure):
            return f"preflight {self.name} failed:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def preflight_checks(osmosis: Any) -> list[tuple[str, Check]]:
    """The checks that apply to this session, in the order they run."""
    from pytest_osmosis.options import resolve_path

    config = osmosis.config
    checks: list[tuple[str, Check]] = []
    for dataset in osmosis.settings.datasets:
        path = resolve_path(config, dataset)
        checks.append((f"dataset[{path.name}]", functools.partial(check_dataset, path)))
    if osmosis.entrypoint:
        base = Path(config.invocation_params.dir)
        checks.append(("entrypoint", functools.partial(check_entrypoint, osmosis.entrypoint, base)))
    if osmosis.eval_config is not None:
        checks.append(("eval-config", functools.partial(check_eval_config, osmosis.eval_config)))
    return checks


class PreflightPlugin:
    """Collects the preflight checks beside one dataset file, the ``anchor``.

    A second ``pytest_collect_file`` result beside that file's dataset collector, so the
    checks are part of collection: ``collected N items``, ``-k``, ``--lf``, ``--co`` and xdist
    count and select them like any item. Nothing is collected when the anchor is not (``pytest
    tests/unit`` with a dataset in the ini runs no checks).
    """

    def __init__(self, osmosis: Any, anchor: Path) -> None:
        self.osmosis = osmosis
        self.anchor = anchor.resolve()

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.resolve() != self.anchor:
            return None
        # Addressed as osmosis-preflight::<check>; shown beside the dataset in progress lines.
        return PreflightCollector.from_parent(
            parent,
            name=PREFLIGHT,
            nodeid=PREFLIGHT,
            path=file_path,
            checks=preflight_checks(self.osmosis),
        )


def preflight_anchor(config: pytest.Config, datasets: list[Path]) -> Path | None:
    """The dataset the checks are collected with: the first one the command line collects whole."""
    invocation = Path(config.invocation_params.dir)
    resolved = [d.resolve() for d in datasets]
    for arg in config.args:
        if "::" in arg:
            continue  # a node id selects its own items only
        path = (invocation / arg).resolve()
        if path in resolved:
            return path
        inside = [d for d in resolved if path.is_dir() and d.is_relative_to(path)]
        if inside:
            return inside[0]
    return None


def order_preflight_items(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Run the preflight items first; with ``--osmosis-preflight-only`` deselect the rows."""
    from pytest_osmosis.keys import ROW_KEY
    from pytest_osmosis.run.session import get_session

    osmosis = get_session(session.config)
    if osmosis is None or not osmosis.settings.active:
        return
    preflight = [item for item in items if isinstance(item, PreflightItem)]
    rest = [item for item in items if not isinstance(item, PreflightItem)]
    if osmosis.settings.preflight_only:
        rows = [item for item in rest if ROW_KEY in item.stash]
        if rows:
            session.config.hook.pytest_deselected(items=rows)
        rest = [item for item in rest if ROW_KEY not in item.stash]
    items[:] = [*preflight, *rest]
