"""The distribution as a user gets it: ``pip install .`` in a fresh venv and the wheel's contents.

Both are built from a fresh copy of the repository's tracked files, so nothing a developer
left in the tree (``build/``, ``*.egg-info``) decides the result, before pytest by
``scripts/test.sh`` (``_support.venvs.DISTRIBUTION``, kept while the files are unchanged); the
tests read what pip printed. Skipped, with the reason, when the index could not be reached.
"""

from __future__ import annotations

import email.parser
import re
import tomllib
import zipfile
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
import trove_classifiers
from _support.repo import REPO
from _support.venvs import DISTRIBUTION, Finished, installed_output, run

import osmosis_rollout

pytestmark = pytest.mark.pip_index

#: Any of these in pip's output is a packaging warning the project must not cause.
WARNING_PATTERN = re.compile(r"deprecat|BuildBackendWarning|SetuptoolsWarning", re.IGNORECASE)


@dataclass(frozen=True)
class Built:
    """A fresh venv with the project installed by ``pip install .``, and a wheel built alike."""

    install: Finished
    python: Path
    wheel: Path


@pytest.fixture(scope="module")
def built() -> Built:
    folder = DISTRIBUTION.folder()
    # pip ran (the index was reachable) and failed: the project does not install, a failure.
    for step in ("install", "wheel"):
        done = installed_output(folder, step)
        assert done is None or done.returncode == 0, done.explain()
    python = DISTRIBUTION.require()
    install = installed_output(folder, "install")
    assert install is not None
    (wheel,) = (folder / "wheels").glob("pytest_osmosis-*.whl")
    return Built(install, python, wheel)


def wheel_metadata(wheel: Path) -> Message:
    """The wheel's ``METADATA`` as an email message (one header per field occurrence)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode("utf-8")
    return email.parser.Parser().parsestr(text)


def test_pip_install_in_a_fresh_venv_prints_no_packaging_warning(built: Built) -> None:
    warnings = [line for line in built.install.output.splitlines() if WARNING_PATTERN.search(line)]
    assert warnings == [], built.install.explain()


def test_the_installed_packages_import_and_report_the_version(built: Built) -> None:
    probe = run(
        [
            str(built.python),
            "-c",
            "import osmosis_rollout, pytest_osmosis; "
            "print(osmosis_rollout.__version__, pytest_osmosis.__version__)",
        ],
        timeout=120,
    )
    assert probe.returncode == 0, probe.explain()
    version = osmosis_rollout.__version__
    assert probe.stdout.split() == [version, version]
    assert (built.python.parent / "osmosis-rollout").is_file()


def test_the_wheel_carries_the_license_file_and_pep_639_metadata(built: Built) -> None:
    version = osmosis_rollout.__version__
    dist_info = f"pytest_osmosis-{version}.dist-info"
    with zipfile.ZipFile(built.wheel) as archive:
        names = set(archive.namelist())
        assert f"{dist_info}/licenses/LICENSE" in names, sorted(names)
        shipped = archive.read(f"{dist_info}/licenses/LICENSE")
        assert shipped == (REPO / "LICENSE").read_bytes()
        assert {"osmosis_rollout/py.typed", "pytest_osmosis/py.typed"} <= names
    metadata = wheel_metadata(built.wheel)
    assert metadata["Version"] == version
    assert tuple(int(n) for n in metadata["Metadata-Version"].split(".")) >= (2, 4)
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["License"] is None, "the legacy License field must not be written"
    classifiers = metadata.get_all("Classifier") or []
    assert not [c for c in classifiers if c.startswith("License ::")], classifiers
    assert {
        "Framework :: Pytest",
        "Topic :: Software Development :: Testing",
    } <= set(classifiers)
    assert any(c.startswith("Development Status :: ") for c in classifiers), classifiers
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(urls), urls
    assert urls["Changelog"].endswith("/CHANGELOG.md")


def test_every_classifier_is_a_known_trove_classifier() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    unknown = [c for c in project["classifiers"] if c not in trove_classifiers.classifiers]
    assert unknown == []


def test_the_license_file_is_the_apache_2_0_text() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_wheel_carries_the_html_reports_stylesheet_and_script(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as archive:
        names = set(archive.namelist())
    assert {"osmosis_rollout/runs/html.css", "osmosis_rollout/runs/html.js"} <= names
