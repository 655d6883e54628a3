"""Find the rollout a user's entrypoint defines: ``path/to/main.py[:ATTR]`` or ``pkg.mod[:ATTR]``.

A file is imported under a unique module name with its directory first on ``sys.path`` (so
``from helpers import x`` next to ``main.py`` works). Resolution, first match wins:

1. an explicit ``ATTR``: a FastAPI app, an ``ExecutionBackend``, or an ``AgentWorkflow``
   subclass (its grader and configs are then found as in rule 4);
2. a module-level FastAPI (Starlette) app;
3. a module-level ``ExecutionBackend``;
4. exactly one concrete ``AgentWorkflow`` subclass and at most one ``Grader`` subclass
   *defined in* the module, plus module-level ``AgentWorkflowConfig`` / ``GraderConfig``
   instances when present.

Anything else raises :class:`~osmosis_rollout.errors.EntrypointError` naming what was found
and what to pass instead.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from osmosis_rollout.agent_workflow import AgentWorkflow
from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.errors import EntrypointError
from osmosis_rollout.grader import Grader
from osmosis_rollout.types import AgentWorkflowConfig, GraderConfig

# The workspace's own finder, under the name this module has always exported.
from osmosis_rollout.workspace import rollout_entrypoints as discover_entrypoints
from osmosis_rollout.workspace.user_code import (
    import_user_file,
    import_user_module,
    looks_like_file,
)

Found = Literal["attr", "app", "backend", "classes"]


@dataclass
class LoadedRollout:
    """What an entrypoint provides, and how it was found."""

    path: str
    module: ModuleType
    found: Found
    app: Any | None = None
    backend: ExecutionBackend | None = None
    workflow: type[AgentWorkflow[Any]] | None = None
    workflow_config: AgentWorkflowConfig | None = None
    grader: type[Grader] | None = None
    grader_config: GraderConfig | None = None

    def describe(self) -> str:
        """One line saying what will be served."""
        if self.workflow is not None:
            grader = f" + {self.grader.__name__}" if self.grader is not None else ""
            return f"{self.path}: {self.workflow.__name__}{grader}"
        what = "app" if self.app is not None else type(self.backend).__name__
        return f"{self.path}: {what}"


def _is_app(obj: Any) -> bool:
    starlette = sys.modules.get("starlette.applications")  # no app without it imported
    return starlette is not None and isinstance(obj, starlette.Starlette)


def split_reference(spec: str) -> tuple[str, str | None]:
    """``FILE_OR_MODULE[:ATTR]`` -> (``FILE_OR_MODULE``, ``ATTR`` or None)."""
    target, sep, attr = spec.rpartition(":")
    if sep and attr and all(part.isidentifier() for part in attr.split(".")) and target:
        return target, attr
    return spec, None


def syntax_error_text(exc: SyntaxError, base_dir: Path | None = None) -> str:
    """``path/to/main.py:29: SyntaxError: invalid syntax`` and the line, as an editor reads it.

    The path is relative to ``base_dir`` when it lies under it.
    """
    filename = exc.filename or "<unknown>"
    if base_dir is not None:
        with contextlib.suppress(ValueError, OSError):  # not under base_dir: kept as it is
            filename = str(Path(filename).resolve().relative_to(base_dir.resolve()))
    where = f"{filename}:{exc.lineno}" if exc.lineno else filename
    text = f"{where}: {type(exc).__name__}: {exc.msg}"
    if exc.text and exc.text.strip():
        text += f"\n    {exc.text.strip()}"
    return text


def check_entrypoint_syntax(spec: str, *, base_dir: Path | None = None) -> None:
    """Compile the entrypoint file (without running it): a syntax error, said as ``file:line``.

    A module path, or a file that does not exist, is left to :func:`load_entrypoint`.
    """
    base = base_dir or Path.cwd()
    target, _ = split_reference(spec)
    if not looks_like_file(target, base):
        return
    path = base / target  # an absolute target stays as it is
    try:
        source = path.read_bytes()
    except OSError:
        return
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise EntrypointError(syntax_error_text(exc, base)) from None


def _import_failed(what: str, exc: Exception) -> EntrypointError:
    """The user's module raised while importing (raised ``from`` the original)."""
    if isinstance(exc, SyntaxError):  # in a module the entrypoint imports: where it is
        return EntrypointError(f"importing {what} failed: {syntax_error_text(exc, Path.cwd())}")
    return EntrypointError(f"importing {what} failed: {type(exc).__name__}: {exc}")


def _import_file(path: Path) -> ModuleType:
    try:
        return import_user_file(path, what="entrypoint file")
    except EntrypointError:
        raise
    except Exception as exc:
        raise _import_failed(str(path), exc) from exc


def _import_module(name: str, base_dir: Path) -> ModuleType:
    try:
        return import_user_module(name, base_dir)
    except EntrypointError as exc:
        raise EntrypointError(f"entrypoint {exc}") from None
    except Exception as exc:
        raise _import_failed(name, exc) from exc


def _is_beside(cls: type, directory: Path | None) -> bool:
    """True when ``cls`` is defined in a file under ``directory`` (a helper of the rollout)."""
    if directory is None:
        return False
    source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return source is not None and Path(source).resolve().is_relative_to(directory)


def _defined_subclasses(module: ModuleType, base: type) -> list[type]:
    """Concrete ``base`` subclasses the module defines; failing that, the ones it imports
    from helper modules beside it (never classes from installed libraries)."""
    candidates = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, base)
        and obj is not base
        and not inspect.isabstract(obj)
    ]
    own = [obj for obj in candidates if obj.__module__ == module.__name__]
    if own:
        return own
    source = getattr(module, "__file__", None)
    directory = Path(source).resolve().parent if source else None
    return list(dict.fromkeys(obj for obj in candidates if _is_beside(obj, directory)))


