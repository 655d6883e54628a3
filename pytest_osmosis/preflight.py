"""Preflight checks, run first and reported as their own items.

``osmosis-preflight::dataset[<file>]``, ``osmosis-preflight::entrypoint`` and
``osmosis-preflight::eval-config``: the checks of :mod:`osmosis_rollout.preflight` (the
same ones ``osmosis-rollout validate`` runs), each a test item. A failed
:class:`~osmosis_rollout.preflight.CheckResult` fails its item, its warnings become
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

from osmosis_rollout.preflight import (
    CheckResult,
    check_dataset,
    check_entrypoint,
    check_eval_config,
)

PREFLIGHT = "osmosis-preflight"


class PreflightFailure(Exception):
    """A failed preflight check: shown as its message, without a traceback."""


class PreflightWarning(UserWarning):
    """A preflight finding that does not fail the check (e.g. a dataset under 4 rows)."""


class PreflightCollector(pytest.Collector):
    """Holds the preflight items of the session."""

    def __init__(self, *, checks: list[tuple[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = checks

    def collect(self) -> Iterator[pytest.Item]:
        for name, check in self.checks:
            yield PreflightItem.from_parent(self, name=name, check=check)


class PreflightItem(pytest.Item):
    """One preflight check."""

    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        # The one place a check result becomes a pytest outcome.
        result: CheckResult = self.check()
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


def preflight_checks(osmosis: Any) -> list[tuple[str, Callable[[], CheckResult]]]:
    """The checks that apply to this session, in the order they run."""
    from pytest_osmosis.options import resolve_path

    config = osmosis.config
    checks: list[tuple[str, Callable[[], CheckResult]]] = []
    for dataset in osmosis.settings.datasets:
        path = resolve_path(config, dataset)
        checks.append((f"dataset[{path.name}]", functools.partial(check_dataset, path)))
    if osmosis.entrypoint:
        base = Path(config.invocation_params.dir)
        checks.append(("entrypoint", functools.partial(check_entrypoint, osmosis.entrypoint, base)))
    if osmosis.eval_config is not None:
        checks.append(("eval-config", functools.partial(check_eval_config, osmosis.eval_config)))
    return checks


def add_preflight_items(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Put the preflight items first; with ``--osmosis-preflight-only`` deselect the rows."""
    from pytest_osmosis.collection import DatasetFile
    from pytest_osmosis.session import get_session

    osmosis = get_session(session.config)
    if osmosis is None or not osmosis.settings.active:
        return
    # Only when a dataset was collected: `pytest tests/unit` with an ini dataset runs no checks.
    if not any(isinstance(item.parent, DatasetFile) for item in items):
        return
    from pytest_osmosis.options import resolve_path

    # Shown beside the first dataset in pytest's progress lines; addressed as osmosis-preflight::<check>.
    anchor = resolve_path(session.config, osmosis.settings.datasets[0])
    collector = PreflightCollector.from_parent(
        session, name=PREFLIGHT, nodeid=PREFLIGHT, path=anchor, checks=preflight_checks(osmosis)
    )
    preflight = list(collector.collect())
    if osmosis.settings.preflight_only:
        from pytest_osmosis.collection import RowItem

        rows = [item for item in items if isinstance(item, RowItem)]
        if rows:
            session.config.hook.pytest_deselected(items=rows)
        items[:] = [item for item in items if not isinstance(item, RowItem)]
    items[:0] = preflight
