"""The import graph of both packages has no cycle, counting every import statement.

Imports inside functions and under ``if TYPE_CHECKING:`` count too: they hide a cycle from
the interpreter, not from a reader. ``osmosis_rollout`` never imports pytest or the plugin.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("osmosis_rollout", "pytest_osmosis")


def _modules(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package``: dotted name -> file (a package is its ``__init__``)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every dotted name an import statement anywhere in ``path`` may load, with its line.

    ``from pkg import name`` yields ``pkg.name``: the caller keeps the longest prefix that is
    a module (``name`` is a submodule, or an attribute of ``pkg``).
    """
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = ".".join(base_parts[: len(base_parts) - drop])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def import_graph(package: str, root: Path = ROOT) -> dict[str, dict[str, int]]:
    """``module -> {imported module of the same package: line}``."""
    modules = _modules(package, root)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        for target, line in _imported_names(name, path):
            # `from pkg import name` names a module or an attribute: keep the longest module.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    members = set(component)
    edges = [
        f"  {source} -> {target} (line {line})"
        for source in component
        for target, line in sorted(graph[source].items())
        if target in members
    ]
    return "cycle among " + ", ".join(component) + ":\n" + "\n".join(edges)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_has_no_import_cycle(package: str) -> None:
    graph = import_graph(package)
    found = cycles(graph)
    assert not found, "\n".join(_describe(graph, c) for c in found)


def test_the_runtime_library_never_imports_pytest_or_the_plugin() -> None:
    offenders = [
        f"{name} line {line}: {target}"
        for name, path in _modules("osmosis_rollout").items()
        for target, line in _imported_names(name, path)
        if target.split(".")[0] in {"pytest", "_pytest", "pytest_osmosis"}
    ]
    assert not offenders, "\n".join(offenders)