def _instances(module: ModuleType, kind: type) -> dict[str, Any]:
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("__") and isinstance(obj, kind)
    }


def _names(objs: Any) -> str:
    return ", ".join(sorted(getattr(o, "__name__", str(o)) for o in objs))


def _single(found: dict[str, Any], what: str, path: str) -> Any | None:
    if not found:
        return None
    if len(found) == 1:
        return next(iter(found.values()))
    if "app" in found and what == "FastAPI apps":
        return found["app"]
    names = ", ".join(sorted(found))
    raise EntrypointError(
        f"{path}: found {len(found)} {what}: {names}; pass {path}:{sorted(found)[0]}"
    )


def _inventory(module: ModuleType) -> str:
    apps = [n for n, o in vars(module).items() if _is_app(o)]
    backends = list(_instances(module, ExecutionBackend))
    workflows = [c.__name__ for c in _defined_subclasses(module, AgentWorkflow)]
    graders = [c.__name__ for c in _defined_subclasses(module, Grader)]
    parts = [
        f"{label}: {', '.join(sorted(items))}"
        for label, items in (
            ("apps", apps),
            ("backends", backends),
            ("AgentWorkflow subclasses", workflows),
            ("Grader subclasses", graders),
        )
        if items
    ]
    return "; ".join(parts) if parts else "nothing usable"


def _with_classes(
    loaded_path: str, module: ModuleType, workflow: type[AgentWorkflow[Any]], found: Found
) -> LoadedRollout:
    from osmosis_rollout.backend.local import LocalBackend

    graders = _defined_subclasses(module, Grader)
    if len(graders) > 1:
        raise EntrypointError(
            f"{loaded_path}: found {len(graders)} Grader subclasses: {_names(graders)}; "
            "keep one grader per rollout entrypoint"
        )
    parts: dict[str, Any] = {
        "workflow": workflow,
        "workflow_config": _single(
            _instances(module, AgentWorkflowConfig), "AgentWorkflowConfig instances", loaded_path
        ),
        "grader": graders[0] if graders else None,
        "grader_config": _single(
            _instances(module, GraderConfig), "GraderConfig instances", loaded_path
        ),
    }
    return LoadedRollout(
        path=loaded_path, module=module, found=found, backend=LocalBackend(**parts), **parts
    )


def _app_backend(app: Any) -> ExecutionBackend | None:
    backend = getattr(getattr(app, "state", None), "osmosis_backend", None)
    return backend if isinstance(backend, ExecutionBackend) else None


def load_entrypoint(spec: str, *, base_dir: Path | None = None) -> LoadedRollout:
    """Import ``spec`` (``file.py[:ATTR]`` or ``package.module[:ATTR]``) and find its rollout."""
    if not spec or not spec.strip():
        raise EntrypointError("empty entrypoint; pass path/to/main.py or package.module")
    base = base_dir or Path.cwd()
    target, attr = split_reference(spec)
    if looks_like_file(target, base):
        path = base / target  # an absolute target stays as it is
        module = _import_file(path)
        loaded_path = str(path)
    else:
        module = _import_module(target, base)
        loaded_path = target

    if attr is not None:
        obj: Any = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise EntrypointError(
                    f"{loaded_path} has no attribute {attr!r} (found {_inventory(module)})"
                )
            obj = getattr(obj, part)
        if _is_app(obj):
            return LoadedRollout(
                path=loaded_path, module=module, found="attr", app=obj, backend=_app_backend(obj)
            )
        if isinstance(obj, ExecutionBackend):
            return LoadedRollout(path=loaded_path, module=module, found="attr", backend=obj)
        if isinstance(obj, type) and issubclass(obj, AgentWorkflow) and not inspect.isabstract(obj):
            return _with_classes(loaded_path, module, obj, "attr")
        raise EntrypointError(
            f"{loaded_path}:{attr} is a {type(obj).__name__}; expected a FastAPI app, an "
            "ExecutionBackend or a concrete AgentWorkflow subclass"
        )

    apps = {name: obj for name, obj in vars(module).items() if _is_app(obj)}
    app = _single(apps, "FastAPI apps", loaded_path)
    if app is not None:
        return LoadedRollout(
            path=loaded_path, module=module, found="app", app=app, backend=_app_backend(app)
        )
    backend = _single(
        _instances(module, ExecutionBackend), "ExecutionBackend instances", loaded_path
    )
    if backend is not None:
        return LoadedRollout(path=loaded_path, module=module, found="backend", backend=backend)
    workflows = _defined_subclasses(module, AgentWorkflow)
    if len(workflows) == 1:
        return _with_classes(loaded_path, module, workflows[0], "classes")
    if len(workflows) > 1:
        first = sorted(w.__name__ for w in workflows)[0]
        raise EntrypointError(
            f"{loaded_path}: found {len(workflows)} AgentWorkflow subclasses: "
            f"{_names(workflows)}; pass {loaded_path}:{first}"
        )
    raise EntrypointError(
        f"{loaded_path}: found no FastAPI app, ExecutionBackend or AgentWorkflow subclass "
        f"(found {_inventory(module)}); define one, e.g. `app = create_rollout_server("
        "backend=LocalBackend(workflow=MyWorkflow, grader=MyGrader))`, or pass FILE:ATTR"
    )


__all__ = ["Found", "LoadedRollout", "discover_entrypoints", "load_entrypoint", "split_reference"]
