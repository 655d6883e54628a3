"""Preflight checks, run first and reported as their own items.

``osmosis-preflight::dataset[<file>]`` (the dataset contract, spec II.7; fewer than the
platform's 4 rows is a warning locally), ``osmosis-preflight::entrypoint`` (the entrypoint
imports and exposes one workflow and one grader, or a backend/app), and
``osmosis-preflight::eval-config`` (the eval TOML validates, spec II.8.1).
``--osmosis-preflight-only`` runs just these: the fast CI step before submission.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
        self.check()

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, PreflightFailure):
            return f"preflight {self.name} failed:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def check_dataset(path: Path) -> None:
    """The dataset contract; errors fail, warnings warn."""
    from osmosis_rollout.dataset import validate_dataset

    report = validate_dataset(path)
    if not report.ok:
        raise PreflightFailure(report.format())
    for warning in report.warnings:
        warnings.warn(PreflightWarning(f"{path.name}: {warning}"), stacklevel=1)


def check_entrypoint(entrypoint: str, base: Path) -> None:
    """The entrypoint imports and exposes a rollout (workflow + grader, or a backend/app)."""
    from osmosis_rollout.entrypoint import load_entrypoint
    from osmosis_rollout.errors import EntrypointError

    try:
        loaded = load_entrypoint(entrypoint, base_dir=base)
    except EntrypointError as exc:
        raise PreflightFailure(str(exc)) from None
    except Exception as exc:
        raise PreflightFailure(
            f"importing {entrypoint} raised {type(exc).__name__}: {exc}"
        ) from None
    if loaded.backend is None:
        raise PreflightFailure(f"{entrypoint} exposes no workflow/grader, backend or app")
    grader = getattr(loaded, "grader", None)
    if loaded.found == "classes" and grader is None:
        raise PreflightFailure(
            f"{entrypoint} defines a workflow but no Grader subclass: rows could not be rewarded. "
            "Define one Grader subclass in the entrypoint."
        )


def check_eval_config(path: Path) -> None:
    """The eval TOML validates."""
    from osmosis_rollout.errors import ConfigError
    from osmosis_rollout.eval_config import load_eval_config

    try:
        load_eval_config(path)
    except ConfigError as exc:
        raise PreflightFailure(str(exc)) from None


def preflight_checks(osmosis: Any) -> list[tuple[str, Any]]:
    """The checks that apply to this session, in the order they run."""
    from pytest_osmosis.options import resolve_path

    config = osmosis.config
    checks: list[tuple[str, Any]] = []
    for dataset in osmosis.settings.datasets:
        path = resolve_path(config, dataset)
        checks.append((f"dataset[{path.name}]", lambda p=path: check_dataset(p)))
    if osmosis.entrypoint:
        base = Path(config.invocation_params.dir)
        checks.append(("entrypoint", lambda e=osmosis.entrypoint, b=base: check_entrypoint(e, b)))
    if osmosis.eval_config is not None:
        checks.append(("eval-config", lambda p=osmosis.eval_config: check_eval_config(p)))
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
