"""The committed pins agree with pyproject.toml, and CI installs and tests both ends.

``constraints.txt`` pins the newest releases (the environment ``scripts/test.sh`` runs in),
``constraints-lowest.txt`` the frameworks' lower bounds (``scripts/test-frameworks.sh``); both
are written by ``scripts/update-constraints.sh``. A range edited without refreshing the pins
fails here, before CI tests something other than what pyproject.toml claims.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from _support.repo import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` (the scripts folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(path: Path) -> dict[str, Version]:
    """``name==version`` lines of a constraints file, by canonical name."""
    found: dict[str, Version] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{path.name}: {line!r} is not a name==version pin"
        found[canonicalize_name(name)] = Version(version)
    return found


def optional_requirements() -> list[Requirement]:
    """Every requirement of every extra, other than the project's own extras."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [
        Requirement(text)
        for requirements in project["optional-dependencies"].values()
        for text in requirements
        if Requirement(text).name != project["name"]
    ]


@pytest.mark.parametrize("constraints", ["constraints.txt", "constraints-lowest.txt"])
def test_a_constraints_file_pins_only_versions_pyproject_allows(constraints: str) -> None:
    pinned = pins(REPO / constraints)
    assert "pytest-osmosis" not in pinned, "the project itself must not be pinned"
    outside = [
        f"{requirement} but {constraints} pins {pinned[name]}"
        for requirement in optional_requirements()
        if (name := canonicalize_name(requirement.name)) in pinned
        and not requirement.specifier.contains(pinned[name], prereleases=True)
    ]
    assert outside == [], "run scripts/update-constraints.sh"


def test_the_lowest_constraints_pin_each_framework_at_its_lower_bound() -> None:
    lowest = load_script("lowest_pins").lowest_pins(REPO / "pyproject.toml")
    pinned = pins(REPO / "constraints-lowest.txt")
    assert {name: pinned.get(name) for name in lowest} == {
        name: Version(version) for name, version in lowest.items()
    }, "run scripts/update-constraints.sh"


def test_ci_tests_the_frameworks_at_their_lowest_releases() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert any(line.strip().startswith("bash scripts/test-frameworks.sh ") for line in ci)
    script = (REPO / "scripts" / "test-frameworks.sh").read_text(encoding="utf-8")
    assert "-c constraints-lowest.txt" in script
    assert "tests/integrations" in script
