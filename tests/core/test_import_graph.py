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


PLUGIN_LAYERS: dict[str, int] = {
    # 0: settings, keys and other leaves
    "pytest_osmosis.keys": 0,
    "pytest_osmosis.options": 0,
    "pytest_osmosis.run.workspace": 0,
    "pytest_osmosis.hookspecs": 0,
    "pytest_osmosis.run.rollout_log": 0,
    "pytest_osmosis.signals": 0,
    # 1: verdicts, statistics, report writers, gates
    "pytest_osmosis.results.verdict": 1,
    "pytest_osmosis.results.report": 1,
    "pytest_osmosis.display.progress": 1,
    "pytest_osmosis.results.html": 1,
    "pytest_osmosis.results.gates": 1,
    "pytest_osmosis.results.stopped": 1,
    "pytest_osmosis.results.output_paths": 1,
    "pytest_osmosis.results.run_folder": 1,
    "pytest_osmosis.results.report_redaction": 1,
    # 2: running rollouts: scheduler, runners, and the engine that wires them
    "pytest_osmosis.run.watchdog": 2,
    "pytest_osmosis.run.scheduler": 2,
    "pytest_osmosis.run.attempts": 2,
    "pytest_osmosis.run.policy_choice": 2,
    "pytest_osmosis.run.rollout_servers": 2,
    "pytest_osmosis.run.engine": 2,
    "pytest_osmosis.display.live": 2,
    "pytest_osmosis.run.auto_repeats": 2,
    "pytest_osmosis.results.rows": 2,
    "pytest_osmosis.results.resume": 2,
    # 3: the session and its plugin objects: the rows, resume, the summary
    "pytest_osmosis.run.row_runner": 3,
    "pytest_osmosis.results.run_end": 3,
    "pytest_osmosis.run.session": 3,
    # 4: what pytest drives: start-up, collection, preflight, fixtures, xdist glue
    "pytest_osmosis.startup": 4,
    "pytest_osmosis.collect.items": 4,
    "pytest_osmosis.collect.preflight": 4,
    "pytest_osmosis.fixtures": 4,
    "pytest_osmosis.collect.xdist_groups": 4,
    # 5: the entry point and the package
    "pytest_osmosis.plugin": 5,
    "pytest_osmosis.collect": 5,
    "pytest_osmosis.run": 5,
    "pytest_osmosis.results": 5,
    "pytest_osmosis.display": 5,
    "pytest_osmosis": 5,
}
"""The plugin's layers: a module imports only modules of its own layer or below."""


def test_every_plugin_module_has_a_layer() -> None:
    unplaced = sorted(set(_modules("pytest_osmosis")) - set(PLUGIN_LAYERS))
    assert not unplaced, f"place {unplaced} in PLUGIN_LAYERS (tests/core/test_import_graph.py)"


def test_plugin_modules_import_only_their_layer_or_below() -> None:
    graph = import_graph("pytest_osmosis")
    upward = [
        f"{source} (layer {PLUGIN_LAYERS[source]}) imports {target} "
        f"(layer {PLUGIN_LAYERS[target]}) at line {line}"
        for source, targets in sorted(graph.items())
        for target, line in sorted(targets.items())
        if source in PLUGIN_LAYERS
        and target in PLUGIN_LAYERS
        and PLUGIN_LAYERS[target] > PLUGIN_LAYERS[source]
    ]
    assert not upward, "\n".join(upward)


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
