"""Write the public names of the official SDK's ``osmosis_ai.rollout`` to a JSON file.

Run with the official SDK's interpreter (its source uses Python 3.12 syntax)::

    ~/.cache/pytest-osmosis/interop-venv-0.3.8/bin/python scripts/official_names.py \
        > tests/core/official_names_0_3_8.json

The source is parsed, never imported, so optional extras (Harbor, OpenAI Agents, Strands)
need not be installed. A module's names are its ``__all__`` when it has one (plus the keys of
a lazy ``_EXPORTS`` table), else every public name bound at its top level (classes,
functions, assignments, type aliases); ``parameters`` holds the parameter names of the
public functions and class constructors it defines. Every module of ``osmosis_ai.rollout`` is listed, and
those outside it that rollouts import: ``osmosis_ai`` and ``osmosis_ai.eval.rubric`` (with its
``engine`` and ``types``).
``tests/core/test_official_name_parity.py`` compares ``osmosis_rollout`` against the file.
"""

from __future__ import annotations

import ast
import json
import sys
from importlib import metadata, util
from pathlib import Path

PACKAGE = "osmosis_ai.rollout"
# Outside the rollout package, the modules whose names a rollout imports (rubric evaluation).
EXTRA_MODULES = (
    "osmosis_ai",
    "osmosis_ai.eval.rubric",
    "osmosis_ai.eval.rubric.engine",
    "osmosis_ai.eval.rubric.types",
)
# Loggers are module plumbing, not API.
IGNORED = frozenset({"logger", "log"})


def parameters(tree: ast.Module) -> dict[str, list[str]]:
    """Parameter names of the public functions and class constructors the module defines."""
    found: dict[str, list[str]] = {}
    for node in tree.body:
        function: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node
        elif isinstance(node, ast.ClassDef):
            function = next(
                (
                    item
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__"
                ),
                None,
            )
        if function is None or node.name.startswith("_"):
            continue
        args = function.args
        found[node.name] = [
            arg.arg
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
            if arg.arg not in ("self", "cls")
        ]
    return found


def module_names(tree: ast.Module) -> tuple[str, list[str]]:
    """``("__all__", names)`` when the module declares ``__all__``, else ``("top-level", names)``."""
    bound: set[str] = set()
    lazy: set[str] = set()
    declared: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "__all__" and node.value is not None:
                    declared = list(ast.literal_eval(node.value))
                elif target.id == "_EXPORTS" and isinstance(node.value, ast.Dict):
                    lazy.update(ast.literal_eval(key) for key in node.value.keys if key)
                bound.add(target.id)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            bound.add(node.name)
        elif sys.version_info >= (3, 12) and isinstance(node, ast.TypeAlias):
            bound.add(node.name.id)
    if declared is not None:
        return "__all__", sorted(set(declared) | lazy)
    return "top-level", sorted(n for n in bound if not n.startswith("_") and n not in IGNORED)


def main() -> int:
    """Print the JSON document for the installed official SDK."""
    spec = util.find_spec(PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        print(f"{PACKAGE} is not importable from {sys.executable}", file=sys.stderr)
        return 1
    root = Path(next(iter(spec.submodule_search_locations)))
    sources: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join([PACKAGE, *parts])] = path
    for name in EXTRA_MODULES:
        extra = util.find_spec(name)
        if extra is None or extra.origin is None:
            print(f"{name} is not importable from {sys.executable}", file=sys.stderr)
            return 1
        sources[name] = Path(extra.origin)
    modules: dict[str, dict[str, object]] = {}
    for name, path in sorted(sources.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kind, names = module_names(tree)
        modules[name] = {"source": kind, "names": names, "parameters": parameters(tree)}
    document = {
        "package": "osmosis-ai",
        "version": metadata.version("osmosis-ai"),
        "modules": modules,
    }
    json.dump(document, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