def test_the_checker_finds_a_cycle_hidden_in_a_function_and_under_type_checking(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    (package / "c.py").write_text("import pkg.a\n")
    assert cycles(import_graph("pkg", tmp_path)) == [["pkg.a", "pkg.b"]]


PLUGIN_LAYERS = ("base", "results", "display", "run", "collect", "root")
"""The plugin's layers, lowest first: a module imports only its own layer or those below.

A module's layer is its folder (``pytest_osmosis/run/engine.py`` is in ``run``); a module at
the package's root is in ``root``, the top (the entry point, start-up, fixtures), except the
few leaves every folder reads, in ``base``. Each folder's ``__init__`` says the same in words.
"""

PLUGIN_BASE = {"keys", "options", "signals", "hookspecs"}
"""Root modules that import no other plugin module's folder: stash keys, settings, signals, hook specs."""


def _plugin_layer(module: str, root: Path = ROOT) -> str:
    package, *parts = module.split(".")
    if len(parts) == 1 and parts[0] in PLUGIN_BASE:
        return "base"
    if parts and (root / package / parts[0]).is_dir():
        return parts[0]
    return "root"


def upward_imports(package: str = "pytest_osmosis", root: Path = ROOT) -> list[str]:
    """Every import of a module in a higher layer than the importer's, with its line."""
    rank = {layer: n for n, layer in enumerate(PLUGIN_LAYERS)}
    upward = []
    for source, targets in sorted(import_graph(package, root).items()):
        for target, line in sorted(targets.items()):
            low, high = _plugin_layer(source, root), _plugin_layer(target, root)
            if rank[high] > rank[low]:
                upward.append(f"{source} ({low}) imports {target} ({high}) at line {line}")
    return upward


def test_every_plugin_folder_has_a_layer() -> None:
    folders = {p.name for p in (ROOT / "pytest_osmosis").iterdir() if (p / "__init__.py").exists()}
    unplaced = sorted(folders - set(PLUGIN_LAYERS))
    assert not unplaced, f"place {unplaced} in PLUGIN_LAYERS (tests/core/test_import_graph.py)"


def test_plugin_modules_import_only_their_layer_or_below() -> None:
    upward = upward_imports()
    assert not upward, "\n".join(upward)


def test_the_layer_check_reads_the_folders(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for folder in ("results", "run"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "options.py").write_text("")
    (package / "plugin.py").write_text("from pkg.run import engine\n")
    (package / "run" / "engine.py").write_text(
        "from pkg.results import report\nimport pkg.options\n"
    )
    (package / "results" / "report.py").write_text(
        "def f():\n    from pkg.run.engine import g\n    from pkg import plugin\n"
    )
    assert upward_imports("pkg", tmp_path) == [
        "pkg.results.report (results) imports pkg.plugin (root) at line 3",
        "pkg.results.report (results) imports pkg.run.engine (run) at line 2",
    ]


def test_the_plugin_root_holds_at_most_ten_modules() -> None:
    root = sorted(p.name for p in (ROOT / "pytest_osmosis").glob("*.py"))
    assert len(root) <= 10, f"group these into the plugin's folders: {root}"


RUNTIME_LAYERS: dict[str, int] = {
    # 0: what everything stands on
    "osmosis_rollout.errors": 0,
    "osmosis_rollout._internal": 0,
    # 1: data shapes and the one redaction step
    "osmosis_rollout.types": 1,
    "osmosis_rollout.redaction": 1,
    "osmosis_rollout.sample_text": 1,
    # 2: the ambient context, traffic, a run's files, datasets
    "osmosis_rollout.context": 2,
    "osmosis_rollout.transport": 2,
    "osmosis_rollout.runs": 2,
    "osmosis_rollout.dataset": 2,
    # 3: the contract and what it produces
    "osmosis_rollout.agent_workflow": 3,
    "osmosis_rollout.grader": 3,
    "osmosis_rollout.policy": 3,
    "osmosis_rollout.trajectory": 3,
    "osmosis_rollout.rollout_notes": 3,
    # 4: model clients, frameworks, the controller side
    "osmosis_rollout.grading": 4,
    "osmosis_rollout.chat_client": 4,
    "osmosis_rollout.integrations": 4,
    "osmosis_rollout.integrations._litellm": 3,  # LiteLLM's one import, policies' too
    "osmosis_rollout.controller": 4,
    "osmosis_rollout.client": 4,
    # 5: graders users write against, and the execution backends
    "osmosis_rollout.rewards": 5,
    "osmosis_rollout.rubric": 5,
    "osmosis_rollout.backend": 5,
    # 6: running one rollout, and finding the user's rollout in a workspace
    "osmosis_rollout.execution": 6,
    "osmosis_rollout.workspace": 6,
    # 7: what assembles everything: the server, Ray (it imports the user's entrypoint), the CLI
    "osmosis_rollout.backend.ray": 7,
    "osmosis_rollout.server": 7,
    "osmosis_rollout.templates": 7,
    "osmosis_rollout.cli": 7,
    "osmosis_rollout": 7,
}
"""The runtime's layers, by module prefix (the longest one wins): a module imports only its
layer or below. ``import osmosis_rollout`` for ``__version__`` is the one exception."""

_VERSION_READERS = {"osmosis_rollout.trajectory.atif"}


def _runtime_layer(module: str) -> int | None:
    name = module
    while name:
        if name in RUNTIME_LAYERS:
            return RUNTIME_LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def test_every_runtime_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _modules("osmosis_rollout") if _runtime_layer(m) is None)
    assert not unplaced, f"place {unplaced} in RUNTIME_LAYERS (tests/core/test_import_graph.py)"


def test_runtime_modules_import_only_their_layer_or_below() -> None:
    upward = []
    for source, targets in import_graph("osmosis_rollout").items():
        for target, line in targets.items():
            if target == "osmosis_rollout" and source in _VERSION_READERS:
                continue
            low, high = _runtime_layer(source), _runtime_layer(target)
            if low is not None and high is not None and high > low:
                upward.append(
                    f"{source} (layer {low}) imports {target} (layer {high}) at line {line}"
                )
    assert not upward, "\n".join(upward)


def test_the_runtime_root_holds_at_most_fifteen_modules() -> None:
    root = sorted(p.name for p in (ROOT / "osmosis_rollout").glob("*.py"))
    assert len(root) <= 15, f"group these into subpackages: {root}"
