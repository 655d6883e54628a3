"""The version is written once, in ``osmosis_rollout/__init__.py``; everything else reads it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import osmosis_rollout
import pytest_osmosis

REPO = Path(__file__).resolve().parents[2]
VERSION_SOURCE = REPO / "osmosis_rollout" / "__init__.py"


def test_the_distribution_and_both_packages_report_one_version() -> None:
    installed = importlib.metadata.version("pytest-osmosis")
    assert installed == osmosis_rollout.__version__, (
        f"the installed metadata says {installed} but osmosis_rollout.__version__ is "
        f"{osmosis_rollout.__version__}: reinstall (`pip install -e .`) after changing it"
    )
    assert pytest_osmosis.__version__ == osmosis_rollout.__version__


def test_pyproject_takes_the_version_from_osmosis_rollout() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "osmosis_rollout.__version__"}


def test_no_other_module_writes_a_version_literal() -> None:
    writers = [
        path.relative_to(REPO).as_posix()
        for package in ("osmosis_rollout", "pytest_osmosis")
        for path in sorted((REPO / package).rglob("*.py"))
        if re.search(r"^__version__\s*[:=]", path.read_text(encoding="utf-8"), re.M)
    ]
    assert writers == [VERSION_SOURCE.relative_to(REPO).as_posix()]


def test_the_changelog_has_a_section_for_the_current_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)", changelog, re.M)
    assert osmosis_rollout.__version__ in headings, headings
