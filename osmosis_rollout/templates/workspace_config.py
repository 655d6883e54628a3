"""The workspace's pytest configuration, written when a template is applied.

So that a bare ``pytest`` in a new workspace runs the rollout's rows offline, applying a
template also writes the workspace's ``pyproject.toml`` (the same file the example
workspaces carry: dependencies and a ``[tool.pytest.ini_options]`` naming the eval config,
the dataset and the reference policy). A workspace's own files are respected:

- no ``pyproject.toml`` and no other pytest configuration: the file is written whole
  (with pytest-asyncio's loop scope set when pytest-asyncio is installed, so its
  deprecation warning does not open every run);
- a ``pyproject.toml`` that does not configure pytest: the section is appended to it;
- pytest already configured there (``pytest.ini``, ``tox.ini``, ``setup.cfg``, a
  ``pyproject.toml`` section, e.g. by an earlier rollout): left as it is, and said.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from osmosis_rollout.templates import PYTEST_SECTION, Template, render_workspace_pyproject

__all__ = ["ASYNCIO_SCOPE", "PytestConfig", "pytest_config_file", "write_pytest_config"]

#: Files pytest reads its configuration from, and the section that makes each one count.
_PYTEST_FILES = (
    ("pytest.ini", ""),
    (".pytest.ini", ""),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("pyproject.toml", "[tool.pytest]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


@dataclass(frozen=True)
class PytestConfig:
    """What applying a template did to the workspace's pytest configuration."""

    path: Path
    action: Literal["written", "appended", "unchanged", "kept"]
    """``kept``: pytest was already configured in ``path``, which was left as it is."""


def pytest_config_file(root: Path) -> Path | None:
    """The file that configures pytest in ``root`` (not its parents), or None."""
    for name, section in _PYTEST_FILES:
        path = root / name
        if path.is_file() and (not section or section in path.read_text("utf-8", errors="replace")):
            return path
    return None


ASYNCIO_SCOPE = 'asyncio_default_fixture_loop_scope = "function"'
"""Set where pytest-asyncio is installed: unset, it warns at the top of every pytest run."""


def _workspace_pyproject(template: Template, rollout: str) -> str:
    text = render_workspace_pyproject(template, rollout)
    # Only where pytest-asyncio is installed: elsewhere pytest would warn of an unknown key.
    if importlib.util.find_spec("pytest_asyncio") is not None:
        line = (
            f"{ASYNCIO_SCOPE}  # pytest-asyncio is installed here; unset, it warns on every run\n"
        )
        text = text.replace(PYTEST_SECTION + "\n", PYTEST_SECTION + "\n" + line, 1)
    return text


def write_pytest_config(root: Path, template: Template, rollout: str) -> PytestConfig:
    """Configure pytest in ``root`` to run ``rollout`` unless something already does."""
    text = _workspace_pyproject(template, rollout)
    pyproject = root / "pyproject.toml"
    existing = pytest_config_file(root)
    if existing is not None:
        unchanged = existing == pyproject and pyproject.read_text("utf-8") == text
        return PytestConfig(existing, "unchanged" if unchanged else "kept")
    if not pyproject.exists():
        root.mkdir(parents=True, exist_ok=True)
        with pyproject.open("x", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return PytestConfig(pyproject, "written")
    section = text[text.index(PYTEST_SECTION) :]
    current = pyproject.read_text("utf-8")
    separator = "" if current.endswith("\n\n") else "\n" if current.endswith("\n") else "\n\n"
    with pyproject.open("a", encoding="utf-8", newline="\n") as handle:
        handle.write(separator + section)
    return PytestConfig(pyproject, "appended")
