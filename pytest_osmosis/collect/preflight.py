"""Preflight checks, run first and reported as their own items.

``osmosis-preflight::dataset[<file>]``, ``::entrypoint`` and ``::eval-config``: the checks
``osmosis-rollout validate`` runs (:mod:`osmosis_rollout.workspace.preflight`), each a test
item that fails with its check and warns (:class:`PreflightWarning`) with its warnings.
``--osmosis-preflight-only`` runs just these: the fast CI step before submission.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.workspace.preflight import (
    CheckResult,
    check_dataset,
    check_entrypoint,
    check_eval_config,
)
from pytest_osmosis.keys import ROW_KEY
from pytest_osmosis.options import resolve_path
from pytest_osmosis.run.session import OsmosisSession, get_session

PREFLIGHT = "osmosis-preflight"
Check = Callable[[], CheckResult]


class PreflightFailure(Exception):
    """A failed preflight check: shown as its message, without a traceback."""


class PreflightWarning(UserWarning):
    """A preflight finding that does not fail the check (e.g. a dataset under 4 rows)."""


class PreflightCollector(pytest.Collector):
    """The checks that apply to the session, in the order they run."""

    def __init__(self, *, osmosis: OsmosisSession, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.osmosis = osmosis

    def collect(self) -> Iterator[pytest.Item]:
        osmosis, config = self.osmosis, self.config
        checks: list[tuple[str, Check]] = []
        for dataset in osmosis.settings.datasets:
            path = resolve_path(config, dataset)
            checks.append((f"dataset[{path.name}]", partial(check_dataset, path)))
        if osmosis.entrypoint:
            base = Path(config.invocation_params.dir)
            checks.append(("entrypoint", partial(check_entrypoint, osmosis.entrypoint, base)))
        if osmosis.eval_config is not None:
            checks.append(("eval-config", partial(check_eval_config, osmosis.eval_config)))
        for name, check in checks:
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


class PreflightPlugin:
    """Collects the preflight checks beside one dataset file, the ``anchor``, so ``collected N
    items``, ``-k``, ``--lf``, ``--co`` and xdist count and select them like any item. Nothing is
    collected when the anchor is not (``pytest tests/unit`` with a dataset in the ini).
    """

    def __init__(self, osmosis: OsmosisSession, anchor: Path) -> None:
        self.osmosis = osmosis
        self.anchor = anchor.resolve()

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.resolve() != self.anchor:
            return None
        # Addressed as osmosis-preflight::<check>; shown beside the dataset in progress lines.
        return PreflightCollector.from_parent(
            parent, name=PREFLIGHT, nodeid=PREFLIGHT, path=file_path, osmosis=self.osmosis
        )


def preflight_anchor(config: pytest.Config, datasets: list[Path]) -> Path | None:
    """The dataset the checks are collected with: the first one the command line collects whole."""
    invocation = Path(config.invocation_params.dir)
    resolved = [d.resolve() for d in datasets]
    # A node id (``::``) selects its own items only.
    args = [(invocation / arg).resolve() for arg in config.args if "::" not in arg]
    return next((d for arg in args for d in resolved if d.is_relative_to(arg)), None)


def order_preflight_items(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Run the preflight items first; with ``--osmosis-preflight-only`` deselect the rows."""
    osmosis = get_session(session.config)
    if osmosis is None or not osmosis.settings.active:
        return
    items.sort(key=lambda item: not isinstance(item, PreflightItem))  # stable: order kept
    if osmosis.settings.preflight_only:
        if rows := [item for item in items if ROW_KEY in item.stash]:
            session.config.hook.pytest_deselected(items=rows)
        items[:] = [item for item in items if ROW_KEY not in item.stash]
